"""Point ranks (one smooth rank per item), :func:`approx` (pairwise sigmoids) and :func:`bound`
(pairwise logistic bounds).

The pairwise kernel, computed in row blocks of bounded memory, also serves every point
ranker's ``cascade`` (ERR). Overview of the smooth rankers: :mod:`jaxrank.ranking.smooth`.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax
from jax.ad_checkpoint import checkpoint_name

from jaxrank import _checks
from jaxrank.ranking._ties import reduce_positions
from jaxrank.ranking.backend import LIST_STATISTICS
from jaxrank.ranking.positives import ListAxis, Positives
from jaxrank.ranking.ranks import PositionFn, Ranks
from jaxrank.ranking.smooth import _check_units, _inputs, _optional_positive, _positive, _spread, soft_cutoff

# The pairwise kernel of ``approx`` works on blocks of rows: at most this many
# pair terms per block for the whole batch, and at most PAIRS_PER_LIST per
# list (so that a ``vmap`` by the caller, invisible here, stays bounded too).
PAIRS_PER_BLOCK = 1 << 22
PAIRS_PER_LIST = 1 << 17


def _top_gap(top: jax.Array, m: jax.Array, depth: int) -> jax.Array:
    """The mean gap between consecutive scores among the first ``min(m, depth + 1)`` of the
    descending ``top[..., >= depth + 1 or m]``: 0 for a tied top or fewer than two items.
    ``[..., 1]``."""
    last = jnp.clip(jnp.minimum(m, depth + 1) - 1, 0, top.shape[-1] - 1)
    return (top[..., :1] - jnp.take_along_axis(top, last, axis=-1)) / jnp.maximum(last, 1).astype(top.dtype)


def _scale(temperature: float, gap: jax.Array, x: jax.Array, valid: jax.Array, list_axis=None) -> jax.Array:
    """``temperature`` times the top ``gap``, or times the list's spread where the gap is 0;
    the spread (three passes over the list) is taken only when some list needs it. Named
    :data:`~jaxrank.ranking.backend.LIST_STATISTICS`, so that a blocked loss keeps it
    rather than recompute the list's top in its backward pass."""
    x = lax.stop_gradient(x)
    spread = lax.cond(
        jnp.any(gap <= 0), lambda: _spread(x, valid, list_axis), lambda: jnp.ones_like(gap, dtype=x.dtype)
    )
    return checkpoint_name(temperature * jnp.where(gap > 0, gap, spread), LIST_STATISTICS)


def _list_scale(temperature: float, depth: int, x: jax.Array, valid: jax.Array, axis: ListAxis) -> jax.Array:
    """``temperature`` times the mean gap among each list's top ``depth + 1`` scores (or
    its spread, see :func:`_scale`), from the list's top alone (``ListAxis.top``, sharded
    over ``axis``): ``[..., 1]``."""
    m = axis.sum(jnp.sum(valid, axis=-1, keepdims=True))
    _, _, top = axis.top(lax.stop_gradient(x), valid, min(depth + 1, axis.size))
    return _scale(temperature, _top_gap(top, m, depth), x, valid, axis)


