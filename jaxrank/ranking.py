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
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Callable, Literal, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

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


def _host_argsort(key: np.ndarray) -> np.ndarray:
    n = key.shape[-1]
    if key.dtype == np.int32:
        # Sorting one int64 per item (key, index) is a plain value sort, which
        # numpy vectorises; it is stable by construction and ~2x faster than
        # np.argsort on the floats themselves.
        comp = (np.invert(key).astype(np.int64) << 32) | np.arange(n, dtype=np.int64)
        comp.sort(axis=-1)
        return (comp & 0xFFFFFFFF).astype(np.int32)
    return np.argsort(np.invert(key), axis=-1, kind="stable").astype(np.int32)


def _cpu_argsort(key: jax.Array) -> jax.Array:
    out = jax.ShapeDtypeStruct(key.shape, jnp.int32)
    return jax.pure_callback(_host_argsort, out, key, vmap_method="expand_dims")


def _device_argsort(key: jax.Array) -> jax.Array:
    iota = lax.broadcasted_iota(jnp.int32, key.shape, key.ndim - 1)
    return lax.sort((~key, iota), dimension=key.ndim - 1, num_keys=1, is_stable=True)[1]


def argsort_descending(key: jax.Array) -> jax.Array:
    """Stable descending argsort of integer keys along the last axis.

    XLA's CPU sort is 15-80x slower than numpy's (jax issue #10434), so on the
    CPU backend the sort runs in numpy through a host callback; elsewhere it is
    ``lax.sort``.
    """
    return lax.platform_dependent(key, cpu=_cpu_argsort, default=_device_argsort)


def _top_k_order(scores: jax.Array, key: jax.Array, valid: jax.Array, depth: int):
    """First ``depth`` positions of the stable descending order, via top_k.

    ``lax.top_k`` is fast only on floats, and breaks ties by index, so it is
    run on the scores with -inf standing for invalid, NaN and -inf items; the
    rare lists where such items reach the prefix are completed by a second
    top_k over just those items (-inf before NaN, then by index).
    """
    x = scores if scores.dtype in (jnp.float32, jnp.float64) else scores.astype(jnp.float32)
    low = jnp.isnan(x) | (x == -jnp.inf)
    fast = jnp.where(valid & ~low, x, -jnp.inf)
    _, order = lax.top_k(fast, depth)
    n_high = jnp.sum(valid & ~low, axis=-1, keepdims=True)

    def complete(order):
        tier = jnp.where(valid & (x == -jnp.inf), 2.0, jnp.where(valid & jnp.isnan(x), 1.0, 0.0))
        _, low_order = lax.top_k(tier.astype(jnp.float32), depth)
        pos = jnp.arange(depth)
        from_low = jnp.take_along_axis(low_order, jnp.clip(pos - n_high, 0, depth - 1), -1)
        return jnp.where(pos < n_high, order, from_low)

    needs = jnp.any((n_high < depth) & jnp.any(valid & low, axis=-1, keepdims=True))
    return lax.cond(needs, complete, lambda o: o, order)


def _segment_bounds(key_sorted: jax.Array):
    """Start (inclusive) and end (exclusive) position of each position's tie group."""
    depth = key_sorted.shape[-1]
    idx = jnp.broadcast_to(jnp.arange(depth), key_sorted.shape)
    differs = key_sorted[..., 1:] != key_sorted[..., :-1]
    edge = jnp.ones(key_sorted.shape[:-1] + (1,), bool)
    first = jnp.concatenate([edge, differs], axis=-1)
    last = jnp.concatenate([differs, edge], axis=-1)
    start = lax.cummax(jnp.where(first, idx, 0), axis=key_sorted.ndim - 1)
    end = lax.cummin(jnp.where(last, idx + 1, depth), axis=key_sorted.ndim - 1, reverse=True)
    return start, end


def _segmented_cumprod(values: jax.Array, first: jax.Array) -> jax.Array:
    """Inclusive cumulative product that restarts where ``first`` is true."""

    def combine(a, b):
        fa, va = a
        fb, vb = b
        return fa | fb, jnp.where(fb, vb, va * vb)

    return lax.associative_scan(combine, (first, values), axis=values.ndim - 1)[1]


def _exclusive_cumprod(x: jax.Array) -> jax.Array:
    ones = jnp.ones(x.shape[:-1] + (1,), x.dtype)
    return jnp.cumprod(jnp.concatenate([ones, x[..., :-1]], axis=-1), axis=-1)


