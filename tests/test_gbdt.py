"""jaxrank losses as LightGBM / XGBoost objectives (jaxrank.losses.gbdt_objective): the
gradient is jax.grad of the loss of each query alone, whatever the padding; the Hessian is
positive ("exact" is |diag| of jax.hessian); and docs/training.md's example boosts both
libraries on 20 MQ2008 queries."""

import functools
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import losses
from jaxrank.losses.gbdt import lists

ROOT = Path(__file__).resolve().parents[1]
MQ2008 = (
    ROOT / "tests" / "data" / "mq2008" / "train_head.txt"
)  # the first 40 queries of ../shared/data/mq2008/train.txt
pytestmark = pytest.mark.usefixtures("quick_compiles")  # small programs (tests/conftest.py)


def _queries(seed=0, sizes=(3, 8, 0, 1, 5, 7)):
    """Lists of 0-8 documents; the one of 5 has no relevant document (its gradient is 0)."""
    rng = np.random.default_rng(seed)
    sizes = np.asarray(sizes)
    labels = rng.integers(0, 3, sizes.sum()).astype(np.float32)
    labels[sizes[:4].sum() : sizes[:5].sum()] = 0
    return rng.normal(size=sizes.sum()), labels, sizes


def test_gradient_is_jax_grad_of_each_query_alone_and_hessian_positive():
    preds, labels, sizes = _queries()
    loss = functools.partial(losses.metric_loss, ranker=jaxrank.approx())
    starts = np.cumsum(sizes) - sizes
    # the same documents in a wider padding, scattered among it, the lists in reverse order
    width, rng = 11, np.random.default_rng(1)
    rows = np.repeat(len(sizes) - 1 - np.arange(len(sizes)), sizes)
    cols = np.concatenate([rng.permutation(width)[:m] for m in sizes])
    wide = [np.zeros((len(sizes), width), t) for t in (np.float32, np.float32, bool)]
    wide[0][rows, cols], wide[1][rows, cols], wide[2][rows, cols] = preds, labels, True

    @jax.jit
    def reference(flat, s, y, w):
        alone = [
            jax.grad(lambda a, y=y_q: loss(a[None], y[None])[0])(flat[b : b + m])
            for b, m, y_q in ((b, m, labels[b : b + m]) for b, m in zip(starts, sizes))
            if m
        ]
        return jnp.concatenate(alone), jax.grad(lambda a: jnp.sum(loss(a, y, where=w)))(s)

    alone, padded = reference(jnp.asarray(preds, jnp.float32), *map(jnp.asarray, wide))
    objective = losses.gbdt_objective(loss, normalize=False)
    g, h = objective.derivatives(preds, labels, sizes)
    np.testing.assert_allclose(g, alone, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(g, np.asarray(padded)[rows, cols], rtol=1e-5, atol=1e-7)
    assert np.all(g[starts[3] : starts[5]] == 0) and np.any(g != 0)  # one document; no relevant one
    assert np.all(h > 0) and np.all(np.isfinite(h))
    np.testing.assert_allclose(h, np.maximum(np.abs(g), 1e-3 * np.abs(g).mean()))  # |g|, floored

    # normalised (the default): g and h scaled alike, mean h = 1; the same leaf values -sum g / sum h
    g1, h1 = losses.gbdt_objective(loss).derivatives(preds, labels, sizes)
    np.testing.assert_allclose(h1.mean(), 1.0)
    np.testing.assert_allclose(g1 / h1, g / h, rtol=1e-6)

    # the forms the libraries call (the same shapes: no new program)
    class LightGBMData:
        def get_label(self):
            return labels

        def get_group(self):
            return sizes

    class XGBoostData:
        def get_label(self):
            return labels

        def get_uint_info(self, name):
            assert name == "group_ptr"
            return np.concatenate([[0], np.cumsum(sizes)]).astype(np.uint32)

    for obj, data in [
        (losses.gbdt_objective(loss), LightGBMData()),
        (losses.gbdt_objective(loss, library="xgboost"), XGBoostData()),
    ]:
        g2, h2 = obj(preds, data)
        np.testing.assert_allclose(g2, g1)
        np.testing.assert_allclose(h2, h1)
    g3, _ = losses.gbdt_objective(loss, group=sizes)(labels, preds)  # scikit-learn's (y_true, y_pred)
    np.testing.assert_allclose(g3, g1)
    assert np.isfinite(objective.last_loss) and objective.last_loss > 0
    with pytest.raises(ValueError, match="same number"):
        objective.derivatives(preds[:-1], labels, sizes)
    with pytest.raises(ValueError, match="hessian"):
        losses.gbdt_objective(loss, hessian="newton")

    # length classes: every document once, in order within its query, lists of at most twice its length
    many = np.array([1, 8, 9, 16, 17, 100, 0, 3, 64, 65, 1000])
    seen = np.zeros(many.sum(), int)
    for docs, (q, n), r, c in lists(many):
        seen[docs] += 1
        assert q >= r.max() + 1 and n >= c.max() + 1 and n == max(8, 1 << int(np.ceil(np.log2(n))))
        lengths = np.bincount(r)
        assert np.all(lengths <= n) and (n == 8 or np.all(lengths > n // 2))
    assert np.all(seen == 1)


def test_exact_hessian_is_the_absolute_diagonal():
    preds, labels, sizes = _queries(2, sizes=(4, 7))
    loss = functools.partial(losses.metric_loss, ranker=jaxrank.approx())
    g, h = losses.gbdt_objective(loss, hessian="exact", normalize=False, floor=1e-9).derivatives(preds, labels, sizes)
    starts = np.cumsum(sizes) - sizes

    @jax.jit
    def diagonals(flat):
        return jnp.concatenate(
            [
                jnp.diag(jax.hessian(lambda a, b=b, m=m: loss(a, labels[b : b + m]))(flat[b : b + m]))
                for b, m in zip(starts, sizes)
            ]
        )

    want = np.abs(np.asarray(diagonals(jnp.asarray(preds, jnp.float32))))
    np.testing.assert_allclose(h, np.maximum(want, 1e-9 * want.mean()), rtol=1e-4, atol=1e-6)
    _, h_probe = losses.gbdt_objective(loss, hessian="hutchinson").derivatives(preds, labels, sizes)
    assert np.all(h_probe > 0) and np.all(np.isfinite(h_probe))


def _example() -> str:
    text = (ROOT / "docs" / "training.md").read_text()
    section = text.split("## Gradient-boosted trees with a jaxrank loss", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_docs_example_boosts_lightgbm_and_xgboost(tmp_path):
    pytest.importorskip("lightgbm")
    pytest.importorskip("xgboost")
    if not MQ2008.exists():
        pytest.fail(f"{MQ2008} is missing")
    # 20 queries of MQ2008's train.txt, of at most 8 documents (one list length: one program)
    queries: dict = {}
    with MQ2008.open() as f:
        for line in f:
            queries.setdefault(line.split()[1], []).append(line)
            if len(queries) > 40:
                break
    sample = [q for q in queries.values() if len(q) <= 8][:20]
    assert len(sample) == 20
    path = tmp_path / "train.txt"
    path.write_text("".join(line for q in sample for line in q))
    code = _example()
    assert '"../shared/data/mq2008/train.txt"' in code
    namespace: dict = {}
    exec(code.replace('"../shared/data/mq2008/train.txt"', repr(str(path))), namespace)
    before = namespace["before"]
    assert namespace["after_lgb"] > before + 0.05 and namespace["after_xgb"] > before + 0.05, namespace


def test_metric_loss_alone_gets_the_tree_default_and_explicit_settings_are_kept():
    """gbdt_objective(metric_loss) is the objective chosen for trees (docs/training.md):
    metric_loss(ranker=approx(1.0), k=10) with Hutchinson's Hessian; a ranker, a cutoff, a
    Hessian or another metric the caller gives is kept."""
    preds, labels, sizes = _queries(3, sizes=(4, 7))
    tree = functools.partial(losses.metric_loss, ranker=jaxrank.approx(1.0), k=10)

    def derivatives(loss, **kwargs):
        return losses.gbdt_objective(loss, **kwargs).derivatives(preds, labels, sizes)

    for got, want in zip(derivatives(losses.metric_loss), derivatives(tree, hessian="hutchinson")):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    # the same loss from ndcg_loss or a partial without ranker/k; a Hessian given is kept (h = |g|)
    with_gradient = derivatives(tree, hessian="gradient")
    for loss in (losses.metric_loss, losses.ndcg_loss, functools.partial(losses.metric_loss, metric=jaxrank.ndcg)):
        for got, want in zip(derivatives(loss, hessian="gradient"), with_gradient):
            np.testing.assert_allclose(got, want, rtol=1e-6)

    # given settings kept: the gradient of each query alone with the loss as given
    starts = np.cumsum(sizes) - sizes
    flat = jnp.asarray(preds, jnp.float32)
    tree_g = derivatives(tree, normalize=False)[0]
    for loss in (
        functools.partial(losses.metric_loss, ranker=jaxrank.softsort()),
        functools.partial(losses.metric_loss, k=3),
        functools.partial(losses.metric_loss, metric=jaxrank.average_precision),
    ):
        g, _ = derivatives(loss, normalize=False)
        alone = jax.jit(
            lambda a, loss=loss: jnp.concatenate(
                [jax.grad(lambda x, b=b, m=m: loss(x, labels[b : b + m]))(a[b : b + m]) for b, m in zip(starts, sizes)]
            )
        )(flat)
        np.testing.assert_allclose(g, alone, rtol=1e-5, atol=1e-7)
        assert not np.allclose(g, tree_g, rtol=1e-3)
