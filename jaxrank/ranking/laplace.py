"""Point ranks from Laplace steps at a temperature set by the list's top: :func:`laplace`.

The ranker the metric losses default to: it keeps the three laws of a relaxation
(docs/soft.md) at every score scale and list length. Overview of the smooth rankers:
:mod:`jaxrank.ranking.smooth`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks
from jaxrank.ranking.backend import argsort_descending, cumsum, linear_recurrence, sort_key
from jaxrank.ranking.pairwise import PointRanks, _list_scale, _ranks_at, _scale, _top_gap
from jaxrank.ranking.positives import ListAxis, Positives
from jaxrank.ranking.smooth import _inputs, _positive, soft_cutoff


def _step(x: jax.Array) -> jax.Array:
    """The Laplace distribution's CDF, :math:`F(x) = \\tfrac12 e^{x}` for :math:`x < 0`,
    :math:`1 - \\tfrac12 e^{-x}` otherwise: a smooth step (:math:`F' = \\tfrac12 e^{-|x|}`
    is continuous) whose tails are exponential, so sums of it over a sorted list are
    linear recurrences."""
    half = 0.5 * jnp.exp(-jnp.abs(x))
    return jnp.where(x >= 0, 1 - half, half)


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["ranks", "valid", "scores", "order", "scale"],
    meta_fields=["tau", "reach"],
)
@dataclasses.dataclass(frozen=True)
class LaplaceRanks(PointRanks):
    """Laplace point ranks; see :func:`laplace`. ``order`` is the exact descending order
    of the items (``None`` when only some items were ranked, :meth:`LaplaceRanker.at_positives`),
    ``scale`` each list's temperature in score units, ``[..., 1]``."""

    ranks: jax.Array
    valid: jax.Array
    scores: jax.Array
    order: Optional[jax.Array]
    scale: jax.Array
    tau: float = 0.5
    reach: float = 0.35

    def cutoff_width(self) -> jax.Array:
        """The cutoff's width, ``tau`` positions: the ranks never collapse (the temperature
        follows the gaps at the top of the list), so nothing is given back."""
        return jnp.full(self.ranks.shape[:-1] + (1,), self.tau, self.ranks.dtype)

    def cutoff(self, positions: jax.Array, k: jax.Array) -> jax.Array:
        """:math:`\\rho + (1 - \\rho)\\,\\sigma((k + \\tfrac12 - r)/\\tau)`: the soft
        cutoff, which never falls below ``reach`` :math:`\\rho`, so an item past it keeps a
        gradient (the discount's own)."""
        return self.reach + (1 - self.reach) * soft_cutoff(positions, k, self.tau)

    def _subset_ranks(self, masks: jax.Array) -> jax.Array:
        if self.order is None:  # the relevant items of a long list, few: every pair
            x = jnp.broadcast_to(self.scores, masks.shape)
            steps = _step((x[..., None, :] - x[..., :, None]) / self.scale[..., None])
            keep = masks[..., None, :] & ~jnp.eye(x.shape[-1], dtype=bool)
            return 1 + jnp.sum(jnp.where(keep, steps, 0), axis=-1)
        scores = jnp.broadcast_to(self.scores, masks.shape)
        order = jnp.broadcast_to(self.order, masks.shape)
        scale = jnp.broadcast_to(self.scale, masks.shape[:-1] + (1,))
        valid = jnp.broadcast_to(self.valid, masks.shape)
        return _ranks_in_order(scores, order, valid, masks, scale)


