"""Relaxed permutation matrices: :func:`neuralsort` (Grover et al., 2019) and
:func:`softsort` (Prillo & Eisenschlos, 2020). Overview: :mod:`jaxrank.ranking.smooth`.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks
from jaxrank.ranking._ties import reduce_positions
from jaxrank.ranking.backend import argsort_descending, cumsum, sort_key
from jaxrank.ranking.ranks import PositionFn, Ranks
from jaxrank.ranking.smooth import (
    _check_units,
    _exclusive_cumprod,
    _inputs,
    _positive,
    masked_logsumexp,
)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PermutationRanks(Ranks):
    """A relaxed permutation matrix ``perm[..., position, item]``.

    Rows past the number of valid items and columns of invalid items are 0.
    Per-item weights are sorted softly (``perm @ g``) and the exact operations
    are applied at the integer positions ``1..n``:
    ``linear = sum_p f(p) G_p``, ``count_before = sum_p f(p) G_p sum_{q<=p} W_q``,
    ``survival = sum_p f(p) G_p prod_{q<p} (1 - W_q)``, and ``cascade`` likewise
    with the sorted ``p``; exact whenever ``perm`` is a permutation matrix.
    The cutoff is the exact indicator.
    """

    perm: jax.Array
    valid: jax.Array

    smooth = True

    @property
    def size(self) -> int:
        return self.perm.shape[-1]

    def _positions(self) -> jax.Array:
        return jnp.arange(1, self.size + 1, dtype=self.perm.dtype)

    def in_rank_order(self, v: jax.Array) -> jax.Array:
        """Per-item values softly sorted: ``perm @ v``, ``[..., position]``."""
        v = jnp.where(self.valid, v, 0)
        return jnp.matmul(self.perm, v[..., None].astype(jnp.promote_types(v.dtype, self.perm.dtype)))[..., 0]

    def linear(self, g: jax.Array, f: PositionFn) -> jax.Array:
        return reduce_positions(self.in_rank_order(g), f(self._positions()))

    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        h = self.in_rank_order(g) * cumsum(self.in_rank_order(w))
        return reduce_positions(h, f(self._positions()))

    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        h = self.in_rank_order(g) * _exclusive_cumprod(1 - self.in_rank_order(w))
        return reduce_positions(h, f(self._positions()))

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        ps = self.in_rank_order(p)
        return reduce_positions(ps * _exclusive_cumprod(1 - ps), f(self._positions()))


def _symmetric_abs(x: jax.Array) -> jax.Array:
    """``|x|`` with derivative ``sign(x)``: 0 at ``x = 0``, the mean of the two one-sided
    derivatives, where ``jnp.abs`` takes +1.

    NeuralSort's ``sum_k |s_j - s_k|`` is symmetric in each pair; with +1 at a tie, every
    ``|s_j - s_k|`` grows with both ``s_j`` and ``s_k``, and at tied scores the gradient of a
    metric points away from the better ranking (a model whose scores start equal, such as
    one with a zero-initialised last layer, trains backwards).
    """
    return x * lax.stop_gradient(jnp.sign(x))


def _permutation_from_logits(logits: jax.Array, valid: jax.Array, sinkhorn: int) -> jax.Array:
    """Row softmax of ``logits[..., position, item]`` over the valid block, then
    ``sinkhorn`` alternations of column and row normalisation (log space)."""
    n = valid.shape[-1]
    m = jnp.sum(valid, axis=-1, keepdims=True)
    rows = jnp.arange(n) < m  # [..., n] valid positions
    mask = rows[..., :, None] & valid[..., None, :]
    x = jnp.where(mask, logits, 0)
    x = x - masked_logsumexp(x, mask, axis=-1)
    for _ in range(sinkhorn):
        x = x - masked_logsumexp(x, mask, axis=-2)
        x = x - masked_logsumexp(x, mask, axis=-1)
    return jnp.where(mask, jnp.exp(jnp.where(mask, x, 0)), 0)


@dataclasses.dataclass(frozen=True)
class _PermutationRanker:
    """The shared call of the relaxed-permutation rankers: scores in units, then
    ``logits[..., position, item]`` (each subclass's), row softmax and Sinkhorn."""

    temperature: float = 1.0
    sinkhorn: int = 0
    units: str = "bounded"

    smooth = True

    def __post_init__(self):
        object.__setattr__(self, "temperature", _positive(self.temperature, "temperature"))
        object.__setattr__(self, "sinkhorn", _checks.positive_int(self.sinkhorn, "sinkhorn", allow_zero=True))
        _check_units(self.units)

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> PermutationRanks:
        del depth
        s, valid = _inputs(scores, where, self.units, self.temperature)
        logits = self._logits(s, valid) / self.temperature
        return PermutationRanks(perm=_permutation_from_logits(logits, valid, self.sinkhorn), valid=valid)


@dataclasses.dataclass(frozen=True)
class NeuralSortRanker(_PermutationRanker):
    """NeuralSort relaxed permutation; see :func:`neuralsort`."""

    def _logits(self, s: jax.Array, valid: jax.Array) -> jax.Array:
        n = s.shape[-1]
        m = jnp.sum(valid, axis=-1, keepdims=True).astype(s.dtype)
        # the k = j term is 0: kept out of abs's kink, as in softsort
        others = valid[..., None, :] & ~jnp.eye(n, dtype=bool)
        spread = jnp.sum(jnp.where(others, _symmetric_abs(s[..., :, None] - s[..., None, :]), 0), -1)
        coef = m + 1 - 2 * jnp.arange(1, n + 1, dtype=s.dtype)  # [..., n] per position
        return coef[..., :, None] * s[..., None, :] - spread[..., None, :]


def neuralsort(temperature: float = 1.0, sinkhorn: int = 0, *, units: str = "bounded") -> NeuralSortRanker:
    """NeuralSort relaxed sorting (Grover et al., 2019).

    Over the :math:`m` valid items, with :math:`A_j = \\sum_k |s_j - s_k|`,
    position :math:`p` (1-based) is the softmax over items

    .. math:: P_{pj} = \\mathrm{softmax}_j\\Big(\\frac{(m + 1 - 2p)\\, s_j - A_j}{T}\\Big),

    followed by ``sinkhorn`` iterations of column / row normalisation (NeuralNDCG,
    Pobrotyn & Bialobrzeski, 2021). The metric is then evaluated at the integer
    positions through :class:`PermutationRanks`. O(n^2) time and memory per list.
    ``temperature`` is in the units of the scores, kept within
    :func:`~jaxrank.ranking.bounded_temperature`'s band of each list's spread (default
    ``units="bounded"``), or a fraction of the list's spread (``units="std"``), or in score
    units (``units="score"``); see :mod:`jaxrank.ranking.smooth`. The default, 1, was
    measured (docs/soft.md).

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 1, 0])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.neuralsort(0.01))), 5)
      0.63093
    """
    return NeuralSortRanker(temperature, sinkhorn, units)


@dataclasses.dataclass(frozen=True)
class SoftSortRanker(_PermutationRanker):
    """SoftSort relaxed permutation; see :func:`softsort`."""

    def _logits(self, s: jax.Array, valid: jax.Array) -> jax.Array:
        n = s.shape[-1]
        m = jnp.sum(valid, axis=-1, keepdims=True)
        order = argsort_descending(sort_key(lax.stop_gradient(s), valid))
        top = jnp.where(jnp.arange(n) < m, jnp.take_along_axis(s, order, axis=-1), 0)
        # |s_j - s_j| of the item sorted at each position is 0 by definition: written as 0,
        # not left to abs's kink, whose side XLA's rounding of a fused s/spread can flip.
        own = order[..., :, None] == jnp.arange(n)
        return -jnp.where(own, 0, jnp.abs(top[..., :, None] - s[..., None, :]))


def softsort(temperature: float = 1.0, sinkhorn: int = 0, *, units: str = "bounded") -> SoftSortRanker:
    """SoftSort relaxed sorting (Prillo & Eisenschlos, 2020).

    With :math:`\\hat s` the valid scores sorted descending, position
    :math:`p` is the softmax over valid items

    .. math:: P_{pj} = \\mathrm{softmax}_j\\Big(-\\frac{|\\hat s_p - s_j|}{T}\\Big),

    optionally followed by ``sinkhorn`` normalisation iterations; evaluated
    through :class:`PermutationRanks`. O(n log n) sort plus O(n^2) time and
    memory per list. ``temperature`` as in :func:`neuralsort` (default ``units="bounded"``).

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([0.0, 2.0, 1.0]), jnp.array([0, 1, 0])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.softsort(0.01, sinkhorn=3))), 5)
      1.0
    """
    return SoftSortRanker(temperature, sinkhorn, units)
