"""Curves over the ranking: precision and recall at every cutoff, recall at a fixed
precision, ROC AUC (torchmetrics' retrieval family, scikit-learn's ``roc_auc_score``)."""

from __future__ import annotations

from typing import Optional

import jax.numpy as jnp

from jaxrank import _checks
from jaxrank.metrics import common as _c
from jaxrank.metrics.common import Array
from jaxrank.metrics.segments import segmented
from jaxrank.ranking import HardRanker, HardRanks, hard
from jaxrank.ranking.backend import cumsum, row_sum


def _curve(r, g: Array, depth: int) -> Array:
    """``sum_i g_i [r_i <= p]`` at every position ``p = 1..depth``, ``[..., depth]``."""
    positions = jnp.arange(1, depth + 1, dtype=g.dtype)
    return r.prefix_sum(g, jnp.broadcast_to(positions, g.shape[:-1] + (depth,)))


def threshold_precision_sum(scores, where, relevant, ranker, ks) -> Array:
    """``sum`` over relevant items of the precision at the end of their tie group (cut
    at each ``k``), ``[..., C]``: scikit-learn's thresholds at the distinct scores."""
    full = isinstance(ranker, HardRanks) and ranker.start is not None and ranker.depth == ranker.size
    if not full and not isinstance(ranker, HardRanker):
        raise ValueError(f"threshold_ties needs the exact ranker (jaxrank.hard()), got {ranker!r}")
    r = ranker if full else hard("expected")(scores, where)
    n = scores.shape[-1]
    cuts = jnp.asarray((n,) if ks is None else ks, jnp.int32)
    hits = r.in_rank_order(relevant)
    last = jnp.minimum(r.end[..., :, None], cuts)  # [..., n, C], 1-based
    run = jnp.broadcast_to(cumsum(hits)[..., None], last.shape)
    precision = jnp.take_along_axis(run, last - 1, axis=-2) / last
    inside = (jnp.arange(n)[:, None] < cuts).astype(hits.dtype)
    return jnp.sum(hits[..., None] * inside * precision, axis=-2)


@segmented()
def precision_recall_curve(
    scores,
    labels,
    *,
    max_k: Optional[int] = None,
    adaptive_k: bool = False,
    where=None,
    rel=1,
    ranker=_c.DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
) -> tuple[Array, Array, Array]:
    """Precision and recall at every cutoff ``k = 1..max_k`` (torchmetrics'
    ``retrieval_precision_recall_curve``).

    .. math:: P@k = \\frac{1}{k} \\sum_i [y_i \\ge rel]\\,[r_i \\le k], \\qquad
        R@k = \\frac{1}{R} \\sum_i [y_i \\ge rel]\\,[r_i \\le k]

    ``max_k`` defaults to the padded list length ``n``; cutoffs past a list's length keep
    its last count. ``adaptive_k`` divides precision by :math:`\\min(k, n_{valid})`
    (torchmetrics' ``adaptive_k``). :math:`R` counts the relevant documents of
    ``judgments`` when given, else of the list; a list without relevant documents gives
    zeros (torchmetrics). One ranking pass gives every cutoff.

    Returns:
      ``(precision[..., K], recall[..., K], top_k[K])`` with ``K = max_k`` and
      ``top_k = 1..K`` (torchmetrics' adaptive ``top_k`` of one list is
      ``minimum(top_k, n_valid)``).

    Example:
      >>> import jaxrank
      >>> p, r, top_k = jaxrank.precision_recall_curve([0.2, 0.3, 0.5], [1, 0, 1], max_k=2)
      >>> [float(v) for v in p], [float(v) for v in r], [int(v) for v in top_k]
      ([1.0, 0.5], [0.5, 0.5], [1, 2])
    """
    return _curves(scores, labels, max_k, adaptive_k, where, rel, ranker, judgments, judgments_where)


def _curves(scores, labels, max_k, adaptive_k, where, rel, ranker, judgments, judgments_where):
    max_k = None if max_k is None else _checks.positive_int(max_k, "max_k")
    adaptive_k = _checks.boolean(adaptive_k, "adaptive_k")
    # ranks of the first max_k positions (all of them without max_k)
    p = _c.prepare(scores, labels, max_k, where, ranker, judgments, judgments_where)
    n = p.scores.shape[-1]
    big_k = n if max_k is None else max_k
    depth = min(big_k, n)
    hits = _curve(p.ranks, p.relevant(rel), depth)
    if big_k > depth:  # cutoffs past the padded length keep the last count
        hits = jnp.concatenate([hits, jnp.repeat(hits[..., -1:], big_k - depth, axis=-1)], axis=-1)
    top_k = jnp.arange(1, big_k + 1)
    retrieved = top_k.astype(hits.dtype)
    if adaptive_k:
        retrieved = jnp.minimum(retrieved, row_sum(p.valid, keepdims=True).astype(hits.dtype))
    precision = _c.safe_divide(hits, jnp.broadcast_to(retrieved, hits.shape))
    recall = _c.safe_divide(hits, p.num_relevant(rel))
    return precision, recall, top_k


