"""Smooth rankers: the interface of :func:`jaxrank.hard`, differentiable.

A smooth ranker maps ``(scores[..., n], where[..., n], depth=None)`` to a
:class:`~jaxrank.ranking.Ranks` whose four operations are smooth in the scores,
so that every metric of :mod:`jaxrank.metrics` becomes its own relaxation::

    jaxrank.ndcg(scores, labels, k=10, ranker=jaxrank.approx(0.1))

There is no second implementation of any metric: the rankers only change what
"the rank of item i" and "item j is ranked above item i" mean.

Two families:

*Point ranks* (:func:`approx`, :func:`softrank`): one smooth rank
:math:`r_i \\in [1, n]` per item. ``linear`` evaluates ``f`` at :math:`r_i`;
the cutoff :math:`[r \\le k]` becomes :func:`soft_cutoff`,
:math:`\\sigma((k + \\tfrac12 - r)/\\tau)`, with :math:`\\tau` the ranker's
temperature (or strength) unless ``cutoff_temperature`` is given, widened per list by
as much spread as the soft ranks have lost (:meth:`PointRanks.cutoff_width`), so a cutoff
never makes the gradient vanish when the soft ranks crowd around the mean rank.
``count_before`` and ``survival`` need "how many of the ``w`` items are above
``i``": :func:`approx` sums its pairwise probabilities; :func:`softrank` ranks
again inside the subsets ``where & (w > 0)`` and ``where & (w == 0)``.

*Permutation matrices* (:func:`neuralsort`, :func:`softsort`): a row-stochastic
(or, with Sinkhorn iterations, doubly stochastic) ``P[..., position, item]``.
The per-item weights are sorted softly, ``P @ g``, and the operations of the
exact ranker are applied at the integer positions ``1..n`` (exact whenever
``P`` is a permutation matrix).

:func:`gumbel` wraps any ranker with Plackett-Luce sampling (Gumbel noise on the
scores) and averages the operations over the samples.

Every ranker is a frozen dataclass (hashable, usable as a default argument).
Scores are processed in at least float32 (bfloat16/float16 are widened), masked
items are replaced by 0 before any arithmetic (so ``-inf`` padding is safe) and
get zero gradient.

*Units.* By default (``units="std"``) every ranker first divides each list's scores by
their standard deviation (:func:`score_spread`), so temperatures and strengths are
fractions of the list's spread and the result does not change when the scores are scaled
or shifted: the same setting works for scores of spread 0.01 and of spread 100.
``units="score"`` keeps them in the units of the scores, as in the papers (and in
TF-Ranking and fast-soft-sort); then a model can sharpen the relaxation by growing its
scores, and the user must match the temperature to the scores' scale.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import math
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank import _checks
from jaxrank.ranking._backend import argsort_descending, cumsum, inverse_permutation, sort_key, vary_like
from jaxrank.ranking.ranks import PositionFn, Ranks

__all__ = [
    "ApproxRanker",
    "ApproxRanks",
    "GumbelRanker",
    "GumbelRanks",
    "NeuralSortRanker",
    "PermutationRanks",
    "PointRanks",
    "SoftRanker",
    "SoftRanks",
    "SoftSortRanker",
    "approx",
    "gumbel",
    "score_spread",
    "neuralsort",
    "soft_cutoff",
    "soft_ranks",
    "softrank",
    "softsort",
]

# The pairwise kernel of ``approx`` works on blocks of rows: at most this many
# pair terms per block for the whole batch, and at most _PAIRS_PER_LIST per
# list (so that a ``vmap`` by the caller, invisible here, stays bounded too).
_PAIRS_PER_BLOCK = 1 << 22
_PAIRS_PER_LIST = 1 << 17


# ---------------------------------------------------------------------------------
# Shared pieces
# ---------------------------------------------------------------------------------
def soft_cutoff(positions: jax.Array, k: jax.Array, tau) -> jax.Array:
    """The smooth cutoff shared by every point-rank ranker.

    .. math:: [r \\le k] \\approx \\sigma\\Big(\\frac{k + \\tfrac12 - r}{\\tau}\\Big)

    At an integer rank :math:`r` the indicator :math:`[r \\le k]` equals
    :math:`[k + \\tfrac12 - r > 0]`; the sigmoid is its relaxation, exact as
    :math:`\\tau \\to 0`. ``tau`` is :meth:`PointRanks.cutoff_width`: the ranker's temperature (``approx``) or
    strength (``softrank``) unless the ranker's ``cutoff_temperature`` is set.

    Example:
      >>> import jax.numpy as jnp
      >>> [round(float(v), 3) for v in soft_cutoff(jnp.array([1.0, 2.0, 3.0]), 2.0, 0.1)]
      [1.0, 0.993, 0.007]
    """
    return jax.nn.sigmoid((k + 0.5 - positions) / tau)


def _compute_dtype(dtype) -> jnp.dtype:
    return jnp.promote_types(dtype, jnp.float32)


def _inputs(scores, where):
    """Scores in a compute dtype with masked entries set to 0, and the mask."""
    scores = _checks.scores(scores)
    valid = _checks.mask(where, scores.shape, broadcast=True)
    x = scores.astype(_compute_dtype(scores.dtype))
    return jnp.where(valid, x, jnp.zeros((), x.dtype)), valid


_positive = _checks.positive


def _optional_positive(value, name: str) -> Optional[float]:
    return None if value is None else _positive(value, name)


UNITS = ("std", "score")


def _check_units(units) -> str:
    if units not in UNITS:
        raise ValueError(f"units must be 'std' or 'score', got {units!r}")
    return units


def score_spread(scores: jax.Array, where: Optional[jax.Array] = None) -> jax.Array:
    """The unit of ``units="std"``: the standard deviation of each list's valid scores.

    .. math:: \\sigma = \\sqrt{\\tfrac1m \\textstyle\\sum_i (s_i - \\bar s)^2}

    over the ``m`` valid scores; ``1`` for a list with fewer than two valid items or
    with all valid scores equal. Shape ``[..., 1]``; differentiable (the soft
    rankers divide the scores by it, so that their result does not change when the
    scores are scaled or shifted).

    Example:
      >>> import jax.numpy as jnp
      >>> [round(float(u), 6) for u in score_spread(jnp.array([[1.0, 3.0, 1.0, 3.0], [5.0, 5.0, 5.0, 5.0]]))[:, 0]]
      [1.0, 1.0]
    """
    s, valid = _inputs(scores, where)
    m = jnp.sum(valid, axis=-1, keepdims=True).astype(s.dtype)
    m_safe = jnp.maximum(m, 1)
    dev = jnp.where(valid, s - jnp.sum(s, axis=-1, keepdims=True) / m_safe, 0)
    # std = a * std(dev / a) for any a > 0: dividing by the largest deviation (held
    # constant, which leaves the gradient exact) keeps squares of |s| ~ 1e30 finite.
    top = lax.stop_gradient(jnp.max(jnp.abs(dev), axis=-1, keepdims=True))
    spread = (m >= 2) & (top > 0)
    top = jnp.where(spread, top, 1)
    mean_square = jnp.where(spread, jnp.sum(jnp.square(dev / top), axis=-1, keepdims=True) / m_safe, 1)
    return jnp.where(spread, top * jnp.sqrt(mean_square), 1)


def _in_units(s: jax.Array, valid: jax.Array, units: str) -> jax.Array:
    """The masked compute-dtype scores in the ranker's units (masked entries stay 0)."""
    return s if units == "score" else s / score_spread(s, valid)


