"""Relaxed permutation matrices: :func:`neuralsort` (Grover et al., 2019) and
:func:`softsort` (Prillo & Eisenschlos, 2020). Overview: :mod:`jaxrank.ranking.smooth`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks
from jaxrank.ranking._ties import reduce_positions
from jaxrank.ranking.backend import argsort_descending, cumsum, linear_recurrence, sort_key
from jaxrank.ranking.positives import ListAxis, Positives
from jaxrank.ranking.ranks import PositionFn, Ranks
from jaxrank.ranking.smooth import (
    _check_units,
    _exclusive_cumprod,
    _inputs,
    _positive,
    masked_logsumexp,
)


class _SoftlySorted(Ranks):
    """The operations of a relaxed permutation ``P[..., position, item]``, through
    :meth:`in_rank_order` (``P @ v``, each subclass's).

    Rows past the number of valid items and columns of invalid items are 0.
    Per-item weights are sorted softly (``P @ g``) and the exact operations
    are applied at the integer positions ``1..n``:
    ``linear = sum_p f(p) G_p``, ``count_before = sum_p f(p) G_p sum_{q<=p} W_q``,
    ``survival = sum_p f(p) G_p prod_{q<p} (1 - W_q)``, and ``cascade`` likewise
    with the sorted ``p``; exact whenever ``P`` is a permutation matrix.
    The cutoff is the exact indicator.
    """

    smooth = True

    def _positions(self) -> jax.Array:
        return jnp.arange(1, self.size + 1, dtype=self._dtype())

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


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PermutationRanks(_SoftlySorted):
    """A relaxed permutation matrix ``perm[..., position, item]``, held whole (NeuralSort,
    and SoftSort with Sinkhorn iterations). The operations: :class:`_SoftlySorted`."""

    perm: jax.Array
    valid: jax.Array

    @property
    def size(self) -> int:
        return self.perm.shape[-1]

    def _dtype(self):
        return self.perm.dtype

    def in_rank_order(self, v: jax.Array) -> jax.Array:
        """Per-item values softly sorted: ``perm @ v``, ``[..., position]``."""
        v = jnp.where(self.valid, v, 0)
        return jnp.matmul(self.perm, v[..., None].astype(jnp.promote_types(v.dtype, self.perm.dtype)))[..., 0]


@functools.partial(
    jax.tree_util.register_dataclass, data_fields=["top", "scores", "order", "valid"], meta_fields=["temperature"]
)
@dataclasses.dataclass(frozen=True)
class SoftSortRanks(_SoftlySorted):
    """SoftSort's relaxed permutation ``P[p, j] = softmax_j(-|top_p - s_j| / T)`` over the
    valid items, never formed: its products with per-item values are two linear
    recurrences over the sorted scores, O(n) memory and time per list.

    With the items in their exact descending order (``top``), the item sorted at ``q``
    lies below position ``p`` (``q >= p``: ``|top_p - top_q| = top_p - top_q``) or above
    it, so

    .. math:: \\sum_j e^{-|t_p - s_j|/T} v_j = \\underbrace{\\sum_{q \\ge p} e^{(t_q - t_p)/T} v_q}_{A_p}
        + \\underbrace{\\sum_{q < p} e^{(t_p - t_q)/T} v_q}_{B_p},

    :math:`A_p = v_p + a_p A_{p+1}` and :math:`B_p = a_{p-1} (v_{p-1} + B_{p-1})` with
    :math:`a_q = e^{(t_{q+1} - t_q)/T} \\le 1`: every factor is at most 1, no exponential
    overflows, and tied scores (the same value on both sides) give the same sums. The
    row sums (``v = 1``) normalise. The operations: :class:`_SoftlySorted`.
    """

    top: jax.Array  # [..., n] the valid scores sorted descending, 0 past them
    scores: jax.Array  # [..., n]
    order: jax.Array  # [..., n] the item sorted at each position
    valid: jax.Array
    temperature: float

    @property
    def size(self) -> int:
        return self.scores.shape[-1]

    def _dtype(self):
        return self.scores.dtype

    def in_rank_order(self, v: jax.Array) -> jax.Array:
        """Per-item values softly sorted, ``sum_j P[..., p, j] v_j``: ``[..., position]``."""
        dtype = jnp.promote_types(v.dtype, self.scores.dtype)
        shape = jnp.broadcast_shapes(self.scores.shape, v.shape)
        top, order, valid = (jnp.broadcast_to(a, shape) for a in (self.top, self.order, self.valid))
        v = jnp.take_along_axis(jnp.broadcast_to(jnp.where(self.valid, v, 0), shape).astype(dtype), order, axis=-1)
        n = shape[-1]
        if n == 0:
            return jnp.zeros(shape, dtype)
        m = jnp.sum(valid, axis=-1, keepdims=True)
        position = jnp.arange(n)
        inside = position + 1 < m  # a_q links q and q + 1, both valid
        gap = jnp.where(inside, jnp.concatenate([top[..., 1:], top[..., -1:]], axis=-1) - top, 0).astype(dtype)
        # values and ones (the row sums) in one pass
        x = jnp.stack([v, jnp.broadcast_to((position < m).astype(dtype), shape)])
        a = jnp.broadcast_to(jnp.where(inside, jnp.exp(gap / self.temperature), 0), x.shape)
        below = linear_recurrence(a, x, reverse=True)  # A_p = x_p + a_p A_{p+1}
        a_prev = jnp.concatenate([jnp.zeros_like(a[..., :1]), a[..., :-1]], axis=-1)
        upto = linear_recurrence(a_prev, x)  # C_p = x_p + a_{p-1} C_{p-1}: B_p = a_{p-1} C_{p-1}
        above = a_prev * jnp.concatenate([jnp.zeros_like(upto[..., :1]), upto[..., :-1]], axis=-1)
        total = below + above + _tied_above(top, x, position < m, self.temperature)
        return jnp.where(position < m, total[0] / jnp.where(total[1] > 0, total[1], 1), 0)


@functools.partial(jax.tree_util.register_dataclass, data_fields=["kernel", "normalizer", "rows"], meta_fields=[])
@dataclasses.dataclass(frozen=True)
class SoftSortTopRanks(_SoftlySorted):
    r"""SoftSort's relaxed permutation at the first ``depth`` positions and the relevant
    items only (:meth:`SoftSortRanker.at_positives`): ``kernel[..., p, i]`` is
    :math:`e^{-|t_p - s_i|/T}` for relevant item ``i`` (1 where ``i`` is the item sorted at
    ``p``), ``normalizer[..., p]`` the row sum :math:`\sum_j e^{-|t_p - s_j|/T}` over the
    whole list, ``rows`` the positions that hold an item. Per-item values are those of the
    relevant items (``[..., r]``); the others are 0. The operations: :class:`_SoftlySorted`
    at the positions ``1..depth``, which is every position a cutoff metric at ``k <= depth``
    reads."""

    kernel: jax.Array  # [..., depth, r]
    normalizer: jax.Array  # [..., depth]
    rows: jax.Array  # [..., depth]

    @property
    def size(self) -> int:
        return self.kernel.shape[-1]

    def _dtype(self):
        return self.kernel.dtype

    def _positions(self) -> jax.Array:
        return jnp.arange(1, self.kernel.shape[-2] + 1, dtype=self._dtype())

    def in_rank_order(self, v: jax.Array) -> jax.Array:
        """``sum_i P[..., p, i] v_i`` over the relevant items, ``[..., depth]``."""
        v = v.astype(jnp.promote_types(v.dtype, self.kernel.dtype))
        total = jnp.sum(self.kernel * v[..., None, :], axis=-1)
        return jnp.where(self.rows, total / jnp.where(self.rows, self.normalizer, 1), 0)


def _tied_above(top: jax.Array, x: jax.Array, valid_rows: jax.Array, temperature: float) -> jax.Array:
    """0, with the gradient that makes the pairs of tied items take ``jnp.abs``'s derivative.

    The recurrences differentiate ``e^{(t_p - t_q)/T}`` for an item ``q`` sorted above
    ``p``; for ``t_q = t_p`` the dense matrix's ``e^{-|t_p - t_q|/T}`` has the derivative
    of ``-|d|`` at ``d = 0`` (``jnp.abs``: +1), the opposite sign. This adds
    ``-2/T \\sum_{q < p, t_q = t_p} x_q (t_p - t_q)``, which is 0, through its gradient only:
    a model whose scores start equal then raises the better items more, and partly tied
    lists get the dense matrix's gradient.
    """
    n = top.shape[-1]
    position = jnp.arange(n)
    starts = jnp.concatenate([jnp.ones_like(top[..., :1], bool), top[..., 1:] != top[..., :-1]], axis=-1)
    first = lax.cummax(jnp.where(starts, position, 0), axis=top.ndim - 1)  # the tie group's first position
    t = jnp.where(valid_rows, top, 0).astype(x.dtype)

    def before_in_group(v):  # sum over q < p in p's tie group of v_q
        exclusive = cumsum(v) - v
        return exclusive - jnp.take_along_axis(exclusive, jnp.broadcast_to(first, v.shape), axis=-1)

    f = (-2 / temperature) * (t * before_in_group(x) - before_in_group(t * x))
    return jnp.where(valid_rows, f - lax.stop_gradient(f), 0)


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

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> Ranks:
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
    """SoftSort relaxed permutation; see :func:`softsort`. Without Sinkhorn iterations the
    matrix is never held (:class:`SoftSortRanks`); with them it is (:class:`PermutationRanks`)."""

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> Ranks:
        if self.sinkhorn:
            return super().__call__(scores, where, depth=depth)
        s, valid = _inputs(scores, where, self.units, self.temperature)
        order, top = _sorted(s, valid)
        return SoftSortRanks(top=top, scores=s, order=order, valid=valid, temperature=self.temperature)

    def at_positives(
        self, scores, where, positives: Positives, depth: Optional[int], axis_name: Optional[str] = None
    ) -> Optional[Ranks]:
        r""":class:`SoftSortTopRanks` of the relevant items of ``positives`` among the whole
        list ``scores[..., n]`` (sharded over ``axis_name`` when given), for a metric that
        reads the first ``depth`` positions. None without a depth or with Sinkhorn
        iterations (every position, or the whole matrix, is needed: the dense path).

        With :math:`t_1 \ge \dots \ge t_D` the top ``depth`` scores (a ``top_k``), every
        item below :math:`t_D` is below every position, so its term of row ``p`` factors,
        :math:`e^{-|t_p - s_j|/T} = e^{(t_D - t_p)/T} e^{(s_j - t_D)/T}`, and the row sums are

        .. math:: Z_p = e^{(t_D - t_p)/T} \sum_{j: s_j \le t_D} e^{(s_j - t_D)/T}
            + \sum_{q: t_q > t_D} e^{-|t_p - t_q|/T}:

        one exponential per item of the list (as a softmax's), ``depth^2`` beside it, and
        the kernel at the relevant items (``r * depth``). Every factor is at most 1."""
        if depth is None or self.sinkhorn:
            return None
        axis = ListAxis(axis_name, scores.shape[-1])
        x, valid = _inputs(scores, where, self.units, self.temperature, axis)
        depth = min(depth, axis.size)
        idx, _, t = axis.top(x, valid, depth)
        m = axis.sum(jnp.sum(valid, axis=-1, keepdims=True))
        rows = jnp.arange(depth) < m
        t = jnp.where(rows, t, 0)
        last = jnp.take_along_axis(t, jnp.clip(jnp.minimum(m, depth) - 1, 0, depth - 1), axis=-1)  # t_D
        below = valid & (x <= last)
        tail = axis.sum(jnp.sum(jnp.where(below, jnp.exp(jnp.where(below, x - last, 0) / self.temperature), 0), -1))
        above = rows & (t > last)  # the positions above t_D: every item above it
        # the item sorted at p meets itself at distance 0, held constant as in SoftSortRanks
        pairs = _kernel(t[..., :, None], t[..., None, :], jnp.eye(depth, dtype=bool), self.temperature)
        head = jnp.sum(jnp.where(above[..., None, :], pairs, 0), axis=-1)
        normalizer = jnp.where(rows, head + jnp.exp((last - t) / self.temperature) * tail[..., None], 0)
        named = positives.valid & (axis.at(valid.astype(jnp.int32), positives.indices) > 0)
        at = axis.at(x, positives.indices)
        kernel = _kernel(
            t[..., :, None], at[..., None, :], idx[..., :, None] == positives.indices[..., None, :], self.temperature
        )
        kernel = jnp.where(named[..., None, :] & rows[..., :, None], kernel, 0)
        return SoftSortTopRanks(kernel=kernel, normalizer=normalizer, rows=rows)

    def _logits(self, s: jax.Array, valid: jax.Array) -> jax.Array:
        n = s.shape[-1]
        order, top = _sorted(s, valid)
        # |s_j - s_j| of the item sorted at each position is 0 by definition: written as 0,
        # not left to abs's kink, whose side XLA's rounding of a fused s/spread can flip.
        own = order[..., :, None] == jnp.arange(n)
        return -jnp.where(own, 0, jnp.abs(top[..., :, None] - s[..., None, :]))


def _kernel(top: jax.Array, s: jax.Array, own: jax.Array, temperature: float) -> jax.Array:
    """:math:`e^{-|t - s|/T}`, with the distance of an item to its own position written as 0
    (no gradient), as :class:`SoftSortRanks`' recurrences have it."""
    return jnp.exp(-jnp.where(own, 0, jnp.abs(top - s)) / temperature)


def _sorted(s: jax.Array, valid: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The item at each position of the exact descending order, and the valid scores in
    that order (0 past them)."""
    n = s.shape[-1]
    m = jnp.sum(valid, axis=-1, keepdims=True)
    order = argsort_descending(sort_key(lax.stop_gradient(s), valid))
    return order, jnp.where(jnp.arange(n) < m, jnp.take_along_axis(s, order, axis=-1), 0)


def softsort(temperature: float = 1.0, sinkhorn: int = 0, *, units: str = "bounded") -> SoftSortRanker:
    """SoftSort relaxed sorting (Prillo & Eisenschlos, 2020).

    With :math:`\\hat s` the valid scores sorted descending, position
    :math:`p` is the softmax over valid items

    .. math:: P_{pj} = \\mathrm{softmax}_j\\Big(-\\frac{|\\hat s_p - s_j|}{T}\\Big),

    optionally followed by ``sinkhorn`` normalisation iterations; evaluated
    through :class:`SoftSortRanks`, which never forms the matrix: O(n log n) sort plus
    O(n) time and memory per list (two linear recurrences over the sorted scores). With
    ``sinkhorn`` the whole matrix is formed (:class:`PermutationRanks`, O(n^2)). ``temperature`` as in :func:`neuralsort` (default ``units="bounded"``).

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([0.0, 2.0, 1.0]), jnp.array([0, 1, 0])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.softsort(0.01, sinkhorn=3))), 5)
      1.0
    """
    return SoftSortRanker(temperature, sinkhorn, units)
