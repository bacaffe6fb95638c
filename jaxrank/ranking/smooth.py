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

*Units.* ``units=`` says what the temperature (or strength) is measured in:

* ``"bounded"`` (the default): the units of the scores, kept inside a band of each list's
  spread, :func:`bounded_temperature`: :math:`T_\\text{list} = \\min(\\max(T, a\\sigma), b\\sigma)`
  with :math:`(a, b)` = :data:`BAND` and :math:`\\sigma` the list's standard deviation
  (:func:`score_spread`, held constant in the gradient). Inside the band this is
  ``"score"``: a model sharpens the relaxation by spreading its scores, which is what
  trains well; outside it the temperature follows the spread, so no scale of the scores
  makes the ranks hard (a vanishing gradient) or all equal.
* ``"std"``: each list's scores are divided by :func:`score_spread` first (differentiated
  through); the temperature is a fraction of the list's spread and the result does not change
  when the scores are scaled or shifted, so a model cannot sharpen the relaxation.
* ``"score"``: the units of the scores, as in the papers (and in TF-Ranking and
  fast-soft-sort); the user matches the temperature to the scores' scale.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks


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


def _inputs(scores, where, units: str = "score", temperature: float = 1.0, list_axis=None):
    """Scores in a compute dtype, with masked entries set to 0, and the mask; the scores
    rescaled so that the ranker's own ``temperature`` acts as ``units`` say (see
    :func:`bounded_temperature` and :func:`score_spread`). ``list_axis``: a
    :class:`jaxrank.ranking.positives.ListAxis` when the lists are sharded (the spread is
    then the whole list's)."""
    scores = _checks.scores(scores)
    valid = _checks.mask(where, scores.shape, broadcast=True)
    x = scores.astype(_compute_dtype(scores.dtype))
    x = jnp.where(valid, x, jnp.zeros((), x.dtype))
    if units == "std":
        x = x / _spread(x, valid, list_axis)
    elif units == "bounded":
        # s / T_list = (s * T / T_list) / T: the ranker divides by its own T afterwards
        spread = lax.stop_gradient(_spread(x, valid, list_axis))
        x = x * (temperature / _band(jnp.asarray(temperature, x.dtype), spread, BAND))
    return x, valid


_positive = _checks.positive


def _optional_positive(value, name: str) -> Optional[float]:
    return None if value is None else _positive(value, name)


UNITS = ("bounded", "std", "score")

#: The band of ``units="bounded"``: the temperature (or strength) is kept between these
#: multiples of each list's score standard deviation (docs/soft.md: the measurement that
#: chose them).
BAND = (0.1, 10.0)


def _check_units(units) -> str:
    if units not in UNITS:
        raise ValueError(f"units must be one of {', '.join(map(repr, UNITS))}, got {units!r}")
    return units


def bounded_temperature(
    scores: jax.Array, where: Optional[jax.Array], temperature: float, band: Optional[tuple] = None
) -> jax.Array:
    """The temperature of ``units="bounded"``, per list: ``temperature`` in the units of
    the scores, kept inside a band of the list's spread.

    .. math:: T_\\text{list} = \\min\\big(\\max(T,\\ a\\,\\sigma),\\ b\\,\\sigma\\big),
        \\qquad \\sigma = \\text{stop\\_gradient}(\\text{score\\_spread}(s))

    with :math:`(a, b)` = ``band`` (default :data:`BAND`, the rankers' band). Inside the band the ranker is the one of
    ``units="score"``: a model sharpens the relaxation by spreading its scores apart.
    Outside it the temperature follows the spread, as ``units="std"`` does: the
    relaxation never gets sharper than :math:`T = a\\sigma` (scores spread far apart:
    no vanishing gradient) nor smoother than :math:`T = b\\sigma` (scores crowded
    together: no collapse of the ranks). :math:`\\sigma` is held constant in the
    gradient, so the band never pushes the scores. Shape ``[..., 1]``.

    Example:
      >>> import jax.numpy as jnp
      >>> s = jnp.array([[0.0, 1.0, 2.0, 3.0], [0.0, 100.0, 200.0, 300.0], [0.0, 0.01, 0.02, 0.03]])
      >>> [round(float(t), 4) for t in bounded_temperature(s, None, 1.0)[:, 0]]  # sigma 1.118, 111.8, 0.01118
      [1.0, 11.1803, 0.1118]
    """
    s, valid = _inputs(scores, where)
    spread = lax.stop_gradient(score_spread(s, valid))
    return _band(jnp.asarray(temperature, s.dtype), spread, BAND if band is None else band)


def _band(t, spread, band):
    low, high = band
    return jnp.clip(t, low * spread, high * spread)


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
    return _spread(s, valid)


def _spread(s: jax.Array, valid: jax.Array, list_axis=None) -> jax.Array:
    """:func:`score_spread` of masked compute-dtype scores; over a sharded list's every
    shard with ``list_axis``."""

    def total(x):
        x = jnp.sum(x, axis=-1, keepdims=True)
        return x if list_axis is None else list_axis.sum(x)

    def top(x):
        x = jnp.max(x, axis=-1, keepdims=True)
        return x if list_axis is None else list_axis.max(x)

    m = total(valid.astype(s.dtype))
    m_safe = jnp.maximum(m, 1)
    dev = jnp.where(valid, s - total(s) / m_safe, 0)
    # std = a * std(dev / a) for any a > 0: dividing by the largest deviation (held
    # constant, which leaves the gradient exact) keeps squares of |s| ~ 1e30 finite.
    largest = top(lax.stop_gradient(jnp.abs(dev)))
    spread = (m >= 2) & (largest > 0)
    largest = jnp.where(spread, largest, 1)
    mean_square = jnp.where(spread, total(jnp.square(dev / largest)) / m_safe, 1)
    return jnp.where(spread, largest * jnp.sqrt(mean_square), 1)


def _exclusive_cumprod(x: jax.Array) -> jax.Array:
    ones = jnp.ones(x.shape[:-1] + (1,), x.dtype)
    return jnp.cumprod(jnp.concatenate([ones, x[..., :-1]], axis=-1), axis=-1)


def masked_logsumexp(x: jax.Array, mask: jax.Array, axis: int) -> jax.Array:
    """logsumexp over the masked entries; 0 where none is; finite gradients."""
    x = jnp.where(mask, x, 0)
    top = jnp.max(jnp.where(mask, x, -jnp.inf), axis=axis, keepdims=True)
    top = lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0))
    total = jnp.sum(jnp.where(mask, jnp.exp(x - top), 0), axis=axis, keepdims=True)
    return top + jnp.log(jnp.where(total > 0, total, 1))
