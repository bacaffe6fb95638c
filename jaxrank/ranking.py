"""The one ranking primitive.

A *ranker* maps ``scores[..., n]`` and a validity mask ``where[..., n]`` to a
:class:`Ranks` object. Every metric in :mod:`jaxrank.metrics` is written once
against the four operations of :class:`Ranks`; the ranker alone decides whether
the result is the exact metric (:func:`hard`) or a smooth relaxation
(:mod:`jaxrank.soft`).

Writing :math:`r_i` for the (random, or smoothed) 1-based rank of item
:math:`i` and :math:`j \\prec i` for "item :math:`j` is ranked above item
:math:`i`", the operations are, for per-item weights :math:`g, w` and a
function of the position :math:`f`:

.. math::

    \\text{linear}(g, f) &= \\sum_i g_i\\, \\mathbb{E}[f(r_i)] \\\\
    \\text{count\\_before}(g, f, w) &= \\sum_i g_i\\,
        \\mathbb{E}\\Big[f(r_i)\\,\\big(w_i + \\textstyle\\sum_{j \\prec i} w_j\\big)\\Big] \\\\
    \\text{survival}(g, f, w) &= \\sum_i g_i\\,
        \\mathbb{E}\\Big[f(r_i) \\textstyle\\prod_{j \\prec i} (1 - w_j)\\Big],
        \\quad w \\in \\{0, 1\\} \\\\
    \\text{cascade}(p, f) &= \\sum_i p_i\\,
        \\mathbb{E}\\Big[f(r_i) \\textstyle\\prod_{j \\prec i} (1 - p_j)\\Big]

The expectation is over the orderings of tied items for ``ties="expected"``
and is trivial otherwise. ``f`` maps positions of shape ``[..., P]`` to weights
``[..., P, C]`` (``C`` cutoffs), and every operation returns ``[..., C]``.

One derived operation, :meth:`Ranks.prefix_sum`, is ``linear`` with the cutoff
indicator at cutoffs ``k[..., C]`` that differ between lists,

.. math:: \\text{prefix\\_sum}(g, k) = \\sum_i g_i\\, \\mathbb{E}\\big[[r_i \\le k]\\big],

which exact ranks compute as a running sum read at ``k`` (no ``[..., n, C]``
weights).
"""

from __future__ import annotations

import abc
import concurrent.futures
import dataclasses
import functools
import math
import os
from typing import Callable, Literal, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank._npsort import argsort_high_bits

Ties = Literal["stable", "pessimistic", "optimistic", "expected"]
TIE_POLICIES: tuple[str, ...] = ("stable", "pessimistic", "optimistic", "expected")
PositionFn = Callable[[jax.Array], jax.Array]

# Above this prefix depth a full sort beats ``lax.top_k`` (measured in
# benchmarks/bench_core.py: top_k cost grows quickly with k on CPU).
TOP_K_MAX_DEPTH = 64


class Ranks(abc.ABC):
    """What a ranker returns: the four operations every metric is written with.

    Subclasses: :class:`HardRanks` here, the smooth ones in :mod:`jaxrank.soft`.
    ``g``, ``w`` and ``p`` are per-item arrays of shape ``[..., n]``; invalid
    items must carry zero weight (the metrics guarantee it).
    """

    #: Number of items ``n`` of the ranked lists.
    size: int
    #: True when the operations are differentiable in the scores.
    smooth: bool = False

    def cutoff(self, positions: jax.Array, k: jax.Array) -> jax.Array:
        """Indicator (hard) or smooth indicator of ``positions <= k``."""
        return (positions <= k).astype(positions.dtype)

    @abc.abstractmethod
    def linear(self, g: jax.Array, f: PositionFn) -> jax.Array:
        """See the module docstring."""

    @abc.abstractmethod
    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        """See the module docstring."""

    @abc.abstractmethod
    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        """See the module docstring."""

    @abc.abstractmethod
    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        """See the module docstring."""

    def prefix_sum(self, g: jax.Array, k: jax.Array) -> jax.Array:
        """``linear`` with the cutoff indicator at per-list cutoffs ``k[..., C]``:
        ``sum_i g_i E[[r_i <= k]]``, shape ``[..., C]``."""
        return self.linear(g, lambda pos: self.cutoff(pos[..., None], k[..., None, :]))


