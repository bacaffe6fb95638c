"""Metric losses: ``1 - metric`` of any jaxrank metric, relaxed by a smooth ranker."""

from __future__ import annotations

from collections.abc import Callable

import jax

from jaxrank import metrics
from jaxrank.ranking import Ranks
from jaxrank.ranking.laplace import laplace

# The one smooth ranker that keeps the three laws (monotone, faithful, reach) at every score
# scale and list length (docs/soft.md, "The three laws"); LTR quality: docs/training.md.
_DEFAULT_RANKER = laplace()


# Metric losses ------------------------------------------------------------------------
def metric_loss(
    scores, labels, *, metric: Callable = metrics.ndcg, ranker=_DEFAULT_RANKER, where=None, **metric_kwargs
) -> jax.Array:
    """``1 - metric(scores, labels, ranker=ranker, ...)`` per list.

    .. math:: \\ell(s, y) = 1 - M_{\\text{ranker}}(s, y)

    ``metric`` is any metric of :mod:`jaxrank.metrics` (or a callable with its
    signature); ``ranker`` a smooth ranker (default ``jaxrank.laplace()``: O(n log n) per
    list, a temperature set by each list's top scores, so the loss is monotone in every
    relevant item's score, faithful to the metric and reaches items past a cutoff at every
    score scale and list length, docs/soft.md);
    ``metric_kwargs`` go to the metric (``k``, ``gain``, ``rel``, ...). A ranker (or
    precomputed :class:`jaxrank.ranking.Ranks`) that is not smooth, such as
    ``jaxrank.hard()``, is refused: its metric has no gradient in the scores, and the
    loss would train nothing.
    Minimising the loss maximises the metric, which is right for every
    higher-is-better metric; for fall-out, where lower is better, minimise the
    metric itself instead (``jaxrank.fallout(..., ranker=...)``), since
    ``1 - fallout`` would be maximised by ranking non-relevant items first.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 0, 1])
      >>> r = jaxrank.approx(0.01)
      >>> round(float(metric_loss(scores, labels, ranker=r)), 5)  # 1 - 1/log2(4)
      0.5
      >>> round(float(metric_loss(scores, labels, metric=jaxrank.precision, ranker=r, k=1)), 5)
      1.0
      >>> metric_loss(scores, labels, ranker=jaxrank.hard())
      Traceback (most recent call last):
      ...
      ValueError: metric_loss needs a smooth ranker, ...
    """
    _smooth_ranker(ranker)
    return 1 - metric(scores, labels, where=where, ranker=ranker, **metric_kwargs)


def _smooth_ranker(ranker) -> None:
    """Refuse a ranker, or precomputed Ranks, that says it is not smooth (``smooth`` False):
    the gradient of a metric through exact ranks is 0 wherever it exists."""
    if getattr(ranker, "smooth", True):
        return
    # Ranks hold arrays: name their kind, not their values
    given = f"precomputed {type(ranker).__name__}" if isinstance(ranker, Ranks) else repr(ranker)
    raise ValueError(
        f"metric_loss needs a smooth ranker, got {given}, whose ranks have no gradient in the scores "
        "(the loss's gradient would be 0 everywhere): use jaxrank.approx(), jaxrank.softrank(), "
        "jaxrank.laplace(), jaxrank.neuralsort(), jaxrank.softsort(), or jaxrank.gumbel() around one of them; "
        "exact ranks are for evaluation (jaxrank.ndcg(scores, labels), ...)"
    )


def ndcg_loss(scores, labels, *, k=None, where=None, ranker=_DEFAULT_RANKER, **metric_kwargs) -> jax.Array:
    """Smooth nDCG loss: ``1 - ndcg(scores, labels, k=k, ranker=ranker)``. With the default
    ``laplace()`` each item's gain is discounted at its smooth rank :math:`r_i`
    (:func:`jaxrank.laplace`), and the cutoff is a soft step with a floor :math:`\\rho`:

    .. math:: \\ell = 1 - \\frac{1}{IDCG_\\rho@k} \\sum_i \\frac{G(y_i)\\,c(r_i)}{\\log_2(1 + r_i)},
        \\qquad c(r) = \\rho + (1 - \\rho)\\,\\sigma\\big((k + \\tfrac12 - r)/\\tau\\big)

    with ``ranker=jaxrank.approx()`` it is ApproxNDCG (Qin et al. 2010). A list without positive labels has
    loss 1 and zero gradient.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> round(float(ndcg_loss(jnp.array([2.0, 1.0]), jnp.array([1, 0]), ranker=jaxrank.softrank(0.1))), 5)
      0.0
    """
    return metric_loss(scores, labels, metric=metrics.ndcg, ranker=ranker, where=where, k=k, **metric_kwargs)


def mrr_loss(scores, labels, *, k=None, where=None, ranker=_DEFAULT_RANKER, **metric_kwargs) -> jax.Array:
    """Smooth reciprocal-rank loss: ``1 - reciprocal_rank(...)`` with a smooth ranker.

    .. math:: \\ell = 1 - \\sum_{i: y_i \\ge rel} \\frac{1}{r_i}\\,
        P(\\text{no relevant item above } i)

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> round(float(mrr_loss(jnp.array([2.0, 1.0]), jnp.array([0, 1]), ranker=jaxrank.approx(0.01))), 5)
      0.5
    """
    return metric_loss(scores, labels, metric=metrics.reciprocal_rank, ranker=ranker, where=where, k=k, **metric_kwargs)


def ap_loss(scores, labels, *, k=None, where=None, ranker=_DEFAULT_RANKER, **metric_kwargs) -> jax.Array:
    """Smooth average-precision loss: ``1 - average_precision(...)`` with a smooth ranker.

    .. math:: \\ell = 1 - \\frac{1}{R} \\sum_{i: y_i \\ge rel}
        \\frac{1 + \\#\\{\\text{relevant above } i\\}}{r_i}

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> round(float(ap_loss(jnp.array([2.0, 1.0, 0.0]), jnp.array([1, 0, 1]), ranker=jaxrank.approx(0.01))), 5)
      0.16667
    """
    return metric_loss(
        scores, labels, metric=metrics.average_precision, ranker=ranker, where=where, k=k, **metric_kwargs
    )
