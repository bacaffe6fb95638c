"""Ranks computed elsewhere, given as values: :func:`given`.

A rank function outside jaxrank (rax's ``rank_fn`` and ``cutoff_fn`` hooks, a model's own
rank estimate) produces one real rank per item, ``ranks[..., n]``, and perhaps a weight
saying how much each item counts (a top-``n`` cutoff, hard or soft). :func:`given` turns them
into a ranker, so that the metrics of :mod:`jaxrank.metrics`, written once over
:class:`~jaxrank.ranking.Ranks`, evaluate on them unchanged.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp

from jaxrank.ranking.backend import inverse_permutation
from jaxrank.ranking.hard import HardRanks, hard, in_given_order
from jaxrank.ranking.ranks import PositionFn, Ranks, float_dtype


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GivenRanks(Ranks):
    """Items at given positions :math:`r_i`, each counted with a weight :math:`c_i`.

    The items are ordered by :math:`r` ascending, ties by input index (the order of
    ``hard("stable")`` on :math:`-r`); the operations are those of that order with the
    position function evaluated at the given values and weighted by :math:`c`:

    .. math::

        \\text{linear}(g, f) = \\sum_i g_i\\, c_i\\, f(r_i), \\qquad
        \\text{count\\_before}(g, f, w) = \\sum_i g_i\\, c_i\\, f(r_i)
            \\big(w_i + \\textstyle\\sum_{j \\prec i} w_j\\big),

    and so on for ``survival`` and ``cascade``. The weights are this ranking's cutoff:
    :meth:`cutoff` is 1, so a metric's ``k`` truncates nothing further (it still sets the
    ideal ranking's depth in nDCG and the divisor of ``precision``). Gradients flow
    through :math:`f(r_i)` and :math:`c_i`, not through the order.

    Attributes:
      order: the exact order of the items (:class:`HardRanks` of :math:`-r`).
      positions: ``[..., n]``, :math:`r` in that order (1 past the valid items).
      present: ``[..., n]``, :math:`c` in that order (0 past the valid items).
    """

    order: HardRanks
    positions: jax.Array
    present: jax.Array

    smooth = True

    @property
    def size(self) -> int:
        return self.order.size

    def _at(self, f: PositionFn) -> PositionFn:
        weights = f(self.positions) * self.present[..., None]
        return lambda _: weights

    def cutoff(self, positions: jax.Array, k: jax.Array) -> jax.Array:
        return jnp.ones(jnp.broadcast_shapes(jnp.shape(positions), jnp.shape(k)), jnp.result_type(positions))

    def linear(self, g: jax.Array, f: PositionFn) -> jax.Array:
        return self.order.linear(g, self._at(f))

    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        return self.order.count_before(g, self._at(f), w)

    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        return self.order.survival(g, self._at(f), w)

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        return self.order.cascade(p, self._at(f))


def _like(x: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """``x[..., n]`` broadcast to ``shape``; a missing axis is taken as the segment axis
    ``[..., S, n]`` that ``segments=`` adds before the items."""
    x = jnp.asarray(x)
    if x.ndim == len(shape) - 1:
        x = x[..., None, :]
    return jnp.broadcast_to(x, shape)


@dataclasses.dataclass(frozen=True)
class GivenRanker:
    """Returns :class:`GivenRanks` of fixed ranks; see :func:`given`."""

    ranks: jax.Array
    present: Optional[jax.Array] = None
    exact: bool = False

    smooth = True

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> GivenRanks:
        del depth  # the given ranks are whole
        shape = jnp.shape(scores)
        if jnp.shape(self.ranks)[-1:] != shape[-1:]:
            raise ValueError(f"given: ranks have shape {jnp.shape(self.ranks)}, the scores {shape}")
        r = _like(self.ranks, shape).astype(jnp.promote_types(jnp.result_type(self.ranks), float_dtype()))
        c = jnp.ones(shape, r.dtype) if self.present is None else _like(self.present, shape).astype(r.dtype)
        valid = jnp.ones(shape, bool) if where is None else jnp.broadcast_to(jnp.asarray(where, bool), shape)
        order = self._order(jax.lax.stop_gradient(r), valid)
        inside = order.valid_positions()
        positions = jnp.where(inside, order.in_rank_order(r), 1)
        return GivenRanks(order, positions, order.in_rank_order(c))

    def _order(self, r: jax.Array, valid: jax.Array) -> HardRanks:
        if not self.exact:
            return hard("stable")(-r, valid)
        # A permutation of 1..n, valid items first: its inverse is the order, no sort.
        return in_given_order(inverse_permutation(jnp.round(r).astype(jnp.int32) - 1), -r, valid)


def given(ranks: jax.Array, present: Optional[jax.Array] = None, *, exact: bool = False) -> GivenRanker:
    """A ranker that returns these ranks, whatever the scores.

    Args:
      ranks: ``[..., n]`` real ranks (1 for the top; need not be integers or distinct),
        e.g. the output of rax's ``rank_fn``. A metric with ``segments=`` gives each
        segment's copy of the row the same ranks: rank within segments.
      present: ``[..., n]`` weights in [0, 1], how much each item counts (e.g. a hard
        or soft top-``n``); default 1. They replace the metrics' cutoff (see
        :class:`GivenRanks`).
      exact: the ranks are a permutation of ``1..n`` along the last axis with the valid
        items first (exact positions, e.g. ``hard()``'s): their order is read off them
        instead of sorted again. Not for ``segments=`` (each copy of the row holds the
        other segments' items too).

    Returns:
      ``ranker(scores, where, depth=None) -> GivenRanks``; ``where`` still says which
      items are valid.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> from jaxrank.ranking import given
      >>> labels = jnp.array([0, 1, 1])
      >>> ranker = given(jnp.array([1.0, 2.5, 3.0]), present=jnp.array([1.0, 1.0, 0.0]))
      >>> round(float(jaxrank.dcg(jnp.zeros(3), labels, ranker=ranker)), 4)  # 1 / log2(3.5)
      0.5533
    """
    return GivenRanker(ranks, present, exact)