def _ranks_in_order(x: jax.Array, order: jax.Array, valid: jax.Array, member: jax.Array, scale: jax.Array) -> jax.Array:
    """``1 + sum_{j != i, member_j} F((x_j - x_i) / scale)`` for every valid item ``i``
    (``member`` within ``valid``), from the descending ``order`` (valid items first): with
    the items sorted, ``t_1 >= t_2 >= ...``, and ``c_q`` the
    members,

    .. math:: r_p = 1 + \\sum_{q < p} c_q - \\tfrac12 \\sum_{q < p} c_q e^{-(t_q - t_p)/T}
        + \\tfrac12 \\sum_{q > p} c_q e^{-(t_p - t_q)/T},

    two linear recurrences over the positions, with links :math:`e^{-(t_q - t_{q+1})/T} \\le 1`
    (no exponential overflows). Tied scores meet at :math:`F(0) = \\tfrac12` from either side,
    so they get equal ranks, and :math:`F` is :math:`C^1`, so the recurrences' gradient is
    exact at ties too."""
    n = x.shape[-1]
    top = jnp.take_along_axis(x, order, axis=-1)
    c = jnp.take_along_axis(member, order, axis=-1).astype(x.dtype)
    m = jnp.sum(valid, axis=-1, keepdims=True)
    inside = jnp.arange(n) + 1 < m  # p and p + 1 both valid (the invalid items are sorted last)
    gap = jnp.concatenate([top[..., 1:] - top[..., :-1], jnp.zeros_like(top[..., :1])], axis=-1)
    link = jnp.where(inside, jnp.exp(jnp.where(inside, gap, 0) / scale), 0)  # between p and p + 1
    below = linear_recurrence(link, c, reverse=True) - c  # sum_{q > p} c_q e^{-(t_p - t_q)/T}
    link_prev = jnp.concatenate([jnp.zeros_like(link[..., :1]), link[..., :-1]], axis=-1)
    upto = linear_recurrence(link_prev, c)  # c_p + link_{p-1} upto_{p-1}
    above = upto - c  # sum_{q < p} c_q e^{-(t_q - t_p)/T}
    count = cumsum(c) - c
    ranks = 1 + count - 0.5 * above + 0.5 * below
    # back to item order: each item's rank at its own index
    flat_order = order.reshape(-1, n)
    rows = jnp.arange(flat_order.shape[0])[:, None]
    out = jnp.zeros(flat_order.shape, ranks.dtype).at[rows, flat_order].set(ranks.reshape(-1, n))
    return out.reshape(ranks.shape)


def order_and_scale(x: jax.Array, valid: jax.Array, temperature: float, top: int) -> tuple[jax.Array, jax.Array]:
    """The exact descending order of each list's items (valid first) and ``temperature``
    times the mean gap among its first ``top + 1`` scores, ``[..., 1]`` (held constant in
    the gradient)."""
    n = x.shape[-1]
    m = jnp.sum(valid, axis=-1, keepdims=True)
    order = argsort_descending(sort_key(lax.stop_gradient(x), valid))
    first = jnp.where(jnp.arange(n) < m, jnp.take_along_axis(lax.stop_gradient(x), order, axis=-1), 0)
    return order, _scale(temperature, _top_gap(first, m, top), x, valid)


@dataclasses.dataclass(frozen=True)
class LaplaceRanker:
    """Laplace point ranks at a temperature set by the list's top; see :func:`laplace`."""

    temperature: float = 0.5
    cutoff_temperature: float = 0.5
    reach: float = 0.35
    top: int = 10

    smooth = True

    def __post_init__(self):
        object.__setattr__(self, "temperature", _positive(self.temperature, "temperature"))
        object.__setattr__(self, "top", _checks.positive_int(self.top, "top"))
        object.__setattr__(self, "cutoff_temperature", _positive(self.cutoff_temperature, "cutoff_temperature"))
        reach = float(self.reach)
        if not 0 <= reach < 1:
            raise ValueError(f"reach must be in [0, 1), got {self.reach!r}")
        object.__setattr__(self, "reach", reach)

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> LaplaceRanks:
        del depth  # every rank depends on every score
        x, valid = _inputs(scores, where)
        order, scale = order_and_scale(x, valid, self.temperature, self.top)
        ranks = _ranks_in_order(x, order, valid, valid, scale)
        return LaplaceRanks(ranks, valid, x, order, scale, self.cutoff_temperature, self.reach)

    def at_positives(
        self, scores, where, positives: Positives, depth: Optional[int], axis_name: Optional[str] = None
    ) -> LaplaceRanks:
        """:class:`LaplaceRanks` of the relevant items of ``positives`` alone, each rank a sum
        over the whole list ``scores[..., n]`` (sharded over ``axis_name`` when given): a
        top-``(top + 1)`` for the temperature and ``n * r`` exponentials, as a softmax over
        ``r`` positives costs; AP's and RR's counts of relevant items above one another
        take the ``r^2`` pairs of relevant items."""
        del depth
        axis = ListAxis(axis_name, scores.shape[-1])
        x, valid = _inputs(scores, where, list_axis=axis)
        scale = _list_scale(self.temperature, self.top, x, valid, axis)
        ranks, named, at = _ranks_at(x, valid, positives, axis, scale, _step)
        return LaplaceRanks(ranks, named, at, None, scale, self.cutoff_temperature, self.reach)


