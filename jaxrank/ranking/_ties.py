"""Tie groups of exact ranks, and the algebra of the expected-ties policy.

:class:`TieGroups` is the part of :class:`~jaxrank.ranking.HardRanks` that
knows tie groups: where each group starts and ends (in position space, also
for a prefix whose last group may go on past it), sums over a group, the
reordering inside groups for the optimistic / pessimistic policies, and the
exact expectations over the orders of every tie group for ``"expected"``
(McSherry & Najork, 2008), each checked against brute-force enumeration in
tests/test_ranking.py.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank.ranking.backend import computed_once, cumsum, row_sum, segment_bounds, take, vary_like


def exclusive(x: jax.Array) -> jax.Array:
    """Inclusive running values shifted right by one, starting at 0."""
    return jnp.concatenate([jnp.zeros(x.shape[:-1] + (1,), x.dtype), x[..., :-1]], axis=-1)


def reduce_positions(h: jax.Array, weights: jax.Array) -> jax.Array:
    """``sum_p h[..., p] * weights[..., p, c]`` without materialising a batch of weights."""
    if weights.ndim == 2:
        return jnp.matmul(h, weights.astype(h.dtype), precision=lax.Precision.HIGHEST)
    return jnp.sum(h[..., :, None] * weights, axis=-2)


def survive(ps: jax.Array) -> jax.Array:
    """``prod_{q < p} (1 - ps_q)``, through a cumulative sum of logs."""
    # A certain stop (p = 1) gets a finite log far below exp's underflow
    # rather than -inf, which the matmul cumsum would turn into NaN (0 * inf).
    ps = jnp.clip(ps, 0.0, 1.0)
    logs = jnp.where(ps >= 1, -1e4, jnp.log1p(-jnp.where(ps >= 1, 0.0, ps)))
    return jnp.exp(exclusive(cumsum(logs)))


class TieGroups:
    """Tie-group bookkeeping and the expected-ties operations of exact ranks.

    Needs, from the class it is mixed into: ``order``, ``n_valid``, ``key``,
    ``key_sorted``, ``start``, ``end``, ``ties``, ``size``,
    ``depth``, ``valid_positions`` and ``in_rank_order``.
    """

    def _groups(self):
        """``(start, end, tail, member)``: each position's tie group; for a
        prefix, ``tail`` marks the last group, which may continue past it, and
        ``member`` sums over all items of that group."""
        if self.start is not None:
            start, end = self.start, self.end
        else:
            start, end = segment_bounds(self.key_sorted)
        if self.depth == self.size:
            return start, end, None, None
        # The last group of a prefix is measured over the whole list: it ends at its start
        # plus its number of members, whether or not it goes on past the prefix.
        spill = self.depth - 1 < self.n_valid
        tail = (start == start[..., -1:]) & spill

        def over_members(v):
            member = (self.key == self.key_sorted[..., -1:]) & spill
            return row_sum(jnp.where(member, v, 0), keepdims=True)

        full = start + over_members(jnp.ones(self.key.shape, jnp.float32)).astype(start.dtype)
        return start, jnp.where(tail, full, end), tail, over_members

    def _group_sum(self, v: jax.Array, groups) -> jax.Array:
        start, end, tail, over_members = groups
        csum = computed_once(cumsum(self.in_rank_order(v)))
        inside = take(csum, jnp.minimum(end, self.depth) - 1) - take(exclusive(csum), start)
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
        before = take(exclusive(cumsum(ws)), start)
        within = (jnp.arange(self.depth) - start).astype(g.dtype)
        sums = [self._group_sum(v, groups) for v in (g, w, g * w)]
        return size, before, within, sums

    def _expected_linear_terms(self, g: jax.Array) -> jax.Array:
        """The mean of ``g`` over each position's tie group."""
        groups = self._groups()
        size = (groups[1] - groups[0]).astype(g.dtype)
        return self._group_sum(g, groups) / size * self.valid_positions(g.dtype)

    def _expected_count_before(self, g: jax.Array, w: jax.Array) -> jax.Array:
        # Item i of a group of m at within-group position q (uniform) has
        # E[#w before | q] = W_before + w_i + (W_group - w_i) q / (m - 1).
        size, before, within, (big_g, big_w, big_gw) = self._expected_terms(g, w)
        frac = jnp.where(size > 1, within / jnp.maximum(size - 1, 1), 0.0)
        h = (big_g * before + big_gw + (big_g * big_w - big_gw) * frac) / size
        return h * self.valid_positions(g.dtype)

    def _expected_survival(self, g: jax.Array, w: jax.Array) -> jax.Array:
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
        return h * (before == 0) * self.valid_positions(g.dtype)

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
                branches.append(lambda: reduce_positions(ps * survive(ps), weights))
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
        keep = (first * self.valid_positions(xs.dtype) * survive(ps))[..., None]
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
        init = tuple(vary_like(v, xs) for v in init)
        pos = jnp.broadcast_to(jnp.arange(depth), xs.shape)
        inputs = tuple(jnp.moveaxis(v, -1, 0) for v in (xs, start, end, valid, pos))
        (_, _, total), _ = lax.scan(step, init, inputs, unroll=8)
        return total