def _reduce(h: jax.Array, weights: jax.Array) -> jax.Array:
    """``sum_p h[..., p] * weights[..., p, c]`` without materialising a batch of weights."""
    if weights.ndim == 2:
        return h @ weights.astype(h.dtype)
    return jnp.sum(h[..., :, None] * weights, axis=-2)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class HardRanks(Ranks):
    """Exact ranks, stored as the first ``depth`` positions of the ranking.

    Attributes:
      order: ``int32[..., depth]``, the item at each position (valid items first).
      n_valid: ``int32[..., 1]``, number of valid items in each list.
      key: ``int[..., n]``, :func:`sort_key` of every item (tie groups).
      ties: the tie policy.
    """

    order: jax.Array
    n_valid: jax.Array
    key: jax.Array
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

    def _valid_sorted(self, dtype) -> jax.Array:
        return (jnp.arange(self.depth) < self.n_valid).astype(dtype)

    def _sorted(self, v: jax.Array) -> jax.Array:
        v = jnp.broadcast_to(v, self.key.shape)
        return jnp.take_along_axis(v, self.order, axis=-1) * self._valid_sorted(v.dtype)

    # Tie groups, in position space ------------------------------------------------
    def _groups(self):
        key_sorted = jnp.take_along_axis(self.key, self.order, axis=-1)
        start, end = _segment_bounds(key_sorted)
        if self.depth < self.size:
            # The group at the last position may continue past the prefix.
            last_key = key_sorted[..., -1:]
            tail = (start == start[..., -1:]) & (self.depth - 1 < self.n_valid)
            member = self.key == last_key
            full = start + jnp.sum(member, axis=-1, keepdims=True)
            end = jnp.where(tail, full, end)
        else:
            tail, member = None, None
        return start, end, tail, member

    def _group_sum(self, v: jax.Array, groups) -> jax.Array:
        start, end, tail, member = groups
        vs = self._sorted(v)
        csum = jnp.concatenate([jnp.zeros(vs.shape[:-1] + (1,), vs.dtype), jnp.cumsum(vs, -1)], -1)
        inside = jnp.take_along_axis(csum, jnp.minimum(end, self.depth), -1) - jnp.take_along_axis(
            csum, start, -1
        )
        if tail is None:
            return inside
        total = jnp.sum(jnp.where(member, jnp.broadcast_to(v, member.shape), 0), -1, keepdims=True)
        return jnp.where(tail, total, inside)

    def _within_group_order(self, *values: jax.Array):
        """Reorder sorted values inside each tie group: best first (optimistic)
        or worst first (pessimistic), by the first value."""
        start, _, _, _ = self._groups()
        sign = -1 if self.ties == "optimistic" else 1
        lead = sign * values[0]
        dim = start.ndim - 1
        return lax.sort((start, lead) + values, dimension=dim, num_keys=2)[2:]

    def _prepare(self, *values: jax.Array):
        sorted_values = tuple(self._sorted(v) for v in values)
        if self.ties in ("optimistic", "pessimistic"):
            sorted_values = self._within_group_order(*sorted_values)
        return sorted_values

    # The four operations ---------------------------------------------------------
    def linear(self, g: jax.Array, f: PositionFn) -> jax.Array:
        weights = f(self._positions())
        if self.ties == "expected":
            groups = self._groups()
            start, end = groups[0], groups[1]
            h = self._group_sum(g, groups) / (end - start) * self._valid_sorted(g.dtype)
        else:
            (h,) = self._prepare(g)
        return _reduce(h, weights)

    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        weights = f(self._positions())
        if self.ties == "expected":
            groups = self._groups()
            start, end = groups[0], groups[1]
            size = (end - start).astype(g.dtype)
            big_g = self._group_sum(g, groups)
            big_w = self._group_sum(w, groups)
            big_gw = self._group_sum(g * w, groups)
            ws = self._sorted(w)
            before = jnp.take_along_axis(jnp.cumsum(ws, -1) - ws, start, -1)
            within = jnp.arange(self.depth) - start
            frac = jnp.where(size > 1, within / jnp.maximum(size - 1, 1), 0.0)
            h = (big_g * before + big_gw + (big_g * big_w - big_gw) * frac) / size
            h = h * self._valid_sorted(g.dtype)
        else:
            ws, gs = self._prepare(w, g)
            h = gs * jnp.cumsum(ws, -1)
        return _reduce(h, weights)

    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        weights = f(self._positions())
        if self.ties == "expected":
            groups = self._groups()
            start, end = groups[0], groups[1]
            size = (end - start).astype(g.dtype)
            big_g = self._group_sum(g, groups)
            big_w = self._group_sum(w, groups)
            big_gw = self._group_sum(g * w, groups)
            ws = self._sorted(w)
            before = jnp.take_along_axis(jnp.cumsum(ws, -1) - ws, start, -1)
            within = (jnp.arange(self.depth) - start).astype(g.dtype)
            first = within == 0

            # C(a, q) / C(size - 1, q): the chance that q random other members
            # of the group avoid every relevant one.
            def ratio(a):
                step = jnp.maximum(a - within + 1, 0) / jnp.maximum(size - within, 1)
                return _segmented_cumprod(jnp.where(first, 1.0, step).astype(g.dtype), first)

            h = (big_gw * ratio(size - big_w) + (big_g - big_gw) * ratio(size - 1 - big_w)) / size
            h = h * (before == 0) * self._valid_sorted(g.dtype)
        else:
            ws, gs = self._prepare(w, g)
            h = gs * _exclusive_cumprod(1 - ws)
        return _reduce(h, weights)

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        weights = f(self._positions())
        if self.ties != "expected":
            (ps,) = self._prepare(p)
            return _reduce(ps * _exclusive_cumprod(1 - ps), weights)
        return self._expected_cascade(p, weights)

    def _expected_cascade(self, p: jax.Array, weights: jax.Array) -> jax.Array:
        """Exact mean of the cascade over the orders of every tie group.

        With :math:`A_t` the mean of :math:`\\prod (1-p_j)` over a random
        t-subset of a group, a group starting at :math:`s` adds
        :math:`\\Pi_{before} \\sum_q f(s+q+1) (A_q - A_{q+1})`. :math:`A` is
        built item by item in a scan over positions: O(depth^2) per list.
        """
        if self.depth < self.size:
            raise ValueError("cascade with ties='expected' needs the full ranking (depth=None)")
        start, end, _, _ = self._groups()
        xs = 1 - self._sorted(p)
        valid = self._valid_sorted(p.dtype)
        depth = self.depth
        batch = xs.shape[:-1]
        wts = jnp.broadcast_to(weights, batch + weights.shape[-2:])
        wts = jnp.concatenate([wts, jnp.zeros(batch + (1, wts.shape[-1]), wts.dtype)], -2)
        t = jnp.arange(depth + 1)

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
            group_prod = jnp.take_along_axis(a, size, -1)
            prod_before = jnp.where(at_end, prod_before * group_prod, prod_before)
            return (a, prod_before, total), None

        init = (
            jnp.zeros(batch + (depth + 1,), xs.dtype),
            jnp.ones(batch + (1,), xs.dtype),
            jnp.zeros(batch + (wts.shape[-1],), xs.dtype),
        )
        pos = jnp.broadcast_to(jnp.arange(depth), xs.shape)
        inputs = tuple(jnp.moveaxis(v, -1, 0) for v in (xs, start, end, valid, pos))
        (_, _, total), _ = lax.scan(step, init, inputs)
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
        valid = jnp.ones(scores.shape, bool) if where is None else jnp.asarray(where, bool)
        n = scores.shape[-1]
        key = sort_key(scores, valid)
        n_valid = jnp.sum(valid, axis=-1, keepdims=True, dtype=jnp.int32)
        use_top_k = (
            depth is not None
            and depth < n
            and depth <= TOP_K_MAX_DEPTH
            and self.ties in ("stable", "expected")
        )
        if use_top_k:
            order = _top_k_order(scores, key, valid, depth)
        else:
            order = argsort_descending(key)
        return HardRanks(order=order.astype(jnp.int32), n_valid=n_valid, key=key, ties=self.ties)


def hard(ties: Ties = "expected") -> HardRanker:
    """The exact ranker.

    Valid items are ranked by score, descending; invalid items get no rank and
    are never counted. NaN scores rank below every number (``-inf`` included),
    in input order. What equal scores mean is set by ``ties``:

    * ``"expected"`` (default): every metric is the exact mean over all orders
      of each tie group (McSherry & Najork, 2008). A model that scores every
      item alike gets the random-ranking value, whatever the input order.
    * ``"stable"``: the earlier input index ranks first. With documents
      pre-ordered by docno descending this reproduces trec_eval, and it is
      what rax and torchmetrics do in practice.
    * ``"optimistic"`` / ``"pessimistic"``: the largest / smallest value of the
      metric over the orders of each tie group (the group is ordered by the
      metric's item weight, e.g. relevance, descending / ascending). For
      fall-out, where lower is better, "optimistic" is still the largest value.

    Args:
      ties: the tie policy.

    Returns:
      A ranker: ``ranker(scores, where, depth=None) -> HardRanks``.

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