def _reduce(h: jax.Array, weights: jax.Array) -> jax.Array:
    """``sum_p h[..., p] * weights[..., p, c]`` (weights may lack batch axes)."""
    return jnp.sum(h[..., :, None] * weights, axis=-2)


def _exclusive_cumprod(x: jax.Array) -> jax.Array:
    ones = jnp.ones(x.shape[:-1] + (1,), x.dtype)
    return jnp.cumprod(jnp.concatenate([ones, x[..., :-1]], axis=-1), axis=-1)


def _masked_logsumexp(x: jax.Array, mask: jax.Array, axis: int) -> jax.Array:
    """logsumexp over the masked entries; 0 where none is; finite gradients."""
    x = jnp.where(mask, x, 0)
    top = jnp.max(jnp.where(mask, x, -jnp.inf), axis=axis, keepdims=True)
    top = lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0))
    total = jnp.sum(jnp.where(mask, jnp.exp(x - top), 0), axis=axis, keepdims=True)
    return top + jnp.log(jnp.where(total > 0, total, 1))


# ---------------------------------------------------------------------------------
# Point ranks
# ---------------------------------------------------------------------------------
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
        return _reduce(h, f(self.ranks))

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
        """``prod_{j above i} (1 - w_j)`` becomes the smooth indicator that no
        ``w`` item is above ``i``: ``soft_cutoff(1 + above_i, 1, tau)``."""
        above = self._ranked_above(jnp.where(self.valid, w, 0))
        return self._weighted(g, f, self.cutoff(1 + above, jnp.ones((), above.dtype)))

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