def _float_dtype() -> jnp.dtype:
    return jnp.result_type(float)


def sort_key(scores: jax.Array, where: jax.Array) -> jax.Array:
    """Integers that order like ``scores``, with NaN below every number and
    invalid items below NaN; equal keys mean tied scores (``-0.0 == 0.0``).

    Low-precision floats are widened to float32 first, which is exact.
    """
    x = scores
    if x.dtype not in (jnp.float32, jnp.float64):
        x = x.astype(jnp.float32)
    x = x + jnp.zeros((), x.dtype)  # -0.0 + 0.0 == +0.0: one key for zero
    itype = jnp.int64 if x.dtype == jnp.float64 else jnp.int32
    info = jnp.iinfo(itype)
    bits = lax.bitcast_convert_type(x, itype)
    key = jnp.where(bits < 0, bits ^ jnp.array(info.max, itype), bits)
    key = jnp.where(jnp.isnan(x), jnp.array(info.min + 1, itype), key)
    return jnp.where(where, key, jnp.array(info.min, itype))


_POOL: Optional[concurrent.futures.ThreadPoolExecutor] = None
_THREADS = max(1, min(8, os.cpu_count() or 1))


def _in_threads(fn, x: np.ndarray) -> np.ndarray:
    """``fn`` over row blocks of ``x`` on a few threads (numpy's sort releases the GIL)."""
    global _POOL
    rows = x.reshape(-1, x.shape[-1])
    if _THREADS == 1 or rows.shape[0] < 2 * _THREADS or x.size < 1 << 16:
        return fn(x)
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(_THREADS, thread_name_prefix="jaxrank-sort")
    parts = np.array_split(rows, _THREADS)
    return np.concatenate(list(_POOL.map(fn, parts))).reshape(x.shape)


def _host_order(key: np.ndarray) -> np.ndarray:
    # Callbacks may receive jax arrays; any jax op from inside a callback can
    # deadlock the CPU runtime, so everything here is numpy.
    return _in_threads(_host_order_rows, np.asarray(key))


def _host_order_rows(key: np.ndarray) -> np.ndarray:
    n = key.shape[-1]
    if key.dtype == np.int32:
        # Sorting one int64 per item (key, index) is a plain value sort, which
        # numpy vectorises; it is stable by construction and ~2x faster than
        # np.argsort on the floats themselves.
        comp = (np.invert(key).astype(np.int64) << 32) | np.arange(n, dtype=np.int64)
        comp.sort(axis=-1)
        return (comp & 0xFFFFFFFF).astype(np.int32)
    # 64-bit keys leave no room for the index, so the index replaces the key's lowest
    # bits: the value sort orders by the rest of the key, then by index. Keys that differ
    # only in those bits (scores within ~n * 2^-52 of each other) can come out of order;
    # rows where that happened are sorted again, exactly (~3x slower).
    if n <= 1:
        return np.zeros(key.shape, np.int32)
    inv = np.invert(key).reshape(-1, n)
    order = argsort_high_bits(inv)
    sorted_keys = np.take_along_axis(inv, order, axis=-1)
    bad = np.flatnonzero((sorted_keys[:, 1:] < sorted_keys[:, :-1]).any(axis=-1))
    if len(bad):
        order[bad] = np.argsort(inv[bad], axis=-1, kind="stable")
    return order.astype(np.int32).reshape(key.shape)


