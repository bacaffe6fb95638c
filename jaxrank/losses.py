"""Ranking losses in the shape of optax's: one value per list, masks, no reduction.

Every function takes ``scores[..., n]`` and ``labels[..., n]`` (graded
relevance), an optional validity mask ``where[..., n]``, and returns the loss
of each list, shape ``[...]``; averaging over lists (or weighting them) is left
to the caller, e.g. ``jnp.mean(ndcg_loss(scores, labels, where=mask))``.
Masked items never contribute and get zero gradient; a list without valid
items has loss 0 (or 1 for the metric losses, whose metric is 0 there).

*Metric losses* are ``1 - metric`` with a smooth ranker from
:mod:`jaxrank.ranking.smooth`: the same metric code as evaluation, relaxed by the ranker.
*Baselines* are the classic surrogate losses, written directly.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks, metrics
from jaxrank.ranking._backend import argsort_descending, inverse_permutation, sort_key
from jaxrank.ranking.pairwise import approx
from jaxrank.ranking.smooth import _masked_logsumexp

__all__ = [
    "ap_loss",
    "lambda_loss",
    "listmle",
    "metric_loss",
    "mrr_loss",
    "ndcg_loss",
    "pairwise_logistic",
    "softmax_cross_entropy",
]

_DEFAULT_RANKER = approx()


def _prepare(scores, labels, where):
    scores = _checks.scores(scores)
    labels = _checks.same_shape(labels, scores.shape, "labels")
    valid = _checks.mask(where, scores.shape, broadcast=True)
    dtype = jnp.promote_types(jnp.promote_types(scores.dtype, jnp.float32), jnp.result_type(float))
    s = jnp.where(valid, scores.astype(dtype), 0)
    y = jnp.where(valid, labels.astype(dtype), 0)
    return s, y, valid


# Metric losses ------------------------------------------------------------------------
def metric_loss(
    scores, labels, *, metric: Callable = metrics.ndcg, ranker=_DEFAULT_RANKER, where=None, **metric_kwargs
) -> jax.Array:
    """``1 - metric(scores, labels, ranker=ranker, ...)`` per list.

    .. math:: \\ell(s, y) = 1 - M_{\\text{ranker}}(s, y)

    ``metric`` is any metric of :mod:`jaxrank.metrics` (or a callable with its
    signature); ``ranker`` a smooth ranker (default ``jaxrank.approx()``);
    ``metric_kwargs`` go to the metric (``k``, ``gain``, ``rel``, ...).
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
    """
    return 1 - metric(scores, labels, where=where, ranker=ranker, **metric_kwargs)


def ndcg_loss(scores, labels, *, k=None, where=None, ranker=_DEFAULT_RANKER, **metric_kwargs) -> jax.Array:
    """Smooth nDCG loss: ``1 - ndcg(scores, labels, k=k, ranker=ranker)`` (ApproxNDCG
    with the default ``approx()`` ranker, Qin et al. 2010).

    .. math:: \\ell = 1 - \\frac{1}{IDCG@k} \\sum_i \\frac{G(y_i)\\, \\sigma((k + \\frac12 - r_i)/\\tau)}{\\log_2(1 + r_i)}

    (the cutoff factor only with ``k``). A list without positive labels has
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


# Baselines ---------------------------------------------------------------------------------
def softmax_cross_entropy(scores, labels, *, where=None) -> jax.Array:
    """ListNet-style softmax cross-entropy against the label distribution.

    .. math:: \\ell = -\\sum_i \\frac{y_i}{\\sum_j y_j} \\log \\frac{e^{s_i}}{\\sum_j e^{s_j}}

    over valid items, with labels clipped at 0; 0 when no label is positive.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(softmax_cross_entropy(jnp.array([0.0, 0.0]), jnp.array([1, 0]))), 5)  # log 2
      0.69315
    """
    s, y, valid = _prepare(scores, labels, where)
    y = jnp.maximum(y, 0)
    total = jnp.sum(y, axis=-1, keepdims=True)
    p = y / jnp.where(total > 0, total, 1)
    log_softmax = s - _masked_logsumexp(s, valid, axis=-1)
    return -jnp.sum(jnp.where(valid, p * log_softmax, 0), axis=-1)


def _pairs(y, valid):
    """``[..., n, n]`` mask of the valid pairs ``(i, j)`` with ``y_i > y_j``."""
    return (y[..., :, None] > y[..., None, :]) & valid[..., :, None] & valid[..., None, :]


def pairwise_logistic(scores, labels, *, where=None) -> jax.Array:
    """RankNet pairwise logistic loss (Burges et al., 2005), summed over pairs.

    .. math:: \\ell = \\sum_{i, j:\\ y_i > y_j} \\log\\big(1 + e^{-(s_i - s_j)}\\big)

    O(n^2) per list.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(pairwise_logistic(jnp.array([1.0, 0.0]), jnp.array([0, 1]))), 5)  # log(1 + e)
      1.31326
    """
    s, y, valid = _prepare(scores, labels, where)
    diff = s[..., :, None] - s[..., None, :]
    return jnp.sum(jnp.where(_pairs(y, valid), jax.nn.softplus(-diff), 0), axis=(-2, -1))