def _pairwise_rows(term: str, scores: jax.Array, valid: jax.Array, col: jax.Array, temperature: float):
    """``out_i = sum_{j valid, j != i} term((s_j - s_i) / T, col_j)`` in row blocks.

    Rows are processed ``block`` at a time in a ``lax.scan`` whose body is
    rematerialised (``jax.checkpoint``), so value and gradient hold
    O(batch * n * block) pair terms at once instead of O(batch * n^2).
    """
    fn = _PAIR_TERMS[term]
    shape = jnp.broadcast_shapes(scores.shape, valid.shape, col.shape)
    n = shape[-1]
    s = jnp.broadcast_to(scores, shape).reshape(-1, n)
    v = jnp.broadcast_to(valid, shape).reshape(-1, n)
    c = jnp.where(v, jnp.broadcast_to(col, shape).reshape(-1, n).astype(s.dtype), 0)
    batch = s.shape[0]
    if batch == 0 or n == 0:
        return jnp.zeros(shape, s.dtype)
    block = max(1, min(n, _PAIRS_PER_BLOCK // (batch * n), _PAIRS_PER_LIST // n))
    nblocks = -(-n // block)
    rows = jnp.pad(s, ((0, 0), (0, nblocks * block - n)))
    rows = rows.reshape(batch, nblocks, block).transpose(1, 0, 2)
    starts = jnp.arange(nblocks, dtype=jnp.int32) * block
    col_idx = jnp.arange(n, dtype=jnp.int32)
    inv_t = 1.0 / temperature

    @jax.checkpoint
    def body(carry, xs):
        s_rows, start = xs
        x = (s[:, None, :] - s_rows[:, :, None]) * inv_t
        keep = (start + jnp.arange(block, dtype=jnp.int32))[:, None] != col_idx[None, :]
        terms = jnp.where(keep[None] & v[:, None, :], fn(x, c[:, None, :]), 0)
        return carry, jnp.sum(terms, axis=-1)

    _, out = lax.scan(body, None, (rows, starts))
    out = out.transpose(1, 0, 2).reshape(batch, nblocks * block)[:, :n]
    return out.reshape(shape)


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
        """Binary ``w``: :math:`\\prod_{j \\ne i} (1 - \\pi_{ij})^{w_j}`."""
        w = jnp.where(self.valid, w, 0)
        return self._weighted(g, f, jnp.exp(self._pairs("log_survive", w)))

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        """:math:`\\sum_i p_i f(r_i) \\prod_{j \\ne i} (1 - p_j \\pi_{ij})` (``p`` clipped to [0, 1])."""
        p = jnp.where(self.valid, p, 0)
        return self._weighted(p, f, jnp.exp(self._pairs("log_cascade", p)))


@dataclasses.dataclass(frozen=True)
class ApproxRanker:
    """Pairwise-sigmoid approximate ranks; see :func:`approx`."""

    temperature: float = 1.0
    cutoff_temperature: Optional[float] = None
    units: str = "std"

    smooth = True

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> ApproxRanks:
        del depth  # every rank depends on every score
        s, valid = _inputs(scores, where)
        s = _in_units(s, valid, self.units)
        ranks = 1 + _pairwise_rows("above", s, valid, valid, self.temperature)
        tau = self.temperature if self.cutoff_temperature is None else self.cutoff_temperature
        return ApproxRanks(ranks=ranks, valid=valid, scores=s, temperature=self.temperature, tau=tau)


def approx(temperature: float = 1.0, *, cutoff_temperature: Optional[float] = None, units: str = "std") -> ApproxRanker:
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
      temperature: :math:`T > 0`, in units of the list's score standard deviation
        (``units="std"``) or of the scores (``units="score"``); ranks become exact as
        :math:`T \\to 0` on
        tie-free scores.
      cutoff_temperature: :math:`\\tau` of the soft cutoff (in rank positions, before
        :meth:`~PointRanks.cutoff_width` widens it); default ``temperature``.
      units: ``"std"`` (scores divided by :func:`score_spread` first) or ``"score"``.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 0, 1])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.approx(0.01))), 5)  # 1/log2(4)
      0.5
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.approx(1.0))), 3)
      0.531
    """
    return ApproxRanker(
        _positive(temperature, "temperature"),
        _optional_positive(cutoff_temperature, "cutoff_temperature"),
        _check_units(units),
    )


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


def _project_sorted_impl(s: jax.Array, m: jax.Array, kl: bool):
    start, end, stat = _pav(s, m, kl)
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


def soft_ranks(scores: jax.Array, where: Optional[jax.Array] = None, *, strength: float = 1.0, regularization: str = "l2") -> jax.Array:
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

    strength: float = 1.0
    regularization: str = "l2"
    cutoff_temperature: Optional[float] = None
    units: str = "std"

    smooth = True

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> SoftRanks:
        del depth
        s, valid = _inputs(scores, where)
        s = _in_units(s, valid, self.units)
        ranks = soft_ranks(s, valid, strength=self.strength, regularization=self.regularization)
        tau = self.strength if self.cutoff_temperature is None else self.cutoff_temperature
        return SoftRanks(ranks=ranks, valid=valid, scores=s, ranker=self, tau=tau)


def softrank(
    strength: float = 1.0,
    regularization: str = "l2",
    *,
    cutoff_temperature: Optional[float] = None,
    units: str = "std",
) -> SoftRanker:
    """Soft ranks by projection onto the permutahedron (Blondel et al., 2020).

    The ranks are :func:`soft_ranks`: piecewise linear (l2) or smooth (kl) in
    the scores, exact integer ranks once the gaps between sorted scores exceed
    the strength (l2), all equal to the mean rank when the strength is large.

    Cost per list: one O(n log n) sort (the ranking primitive's
    :func:`~jaxrank.ranking.argsort_descending`: ``lax.sort`` on GPU and TPU, no
    host callback there; numpy's sort on CPU), then pool-adjacent-violators in a
    ``lax.while_loop`` of at most 2n O(1) steps (exact, sequential), and an
    O(n) custom VJP. The cutoff is :func:`soft_cutoff` with
    :math:`\\tau` = ``strength`` (or ``cutoff_temperature``). ``count_before``
    and ``survival`` (AP, RR, success) rank again inside the relevant /
    non-relevant subsets; ERR (``cascade``) compares every pair of soft ranks,
    :math:`\\sigma((r_i - r_j)/\\tau)`, in O(n^2) work and O(n) memory per list.

    Args:
      strength: :math:`\\varepsilon > 0`, in units of the list's score standard
        deviation (``units="std"``) or of the scores (``units="score"``).
      regularization: ``"l2"`` (Euclidean projection) or ``"kl"`` (entropic).
      cutoff_temperature: :math:`\\tau` of the soft cutoff (in rank positions, before
        :meth:`~PointRanks.cutoff_width` widens it); default ``strength``.
      units: ``"std"`` (scores divided by :func:`score_spread` first) or ``"score"``.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 1, 0])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.softrank(0.01))), 5)
      0.63093
    """
    if regularization not in ("l2", "kl"):
        raise ValueError(f"regularization must be 'l2' or 'kl', got {regularization!r}")
    return SoftRanker(
        _positive(strength, "strength"),
        regularization,
        _optional_positive(cutoff_temperature, "cutoff_temperature"),
        _check_units(units),
    )


# ---------------------------------------------------------------------------------
# Permutation matrices
# ---------------------------------------------------------------------------------
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
        return _reduce(self.in_rank_order(g), f(self._positions()))

    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        h = self.in_rank_order(g) * cumsum(self.in_rank_order(w))
        return _reduce(h, f(self._positions()))

    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        h = self.in_rank_order(g) * _exclusive_cumprod(1 - self.in_rank_order(w))
        return _reduce(h, f(self._positions()))

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        ps = self.in_rank_order(p)
        return _reduce(ps * _exclusive_cumprod(1 - ps), f(self._positions()))


def _permutation_from_logits(logits: jax.Array, valid: jax.Array, sinkhorn: int) -> jax.Array:
    """Row softmax of ``logits[..., position, item]`` over the valid block, then
    ``sinkhorn`` alternations of column and row normalisation (log space)."""
    n = valid.shape[-1]
    m = jnp.sum(valid, axis=-1, keepdims=True)
    rows = jnp.arange(n) < m  # [..., n] valid positions
    mask = rows[..., :, None] & valid[..., None, :]
    x = jnp.where(mask, logits, 0)
    x = x - _masked_logsumexp(x, mask, axis=-1)
    for _ in range(sinkhorn):
        x = x - _masked_logsumexp(x, mask, axis=-2)
        x = x - _masked_logsumexp(x, mask, axis=-1)
    return jnp.where(mask, jnp.exp(jnp.where(mask, x, 0)), 0)


def _check_sinkhorn(sinkhorn) -> int:
    if isinstance(sinkhorn, bool) or not isinstance(sinkhorn, (int, np.integer)) or sinkhorn < 0:
        raise ValueError(f"sinkhorn must be a non-negative integer, got {sinkhorn!r}")
    return int(sinkhorn)


@dataclasses.dataclass(frozen=True)
class NeuralSortRanker:
    """NeuralSort relaxed permutation; see :func:`neuralsort`."""

    temperature: float = 1.0
    sinkhorn: int = 0
    units: str = "std"

    smooth = True

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> PermutationRanks:
        del depth
        s, valid = _inputs(scores, where)
        s = _in_units(s, valid, self.units)
        n = s.shape[-1]
        m = jnp.sum(valid, axis=-1, keepdims=True).astype(s.dtype)
        # the k = j term is 0: kept out of abs's kink, as in softsort
        others = valid[..., None, :] & ~jnp.eye(n, dtype=bool)
        spread = jnp.sum(jnp.where(others, jnp.abs(s[..., :, None] - s[..., None, :]), 0), -1)
        coef = m + 1 - 2 * jnp.arange(1, n + 1, dtype=s.dtype)  # [..., n] per position
        logits = (coef[..., :, None] * s[..., None, :] - spread[..., None, :]) / self.temperature
        return PermutationRanks(perm=_permutation_from_logits(logits, valid, self.sinkhorn), valid=valid)


def neuralsort(temperature: float = 1.0, sinkhorn: int = 0, *, units: str = "std") -> NeuralSortRanker:
    """NeuralSort relaxed sorting (Grover et al., 2019).

    Over the :math:`m` valid items, with :math:`A_j = \\sum_k |s_j - s_k|`,
    position :math:`p` (1-based) is the softmax over items

    .. math:: P_{pj} = \\mathrm{softmax}_j\\Big(\\frac{(m + 1 - 2p)\\, s_j - A_j}{T}\\Big),

    followed by ``sinkhorn`` iterations of column / row normalisation (NeuralNDCG,
    Pobrotyn & Bialobrzeski, 2021). The metric is then evaluated at the integer
    positions through :class:`PermutationRanks`. O(n^2) time and memory per list.
    ``temperature`` is in units of the list's score standard deviation (default
    ``units="std"``; the scores are divided by :func:`score_spread` first) or of the
    scores (``units="score"``).

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 1, 0])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.neuralsort(0.01))), 5)
      0.63093
    """
    return NeuralSortRanker(_positive(temperature, "temperature"), _check_sinkhorn(sinkhorn), _check_units(units))


@dataclasses.dataclass(frozen=True)
class SoftSortRanker:
    """SoftSort relaxed permutation; see :func:`softsort`."""

    temperature: float = 1.0
    sinkhorn: int = 0
    units: str = "std"

    smooth = True

    def __call__(self, scores, where=None, *, depth: Optional[int] = None) -> PermutationRanks:
        del depth
        s, valid = _inputs(scores, where)
        s = _in_units(s, valid, self.units)
        n = s.shape[-1]
        m = jnp.sum(valid, axis=-1, keepdims=True)
        order = argsort_descending(sort_key(lax.stop_gradient(s), valid))
        top = jnp.where(jnp.arange(n) < m, jnp.take_along_axis(s, order, axis=-1), 0)
        # |s_j - s_j| of the item sorted at each position is 0 by definition: written as 0,
        # not left to abs's kink, whose side XLA's rounding of a fused s/spread can flip.
        own = order[..., :, None] == jnp.arange(n)
        logits = -jnp.where(own, 0, jnp.abs(top[..., :, None] - s[..., None, :])) / self.temperature
        return PermutationRanks(perm=_permutation_from_logits(logits, valid, self.sinkhorn), valid=valid)


def softsort(temperature: float = 1.0, sinkhorn: int = 0, *, units: str = "std") -> SoftSortRanker:
    """SoftSort relaxed sorting (Prillo & Eisenschlos, 2020).

    With :math:`\\hat s` the valid scores sorted descending, position
    :math:`p` is the softmax over valid items

    .. math:: P_{pj} = \\mathrm{softmax}_j\\Big(-\\frac{|\\hat s_p - s_j|}{T}\\Big),

    optionally followed by ``sinkhorn`` normalisation iterations; evaluated
    through :class:`PermutationRanks`. O(n log n) sort plus O(n^2) time and
    memory per list. ``temperature`` is in units of the list's score standard
    deviation (default ``units="std"``) or of the scores (``units="score"``).

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 1, 0])
      >>> round(float(jaxrank.ndcg(scores, labels, ranker=jaxrank.softsort(0.01))), 5)
      0.63093
    """
    return SoftSortRanker(_positive(temperature, "temperature"), _check_sinkhorn(sinkhorn), _check_units(units))


# ---------------------------------------------------------------------------------
# Plackett-Luce sampling
# ---------------------------------------------------------------------------------
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
