"""torchmetrics' retrieval family (1.9), value for value, over jaxrank's core.

Functions take one list (inputs of any shape are flattened, as torchmetrics does); classes
take flat ``preds, target, indexes`` over several ``update`` calls and group them by query
with :func:`jaxrank.group_by_query`, then compute every query at once, under ``jit``.

torchmetrics' conventions, kept here (``docs/compat/torchmetrics.md`` sets them beside
trec_eval's):

* ``retrieval_average_precision``, ``retrieval_reciprocal_rank``, ``retrieval_precision``
  and ``retrieval_recall`` count an item as relevant only when its score is positive.
* Average precision divides by the relevant items within the top ``k``, not by all of them.
* nDCG averages over tied scores (:func:`jaxrank.hard` ``"expected"``) with linear gain;
  the other metrics order tied scores as torch's sort happens to, which is unspecified:
  here ties keep input order (``hard("stable")``).
* A query without a relevant item (fall-out: without a non-relevant one) is decided by
  ``empty_target_action``; ``"median"`` is the lower median, as ``torch.median``.
* A callable ``aggregation`` is called as torchmetrics calls it, ``(values, dim=None)``
  (``dim=0`` for a curve), with a CPU torch tensor when the updates were torch tensors and a
  JAX array otherwise; ``compute`` returns a JAX array either way.
* The classes pickle and ``copy.deepcopy`` with their state (checkpoints).

In the formulas, :math:`s_i`, :math:`y_i` and :math:`r_i` are item :math:`i`'s score, target
and rank (1 = first).

Example:
  >>> from jaxrank.compat import torchmetrics as tm
  >>> metric = tm.RetrievalMAP()
  >>> metric.update([0.2, 0.3, 0.5, 0.1], [0, 1, 0, 1], indexes=[0, 0, 1, 1])
  >>> float(metric.compute())  # query 0: AP 1; query 1: AP 1/2
  0.75
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import metrics
from jaxrank.compat import _retrieval_metric as _base
from jaxrank.compat._common import EXPECTED, STABLE, average_precision_over_retrieved
from jaxrank.compat._retrieval_metric import Aggregation

Array = jax.Array


# Per-list kernels over [..., n] with a mask ------------------------------------------------
def _scored(preds: Array, target: Array) -> Array:
    # torchmetrics zeroes the target of items scored <= 0 in AP, RR, precision and recall.
    return jnp.where(preds > 0, target, 0)


def _average_precision(preds, target, where, top_k):
    return average_precision_over_retrieved(preds, _scored(preds, target), k=top_k, where=where, ranker=STABLE)


def _reciprocal_rank(preds, target, where, top_k):
    return metrics.reciprocal_rank(preds, _scored(preds, target), k=top_k, where=where, ranker=STABLE)


def _normalized_dcg(preds, target, where, top_k):
    return metrics.ndcg(preds, target, k=top_k, where=where, ranker=EXPECTED, gain=lambda y: y)


def _precision(preds, target, where, top_k, adaptive_k):
    return metrics.precision(preds, _scored(preds, target), k=top_k, where=where, adaptive=adaptive_k, ranker=STABLE)


def _recall(preds, target, where, top_k):
    # The denominator counts every relevant item, positive score or not: the judgments.
    return metrics.recall(
        preds, _scored(preds, target), k=top_k, where=where, ranker=STABLE, judgments=target, judgments_where=where
    )


def _hit_rate(preds, target, where, top_k):
    return metrics.success(preds, target, k=top_k, where=where, ranker=STABLE)


def _fall_out(preds, target, where, top_k):
    return metrics.fallout(preds, target, k=top_k, where=where, ranker=STABLE)


def _r_precision(preds, target, where):
    return metrics.r_precision(preds, target, where=where, ranker=STABLE)


def _auroc(preds, target, where, top_k, max_fpr):
    return metrics.roc_auc(preds, target, k=top_k, max_fpr=max_fpr, where=where)


def _precision_recall_curve(preds, target, where, max_k, adaptive_k):
    return metrics.precision_recall_curve(preds, target, max_k=max_k, adaptive_k=adaptive_k, where=where, ranker=STABLE)


# Functional interface ------------------------------------------------------------------------
def retrieval_average_precision(preds, target, top_k: Optional[int] = None) -> Array:
    """Average precision of one list: the mean of :math:`P@r_i` over the relevant items
    :math:`i` (score > 0) within the top ``top_k``; 0 without one.

    .. math:: AP@k = \\frac{1}{|H|} \\sum_{i \\in H} P@r_i, \\quad H = \\{i : y_i = 1, s_i > 0, r_i \\le k\\}

    Shapes: ``preds, target [...]`` (one list, flattened) ``-> []``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_average_precision
      >>> round(float(retrieval_average_precision([0.2, 0.3, 0.5], [True, False, True])), 4)
      0.8333
    """
    return _base.functional(_average_precision, preds, target, top_k=top_k)


def retrieval_reciprocal_rank(preds, target, top_k: Optional[int] = None) -> Array:
    """:math:`1 / r` of the first relevant item (score > 0) within the top ``top_k``, else 0.

    .. math:: RR@k = \\max(\\{1 / r_i : y_i = 1, s_i > 0, r_i \\le k\\} \\cup \\{0\\})

    Shapes: ``preds, target [...]`` (one list, flattened) ``-> []``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_reciprocal_rank
      >>> [float(retrieval_reciprocal_rank([0.2, 0.3, 0.5], [False, True, False], top_k=k)) for k in (1, 2, 3)]
      [0.0, 0.5, 0.5]
    """
    return _base.functional(_reciprocal_rank, preds, target, top_k=top_k)


def retrieval_normalized_dcg(preds, target, top_k: Optional[int] = None) -> Array:
    """nDCG at ``top_k`` with linear gain :math:`G(y) = y` (graded targets allowed), tied
    scores averaged; 0 when the ideal DCG is 0.

    .. math:: nDCG@k = \\frac{\\sum_{i: r_i \\le k} y_i / \\log_2(1 + r_i)}{\\max_\\pi \\sum_{i: \\pi_i \\le k} y_i / \\log_2(1 + \\pi_i)}

    Shapes: ``preds, target [...]`` (one list, flattened) ``-> []``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_normalized_dcg
      >>> round(float(retrieval_normalized_dcg([0.1, 0.2, 0.3, 4.0, 70.0], [10, 0, 0, 1, 5])), 4)
      0.6957
    """
    return _base.functional(_normalized_dcg, preds, target, allow_non_binary=True, top_k=top_k)


def retrieval_precision(preds, target, top_k: Optional[int] = None, adaptive_k: bool = False) -> Array:
    """Relevant items (score > 0) within the top ``top_k``, over ``top_k`` (over the list
    length when ``top_k`` is None, or with ``adaptive_k`` when ``top_k`` exceeds it).

    .. math:: P@k = \\frac{1}{k} \\sum_i [y_i = 1] [s_i > 0] [r_i \\le k]

    Shapes: ``preds, target [...]`` (one list, flattened) ``-> []``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_precision
      >>> float(retrieval_precision([0.2, 0.3, 0.5], [True, False, True], top_k=2))
      0.5
    """
    return _base.functional(_precision, preds, target, top_k=top_k, adaptive_k=adaptive_k)


def retrieval_recall(preds, target, top_k: Optional[int] = None) -> Array:
    """Relevant items (score > 0) within the top ``top_k``, over all relevant items; 0 without one.

    .. math:: R@k = \\frac{\\sum_i [y_i = 1] [s_i > 0] [r_i \\le k]}{\\sum_i [y_i = 1]}

    Shapes: ``preds, target [...]`` (one list, flattened) ``-> []``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_recall
      >>> float(retrieval_recall([0.2, 0.3, -0.5], [True, False, True]))  # the last one scores <= 0
      0.5
    """
    return _base.functional(_recall, preds, target, top_k=top_k)


def retrieval_hit_rate(preds, target, top_k: Optional[int] = None) -> Array:
    """1 when a relevant item is within the top ``top_k``, else 0.

    .. math:: HR@k = [\\exists i : y_i = 1, r_i \\le k]

    Shapes: ``preds, target [...]`` (one list, flattened) ``-> []``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_hit_rate
      >>> [float(retrieval_hit_rate([0.2, 0.3, 0.5], [True, False, False], top_k=k)) for k in (2, 3)]
      [0.0, 1.0]
    """
    return _base.functional(_hit_rate, preds, target, top_k=top_k)


def retrieval_fall_out(preds, target, top_k: Optional[int] = None) -> Array:
    """Non-relevant items within the top ``top_k``, over all non-relevant items; 0 without one.

    .. math:: FO@k = \\frac{\\sum_i [y_i = 0] [r_i \\le k]}{\\sum_i [y_i = 0]}

    Shapes: ``preds, target [...]`` (one list, flattened) ``-> []``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_fall_out
      >>> float(retrieval_fall_out([0.2, 0.3, 0.5, 0.1], [True, False, True, False], top_k=2))
      0.5
    """
    return _base.functional(_fall_out, preds, target, top_k=top_k)


def retrieval_r_precision(preds, target) -> Array:
    """Precision at :math:`R`, the number of relevant items; 0 without one.

    .. math:: RP = \\frac{1}{R} \\sum_i y_i [r_i \\le R], \\quad R = \\sum_i y_i

    Shapes: ``preds, target [...]`` (one list, flattened) ``-> []``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_r_precision
      >>> float(retrieval_r_precision([0.2, 0.3, 0.5], [True, False, True]))
      0.5
    """
    return _base.functional(_r_precision, preds, target)


def retrieval_auroc(preds, target, top_k: Optional[int] = None, max_fpr: Optional[float] = None) -> Array:
    """ROC AUC of the top ``top_k`` items (tied scores count one half; McClish-corrected
    partial AUC up to ``max_fpr``); 0 unless they hold a relevant and a non-relevant item.

    .. math:: AUC = \\frac{1}{P N} \\sum_{i: y_i = 1} \\sum_{j: y_j = 0} ([s_i > s_j] + \\tfrac12 [s_i = s_j])

    over the top ``top_k`` items, :math:`P` and :math:`N` their relevant and non-relevant counts.
    Shapes: ``preds, target [...]`` (one list, flattened) ``-> []``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_auroc
      >>> float(retrieval_auroc([0.2, 0.3, 0.5, 0.1], [False, False, True, True]))
      0.5
    """
    return _base.functional(_auroc, preds, target, top_k=top_k, max_fpr=max_fpr)


def retrieval_precision_recall_curve(
    preds, target, max_k: Optional[int] = None, adaptive_k: bool = False
) -> tuple[Array, Array, Array]:
    """Precision and recall at every ``k = 1..max_k`` (``max_k`` defaults to the list
    length), and those ``k``; with ``adaptive_k``, ``k`` stops at the list length.

    .. math:: P@k = \\frac{1}{k} \\sum_i y_i [r_i \\le k], \\quad R@k = \\frac{\\sum_i y_i [r_i \\le k]}{\\sum_i y_i}

    Shapes: ``preds, target [...]`` (one list, flattened) ``-> ([max_k], [max_k], [max_k])``.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_precision_recall_curve
      >>> p, r, k = retrieval_precision_recall_curve([0.2, 0.3, 0.5], [True, False, True], max_k=2)
      >>> p.tolist(), r.tolist(), k.tolist()
      ([1.0, 0.5], [0.5, 0.5], [1, 2])
    """
    preds, target = _base.functional_inputs(preds, target)
    adaptive_k = _base.check_adaptive(adaptive_k)
    max_k = _base.check_top_k(max_k, "max_k") or preds.shape[-1]
    curve = _base.compiled(_precision_recall_curve)
    precision, recall, top_k = curve(preds, target, None, max_k=max_k, adaptive_k=adaptive_k)
    return precision, recall, jnp.minimum(top_k, preds.shape[-1]) if adaptive_k else top_k


# Module interface ----------------------------------------------------------------------------
class RetrievalMAP(_base.TopK):
    """Mean over queries of :func:`retrieval_average_precision`."""

    _fn = staticmethod(_average_precision)


class RetrievalMRR(_base.TopK):
    """Mean over queries of :func:`retrieval_reciprocal_rank`."""

    _fn = staticmethod(_reciprocal_rank)


class RetrievalNormalizedDCG(_base.TopK):
    """Mean over queries of :func:`retrieval_normalized_dcg` (graded targets allowed)."""

    _fn = staticmethod(_normalized_dcg)
    _allow_non_binary = True


class RetrievalRecall(_base.TopK):
    """Mean over queries of :func:`retrieval_recall`."""

    _fn = staticmethod(_recall)


class RetrievalHitRate(_base.TopK):
    """Mean over queries of :func:`retrieval_hit_rate`."""

    _fn = staticmethod(_hit_rate)


class RetrievalFallOut(_base.TopK):
    """Mean over queries of :func:`retrieval_fall_out`; a query without a non-relevant
    item is the empty one, and counts 1 by default (``empty_target_action="pos"``)."""

    _fn = staticmethod(_fall_out)
    _empty_message = "`compute` method was provided with a query with no negative target."

    def __init__(
        self,
        empty_target_action: str = "pos",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        aggregation: Aggregation = "mean",
    ) -> None:
        super().__init__(empty_target_action, ignore_index, top_k, aggregation)

    def _empty(self, target, where):
        return jnp.sum(jnp.where(where, 1 - target, 0), axis=-1) == 0


class RetrievalPrecision(_base.RetrievalMetric):
    """Mean over queries of :func:`retrieval_precision` (``top_k`` and ``adaptive_k`` as there)."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        adaptive_k: bool = False,
        aggregation: Aggregation = "mean",
    ) -> None:
        super().__init__(empty_target_action, ignore_index, aggregation)
        self._bind(_precision, top_k=top_k, adaptive_k=adaptive_k)


