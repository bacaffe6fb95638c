"""Soft ranks by projection onto the permutahedron (Blondel et al., 2020): :func:`softrank`.

O(n log n): one sort, then pool-adjacent-violators isotonic regression (L2 or KL), with
its own vector-Jacobian product. Overview: :mod:`jaxrank.ranking.smooth`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank.ranking.backend import argsort_descending, cpu_or_elsewhere, inverse_permutation, sort_key, vary_like
from jaxrank.ranking.pairwise import PointRanks
from jaxrank.ranking.smooth import _check_units, _inputs, _optional_positive, _positive


# softrank ---------------------------------------------------------------------------
def _log_geometric(length: jax.Array) -> jax.Array:
    """``log(sum_{j=0}^{L-1} e^{-j})`` for integer-valued float ``L >= 1``."""
    return jnp.log(-jnp.expm1(-length)) - math.log(-math.expm1(-1.0))


def _pav(s: jax.Array, m: jax.Array, kl: bool):
    """Pool adjacent violators with a stack, for a batch of lists ``s[B, n]``.

    Solves the isotonic problem of the projection onto the permutahedron for
    targets ``s`` (sorted descending on the first ``m`` entries, ``m[B]``) and
    ``w_k = m - k`` (0-based ``k``): ``v_0 >= v_1 >= ...`` minimising
    ``sum_k (v_k - (s_k - w_k))^2 / 2`` (l2) or
    ``sum_k exp(s_k - v_k) + exp(w_k) v_k`` (kl). A block ``B`` takes the value
    ``mean_B(s) - mean_B(w)`` (l2) or ``lse_B(s) - lse_B(w)`` (kl); only the
    sufficient statistic of ``s`` (its sum, or logsumexp) is kept per block,
    the one of ``w`` has a closed form.

    Each step either merges the two top blocks of the stack (when they violate
    the order) or pushes the next item: a list of ``m`` items is done after at
    most ``2m - 1`` steps, so a ``fori_loop`` of ``2n - 1`` steps, each O(B)
    (two gathers and one in-place scatter), is exact. It is a fixed trip count
    on purpose: a ``while_loop`` under ``vmap`` would copy the whole carry at
    every step. Finished lists do no-op steps (their writes go out of bounds).
    The top block lives in the loop carry; the stack below it holds
    ``(statistic, start)`` pairs (starts as floats: exact below 2^24 items).

    Returns, per position: block start, block end (exclusive), block statistic.
    """
    batch, n = s.shape
    dt = s.dtype
    if dt == jnp.float32 and n >= 1 << 24:
        raise ValueError(f"softrank in float32 handles lists of fewer than 2^24 items, got {n}")
    rows = jnp.arange(batch)

    def value(stat, start, end):
        # The block value plus m (the same constant for every block of a list).
        length = end - start
        if kl:
            return stat + start - _log_geometric(length)
        return stat / length + 0.5 * (start + end - 1)

    def take(a, idx):
        return jnp.take_along_axis(a, idx[:, None, None], axis=1)[:, 0]

    def body(_, state):
        stack, stat1, start1, top, i = state
        i_f = i.astype(dt)
        below = take(stack, jnp.maximum(top - 2, 0))
        stat0, start0 = below[:, 0], below[:, 1]
        merge = (top >= 2) & (value(stat0, start0, start1) < value(stat1, start1, i_f))
        push = ~merge & (i < m)
        merged = jnp.logaddexp(stat0, stat1) if kl else stat0 + stat1
        # a push moves the top block onto the stack (nowhere while the stack is empty)
        at = jnp.where(push & (top >= 1), top - 1, n)
        stack = stack.at[rows, at].set(jnp.stack([stat1, start1], axis=-1), mode="drop")
        item = jnp.take_along_axis(s, jnp.minimum(i, n - 1)[:, None], axis=1)[:, 0]
        stat1 = jnp.where(merge, merged, jnp.where(push, item, stat1))
        start1 = jnp.where(merge, start0, jnp.where(push, i_f, start1))
        top = top + push.astype(top.dtype) - merge.astype(top.dtype)
        return stack, stat1, start1, top, i + push.astype(i.dtype)

    zeros = jnp.zeros(batch, jnp.int32)
    init = (jnp.zeros((batch, n, 2), dt), jnp.zeros(batch, dt), jnp.zeros(batch, dt), zeros, zeros)
    init = jax.tree.map(lambda v: vary_like(v, s), init)  # shard_map: the loop's carry varies like s
    stack, stat1, start1, top, _ = lax.fori_loop(0, 2 * n - 1, body, init)
    stack = stack.at[rows, jnp.where(top >= 1, top - 1, n)].set(jnp.stack([stat1, start1], axis=-1), mode="drop")
    stats, starts = stack[..., 0], stack[..., 1].astype(jnp.int32)

    # The block of each position, walking the positions backwards: n steps of
    # one gather and one column write (cheaper to compile than scatter + cumsum).
    def fill(step, state):
        blk, j = state
        k = n - 1 - step
        j = jnp.where((k < m) & (k < take(starts[..., None], j)[:, 0]), j - 1, j)
        return lax.dynamic_update_index_in_dim(blk, jnp.maximum(j, 0), k, axis=1), j

    blk, _ = lax.fori_loop(0, n, fill, (vary_like(jnp.zeros((batch, n), jnp.int32), top), jnp.maximum(top - 1, 0)))
    pos = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (batch, n))
    top, m = top[:, None], m[:, None]
    start = jnp.take_along_axis(starts, blk, axis=1)
    end = jnp.where(blk + 1 < top, jnp.take_along_axis(starts, jnp.minimum(blk + 1, n - 1), axis=1), m)
    stat = jnp.take_along_axis(stats, blk, axis=1)
    inside = pos < m
    return jnp.where(inside, start, pos), jnp.where(inside, end, pos + 1), jnp.where(inside, stat, s)


#: Lists of at most this many ``[B, n, n]`` table entries take the min-max form off CPU.
MINMAX_ENTRIES = 1 << 25


def _minmax(s: jax.Array, m: jax.Array, kl: bool):
    """:func:`_pav`'s blocks by the min-max formula of isotonic regression, in parallel.

    The solution at position ``i`` is :math:`v_i = \\min_{j \\le i} \\max_{k \\ge i} A(j, k)`,
    with :math:`A(j, k)` the value of the block ``j..k`` (:func:`_pav`'s ``value``): a table
    of every block's statistic (a cumulative sum, or logsumexp, along ``k`` for each ``j``),
    a reverse cumulative maximum over ``k`` and a cumulative minimum over ``j``: O(n^2)
    work and memory per list, O(log n) depth, where the stack's loop is 2n - 1 sequential
    steps (each a few kernel launches on a GPU). Each block's positions read the same
    table entry, so a block is a run of equal values; its start, end and statistic are read
    back from the table."""
    batch, n = s.shape
    dt = s.dtype
    pos = jnp.arange(n, dtype=jnp.int32)
    j, k = pos[:, None], pos[None, :]
    empty = -jnp.inf if kl else 0.0
    inside = pos < m[:, None]
    rows = jnp.where((j <= k) & inside[:, None, :], s[:, None, :], empty)  # [B, j, k]: s_k of block j..k
    stat = lax.associative_scan(jnp.logaddexp, rows, axis=2) if kl else jnp.cumsum(rows, axis=2)
    start, end = j.astype(dt), (k + 1).astype(dt)
    if kl:
        value = stat + start - _log_geometric(end - start)
    else:
        value = stat / (end - start) + 0.5 * (start + end - 1)
    block = (j <= k) & inside[:, None, :]
    value = jnp.where(block, value, -jnp.inf)
    best_end = jnp.where(j <= k, lax.cummax(value, axis=2, reverse=True), jnp.inf)  # max over k >= i
    v = jnp.diagonal(lax.cummin(best_end, axis=1), axis1=1, axis2=2)  # min over j <= i
    changes = v[:, 1:] != v[:, :-1]
    first = jnp.concatenate([jnp.ones((batch, 1), bool), changes], axis=1)
    last = jnp.concatenate([changes, jnp.ones((batch, 1), bool)], axis=1) | (pos + 1 >= m[:, None])
    starts = lax.cummax(jnp.where(first, pos, 0), axis=1)
    ends = lax.cummin(jnp.where(last, pos + 1, n), axis=1, reverse=True)
    stats = stat[jnp.arange(batch)[:, None], starts, jnp.clip(ends - 1, 0, n - 1)]
    return jnp.where(inside, starts, pos), jnp.where(inside, ends, pos + 1), jnp.where(inside, stats, s)


def _blocks(s: jax.Array, m: jax.Array, kl: bool):
    """The isotonic blocks: :func:`_pav` on CPU (and for lists too long for the table),
    :func:`_minmax` elsewhere."""
    batch, n = s.shape
    if batch * n * n > MINMAX_ENTRIES:
        return _pav(s, m, kl)
    return cpu_or_elsewhere(s, m, cpu=lambda s, m: _pav(s, m, kl), elsewhere=lambda s, m: _minmax(s, m, kl))


def _project_sorted_impl(s: jax.Array, m: jax.Array, kl: bool):
    start, end, stat = _blocks(s, m, kl)
    dt = s.dtype
    length = (end - start).astype(dt)
    m_f = m[:, None].astype(dt)
    if kl:
        r = s - stat + (m_f - start.astype(dt)) + _log_geometric(length)
        weight = jnp.exp(s - stat)  # softmax of s within the block
    else:
        r = s - stat / length + (m_f - 0.5 * (start + end - 1).astype(dt))
        weight = 1 / length
    n = s.shape[-1]
    ids = start + n * jnp.arange(s.shape[0], dtype=start.dtype)[:, None]
    return r, (ids, weight)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def _project_sorted(s: jax.Array, m: jax.Array, kl: bool) -> jax.Array:
    """Projection onto the permutahedron of (m, ..., 1), for sorted input.

    ``s``: ``[B, n]`` sorted descending on the first ``m`` entries. Returns
    ``s - v`` with ``v`` the isotonic solution; entries past ``m`` are junk.
    """
    return _project_sorted_impl(s, m, kl)[0]


def _project_sorted_fwd(s, m, kl):
    return _project_sorted_impl(s, m, kl)


def _project_sorted_bwd(kl, residuals, u):
    # r = s - v(s): v is constant on each block B with dv_i/ds_j = weight_j for
    # i, j in B (1/|B| for l2, softmax_B(s)_j for kl), so
    # (J^T u)_j = u_j - weight_j * sum_{i in B} u_i: O(n).
    ids, weight = residuals
    flat = ids.reshape(-1)
    totals = jax.ops.segment_sum(u.reshape(-1), flat, num_segments=flat.shape[0], indices_are_sorted=True)
    return u - weight * totals[flat].reshape(u.shape), None


_project_sorted.defvjp(_project_sorted_fwd, _project_sorted_bwd)


def _ascending_order(scores: jax.Array, valid: jax.Array) -> jax.Array:
    """Valid items by score ascending (ties in input order), then the invalid ones: the
    ranking primitive's order of the negated scores."""
    return argsort_descending(sort_key(-lax.stop_gradient(scores), valid))


def soft_ranks(
    scores: jax.Array, where: Optional[jax.Array] = None, *, strength: float = 1.0, regularization: str = "l2"
) -> jax.Array:
    """Soft ranks by projection onto the permutahedron (Blondel et al., 2020).

    With :math:`m` valid items, :math:`\\rho = (m, m-1, \\dots, 1)` and
    :math:`\\varepsilon` the strength,

    .. math::
        r = \\arg\\min_{\\mu \\in \\mathcal{P}(\\rho)} \\tfrac12 \\|\\mu + s/\\varepsilon\\|^2
        \\quad (\\text{l2}), \\qquad
        r = \\log \\arg\\min_{\\mu \\in \\mathcal{P}(e^\\rho)}
        \\mathrm{KL}(\\mu, e^{-s/\\varepsilon}) \\quad (\\text{kl}),

    where :math:`\\mathcal{P}(\\rho)` is the convex hull of the permutations of
    :math:`\\rho`; rank 1 is the highest score. Computed as one sort plus an
    isotonic regression (pool adjacent violators); the gradient (custom VJP) is
    O(n). Invalid items are left out of the projection and get rank ``m + 1``.
    Values are clipped to ``[1, m]`` (rounding only; the gradient is unclipped).

    Example:
      >>> import jax.numpy as jnp
      >>> [float(r) for r in soft_ranks(jnp.array([3.0, 1.0, 2.0]), strength=0.1)]
      [1.0, 3.0, 2.0]
      >>> [round(float(r), 2) for r in soft_ranks(jnp.array([3.0, 1.0, 2.0]), strength=10.0)]
      [1.9, 2.1, 2.0]
      >>> [round(float(r), 2) for r in soft_ranks(jnp.array([3.0, 2.8, 0.0]), strength=1.0)]
      [1.4, 1.6, 3.0]
    """
    strength = _positive(strength, "strength")
    if regularization not in ("l2", "kl"):
        raise ValueError(f"regularization must be 'l2' or 'kl', got {regularization!r}")
    s, valid = _inputs(scores, where)
    shape = s.shape
    n = shape[-1]
    if n == 0 or s.size == 0:
        return jnp.zeros(shape, s.dtype)
    s = s.reshape(-1, n)
    valid = valid.reshape(-1, n)
    m = jnp.sum(valid, axis=-1, dtype=jnp.int32)
    order = _ascending_order(s, valid)
    z = jnp.take_along_axis(-s / strength, order, axis=-1)
    r_sorted = _project_sorted(z, m, regularization == "kl")
    r = jnp.take_along_axis(r_sorted, inverse_permutation(order), axis=-1)
    m_f = m[:, None].astype(r.dtype)
    r = r + lax.stop_gradient(jnp.clip(r, 1, jnp.maximum(m_f, 1)) - r)
    return jnp.where(valid, r, m_f + 1).reshape(shape)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SoftRanks(PointRanks):
    """Soft ranks by projection onto the permutahedron; see :func:`softrank`.

    ``count_before`` and ``survival`` rank again inside the subsets
    ``where & (w > 0)`` and ``where & (w == 0)`` (one extra call, on a doubled
    batch), so they need binary ``w``; ``cascade`` is not defined.
    """

    ranks: jax.Array
    valid: jax.Array
    scores: jax.Array
    ranker: SoftRanker = dataclasses.field(metadata=dict(static=True), default=None)
    tau: float = dataclasses.field(metadata=dict(static=True), default=1.0)

    def _subset_ranks(self, masks: jax.Array) -> jax.Array:
        scores = jnp.broadcast_to(self.scores, masks.shape)
        return soft_ranks(scores, masks, strength=self.ranker.strength, regularization=self.ranker.regularization)


@dataclasses.dataclass(frozen=True)
class SoftRanker:
    """Permutahedron-projection soft ranks; see :func:`softrank`."""

    strength: float = 0.3
    regularization: str = "l2"
    cutoff_temperature: Optional[float] = None
    units: str = "bounded"

    smooth = True

    def __post_init__(self):
        object.__setattr__(self, "strength", _positive(self.strength, "strength"))
        if self.regularization not in ("l2", "kl"):
            raise ValueError(f"regularization must be 'l2' or 'kl', got {self.regularization!r}")
        object.__setattr__(
            self, "cutoff_temperature", _optional_positive(self.cutoff_temperature, "cutoff_temperature")
        )
        _check_units(self.units)

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> SoftRanks:
        del depth
        s, valid = _inputs(scores, where, self.units, self.strength)
        ranks = soft_ranks(s, valid, strength=self.strength, regularization=self.regularization)
        tau = self.strength if self.cutoff_temperature is None else self.cutoff_temperature
        return SoftRanks(ranks=ranks, valid=valid, scores=s, ranker=self, tau=tau)


def softrank(
    strength: float = 0.3,
    regularization: str = "l2",
    *,
    cutoff_temperature: Optional[float] = None,
    units: str = "bounded",
) -> SoftRanker:
    """Soft ranks by projection onto the permutahedron (Blondel et al., 2020).

    The ranks are :func:`soft_ranks`: piecewise linear (l2) or smooth (kl) in
    the scores, exact integer ranks once the gaps between sorted scores exceed
    the strength (l2), all equal to the mean rank when the strength is large.

    Cost per list: one O(n log n) sort (the ranking primitive's
    :func:`~jaxrank.ranking.argsort_descending`: ``lax.sort`` on GPU and TPU, no
    host callback there; numpy's sort on CPU), then the isotonic regression: on CPU
    pool-adjacent-violators, a loop of at most 2n O(1) steps (exact, sequential); on GPU
    and TPU the min-max formula over a table of every block, O(n^2) work in O(log n) depth
    (lists with more than 2^25 table entries in a batch take the loop there too); and an
    O(n) custom VJP. The cutoff is :func:`soft_cutoff` with
    :math:`\\tau` = ``strength`` (or ``cutoff_temperature``). ``count_before``
    and ``survival`` (AP, RR, success) rank again inside the relevant /
    non-relevant subsets; ERR (``cascade``) compares every pair of soft ranks,
    :math:`\\sigma((r_i - r_j)/\\tau)`, in O(n^2) work and O(n) memory per list.

    Args:
      strength: :math:`\\varepsilon > 0`, in the units of the scores, kept within
        :func:`~jaxrank.ranking.bounded_temperature`'s band of each list's spread
        (``units="bounded"``), or a fraction of the list's spread (``units="std"``), or in score
        units (``units="score"``). The default, 0.3, was measured (docs/soft.md).
      regularization: ``"l2"`` (Euclidean projection) or ``"kl"`` (entropic).
      cutoff_temperature: :math:`\\tau` of the soft cutoff (in rank positions, before
        :meth:`~PointRanks.cutoff_width` widens it); default ``strength``.
      units: ``"bounded"``, ``"std"`` or ``"score"``; see :mod:`jaxrank.ranking.smooth`.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 1, 0])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.softrank(0.01))), 5)
      0.63093
    """
    return SoftRanker(strength, regularization, cutoff_temperature, units)