def _ranks_at(
    x: jax.Array, valid: jax.Array, positives: Positives, axis: ListAxis, scale, step: Callable[[jax.Array], jax.Array]
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The point ranks of the relevant items of ``positives`` alone, ``1 + sum_{j valid,
    j != i} step((x_j - x_i) / scale)`` over the whole list ``x[..., n]`` (sharded over
    ``axis``): ``n * r`` terms. ``scale``: a number or ``[..., 1]``. Returns (ranks, which
    relevant items are in the list, their scores), each ``[..., r]``."""
    at = axis.at(x, positives.indices)
    named = positives.valid & (axis.at(valid.astype(jnp.int32), positives.indices) > 0)
    keep = valid[..., None, :] & (positives.indices[..., :, None] != axis.offset + jnp.arange(x.shape[-1]))
    inverse = 1.0 / jnp.expand_dims(jnp.asarray(scale, x.dtype), -1)
    # 0 off the kept pairs, as in _pairwise_rows
    z = jnp.where(keep, (x[..., None, :] - at[..., :, None]) * inverse, 0)
    ranks = 1 + axis.sum(jnp.sum(jnp.where(keep, step(z), 0), axis=-1))
    return ranks, named, at


class PointRanks(Ranks):
    """Base of the rankers that give every item one smooth rank.

    Subclasses hold ``ranks`` (``[..., n]``, in ``[1, n]``), ``valid``,
    ``scores`` (the masked compute-dtype scores) and ``tau`` (the cutoff
    temperature), and implement :meth:`_subset_ranks`.
    """

    smooth = True
    ranks: jax.Array
    valid: jax.Array
    scores: jax.Array
    tau: float

    @property
    def size(self) -> int:
        return self.ranks.shape[-1]

    def cutoff_width(self) -> jax.Array:
        """The width of this list's soft cutoff, ``[..., 1]``:

        .. math:: \\tau_\\text{list} = \\sqrt{\\tau^2 + \\tfrac{3}{\\pi^2}
            \\max\\big(0, \\tfrac{m^2 - 1}{12} - \\tfrac1m \\textstyle\\sum_i (r_i - \\bar r)^2\\big)}

        over the ``m`` valid items. Smooth ranks lose spread: the exact ranks'
        variance is :math:`(m^2 - 1)/12`, and when the temperature is large next to
        the gaps between scores every soft rank tends to one value (the mean rank
        :math:`(m + 1)/2`; :math:`\\log \\frac1m \\sum_j e^j`, near ``m``, for
        ``softrank(regularization="kl")``), where a cutoff of width :math:`\\tau` at
        a small ``k`` would be 0 for every item. The lost variance is given back to the cutoff as the variance
        of a logistic (:math:`\\pi^2 w^2 / 3`). A list of exact ranks keeps
        :math:`\\tau`; a list whose soft ranks have all collapsed to the mean rank gets
        a width of about :math:`m / (2\\pi)`, so every item keeps a cutoff weight of
        about :math:`\\sigma(-\\pi (1 - 2k/m))` (0.06 at ``k = 10``, ``m = 200``)
        instead of 0, and a gradient.
        """
        valid = self.valid
        m = jnp.sum(valid, axis=-1, keepdims=True).astype(self.ranks.dtype)
        mean = jnp.sum(jnp.where(valid, self.ranks, 0), axis=-1, keepdims=True) / jnp.maximum(m, 1)
        centred = jnp.where(valid, self.ranks - mean, 0)
        variance = jnp.sum(jnp.square(centred), axis=-1, keepdims=True) / jnp.maximum(m, 1)
        lost = jnp.maximum((m * m - 1) / 12 - variance, 0)
        return jnp.sqrt(self.tau**2 + (3 / math.pi**2) * lost)

    def cutoff(self, positions: jax.Array, k: jax.Array) -> jax.Array:
        """:func:`soft_cutoff` with this list's :meth:`cutoff_width`; ``positions``
        must carry the batch axes of the ranks (``[..., n, ...]``)."""
        width = self.cutoff_width()
        extra = jnp.ndim(positions) - self.ranks.ndim
        if extra < 0:
            raise ValueError(
                f"positions must have the batch axes of the ranks {self.ranks.shape}, got shape {jnp.shape(positions)}"
            )
        return soft_cutoff(positions, k, width.reshape(width.shape + (1,) * extra))

    def _weighted(self, g: jax.Array, f: PositionFn, factor: Optional[jax.Array] = None) -> jax.Array:
        """``sum_i g_i f(r_i) factor_i`` over valid items."""
        h = g if factor is None else g * factor
        h = jnp.where(self.valid, h, 0)
        return reduce_positions(h, f(self.ranks))

    @abc.abstractmethod
    def _subset_ranks(self, masks: jax.Array) -> jax.Array:
        """Smooth ranks of the same scores, within the items of each mask."""

    def _ranked_above(self, w: jax.Array) -> jax.Array:
        """Smooth count of the items with ``w > 0`` ranked strictly above each item.

        Ranks each item inside its own subset, ``where & (w > 0)`` or
        ``where & (w == 0)``, in one call of the ranker: for a member of the
        first, the count is its rank there minus 1; for a member of the second,
        its full rank minus its rank there (which counts the items of the
        second subset above it, and itself).
        """
        inside = self.valid & (w > 0)
        outside = self.valid & ~(w > 0)
        shape = jnp.broadcast_shapes(inside.shape, self.ranks.shape)
        masks = jnp.stack([jnp.broadcast_to(inside, shape), jnp.broadcast_to(outside, shape)])
        both = self._subset_ranks(masks)
        return jnp.where(inside, both[0] - 1, self.ranks - both[1])

    def linear(self, g: jax.Array, f: PositionFn) -> jax.Array:
        return self._weighted(g, f)

    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        """Binary ``w`` (as in every metric): ``w_i`` plus the smooth number of
        ``w`` items above ``i``."""
        w = jnp.where(self.valid, w, 0)
        return self._weighted(g, f, w + self._ranked_above(w))

    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        """``prod_{j above i} (1 - w_j)``, the indicator that ``i`` is the first ``w`` item,
        becomes ``c_i / sum_{j: w_j > 0} c_j`` with ``c_i = soft_cutoff(1 + above_i, 1, tau)``
        the smooth indicator that no ``w`` item is above ``i``: a distribution over which
        ``w`` item is first, so RR and success stay within [0, 1] at any cutoff width (a lone
        ``w`` item is first: RR reads ``1 / r``). The plain soft cutoff, not a ranker's own:
        ``laplace``'s floor past ``k`` is for the metric's cutoff."""
        w = jnp.where(self.valid, w, 0)
        c = PointRanks.cutoff(self, 1 + self._ranked_above(w), jnp.ones((), self.ranks.dtype))
        total = jnp.sum(jnp.where(w > 0, c, 0), axis=-1, keepdims=True)
        return self._weighted(g, f, c / jnp.where(total > 0, total, 1))

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        """:math:`\\sum_i p_i f(r_i) \\prod_{j \\ne i} (1 - p_j \\pi_{ij})` with
        :math:`\\pi_{ij} = \\sigma((r_i - r_j) / \\tau)`, the chance that ``j`` is above ``i``
        read off the smooth ranks (``p`` clipped to [0, 1]). O(n^2) work in row blocks of
        O(n) memory, as :func:`approx`: ERR is the one metric that needs every pair."""
        p = jnp.where(self.valid, p, 0)
        # pairs of (s_j - s_i) / tau with s = -r: (r_i - r_j) / tau
        logs = _pairwise_rows("log_cascade", -self.ranks, self.valid, p, self.tau)
        return self._weighted(p, f, jnp.exp(logs))


# approx -----------------------------------------------------------------------------
def _log1m_prob(x: jax.Array, c: jax.Array) -> jax.Array:
    """``log(1 - c * sigmoid(x))`` for ``c`` in [0, 1], stably."""
    c = jnp.clip(c, 0, 1)
    log_c = jnp.log(jnp.where(c > 0, c, 1))
    log_1mc = jnp.log1p(-jnp.where(c < 1, c, 0))
    a = jnp.where(c < 1, log_1mc, -jnp.inf)
    b = jnp.where(c > 0, log_c + jax.nn.log_sigmoid(-x), -jnp.inf)
    hi = jnp.maximum(a, b)
    lo = jnp.minimum(a, b)
    return hi + jnp.log1p(jnp.exp(lo - hi))


_PAIR_TERMS = {
    # sum_j c_j P(j above i)
    "above": lambda x, c: c * jax.nn.sigmoid(x),
    # sum_j c_j log(1 - P(j above i)), c binary
    "log_survive": lambda x, c: c * jax.nn.log_sigmoid(-x),
    # sum_j log(1 - c_j P(j above i))
    "log_cascade": _log1m_prob,
}


def _pairwise_rows(
    term, scores: jax.Array, valid: jax.Array, col: jax.Array, temperature: float, segments: Optional[jax.Array] = None
):
    """``out_i = sum_{j valid, j != i} term((s_j - s_i) / T, col_j)`` in row blocks, ``j``
    within the segment of ``i`` when ``segments`` is given. ``term``: a name of
    ``_PAIR_TERMS`` or a function ``(x, c) -> terms``.

    Rows are processed ``block`` at a time in a ``lax.scan`` whose body is
    rematerialised (``jax.checkpoint``), so value and gradient hold
    O(batch * n * block) pair terms at once instead of O(batch * n^2).
    """
    fn = _PAIR_TERMS[term] if isinstance(term, str) else term
    shape = jnp.broadcast_shapes(scores.shape, valid.shape, col.shape)
    n = shape[-1]
    s = jnp.broadcast_to(scores, shape).reshape(-1, n)
    v = jnp.broadcast_to(valid, shape).reshape(-1, n)
    c = jnp.where(v, jnp.broadcast_to(col, shape).reshape(-1, n).astype(s.dtype), 0)
    g = None if segments is None else jnp.broadcast_to(segments, shape).reshape(-1, n)
    batch = s.shape[0]
    if batch == 0 or n == 0:
        return jnp.zeros(shape, s.dtype)
    block = max(1, min(n, PAIRS_PER_BLOCK // (batch * n), PAIRS_PER_LIST // n))
    nblocks = -(-n // block)

    def in_blocks(a):
        a = jnp.pad(a, ((0, 0), (0, nblocks * block - n)))
        return a.reshape(batch, nblocks, block).transpose(1, 0, 2)

    starts = jnp.arange(nblocks, dtype=jnp.int32) * block
    col_idx = jnp.arange(n, dtype=jnp.int32)
    inv_t = 1.0 / temperature

    @jax.checkpoint
    def body(carry, xs):
        s_rows, g_rows, start = xs
        keep = (start + jnp.arange(block, dtype=jnp.int32))[:, None] != col_idx[None, :]
        keep = keep[None] & v[:, None, :]
        if g is not None:
            keep &= g_rows[:, :, None] == g[:, None, :]
        # 0 off the kept pairs: an item scored -inf meets itself as -inf - -inf = NaN,
        # whose gradient through the term would be NaN even where it is not kept.
        x = jnp.where(keep, (s[:, None, :] - s_rows[:, :, None]) * inv_t, 0)
        terms = jnp.where(keep, fn(x, c[:, None, :]), 0)
        return carry, jnp.sum(terms, axis=-1)

    xs = (in_blocks(s), None if g is None else in_blocks(g), starts)
    _, out = lax.scan(body, None, xs)
    out = out.transpose(1, 0, 2).reshape(batch, nblocks * block)[:, :n]
    return out.reshape(shape)


def pairwise_ranks(
    scores: jax.Array,
    where: Optional[jax.Array] = None,
    *,
    step: Callable[[jax.Array], jax.Array] = jax.nn.sigmoid,
    temperature: float = 1.0,
    segments: Optional[jax.Array] = None,
) -> jax.Array:
    """Approximate ranks from a step function of the score differences, in score units:

    .. math:: r_i = 1 + \\sum_{j \\ne i,\\ j\\ \\text{valid}} \\text{step}\\Big(\\frac{s_j - s_i}{T}\\Big)

    over the valid items ``j`` of the segment of ``i`` (``segments[..., n]``, integer ids)
    when given. :func:`approx` is this with the logistic sigmoid (and its temperature
    units); rax's ``bound_t12n`` takes :math:`\\text{relu}(x + 1)`, an upper bound of the
    exact rank. Computed in row blocks of bounded memory, as :func:`approx`. Invalid
    items get the ranks of the valid items of their segment as if they were valid.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxrank.ranking import pairwise_ranks
      >>> pairwise_ranks(jnp.array([2.0, 0.0, -2.0]), step=lambda x: jax.nn.relu(x + 1)).tolist()
      [1.0, 4.0, 9.0]
    """
    scores = jnp.asarray(scores)
    scores = scores.astype(jnp.promote_types(scores.dtype, jnp.float32))
    valid = jnp.ones(scores.shape, bool) if where is None else jnp.asarray(where, bool)
    temperature = _positive(temperature, "temperature")
    term = lambda x, c: c * step(x)  # noqa: E731
    return 1 + _pairwise_rows(term, scores, valid, valid, temperature, segments)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ApproxRanks(PointRanks):
    """Pairwise-sigmoid ranks; see :func:`approx`.

    ``count_before``, ``survival`` and ``cascade`` use the pairwise
    probabilities :math:`\\pi_{ij} = \\sigma((s_j - s_i)/T)` that ``j`` is
    above ``i`` directly, as if the pairs were independent:
    :math:`\\sum_{j \\prec i} w_j \\to \\sum_{j \\ne i} w_j \\pi_{ij}` and
    :math:`\\prod_{j \\prec i} (1 - w_j) \\to \\prod_{j \\ne i} (1 - w_j \\pi_{ij})`.
    """

    ranks: jax.Array
    valid: jax.Array
    scores: jax.Array
    temperature: float = dataclasses.field(metadata=dict(static=True), default=1.0)
    tau: float = dataclasses.field(metadata=dict(static=True), default=1.0)

    def _pairs(self, term: str, col: jax.Array) -> jax.Array:
        return _pairwise_rows(term, self.scores, self.valid, col, self.temperature)

    def _subset_ranks(self, masks: jax.Array) -> jax.Array:
        scores = jnp.broadcast_to(self.scores, masks.shape)
        return 1 + _pairwise_rows("above", scores, masks, masks, self.temperature)

    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        """Any ``w``: :math:`w_i + \\sum_{j \\ne i} w_j \\pi_{ij}`."""
        w = jnp.where(self.valid, w, 0)
        return self._weighted(g, f, w + self._pairs("above", w))

    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        """Binary ``w``: :math:`c_i = \\prod_{j \\ne i} (1 - \\pi_{ij})^{w_j}`, normalised
        over the ``w`` items, :math:`c_i / \\sum_{j: w_j > 0} c_j`: a distribution over which
        ``w`` item is first, as :meth:`PointRanks.survival`'s. The product alone treats the
        pairs as independent, and with many ``w`` items at a wide temperature every item's
        product is near 0 (RR near 0 where the hard RR is 1)."""
        w = jnp.where(self.valid, w, 0)
        logs = self._pairs("log_survive", w)
        # in logs: the products reach below float32's smallest number on long lists; a list
        # without a w item sums zeros (no -inf everywhere: its gradient would be NaN)
        some = jnp.any(w > 0, axis=-1, keepdims=True)
        total = jax.nn.logsumexp(jnp.where(w > 0, logs, jnp.where(some, -jnp.inf, 0.0)), axis=-1, keepdims=True)
        return self._weighted(g, f, jnp.exp(logs - jnp.where(some, total, 0.0)))

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        """:math:`\\sum_i p_i f(r_i) \\prod_{j \\ne i} (1 - p_j \\pi_{ij})` (``p`` clipped to [0, 1])."""
        p = jnp.where(self.valid, p, 0)
        return self._weighted(p, f, jnp.exp(self._pairs("log_cascade", p)))


@dataclasses.dataclass(frozen=True)
class ApproxRanker:
    """Pairwise-sigmoid approximate ranks; see :func:`approx`."""

    temperature: float = 3.0
    cutoff_temperature: Optional[float] = None
    units: str = "bounded"

    smooth = True

    def __post_init__(self):
        object.__setattr__(self, "temperature", _positive(self.temperature, "temperature"))
        object.__setattr__(
            self, "cutoff_temperature", _optional_positive(self.cutoff_temperature, "cutoff_temperature")
        )
        _check_units(self.units)

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> ApproxRanks:
        del depth  # every rank depends on every score
        s, valid = _inputs(scores, where, self.units, self.temperature)
        ranks = 1 + _pairwise_rows("above", s, valid, valid, self.temperature)
        tau = self.temperature if self.cutoff_temperature is None else self.cutoff_temperature
        return ApproxRanks(ranks=ranks, valid=valid, scores=s, temperature=self.temperature, tau=tau)

    def at_positives(
        self, scores, where, positives: Positives, depth: Optional[int], axis_name: Optional[str] = None
    ) -> Optional[ApproxRanks]:
        """:class:`ApproxRanks` of the relevant items of ``positives`` alone, each rank a sum
        over the whole list ``scores[..., n]`` (sharded over ``axis_name`` when given):
        ``n * r`` terms. The pairwise operations (AP, RR, ERR) then need the relevant
        items only. None with a depth: the soft cutoff's width reads every item's rank
        (:meth:`PointRanks.cutoff_width`), the dense path."""
        if depth is not None:
            return None
        axis = ListAxis(axis_name, scores.shape[-1])
        x, valid = _inputs(scores, where, self.units, self.temperature, axis)
        ranks, named, at = _ranks_at(x, valid, positives, axis, self.temperature, jax.nn.sigmoid)
        tau = self.temperature if self.cutoff_temperature is None else self.cutoff_temperature
        return ApproxRanks(ranks=ranks, valid=named, scores=at, temperature=self.temperature, tau=tau)


def approx(
    temperature: float = 3.0, *, cutoff_temperature: Optional[float] = None, units: str = "bounded"
) -> ApproxRanker:
    """Approximate ranks from pairwise sigmoids (ApproxNDCG, Qin et al., 2010).

    .. math:: r_i = 1 + \\sum_{j \\ne i,\\ j\\ \\text{valid}}
        \\sigma\\Big(\\frac{s_j - s_i}{T}\\Big)

    The cutoff :math:`[r \\le k]` is :func:`soft_cutoff` with
    :math:`\\tau = T` (or ``cutoff_temperature``). ``count_before``,
    ``survival`` and ``cascade`` (so AP, RR, success and ERR) use the pairwise
    probabilities directly; see :class:`ApproxRanks`.

    Cost: O(n^2) time per list, but O(n * block) memory for value and gradient:
    rows are processed in blocks inside a rematerialised ``lax.scan``. Tied
    scores get equal ranks (each counts the other as half above it).

    Args:
      temperature: :math:`T > 0`, in the units of the scores, kept within
        :func:`~jaxrank.ranking.bounded_temperature`'s band of each list's spread (``units="bounded"``), or a
        fraction of the list's spread (``units="std"``), or in score units (``units="score"``);
        ranks become exact as :math:`T \\to 0` on tie-free scores (``"std"`` or ``"score"``;
        ``"bounded"`` stops at the band's floor). The default, 3, was measured
        (docs/soft.md, ``benchmarks/bench_defaults.py``).
      cutoff_temperature: :math:`\\tau` of the soft cutoff (in rank positions, before
        :meth:`~PointRanks.cutoff_width` widens it); default ``temperature``.
      units: ``"bounded"``, ``"std"`` or ``"score"``; see :mod:`jaxrank.ranking.smooth`.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 0, 1])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.approx(0.01))), 5)  # 1/log2(4)
      0.5
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.approx())), 3)
      0.589
    """
    return ApproxRanker(temperature, cutoff_temperature, units)


# bound ------------------------------------------------------------------------------
def _bound_step(x: jax.Array) -> jax.Array:
    """:math:`\\log_2(1 + e^x)`: at least :math:`[x \\ge 0]` everywhere (1 at 0, above
    it the logistic loss's linear growth), so the sum of it over the other items is an
    upper bound of an item's rank."""
    return jax.nn.softplus(x) * (1 / math.log(2))


def _bound_term(x: jax.Array, c: jax.Array) -> jax.Array:
    return c * _bound_step(x)


# past this many temperatures above, the exponential step goes on along its tangent: the
# rank stays finite in float32 for a million items and 1 / rank^2 (its metric's gradient)
# above the smallest normal number
_EXP_LINEAR_FROM = 20.0


def _exp_step(x: jax.Array) -> jax.Array:
    """:math:`e^x` (at least :math:`[x \\ge 0]`: the softmax's rank), linear past
    :data:`_EXP_LINEAR_FROM`, where it keeps the slope it has there."""
    c = _EXP_LINEAR_FROM
    return jnp.exp(jnp.minimum(x, c)) * (1 + jnp.maximum(x - c, 0))


def _exp_term(x: jax.Array, c: jax.Array) -> jax.Array:
    return c * _exp_step(x)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class BoundRanks(PointRanks):
    """Logistic upper bounds of the ranks; see :func:`bound`. ``scores``: over the
    temperature. ``tau``: the soft cutoff's width in positions (bounds do not collapse to
    the mean rank: nothing is given back)."""

    ranks: jax.Array
    valid: jax.Array
    scores: jax.Array
    tau: float = dataclasses.field(metadata=dict(static=True), default=1.0)
    exponential: bool = dataclasses.field(metadata=dict(static=True), default=False)

    def cutoff_width(self) -> jax.Array:
        return jnp.full(self.ranks.shape[:-1] + (1,), self.tau, self.ranks.dtype)

    def _subset_ranks(self, masks: jax.Array) -> jax.Array:
        scores = jnp.broadcast_to(self.scores, masks.shape)
        return 1 + _pairwise_rows(_exp_term if self.exponential else _bound_term, scores, masks, masks, 1.0)


@dataclasses.dataclass(frozen=True)
class BoundRanker:
    """Logistic upper bounds of the ranks; see :func:`bound`."""

    temperature: float = 1.0
    cutoff_temperature: float = 1.0
    top: Optional[int] = None
    exponential: bool = False
    per_list: bool = True

    smooth = True

    def __post_init__(self):
        object.__setattr__(self, "temperature", _positive(self.temperature, "temperature"))
        object.__setattr__(self, "cutoff_temperature", _positive(self.cutoff_temperature, "cutoff_temperature"))
        if self.top is not None:
            object.__setattr__(self, "top", _checks.positive_int(self.top, "top"))
        for name in ("exponential", "per_list"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not self.per_list and self.top is None:
            raise ValueError("per_list=False pools the lists' top gaps: give top as well")

    def _over_temperature(self, x: jax.Array, valid: jax.Array, axis: ListAxis) -> jax.Array:
        if self.top is None:
            return x * (1.0 / self.temperature)
        scale, m = self._list_temperatures(x, valid, axis)
        return x / (scale if self.per_list else pooled_temperature(scale, m))

    def _list_temperatures(self, x: jax.Array, valid: jax.Array, axis: ListAxis) -> tuple[jax.Array, jax.Array]:
        m = axis.sum(jnp.sum(valid, axis=-1, keepdims=True))
        return _list_scale(self.temperature, self.top, x, valid, axis), m

    def list_temperatures(self, scores, where=None, axis_name: Optional[str] = None) -> tuple[jax.Array, jax.Array]:
        """Each list's own temperature (``temperature`` times its mean top gap, with ``top``)
        and its number of items, ``[..., 1]`` each, held constant in the gradient: what
        :func:`pooled_temperature` pools. ``axis_name``: the lists are sharded."""
        axis = ListAxis(axis_name, jnp.shape(scores)[-1])
        x, valid = _inputs(scores, where, list_axis=axis)
        return self._list_temperatures(x, valid, axis)

    def at_unit_temperature(self) -> BoundRanker:
        """The same bound at temperature 1 in score units: for scores already over their temperature."""
        return BoundRanker(1.0, self.cutoff_temperature, None, self.exponential)

    def over_temperature(self, scores, where=None, axis_name: Optional[str] = None) -> tuple[jax.Array, BoundRanker]:
        """Each list's scores over its temperature (masked items 0), and the ranker that
        ranks them at temperature 1: the temperature of a whole list, for lists cut from it
        (``retrieval_loss(per_positive=True)``). ``axis_name``: the lists are sharded."""
        axis = ListAxis(axis_name, jnp.shape(scores)[-1])
        x, valid = _inputs(scores, where, list_axis=axis)
        return self._over_temperature(x, valid, axis), self.at_unit_temperature()

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> BoundRanks:
        del depth  # every rank depends on every score
        s, valid = _inputs(scores, where)
        x = self._over_temperature(s, valid, ListAxis(None, s.shape[-1]))
        ranks = 1 + _pairwise_rows(_exp_term if self.exponential else _bound_term, x, valid, valid, 1.0)
        return BoundRanks(ranks, valid, x, self.cutoff_temperature, self.exponential)

    def at_positives(
        self, scores, where, positives: Positives, depth: Optional[int], axis_name: Optional[str] = None
    ) -> BoundRanks:
        """:class:`BoundRanks` of the relevant items of ``positives`` alone, each a sum over
        the whole list ``scores[..., n]`` (sharded over ``axis_name`` when given): ``n * r``
        terms, a softmax's cost over ``r`` positives (and a top-``(top + 1)``)."""
        del depth  # the cutoff's width is fixed
        axis = ListAxis(axis_name, scores.shape[-1])
        x, valid = _inputs(scores, where, list_axis=axis)
        x = self._over_temperature(x, valid, axis)
        ranks, named, at = _ranks_at(x, valid, positives, axis, 1.0, _exp_step if self.exponential else _bound_step)
        return BoundRanks(ranks, named, at, self.cutoff_temperature, self.exponential)


def pooled_temperature(scale: jax.Array, m: jax.Array) -> jax.Array:
    """One temperature for a batch of lists: the mean of the lists' temperatures ``scale``
    (``[..., 1]``) over those of at least two items ``m``, broadcast back to ``[..., 1]``."""
    axes = tuple(range(scale.ndim))
    counted = m >= 2
    total = jnp.sum(counted, axis=axes, keepdims=True)
    mean = jnp.sum(jnp.where(counted, scale, 0), axis=axes, keepdims=True) / jnp.maximum(total, 1)
    return jnp.broadcast_to(jnp.where(total > 0, mean, jnp.mean(scale, axis=axes, keepdims=True)), scale.shape)


def bound(
    temperature: float = 1.0,
    *,
    cutoff_temperature: float = 1.0,
    top: Optional[int] = None,
    exponential: bool = False,
    per_list: bool = True,
) -> BoundRanker:
    """Upper bounds of the ranks from the pairwise logistic loss: the ranks of InfoNCE's logits.

    .. math:: r_i = 1 + \\sum_{j \\ne i,\\ j\\ \\text{valid}} \\log_2\\Big(1 + e^{(s_j - s_i)/T}\\Big)
        \\;\\ge\\; 1 + \\#\\{j \\ne i : s_j \\ge s_i\\}

    Each term is at least the indicator that ``j`` is at or above ``i``, so :math:`r_i` is at
    least ``i``'s rank (ties counted above) and a metric's value over these ranks is at
    most the hard metric's (its loss an upper bound of the hard loss); the bound is tight
    when the other items are many :math:`T` below. An item ``d`` above ``i`` adds about
    :math:`1 + d / (T \\ln 2)`: its gradient does not vanish however far above it is (the
    logistic loss's, as in InfoNCE), where a smooth step (:func:`approx`, :func:`laplace`)
    gives a negative far above almost none.

    :math:`T` is ``temperature`` in score units (give the scores as you give logits to a
    softmax cross-entropy: cosines over InfoNCE's temperature), or, with ``top``,
    ``temperature`` times the mean gap between consecutive scores among the list's first
    ``top + 1`` (held constant in the gradient; the list's standard deviation where those
    are tied), as :func:`laplace`'s: the same bound at every score scale and, since the top
    gaps shrink as a list grows, for a list of 10 or of a million.

    ``exponential=True`` takes :math:`e^{(s_j - s_i)/T}` for each term instead (also at least
    the indicator): the softmax's rank, :math:`r_i = 1 / \\mathrm{softmax}(s / T)_i`, so that
    ``-log`` of the reciprocal rank over these ranks is InfoNCE's loss; past 20 :math:`T`
    above, a term grows along its tangent, which keeps the rank finite in float32.

    The cutoff :math:`[r \\le k]` is :func:`soft_cutoff` of width ``cutoff_temperature``
    positions. Cost: as :func:`approx`, O(n^2) per list in row blocks; with a metric's labels
    given as :func:`jaxrank.positives`, ``n * r`` terms (and a top-``(top + 1)``).

    Args:
      temperature: :math:`T > 0`, in the units of the scores, or of the top gaps with ``top``.
      cutoff_temperature: the soft cutoff's width, in positions.
      top: how many gaps at the top of each list set the temperature (None: score units).
      exponential: each term :math:`e^{(s_j - s_i)/T}` (the softmax's rank) instead of the
        logistic :math:`\\log_2(1 + e^{(s_j - s_i)/T})`.
      per_list: with ``top``, each list's own temperature (default); False: one for the
        whole batch of lists, ``temperature`` times the mean over the lists of their top
        gaps, as InfoNCE's one temperature (``retrieval_loss`` pools it over every query).

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> [round(float(r), 3) for r in jaxrank.bound(0.1)(jnp.array([3.0, 2.9, 0.0])).ranks]
      [1.452, 2.895, 86.119]
      >>> [round(float(r), 3) for r in jaxrank.bound(0.1)(jnp.array([3.0, 2.0, 0.0])).ranks]  # 10 T above: 14 more
      [1.0, 15.427, 73.135]
      >>> [round(float(r), 3) for r in jaxrank.bound()(jnp.array([3.0, 3.0])).ranks]  # a tie counts as above
      [2.0, 2.0]
      >>> [round(float(r), 3) for r in jaxrank.bound(top=2)(0.001 * jnp.array([3.0, 2.0, 0.0])).ranks]  # T: 1.5 thousandths
      [1.781, 2.897, 6.33]
      >>> [round(float(r), 3) for r in jaxrank.bound(1.0, exponential=True)(jnp.array([3.0, 2.0, 0.0])).ranks]  # 1 / softmax
      [1.418, 3.854, 28.475]
    """
    return BoundRanker(temperature, cutoff_temperature, top, exponential, per_list)
