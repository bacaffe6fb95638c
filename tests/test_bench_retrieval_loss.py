"""benchmarks/bench_retrieval_loss.py: every row is a loss (or floor) with a finite value and
gradient, and the ``logrr`` row is the mean log of each pair's bound rank."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_retrieval_loss as bench  # noqa: E402


def _batch(n_queries, n_docs, relevant, seed=0):
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n_docs, 16)).astype(np.float32)
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    pos = np.stack([rng.choice(n_docs, relevant, replace=False) for _ in range(n_queries)]).astype(np.int32)
    q = d[pos].mean(1) + 0.5 * rng.normal(size=(n_queries, 16)).astype(np.float32)
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    return jnp.asarray(q), jnp.asarray(d), jnp.asarray(pos)


@pytest.mark.parametrize("relevant", [1, 3])
def test_every_row_gives_a_finite_value_and_gradient(relevant):
    q, d, pos = _batch(8, 40, relevant)
    for row in bench.ROWS:
        value, grads = jax.jit(jax.value_and_grad(bench._loss(row, pos, d.shape[0]), argnums=(0, 1)))(q, d)
        assert np.isfinite(float(value)), row
        assert all(np.all(np.isfinite(np.asarray(g))) for g in grads), row
        assert any(np.any(np.asarray(g) != 0) for g in grads), row


def test_logrr_row_is_the_mean_log_of_each_pairs_bound_rank():
    q, d, pos = _batch(8, 40, 1, seed=1)
    got = float(bench._loss("logrr", pos, d.shape[0])(q, d))
    scores = np.asarray(q, np.float64) @ np.asarray(d, np.float64).T
    logs = []
    for s, i in zip(scores, np.asarray(pos)[:, 0]):
        top = np.sort(s)[::-1][:11]
        t = (top[0] - top[-1]) / 10  # one mean gap among the top 11
        others = np.delete(s, i)
        logs.append(np.log(1 + np.sum(np.log2(1 + np.exp((others - s[i]) / t)))))
    np.testing.assert_allclose(got, np.mean(logs), rtol=2e-5)