class RetrievalRPrecision(_base.RetrievalMetric):
    """Mean over queries of :func:`retrieval_r_precision`."""

    def __init__(
        self, empty_target_action: str = "neg", ignore_index: Optional[int] = None, aggregation: Aggregation = "mean"
    ) -> None:
        super().__init__(empty_target_action, ignore_index, aggregation)
        self._bind(_r_precision)


class RetrievalAUROC(_base.RetrievalMetric):
    """Mean over queries of :func:`retrieval_auroc`: the ROC AUC of each query's top
    ``top_k`` items, partial up to ``max_fpr``."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        max_fpr: Optional[float] = None,
        aggregation: Aggregation = "mean",
    ) -> None:
        super().__init__(empty_target_action, ignore_index, aggregation)
        self._bind(_auroc, top_k=top_k, max_fpr=max_fpr)


class RetrievalPrecisionRecallCurve(_base.RetrievalMetric):
    """Precision and recall at ``k = 1..max_k``, aggregated over queries per ``k``
    (``max_k`` defaults to the largest query); ``compute`` returns ``(precision, recall, top_k)``."""

    def __init__(
        self,
        max_k: Optional[int] = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        aggregation: Aggregation = "mean",
    ) -> None:
        super().__init__(empty_target_action, ignore_index, aggregation)
        self.max_k = _base.check_top_k(max_k, "max_k")
        self._bind(_precision_recall_curve, adaptive_k=adaptive_k)

    def compute(self) -> tuple[Array, Array, Array]:
        g = self._grouped()
        max_k = self.max_k or g.preds.shape[-1]
        precision, recall, top_k = self._kernel(g.preds, g.target, g.where, max_k=max_k)
        empty = self._empty(g.target, g.where)
        return self._aggregate(precision, empty), self._aggregate(recall, empty), top_k

    def plot(self, curve=None, ax=None):
        """Plot the curve (``compute()``'s unless given) as torchmetrics does: precision on
        x, recall on y. Needs matplotlib (the ``plot`` extra). Returns ``(figure, axes)``."""
        curve = curve or self.compute()
        fig, ax = _base.axes(ax)
        ax.plot(np.asarray(curve[0]), np.asarray(curve[1]), linestyle="-", linewidth=2)
        ax.set_xlabel("Precision")
        ax.set_ylabel("Recall")
        ax.grid(True)
        ax.set_title(type(self).__name__)
        return fig, ax


class RetrievalRecallAtFixedPrecision(RetrievalPrecisionRecallCurve):
    """The largest recall of the aggregated curve whose precision is at least
    ``min_precision``, and its ``k`` (``(0, max_k)`` when there is none)."""

    def __init__(
        self,
        min_precision: float = 0.0,
        max_k: Optional[int] = None,
        adaptive_k: bool = False,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        aggregation: Aggregation = "mean",
    ) -> None:
        super().__init__(max_k, adaptive_k, empty_target_action, ignore_index, aggregation)
        if not (isinstance(min_precision, float) and 0.0 <= min_precision <= 1.0):
            raise ValueError("`min_precision` has to be a positive float between 0 and 1")
        self.min_precision = min_precision

    def compute(self) -> tuple[Array, Array]:  # type: ignore[override]
        precision, recall, top_k = super().compute()
        return metrics.recall_at_precision_from_curve(precision, recall, top_k, self.min_precision)

    def plot(self, val=None, ax=None):
        """Plot the recall (``compute()``'s unless given; a sequence of values gives a line
        over steps), as torchmetrics plots a scalar metric. Returns ``(figure, axes)``."""
        val = self.compute()[0] if val is None else val
        values = np.atleast_1d(np.asarray([np.asarray(v) for v in val] if isinstance(val, (list, tuple)) else val))
        fig, ax = _base.axes(ax)
        ax.plot(np.arange(values.size), values, marker="o")
        ax.set_ylabel("Recall")
        ax.set_title(type(self).__name__)
        return fig, ax
