"""Plackett-Luce sampling around any ranker: :func:`gumbel`. Overview:
:mod:`jaxrank.ranking.smooth`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank.ranking.ranks import PositionFn, Ranks
from jaxrank.ranking.smooth import _inputs


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GumbelRanks(Ranks):
    """The mean of the operations of ``inner`` (ranks of ``[samples, ..., n]``
    noisy scores) over the leading sample axis."""

    inner: Ranks

    @property
    def size(self) -> int:
        return self.inner.size

    @property
    def smooth(self) -> bool:  # type: ignore[override]
        return self.inner.smooth

    def cutoff(self, positions: jax.Array, k: jax.Array) -> jax.Array:
        return self.inner.cutoff(positions, k)

    def linear(self, g: jax.Array, f: PositionFn) -> jax.Array:
        return jnp.mean(self.inner.linear(g, f), axis=0)

    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        return jnp.mean(self.inner.count_before(g, f, w), axis=0)

    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        return jnp.mean(self.inner.survival(g, f, w), axis=0)

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        return jnp.mean(self.inner.cascade(p, f), axis=0)


def _key_token(key) -> Any:
    if key is None or isinstance(key, (int, np.integer)):
        return key
    try:
        if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
            key = jax.random.key_data(key)
        data = np.asarray(key)
    except Exception:  # a traced key: equal only to itself
        return ("id", id(key))
    return (data.dtype.str, data.shape, data.tobytes())


@dataclasses.dataclass(frozen=True, eq=False)
class GumbelRanker:
    """Plackett-Luce sampling around a ranker; see :func:`gumbel`."""

    ranker: Any
    samples: int = 8
    key: Any = None

    def __eq__(self, other):
        if not isinstance(other, GumbelRanker):
            return NotImplemented
        return (self.ranker, self.samples, _key_token(self.key)) == (
            other.ranker,
            other.samples,
            _key_token(other.key),
        )

    def __hash__(self):
        return hash((GumbelRanker, self.ranker, self.samples, _key_token(self.key)))

    @property
    def smooth(self) -> bool:
        return bool(getattr(self.ranker, "smooth", False))

    def _key(self):
        if self.key is None:
            return jax.random.PRNGKey(0)
        if isinstance(self.key, (int, np.integer)):
            return jax.random.PRNGKey(int(self.key))
        return self.key

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> GumbelRanks:
        del depth  # the inner ranker ranks every sample fully
        scores = jnp.asarray(scores)
        s, valid = _inputs(scores, where)
        key = self._key()
        # One stream per list slot (fold_in of its index): appending masked
        # items leaves the noise of the others unchanged.
        slots = jnp.arange(s.shape[-1])
        noise = jax.vmap(
            lambda i: jax.random.gumbel(jax.random.fold_in(key, i), (self.samples,) + s.shape[:-1], s.dtype),
            out_axes=-1,
        )(slots)
        noisy = s + noise
        inner = self.ranker(noisy, jnp.broadcast_to(valid, noisy.shape))
        return GumbelRanks(inner=inner)


def gumbel(ranker, samples: int = 8, key=None) -> GumbelRanker:
    """Plackett-Luce sampling around any ranker (Gumbel-max trick).

    Adds i.i.d. Gumbel(0, 1) noise to the scores, ``samples`` times, ranks each
    noisy copy with ``ranker`` and averages every operation over the samples:
    with the exact ranker, orders are drawn from the Plackett-Luce model with
    log-weights ``scores``. The noise is fixed by ``key`` (default
    ``jax.random.PRNGKey(0)``; an int is a seed); pass a fresh key per training
    step for fresh samples (a traced key works under ``jit``).

    The noise is in the units of the scores (the scores are the model's
    log-weights), whatever the inner ranker's ``units``: on scores of spread far
    below 1 the sampled orders are close to uniform, and the gradient is small (but
    not zero) until the scores spread out.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([20.0, 10.0, 0.0]), jnp.array([0, 1, 0])
      >>> r = jaxrank.gumbel(jaxrank.softrank(0.01), samples=4)
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=r)), 5)
      0.63093
    """
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be a positive integer, got {samples!r}")
    if not callable(ranker) or isinstance(ranker, Ranks):
        raise ValueError(f"ranker must be a ranker such as jaxrank.softrank(), got {ranker!r}")
    return GumbelRanker(ranker, int(samples), key)