def _host_bounds(key_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = key_sorted.shape[-1]
    idx = np.broadcast_to(np.arange(n, dtype=np.int32), key_sorted.shape)
    differs = key_sorted[..., 1:] != key_sorted[..., :-1]
    edge = np.ones(key_sorted.shape[:-1] + (1,), bool)
    start = np.maximum.accumulate(np.where(np.concatenate([edge, differs], -1), idx, 0), axis=-1)
    last = np.concatenate([differs, edge], -1)
    end = np.minimum.accumulate(np.where(last, idx + 1, n)[..., ::-1], axis=-1)[..., ::-1]
    return start.astype(np.int32), np.ascontiguousarray(end, dtype=np.int32)


def _host_order_and_bounds(key: np.ndarray):
    key = np.asarray(key)
    order = _host_order(key)
    return (order,) + _host_bounds(np.take_along_axis(key, order, -1))


def _joined(host_fn):
    """``host_fn`` on int64 keys passed as int32 pairs (see :func:`_cpu_argsort`)."""
    return lambda pairs: host_fn(np.ascontiguousarray(pairs, np.int32).view(np.int64)[..., 0])


def _cpu_argsort(key: jax.Array, bounds: bool = False):
    out = jax.ShapeDtypeStruct(key.shape, jnp.int32)
    host_fn = _host_order_and_bounds if bounds else _host_order
    if key.dtype == jnp.int64:
        # XLA may run the callback on a thread where a `with jax.enable_x64(True)` block is
        # not in force; int64 operands would reach it truncated to int32. Int32 pairs do not.
        host_fn, key = _joined(host_fn), lax.bitcast_convert_type(key, jnp.int32)
    outs = (out, out, out) if bounds else out
    return jax.pure_callback(host_fn, outs, key, vmap_method="expand_dims")


def _device_argsort(key: jax.Array, bounds: bool = False):
    iota = lax.broadcasted_iota(jnp.int32, key.shape, key.ndim - 1)
    order = lax.sort((~key, iota), dimension=key.ndim - 1, num_keys=1, is_stable=True)[1]
    if not bounds:
        return order
    start, end = _segment_bounds(jnp.take_along_axis(key, order, -1))
    return order, start.astype(jnp.int32), end.astype(jnp.int32)


def argsort_descending(key: jax.Array, bounds: bool = False):
    """Stable descending argsort of integer keys along the last axis.

    With ``bounds``, also the start (inclusive) and end (exclusive) position of
    the tie group at each position. XLA's CPU sort is 15-80x slower than
    numpy's (jax issue #10434), so on the CPU backend the sort runs in numpy
    through a host callback; elsewhere it is ``lax.sort``.
    """
    return lax.platform_dependent(
        key,
        cpu=lambda k: _cpu_argsort(k, bounds),
        default=lambda k: _device_argsort(k, bounds),
    )


def inverse_permutation(order: jax.Array) -> jax.Array:
    """``inv`` with ``inv[..., order[..., p]] = p``: the 0-based position of each item,
    for an ``order`` holding a permutation of ``0..n-1`` along its last axis."""
    n = order.shape[-1]
    flat = order.reshape(-1, n)
    rows = jnp.arange(flat.shape[0])[:, None]
    inv = jnp.zeros_like(flat).at[rows, flat].set(lax.broadcasted_iota(flat.dtype, flat.shape, 1))
    return inv.reshape(order.shape)


def _key_as_float(key: jax.Array) -> jax.Array:
    """Floats whose total order (the one ``lax.top_k`` uses, NaN payloads
    included) is the order of the integer keys."""
    ftype = jnp.float64 if key.dtype == jnp.int64 else jnp.float32
    flip = jnp.array(jnp.iinfo(key.dtype).max, key.dtype)
    return lax.bitcast_convert_type(jnp.where(key < 0, key ^ flip, key), ftype)


def _float_as_key(x: jax.Array) -> jax.Array:
    """Inverse of :func:`_key_as_float`."""
    itype = jnp.int64 if x.dtype == jnp.float64 else jnp.int32
    bits = lax.bitcast_convert_type(x, itype)
    return jnp.where(bits < 0, bits ^ jnp.array(jnp.iinfo(itype).max, itype), bits)


def _top_k_order(key: jax.Array, depth: int) -> tuple[jax.Array, jax.Array]:
    """First ``depth`` positions of the stable descending order of ``key``,
    and the keys at those positions.

    ``lax.top_k`` is fast only on floats; it orders them totally (NaN payloads
    too) and breaks ties by index, so it runs exactly on the keys cast to
    floats with the same order.
    """
    # The barrier keeps later slices of the outputs from being folded into
    # XLA's sort+slice pattern for top_k, which then falls back to a full sort.
    values, order = lax.optimization_barrier(lax.top_k(_key_as_float(key), depth))
    return order, _float_as_key(values)


def _segment_bounds(key_sorted: jax.Array):
    """Start (inclusive) and end (exclusive) position of each position's tie group."""
    depth = key_sorted.shape[-1]
    idx = jnp.broadcast_to(jnp.arange(depth, dtype=jnp.int32), key_sorted.shape)
    differs = key_sorted[..., 1:] != key_sorted[..., :-1]
    edge = jnp.ones(key_sorted.shape[:-1] + (1,), bool)
    first = jnp.concatenate([edge, differs], axis=-1)
    last = jnp.concatenate([differs, edge], axis=-1)
    start = lax.cummax(jnp.where(first, idx, 0), axis=key_sorted.ndim - 1)
    end = lax.cummin(jnp.where(last, idx + 1, depth), axis=key_sorted.ndim - 1, reverse=True)
    return start, end


def _blocked_cumsum(x: jax.Array, block: int = 64) -> jax.Array:
    """Cumulative sum as two small triangular matmuls (blocks, then block offsets).

    A list length that is not a multiple of the block gets its tail summed
    apart: padding instead would fuse the producer of ``x`` into a pad, where
    XLA:CPU does not vectorise transcendental functions (log1p there is ~10x slower).
    """
    n = x.shape[-1]
    # a block that divides n, when one is near ``block``, leaves no tail (a smaller program)
    b = next((d for d in range(block, block // 2, -1) if n % d == 0), min(block, n))
    m = n // b * b
    hi = lax.Precision.HIGHEST
    blocks = x[..., :m].reshape(x.shape[:-1] + (m // b, b))
    within = jnp.matmul(blocks, jnp.triu(jnp.ones((b, b), x.dtype)), precision=hi)
    offsets = jnp.matmul(within[..., -1], jnp.triu(jnp.ones((m // b, m // b), x.dtype), 1), precision=hi)
    head = (within + offsets[..., None]).reshape(x.shape[:-1] + (m,))
    if m == n:
        return head
    r = n - m
    tail = jnp.matmul(x[..., m:], jnp.triu(jnp.ones((r, r), x.dtype)), precision=hi)
    return jnp.concatenate([head, tail + head[..., -1:]], axis=-1)


def cumsum(x: jax.Array) -> jax.Array:
    """Inclusive cumulative sum along the last axis.

    XLA's CPU cumsum is ~5x slower than two blocked triangular matmuls
    (benchmarks/bench_core.py), so the CPU backend uses those.
    """
    x = jnp.asarray(x)
    return lax.platform_dependent(x, cpu=_blocked_cumsum, default=lambda v: jnp.cumsum(v, axis=-1))


def row_sum(x: jax.Array, keepdims: bool = False) -> jax.Array:
    """Sum over the last axis as a matrix-vector product (in the float dtype).

    XLA's CPU row reductions are several times slower than a matvec
    (benchmarks/bench_core.py); integer and boolean inputs are summed exactly
    as floats (up to 2**24 items in float32). Float64 rows are reduced: XLA:CPU
    emits a float64 matvec as a loop kernel of its own (no BLAS), which runs no
    faster than the reduction fused into its producer and costs compile time.
    """
    x = jnp.asarray(x)
    ftype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else _float_dtype()
    if ftype == jnp.float64:
        return jnp.sum(x.astype(ftype), axis=-1, keepdims=keepdims)
    ones = jnp.ones((x.shape[-1],), ftype)
    out = jnp.matmul(x.astype(ftype), ones, precision=lax.Precision.HIGHEST)
    return out[..., None] if keepdims else out


def _exclusive(x: jax.Array) -> jax.Array:
    """Inclusive running values shifted right by one, starting at 0."""
    return jnp.concatenate([jnp.zeros(x.shape[:-1] + (1,), x.dtype), x[..., :-1]], axis=-1)


def _reduce(h: jax.Array, weights: jax.Array) -> jax.Array:
    """``sum_p h[..., p] * weights[..., p, c]`` without materialising a batch of weights."""
    if weights.ndim == 2:
        return jnp.matmul(h, weights.astype(h.dtype), precision=lax.Precision.HIGHEST)
    return jnp.sum(h[..., :, None] * weights, axis=-2)


def _take(x: jax.Array, idx: jax.Array) -> jax.Array:
    return jnp.take_along_axis(x, idx, axis=-1)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class HardRanks(Ranks):
    """Exact ranks, stored as the first ``depth`` positions of the ranking.

    Attributes:
      order: ``int32[..., depth]``, the item at each position (valid items first).
      n_valid: ``int32[..., 1]``, number of valid items in each list.
      key: ``int[..., n]``, :func:`sort_key` of every item (tie groups).
      key_sorted: ``int[..., depth]`` or None, the keys in rank order (prefix path).
      next_key: ``int[..., 1]`` or None, the key just past the prefix (prefix path).
      start, end: ``int32[..., depth]`` or None, the tie group of each position
        (computed with the sort on the full path; from the prefix otherwise).
      ties: the tie policy.
    """

    order: jax.Array
    n_valid: jax.Array
    key: jax.Array
    key_sorted: Optional[jax.Array] = None
    next_key: Optional[jax.Array] = None
    start: Optional[jax.Array] = None
    end: Optional[jax.Array] = None
    ties: str = dataclasses.field(metadata=dict(static=True), default="stable")

    smooth = False

    @property
    def size(self) -> int:
        return self.key.shape[-1]

    @property
    def depth(self) -> int:
        return self.order.shape[-1]

    def _positions(self) -> jax.Array:
        return jnp.arange(1, self.depth + 1, dtype=_float_dtype())

    def valid_positions(self, dtype=bool) -> jax.Array:
        """``[..., depth]``: which positions hold a valid item (the first ``n_valid``)."""
        return (jnp.arange(self.depth) < self.n_valid).astype(dtype)

    def in_rank_order(self, v: jax.Array) -> jax.Array:
        """Per-item values ``v[..., n]`` at the ranked positions, ``[..., depth]``; 0 at the
        positions past the valid items."""
        v = jnp.broadcast_to(v, self.key.shape)
        return jnp.where(self.valid_positions(), _take(v, self.order), jnp.zeros((), v.dtype))

    # Tie groups, in position space ------------------------------------------------
    def _groups(self):
        """``(start, end, tail, member)``: each position's tie group; for a
        prefix, ``tail`` marks the group that may continue past it and
        ``member`` the items of that group."""
        if self.start is not None:
            start, end = self.start, self.end
        else:
            start, end = _segment_bounds(self.key_sorted)
        if self.depth == self.size:
            return start, end, None, None
        # The last group spills past the prefix when the next key is equal.
        spill = (self.key_sorted[..., -1:] == self.next_key) & (self.depth - 1 < self.n_valid)
        tail = (start == start[..., -1:]) & spill

        def over_members(v):
            member = (self.key == self.key_sorted[..., -1:]) & spill
            return row_sum(jnp.where(member, v, 0), keepdims=True)

        full = start + over_members(jnp.ones(self.key.shape, jnp.float32)).astype(start.dtype)
        return start, jnp.where(tail, full, end), tail, over_members

    def _group_sum(self, v: jax.Array, groups) -> jax.Array:
        start, end, tail, over_members = groups
        csum = lax.optimization_barrier(cumsum(self.in_rank_order(v)))
        inside = _take(csum, jnp.minimum(end, self.depth) - 1) - _take(_exclusive(csum), start)
        if tail is None:
            return inside
        return jnp.where(tail, over_members(v), inside)

    def _prepare(self, *values: jax.Array):
        """Values in rank order; for optimistic / pessimistic ties, reordered
        inside each tie group by the first value, descending / ascending."""
        sorted_values = tuple(self.in_rank_order(v) for v in values)
        if self.ties not in ("optimistic", "pessimistic"):
            return sorted_values
        start = self._groups()[0]
        lead = -sorted_values[0] if self.ties == "optimistic" else sorted_values[0]
        return lax.sort((start, lead) + sorted_values, dimension=start.ndim - 1, num_keys=2)[2:]

    def _expected_terms(self, g: jax.Array, w: jax.Array):
        groups = self._groups()
        start, end = groups[0], groups[1]
        size = (end - start).astype(g.dtype)
        ws = self.in_rank_order(w)
        before = _take(_exclusive(cumsum(ws)), start)
        within = (jnp.arange(self.depth) - start).astype(g.dtype)
        sums = [self._group_sum(v, groups) for v in (g, w, g * w)]
        return size, before, within, sums

    # The four operations ---------------------------------------------------------
    def _linear_terms(self, g: jax.Array) -> jax.Array:
        """``g`` at each position, in expectation over tie orders for ``"expected"``."""
        if self.ties == "expected":
            groups = self._groups()
            size = (groups[1] - groups[0]).astype(g.dtype)
            return self._group_sum(g, groups) / size * self.valid_positions(g.dtype)
        (h,) = self._prepare(g)
        return h

    def linear(self, g: jax.Array, f: PositionFn) -> jax.Array:
        return _reduce(self._linear_terms(g), f(self._positions()))

    def prefix_sum(self, g: jax.Array, k: jax.Array) -> jax.Array:
        # The running sum read at position floor(k): a per-list cutoff would otherwise
        # need [..., n, C] weights, which XLA:CPU handles slowly inside a large program.
        running = cumsum(self._linear_terms(g))
        count = jnp.clip(jnp.floor(k), 0, self.depth).astype(jnp.int32)
        at = _take(running, jnp.maximum(count - 1, 0))
        return jnp.where(count > 0, at, jnp.zeros((), at.dtype))

    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        weights = f(self._positions())
        if self.ties == "expected":
            # Item i of a group of m at within-group position q (uniform) has
            # E[#w before | q] = W_before + w_i + (W_group - w_i) q / (m - 1).
            size, before, within, (big_g, big_w, big_gw) = self._expected_terms(g, w)
            frac = jnp.where(size > 1, within / jnp.maximum(size - 1, 1), 0.0)
            h = (big_g * before + big_gw + (big_g * big_w - big_gw) * frac) / size
            h = h * self.valid_positions(g.dtype)
        else:
            ws, gs = self._prepare(w, g)
            h = gs * cumsum(ws)
        return _reduce(h, weights)

    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        weights = f(self._positions())
        if self.ties != "expected":
            ws, gs = self._prepare(w, g)
            return _reduce(gs * (_exclusive(cumsum(ws)) == 0), weights)
        # Only the first group holding a relevant item matters. There, q random
        # other members avoid all relevant ones with chance C(a, q) / C(m-1, q),
        # a = m - W (item relevant) or m - 1 - W (not): a product of steps
        # (a - j) / (m - 1 - j), summed in logs inside that one group.
        size, before, within, (big_g, big_w, big_gw) = self._expected_terms(g, w)
        active = (before == 0) & (big_w > 0) & (within > 0)

        def ratio(a):
            step = (a - within + 1) / jnp.maximum(size - within, 1)
            logs = jnp.where(active, jnp.log(jnp.where(step > 0, step, 1.0)), 0.0)
            return jnp.where(within > a, 0.0, jnp.exp(cumsum(logs)))

        h = (big_gw * ratio(size - big_w) + (big_g - big_gw) * ratio(size - 1 - big_w)) / size
        return _reduce(h * (before == 0) * self.valid_positions(g.dtype), weights)

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        weights = f(self._positions())
        if self.ties != "expected":
            (ps,) = self._prepare(p)
            return _reduce(ps * self._survive(ps), weights)
        return self._expected_cascade(p, weights)

    @staticmethod
    def _survive(ps: jax.Array) -> jax.Array:
        """``prod_{q < p} (1 - ps_q)``, through a cumulative sum of logs."""
        # A certain stop (p = 1) gets a finite log far below exp's underflow
        # rather than -inf, which the matmul cumsum would turn into NaN (0 * inf).
        ps = jnp.clip(ps, 0.0, 1.0)
        logs = jnp.where(ps >= 1, -1e4, jnp.log1p(-jnp.where(ps >= 1, 0.0, ps)))
        return jnp.exp(_exclusive(cumsum(logs)))

    def _expected_cascade(self, p: jax.Array, weights: jax.Array) -> jax.Array:
        """Exact mean of the cascade over the orders of every tie group.

        With :math:`A_t` the mean of :math:`\\prod (1-p_j)` over a random
        t-subset of a group, a group starting at :math:`s` adds
        :math:`\\Pi_{before} \\sum_q f(s+q+1) (A_q - A_{q+1})`.
        :math:`A_t = e_t / \\binom{m}{t}`, :math:`e_t` the elementary symmetric
        polynomials of the group's :math:`1 - p`. The branch is picked by the
        largest tie group in the batch: none (the stable cascade), up to 8
        items (polynomials built from shifted copies of the list, O(n w^2)),
        or larger (a scan over positions, O(n w)).
        """
        if self.depth < self.size:
            raise ValueError("cascade with ties='expected' needs the full ranking (depth=None)")
        start, end, _, _ = self._groups()
        largest = jnp.max(jnp.where(self.valid_positions(jnp.int32) > 0, end - start, 1))
        ps = self.in_rank_order(p)
        widths = sorted({1, min(2, self.depth), min(8, self.depth), self.depth})
        branches = []
        for w in widths:
            if w == 1:
                branches.append(lambda: _reduce(ps * self._survive(ps), weights))
            elif w <= 8:
                branches.append(functools.partial(self._cascade_shifted, ps, weights, start, end, w))
            else:
                branches.append(functools.partial(self._cascade_scan, p, weights, start, end, w))
        index = jnp.sum(largest > jnp.asarray(widths[:-1]))
        return lax.switch(index, branches)

    def _cascade_shifted(self, ps, weights, start, end, width: int) -> jax.Array:
        depth = self.depth
        xs = 1 - ps
        size = end - start
        pos = jnp.arange(depth)
        first = start == pos

        def shift(v, j):  # v[..., p + j], zero past the end
            pad = jnp.zeros(v.shape[:-1] + (j,) + v.shape[v.ndim :], v.dtype)
            return jnp.concatenate([v[..., j:], pad], axis=-1) if j else v

        coeffs = [jnp.ones_like(xs)] + [jnp.zeros_like(xs) for _ in range(width)]
        for j in range(width):
            x = jnp.where(j < size, shift(xs, j), 1.0)
            add = j < size
            coeffs = [coeffs[0]] + [
                jnp.where(add, coeffs[t] + x * coeffs[t - 1], coeffs[t]) for t in range(1, width + 1)
            ]
        binom = np.array([[math.comb(m, t) for t in range(width + 1)] for m in range(width + 1)], float)
        table = jnp.asarray(binom, xs.dtype)[jnp.clip(size, 0, width)]
        mean = [coeffs[t] / jnp.maximum(table[..., t], 1.0) for t in range(width + 1)]
        total = 0.0
        for q in range(width):
            pad = jnp.zeros(weights.shape[:-2] + (q, weights.shape[-1]), weights.dtype)
            rows = jnp.concatenate([weights[..., q:, :], pad], -2)
            step = jnp.where(q < size, mean[q] - mean[q + 1], 0.0)
            total = total + step[..., None] * rows
        keep = (first * self.valid_positions(xs.dtype) * self._survive(ps))[..., None]
        return jnp.sum(keep * total, axis=-2)

    def _cascade_scan(self, p, weights, start, end, width: int) -> jax.Array:
        xs = 1 - self.in_rank_order(p)
        valid = self.valid_positions(p.dtype)
        depth = self.depth
        batch = xs.shape[:-1]
        wts = jnp.broadcast_to(weights, batch + weights.shape[-2:])
        wts = jnp.concatenate([wts, jnp.zeros(batch + (1, wts.shape[-1]), wts.dtype)], -2)
        t = jnp.arange(width + 1)

        def step(carry, inputs):
            a, prod_before, total = carry
            x, s, e, is_valid, pos = inputs
            a = jnp.where((pos == s)[..., None], (t == 0).astype(a.dtype), a)
            j = (pos - s + 1).astype(a.dtype)[..., None]
            shifted = jnp.concatenate([jnp.zeros(batch + (1,), a.dtype), a[..., :-1]], -1)
            a = (j - t) / j * a + t / j * x[..., None] * shifted
            size = (e - s)[..., None]
            at_end = ((pos + 1 == e) & (is_valid > 0))[..., None]
            rows = jnp.clip(s[..., None] + t, 0, depth)
            f_rows = jnp.take_along_axis(wts, rows[..., None], axis=-2)
            nxt = jnp.concatenate([a[..., 1:], jnp.zeros(batch + (1,), a.dtype)], -1)
            diff = jnp.where(t < size, a - nxt, 0.0)
            contribution = jnp.sum(diff[..., None] * f_rows, axis=-2) * prod_before
            total = total + jnp.where(at_end, contribution, 0.0)
            group_prod = jnp.take_along_axis(a, jnp.minimum(size, width), -1)
            prod_before = jnp.where(at_end, prod_before * group_prod, prod_before)
            return (a, prod_before, total), None

        init = (
            jnp.zeros(batch + (width + 1,), xs.dtype),
            jnp.ones(batch + (1,), xs.dtype),
            jnp.zeros(batch + (wts.shape[-1],), xs.dtype),
        )
        pos = jnp.broadcast_to(jnp.arange(depth), xs.shape)
        inputs = tuple(jnp.moveaxis(v, -1, 0) for v in (xs, start, end, valid, pos))
        (_, _, total), _ = lax.scan(step, init, inputs, unroll=8)
        return total


@dataclasses.dataclass(frozen=True)
class HardRanker:
    """Exact 1-based ranks; see :func:`hard`."""

    ties: str = "stable"

    smooth = False

    def __call__(
        self, scores: jax.Array, where: Optional[jax.Array] = None, *, depth: Optional[int] = None
    ) -> HardRanks:
        scores = jnp.asarray(scores)
        n = scores.shape[-1]
        if where is None:
            valid = jnp.ones(scores.shape, bool)
            n_valid = jnp.full(scores.shape[:-1] + (1,), n, jnp.int32)
        else:
            valid = jnp.asarray(where, bool)
            n_valid = row_sum(valid, keepdims=True).astype(jnp.int32)
        key = sort_key(scores, valid)
        top_k = depth is not None and depth < n and depth <= TOP_K_MAX_DEPTH and self.ties in ("stable", "expected")
        if top_k and self.ties == "stable":
            order, _ = _top_k_order(key, depth)
            return HardRanks(order, n_valid, key, ties=self.ties)
        if top_k:
            # one position more, to see whether the last tie group goes on
            order, key_sorted = _top_k_order(key, depth + 1)
            return HardRanks(
                order[..., :depth], n_valid, key, key_sorted[..., :depth], key_sorted[..., depth:], ties=self.ties
            )
        if self.ties == "stable":
            return HardRanks(argsort_descending(key), n_valid, key, ties=self.ties)
        order, start, end = argsort_descending(key, bounds=True)
        return HardRanks(order, n_valid, key, start=start, end=end, ties=self.ties)


def hard(ties: Ties = "stable") -> HardRanker:
    """The exact ranker.

    Valid items are ranked by score, descending; invalid items get no rank and
    are never counted. NaN scores rank below every number (``-inf`` included),
    in input order. What equal scores mean is set by ``ties``:

    * ``"stable"`` (default): the earlier input index ranks first. This is what
      rax, torchmetrics and TF-Ranking (unshuffled) do, and, with documents
      pre-ordered by docno descending (as :mod:`jaxrank.trec` does), exactly
      what trec_eval does. It is also the fastest: no tie-group bookkeeping.
    * ``"expected"``: every metric is the exact mean over all orders of each
      tie group (McSherry & Najork, 2008). A model that scores every item
      alike gets the random-ranking value, whatever the input order: use it
      for validation when scores can tie (quantised or bfloat16 scores, a
      collapsed model). It costs a few extra passes over the list, and
      ``err`` an O(n x largest tie group) scan.
    * ``"optimistic"`` / ``"pessimistic"``: the largest / smallest value of the
      metric over the orders of each tie group (the group is ordered by the
      metric's item weight, e.g. relevance, descending / ascending). For
      fall-out, where lower is better, "optimistic" is still the largest value.

    Args:
      ties: the tie policy.

    Returns:
      A ranker: ``ranker(scores, where, depth=None) -> HardRanks``. ``depth``
      asks for the first ``depth`` positions only (``lax.top_k`` when small).

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores = jnp.array([1.0, 1.0, 0.0])
      >>> labels = jnp.array([0, 1, 0])
      >>> float(jaxrank.reciprocal_rank(scores, labels, ranker=jaxrank.hard("stable")))
      0.5
      >>> float(jaxrank.reciprocal_rank(scores, labels, ranker=jaxrank.hard("expected")))
      0.75
    """
    if ties not in TIE_POLICIES:
        raise ValueError(f"ties must be one of {TIE_POLICIES}, got {ties!r}")
    return HardRanker(ties)
