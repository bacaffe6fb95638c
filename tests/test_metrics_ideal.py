"""The ideal DCG from counts per grade (jaxrank/metrics/_ideal.py) against the ideal ranked
by the exact ranker, on every kind of label batch: integer grades, negative and unjudged
labels, non-integer labels and grades past MAX_GRADES (which take the ranking path)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.metrics._ideal import MAX_GRADES

pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)


def _labels(kind: str, rng, shape):
    if kind == "grades":
        return rng.integers(0, 5, shape).astype(float)
    if kind == "negative":
        return rng.integers(-2, 4, shape).astype(float)
    if kind == "fractional":
        return np.round(rng.random(shape) * 3, 1)
    return rng.integers(0, 2 * MAX_GRADES, shape).astype(float)  # "many grades"


def _brute_ideal(labels, where, k, gain):
    """Per list in numpy: sort the valid labels, sum gain / log2(1 + position)."""
    out = []
    for y, w in zip(labels, where):
        top = np.sort(y[w])[::-1][: len(y) if k is None else k]
        g = np.maximum(top, 0) if gain == "linear" else np.exp2(np.maximum(top, 0)) - 1
        out.append(np.sum(g / np.log2(np.arange(2, len(top) + 2))))
    return np.asarray(out)


@pytest.mark.parametrize("kind", ["grades", "negative", "fractional", "many grades"])
@pytest.mark.parametrize("gain", ["linear", "exp"])
def test_ndcg_ideal_equals_brute_force_on_every_kind_of_labels(kind, gain):
    rng = np.random.default_rng(len(kind) + len(gain))
    labels = _labels(kind, rng, (5, 30))
    where = rng.random((5, 30)) < 0.8
    where[0] = False  # a list without valid items
    scores = rng.standard_normal((5, 30))
    cuts = (None, 1, 7, 40)

    @jax.jit
    def both(s, y, w):
        return [(jaxrank.dcg(s, y, k=k, where=w, gain=gain), jaxrank.ndcg(s, y, k=k, where=w, gain=gain)) for k in cuts]

    for k, (dcg, ndcg) in zip(cuts, both(scores, labels, where)):
        ideal = _brute_ideal(labels, where, k, gain)
        np.testing.assert_allclose(ndcg, np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1), 0), rtol=1e-12)


def test_ndcg_ideal_over_judgments_counts_every_judged_item():
    rng = np.random.default_rng(3)
    scores, labels = rng.standard_normal((4, 10)), rng.integers(0, 4, (4, 10))
    judgments = rng.integers(-1, 5, (4, 25)).astype(float)
    jwhere = rng.random((4, 25)) < 0.7
    cuts = (1, 10, 30)
    got = jax.jit(lambda s: jaxrank.ndcg(s, labels, k=cuts, judgments=judgments, judgments_where=jwhere))(scores)
    ideal = np.stack([_brute_ideal(judgments, jwhere, k, "linear") for k in cuts], -1)
    dcg = np.asarray(jaxrank.dcg(scores, labels, k=cuts))
    np.testing.assert_allclose(got, np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1), 0), rtol=1e-12)


def test_counted_ideal_under_vmap_and_grad():
    rng = np.random.default_rng(5)
    scores = jnp.asarray(rng.standard_normal((3, 4, 50)))
    labels = jnp.asarray(rng.integers(0, 5, (3, 4, 50)).astype(float))
    mixed = labels.at[1].add(0.5)  # one vmapped element takes the ranking path, the others count
    per_element = jax.jit(jax.vmap(lambda s, y: jaxrank.ndcg(s, y, k=10)))
    whole = jax.jit(lambda s, y: jaxrank.ndcg(s, y, k=10))  # one batch: the ranking path for all
    np.testing.assert_allclose(per_element(scores, mixed), whole(scores, mixed), rtol=1e-12)
    np.testing.assert_allclose(per_element(scores, labels), whole(scores, labels), rtol=1e-12)
    # the ideal's loop depends on the labels only: differentiating in the scores goes past it
    grad = jax.grad(lambda s: jnp.sum(jaxrank.ndcg(s, labels[0], ranker=jaxrank.approx(0.5, units="score"))))(scores[0])
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.int8, jnp.uint8])
def test_integer_labels_give_the_values_of_the_same_float_labels(dtype):
    """The counted ideal reads integer labels in their own dtype (no float copy)."""
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 5, (6, 40))
    where = rng.random((6, 40)) < 0.8
    scores = jnp.asarray(rng.standard_normal((6, 40)), jnp.float32)
    for k in (None, 3, 10):
        for w in (None, where):
            got = jaxrank.ndcg(scores, jnp.asarray(labels, dtype), k=k, where=w, gain="exp")
            want = jaxrank.ndcg(scores, jnp.asarray(labels, jnp.float32), k=k, where=w, gain="exp")
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
