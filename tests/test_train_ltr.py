"""examples/train_ltr.py: the scorer's list-level features ignore padding; its losses run."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train_ltr  # noqa: E402


@pytest.mark.parametrize("context", [False, True])
def test_padding_does_not_change_the_scores_of_a_list(context):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((2, 5, 4)), jnp.float32)
    where = jnp.asarray([[True] * 5, [True, True, True, False, False]])
    params = train_ltr.init_mlp(jax.random.PRNGKey(0), (8, 6, 3, 1), context=context)
    scores = train_ltr.score(params, x, where, query_norm=True, context=context)
    padded_x = jnp.concatenate([x, jnp.full((2, 3, 4), 7.0)], 1)
    padded_where = jnp.concatenate([where, jnp.zeros((2, 3), bool)], 1)
    padded = train_ltr.score(params, padded_x, padded_where, query_norm=True, context=context)
    np.testing.assert_allclose(padded[:, :5][where], scores[where], rtol=1e-5, atol=1e-6)
    # the second list's own three documents, alone, score as they do padded
    alone = train_ltr.score(params, x[1:, :3], where[1:, :3], query_norm=True, context=context)
    np.testing.assert_allclose(alone[0], scores[1, :3], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", train_ltr.SOFT_LOSSES)
def test_gumbel_samples_change_with_the_key_and_keep_gradients_finite(name):
    rng = np.random.default_rng(1)
    scores = jnp.asarray(rng.standard_normal((3, 6)), jnp.float32)
    labels = jnp.asarray(rng.integers(0, 3, (3, 6)), jnp.float32)
    where = jnp.asarray(rng.random((3, 6)) < 0.8).at[:, 0].set(True)
    # jitted as training runs it (op-by-op dispatch compiles every op: slower in a test)
    loss = jax.jit(train_ltr.make_loss(name, gumbel=4))
    a = loss(scores, labels, where, 1.0, jax.random.PRNGKey(0))
    b = loss(scores, labels, where, 1.0, jax.random.PRNGKey(1))
    assert not np.allclose(a, b)  # fresh noise per key
    plain = jax.jit(train_ltr.make_loss(name))(scores, labels, where)
    np.testing.assert_allclose(loss(scores, labels, where, 1.0, None), plain)
    grads = jax.jit(jax.grad(lambda s: loss(s, labels, where, 1.0, jax.random.PRNGKey(2)).sum()))(scores)
    assert np.isfinite(np.asarray(grads)).all()
    assert np.all(np.asarray(grads)[~np.asarray(where)] == 0)