def laplace(
    temperature: float = 0.5, *, cutoff_temperature: float = 0.5, reach: float = 0.35, top: int = 10
) -> LaplaceRanker:
    """Smooth point ranks from Laplace steps, at a temperature relative to the list's top.

    .. math:: r_i = 1 + \\sum_{j \\ne i,\\ j\\ \\text{valid}} F\\Big(\\frac{s_j - s_i}{T}\\Big),
        \\qquad F(x) = \\begin{cases} \\tfrac12 e^{x} & x < 0 \\\\ 1 - \\tfrac12 e^{-x} & x \\ge 0 \\end{cases}

    with :math:`T` = ``temperature`` times the mean gap between consecutive scores among the
    list's first ``top + 1`` (held constant in the gradient; the list's standard
    deviation where those are tied). :func:`approx` with the Laplace CDF in place of the
    logistic, and a temperature measured in the list's own gaps at the top, where the
    metrics look: the same relaxation for cosines (spread 0.1), logits and unbounded
    scores, for a list of 10 or of a million. Its three laws (docs/soft.md):

    * *monotone*: :math:`r_i` falls as :math:`s_i` rises and rises with every other score,
      so raising a relevant item never raises the loss;
    * *faithful*: the top item's rank is about :math:`1 + \\tfrac12 e^{-1/t}` (``t`` the
      temperature), ranks are exact as ``temperature`` goes to 0, and the cutoff
      :math:`[r \\le k]` is :math:`\\rho + (1 - \\rho)\\,\\sigma((k + \\tfrac12 - r)/\\tau)`
      (``reach`` :math:`\\rho`, ``cutoff_temperature`` :math:`\\tau` in positions): the hard
      metric as ``temperature``, :math:`\\tau` and :math:`\\rho` go to 0;
    * *reach*: past the cutoff an item keeps :math:`\\rho` times the discount's gradient, and
      :math:`\\partial r_i / \\partial s_i` is about the density of scores at :math:`s_i`
      (items per unit score), which grows down a list: an item hundreds of places down is
      still pushed up.

    Cost: one sort and two linear recurrences per list, O(n log n) (AP, RR and ERR add the
    pairwise terms of :class:`~jaxrank.ranking.PointRanks`); with a metric's labels given as
    :func:`jaxrank.positives`, ``n * r`` exponentials and a top-``(top + 1)``.

    Args:
      temperature: :math:`T` as a fraction of the mean gap among the top scores.
      cutoff_temperature: :math:`\\tau`, the soft cutoff's width in positions.
      reach: :math:`\\rho \\in [0, 1)`, the cutoff's floor past ``k``.
      top: how many gaps at the top of each list set the temperature.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 0, 1])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.laplace(0.01))), 5)  # 1/log2(4)
      0.5
      >>> [round(float(r), 3) for r in jaxrank.laplace()(0.001 * scores).ranks]  # scale-free
      [1.077, 2.0, 2.923]
    """
    return LaplaceRanker(temperature, cutoff_temperature, reach, top)