def recall_at_precision_from_curve(precision, recall, top_k, min_precision: float) -> tuple[Array, Array]:
    """The largest recall whose precision is at least ``min_precision``, and its ``k``,
    from curves ``[..., K]`` (e.g. means over queries of :func:`precision_recall_curve`).

    Among equal recalls the largest ``k`` wins; without such a point, or when the best
    recall is 0, the recall is 0 and ``k`` is ``K`` (torchmetrics'
    ``RetrievalRecallAtFixedPrecision``).

    Example:
      >>> import jax.numpy as jnp
      >>> p, r = jnp.array([1.0, 0.5, 0.67, 0.5]), jnp.array([0.5, 0.5, 1.0, 1.0])
      >>> best, k = recall_at_precision_from_curve(p, r, jnp.arange(1, 5), 0.6)
      >>> float(best), int(k)
      (1.0, 3)
    """
    min_precision = _checks.in_range(min_precision, "min_precision", 0.0, 1.0, closed_low=True, closed_high=True)
    precision, recall, top_k = jnp.asarray(precision), jnp.asarray(recall), jnp.asarray(top_k)
    big_k = top_k.shape[-1]
    ok = precision >= min_precision
    best = jnp.max(jnp.where(ok, recall, -jnp.inf), axis=-1, keepdims=True)
    k = jnp.max(jnp.where(ok & (recall == best), top_k, 0), axis=-1)
    best = best[..., 0]
    found = jnp.isfinite(best) & (best != 0)
    return jnp.where(found, best, 0.0), jnp.where(found, k, big_k)


@segmented()
def recall_at_fixed_precision(
    scores,
    labels,
    *,
    min_precision: float,
    max_k: Optional[int] = None,
    adaptive_k: bool = False,
    where=None,
    rel=1,
    ranker=_c.DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
) -> tuple[Array, Array]:
    """Per list, the largest recall at a cutoff ``k <= max_k`` whose precision is at
    least ``min_precision``, and that ``k``.

    .. math:: \\max \\{R@k : P@k \\ge p_{min}\\}

    The curve is :func:`precision_recall_curve`'s (same keywords); ties between
    recalls go to the largest ``k``, and a list with no such cutoff (or best recall 0)
    gives ``(0, max_k)``, as torchmetrics' ``RetrievalRecallAtFixedPrecision``. For
    torchmetrics' value over many queries (the best point of the mean curve), average
    the curves and call :func:`recall_at_precision_from_curve`.

    Returns:
      ``(recall[...], k[...])``.

    Example:
      >>> import jaxrank
      >>> scores, labels = [0.4, 0.01, 0.5, 0.6], [1, 0, 0, 1]
      >>> recall, k = jaxrank.recall_at_fixed_precision(scores, labels, min_precision=0.6)
      >>> float(recall), int(k)
      (1.0, 3)
    """
    curves = _curves(scores, labels, max_k, adaptive_k, where, rel, ranker, judgments, judgments_where)
    return recall_at_precision_from_curve(*curves, min_precision)


@segmented()
def roc_auc(
    scores,
    labels,
    *,
    k: Optional[int] = None,
    max_fpr: Optional[float] = None,
    where=None,
    rel=1,
    ranker=_c.EXPECTED_RANKER,
    judgments=None,
    judgments_where=None,
) -> Array:
    """Area under the ROC curve of each list: the chance that a relevant item is ranked
    above a non-relevant one.

    .. math:: AUC = \\frac{1}{P N} \\sum_{i: y_i \\ge rel} \\sum_{j: y_j < rel}
        \\big([s_i > s_j] + \\tfrac12 [s_i = s_j]\\big)

    The curve is traced at every position of the ranking and integrated by trapezoids.
    The default ranker, ``hard("expected")``, counts tied pairs one half
    (scikit-learn's ``roc_auc_score``); ``hard()`` would break ties by index. ``k``
    keeps the top ``k`` items only (torchmetrics' ``retrieval_auroc(top_k=)``).
    ``max_fpr`` in ``(0, 1]`` integrates up to that false positive rate (interpolating
    the curve there) and applies McClish's correction,
    :math:`\\frac12 (1 + \\frac{A - m^2/2}{m - m^2/2})`, as scikit-learn and torchmetrics.
    A list without a relevant or a non-relevant item gives 0 (torchmetrics; scikit-learn
    raises). ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.roc_auc([0.9, 0.5, 0.5, 0.1], [1, 1, 0, 0]))  # 3 pairs right, one tied
      0.875
    """
    k = None if k is None else _checks.positive_int(k, "k")
    if max_fpr is not None:
        max_fpr = _checks.in_range(max_fpr, "max_fpr", 0.0, 1.0, closed_high=True)
    # ranks of the first k positions (all of them without k)
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    n = p.scores.shape[-1]
    depth = n if k is None else min(k, n)
    relevant = p.relevant(rel)
    zero = jnp.zeros(p.scores.shape[:-1] + (1,), relevant.dtype)
    tp = jnp.concatenate([zero, _curve(p.ranks, relevant, depth)], axis=-1)
    fp = jnp.concatenate([zero, _curve(p.ranks, p.valid.astype(relevant.dtype) - relevant, depth)], axis=-1)
    x = _c.safe_divide(fp, fp[..., -1])
    y = _c.safe_divide(tp, tp[..., -1])
    m = 1.0 if max_fpr is None else max_fpr
    x0, x1, y0, y1 = x[..., :-1], x[..., 1:], y[..., :-1], y[..., 1:]
    x0c, x1c = jnp.minimum(x0, m), jnp.minimum(x1, m)
    run = x1 - x0
    y1c = y0 + (y1 - y0) * jnp.where(run > 0, (x1c - x0) / jnp.where(run > 0, run, 1), 0.0)
    area = jnp.sum((x1c - x0c) * (y0 + y1c) / 2, axis=-1)
    if max_fpr is not None and max_fpr < 1:
        low = 0.5 * m * m
        area = 0.5 * (1 + (area - low) / (m - low))
    both = (tp[..., -1] > 0) & (fp[..., -1] > 0)
    return jnp.where(both, area, 0.0)