def lambda_loss(scores, labels, *, where=None, mu: float = 10.0, gain: str = "exp") -> jax.Array:
    """LambdaLoss with the NDCG-Loss2++ weights (Wang et al., 2018).

    .. math::
        \\ell = -\\sum_{i, j:\\ y_i > y_j} (\\rho_{ij} + \\mu\\, \\delta_{ij})\\,
            |G_i - G_j| \\log_2 \\sigma(s_i - s_j), \\\\
        \\rho_{ij} = \\Big|\\frac{1}{D_{r_i}} - \\frac{1}{D_{r_j}}\\Big|, \\quad
        \\delta_{ij} = \\Big|\\frac{1}{D_{|r_i - r_j|}} - \\frac{1}{D_{|r_i - r_j| + 1}}\\Big|,

    with :math:`D_r = \\log_2(1 + r)`, :math:`r_i` the current rank of item
    ``i`` (by score, ties by index, no gradient), and
    :math:`G_i = (2^{y_i} - 1) / IDCG` (``gain="exp"``) or :math:`y_i / IDCG`
    (``gain="linear"``), IDCG the ideal DCG of the list. :math:`\\rho` is the
    LambdaRank :math:`|\\Delta NDCG|` weight, :math:`\\delta` the NDCG-Loss2
    weight; ``mu`` balances them. 0 when no label is positive. O(n^2) per list.

    Example:
      >>> import jax.numpy as jnp
      >>> # r = (1, 2), G = (1, 0), rho = delta = 1 - 1/log2(3):
      >>> # loss = 2 (1 - 1/log2 3) log2(1 + e^-1)
      >>> round(float(lambda_loss(jnp.array([1.0, 0.0]), jnp.array([1, 0]), mu=1.0)), 4)
      0.3336
    """
    if gain not in ("exp", "linear"):
        raise ValueError(f"gain must be 'exp' or 'linear', got {gain!r}")
    s, y, valid = _prepare(scores, labels, where)
    y = jnp.maximum(y, 0)
    g = jnp.exp2(y) - 1 if gain == "exp" else y
    g = jnp.where(valid, g, 0)
    # positions by score, ties in input order (the ranking primitive, no gradient)
    order = argsort_descending(sort_key(lax.stop_gradient(s), valid))
    ranks = (inverse_permutation(order) + 1).astype(s.dtype)
    idcg = metrics.dcg(g, g, where=valid)[..., None]
    g = g / jnp.where(idcg > 0, idcg, 1)

    def inv_d(r):
        return 1 / jnp.log2(1 + r)

    ri, rj = ranks[..., :, None], ranks[..., None, :]
    gap = jnp.maximum(jnp.abs(ri - rj), 1)
    rho = jnp.abs(inv_d(ri) - inv_d(rj))
    delta = jnp.abs(inv_d(gap) - inv_d(gap + 1))
    weight = (rho + mu * delta) * jnp.abs(g[..., :, None] - g[..., None, :])
    diff = s[..., :, None] - s[..., None, :]
    terms = weight * jax.nn.softplus(-diff) / jnp.log(2.0)
    return jnp.sum(jnp.where(_pairs(y, valid), terms, 0), axis=(-2, -1))


def listmle(scores, labels, *, where=None) -> jax.Array:
    """ListMLE (Xia et al., 2008): negative Plackett-Luce log-likelihood of the
    order of the labels.

    .. math:: \\ell = \\sum_{p=1}^{m} \\Big(\\log \\sum_{q \\ge p} e^{s_{\\pi(q)}} - s_{\\pi(p)}\\Big)

    :math:`\\pi` sorts the ``m`` valid items by label, descending; equal labels
    keep their input order.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(listmle(jnp.array([0.0, 0.0]), jnp.array([1, 0]))), 5)  # log 2 + log 1
      0.69315
    """
    s, y, valid = _prepare(scores, labels, where)
    n = s.shape[-1]
    order = argsort_descending(sort_key(y, valid))
    s_sorted = jnp.take_along_axis(s, order, axis=-1)
    inside = jnp.arange(n) < jnp.sum(valid, axis=-1, keepdims=True)
    # Items past the valid prefix stand at the lowest finite value: they add
    # exp(-huge) = 0 to every suffix sum that contains a valid item.
    low = jnp.finfo(s.dtype).min / 2
    x = jnp.where(inside, s_sorted, low)
    suffix = lax.cumlogsumexp(x, axis=x.ndim - 1, reverse=True)
    return jnp.sum(jnp.where(inside, suffix - x, 0), axis=-1)
