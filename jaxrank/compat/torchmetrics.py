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

Example:
  >>> from jaxrank.compat import torchmetrics as tm
  >>> metric = tm.RetrievalMAP()
  >>> metric.update([0.2, 0.3, 0.5, 0.1], [0, 1, 0, 1], indexes=[0, 0, 1, 1])
  >>> float(metric.compute())  # query 0: AP 1; query 1: AP 1/2
  0.75
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from functools import partial
from typing import Literal, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import metrics
from jaxrank.compat._common import average_precision_over_retrieved
from jaxrank.grouping import group_by_query
from jaxrank.ranking import hard

Array = jax.Array
Aggregation = Union[Literal["mean", "median", "min", "max"], Callable]

_STABLE = hard("stable")
_STATIC = ("top_k", "adaptive_k", "max_fpr", "max_k")
_EXPECTED = hard("expected")
_ACTIONS = ("error", "skip", "neg", "pos")


# Checks (torchmetrics' messages) -------------------------------------------------------------
def _is_int(v) -> bool:
    return isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool)


def _top_k(top_k, name: str = "top_k") -> Optional[int]:
    if top_k is not None and not (_is_int(top_k) and top_k > 0):
        raise ValueError(f"`{name}` has to be a positive integer or None")
    return None if top_k is None else int(top_k)


def _adaptive(adaptive_k) -> bool:
    if not isinstance(adaptive_k, bool):
        raise ValueError("`adaptive_k` has to be a boolean")
    return adaptive_k


def _max_fpr(max_fpr) -> Optional[float]:
    if max_fpr is not None and not (isinstance(max_fpr, float) and 0 < max_fpr <= 1):
        raise ValueError(f"Arguments `max_fpr` should be a float in range (0, 1], but got: {max_fpr}")
    return max_fpr


def _array(x) -> Array:
    return x if isinstance(x, jax.Array) else jnp.asarray(np.asarray(x))


def _types(preds: Array, target: Array, allow_non_binary: bool) -> None:
    if not (
        target.dtype == bool or jnp.issubdtype(target.dtype, jnp.integer) or jnp.issubdtype(target.dtype, jnp.floating)
    ):
        raise ValueError("`target` must be a tensor of booleans, integers or floats")
    if not jnp.issubdtype(preds.dtype, jnp.floating):
        raise ValueError("`preds` must be a tensor of floats")
    if not allow_non_binary and not isinstance(target, jax.core.Tracer):
        if target.size and (float(jnp.max(target)) > 1 or float(jnp.min(target)) < 0):
            raise ValueError("`target` must contain `binary` values")


def _functional_inputs(preds, target, allow_non_binary: bool = False) -> tuple[Array, Array]:
    preds, target = _array(preds), _array(target)
    if preds.shape != target.shape:
        raise ValueError("`preds` and `target` must be of the same shape")
    if preds.ndim == 0 or preds.size == 0:
        raise ValueError("`preds` and `target` must be non-empty and non-scalar tensors")
    _types(preds, target, allow_non_binary)
    return preds.ravel(), target.ravel()


# Per-list kernels over [..., n] with a mask ------------------------------------------------
def _scored(preds: Array, target: Array) -> Array:
    # torchmetrics zeroes the target of items scored <= 0 in AP, RR, precision and recall.
    return jnp.where(preds > 0, target, 0)


def _average_precision(preds, target, where, top_k):
    return average_precision_over_retrieved(preds, _scored(preds, target), k=top_k, where=where, ranker=_STABLE)


def _reciprocal_rank(preds, target, where, top_k):
    return metrics.reciprocal_rank(preds, _scored(preds, target), k=top_k, where=where, ranker=_STABLE)


def _normalized_dcg(preds, target, where, top_k):
    return metrics.ndcg(preds, target, k=top_k, where=where, ranker=_EXPECTED, gain=lambda y: y)


def _precision(preds, target, where, top_k, adaptive_k):
    return metrics.precision(preds, _scored(preds, target), k=top_k, where=where, adaptive=adaptive_k, ranker=_STABLE)


def _recall(preds, target, where, top_k):
    # The denominator counts every relevant item, positive score or not: the judgments.
    return metrics.recall(
        preds, _scored(preds, target), k=top_k, where=where, ranker=_STABLE, judgments=target, judgments_where=where
    )


def _hit_rate(preds, target, where, top_k):
    return metrics.success(preds, target, k=top_k, where=where, ranker=_STABLE)


def _fall_out(preds, target, where, top_k):
    return metrics.fallout(preds, target, k=top_k, where=where, ranker=_STABLE)


def _r_precision(preds, target, where):
    return metrics.r_precision(preds, target, where=where, ranker=_STABLE)


def _auroc(preds, target, where, top_k, max_fpr):
    return metrics.roc_auc(preds, target, k=top_k, max_fpr=max_fpr, where=where)


def _precision_recall_curve(preds, target, where, max_k, adaptive_k):
    return metrics.precision_recall_curve(
        preds, target, max_k=max_k, adaptive_k=adaptive_k, where=where, ranker=_STABLE
    )


@functools.cache
def _jit(kernel: Callable) -> Callable:
    """One compiled kernel per function, shape and static setting, shared by every call."""
    return jax.jit(kernel, static_argnames=[a for a in _STATIC if a in kernel.__code__.co_varnames])


# Functional interface ------------------------------------------------------------------------
def retrieval_average_precision(preds, target, top_k: Optional[int] = None) -> Array:
    """Average precision of one list: the mean of :math:`P@r_i` over the relevant items
    :math:`i` (score > 0) within the top ``top_k``; 0 without one.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_average_precision
      >>> round(float(retrieval_average_precision([0.2, 0.3, 0.5], [True, False, True])), 4)
      0.8333
    """
    preds, target = _functional_inputs(preds, target)
    return _jit(_average_precision)(preds, target, None, top_k=_top_k(top_k))


def retrieval_reciprocal_rank(preds, target, top_k: Optional[int] = None) -> Array:
    """:math:`1 / r` of the first relevant item (score > 0) within the top ``top_k``, else 0.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_reciprocal_rank
      >>> float(retrieval_reciprocal_rank([0.2, 0.3, 0.5], [False, True, False]))
      0.5
    """
    preds, target = _functional_inputs(preds, target)
    return _jit(_reciprocal_rank)(preds, target, None, top_k=_top_k(top_k))


def retrieval_normalized_dcg(preds, target, top_k: Optional[int] = None) -> Array:
    """nDCG at ``top_k`` with linear gain :math:`G(y) = y` (graded targets allowed), tied
    scores averaged; 0 when the ideal DCG is 0.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_normalized_dcg
      >>> round(float(retrieval_normalized_dcg([0.1, 0.2, 0.3, 4.0, 70.0], [10, 0, 0, 1, 5])), 4)
      0.6957
    """
    preds, target = _functional_inputs(preds, target, allow_non_binary=True)
    return _jit(_normalized_dcg)(preds, target, None, top_k=_top_k(top_k))


def retrieval_precision(preds, target, top_k: Optional[int] = None, adaptive_k: bool = False) -> Array:
    """Relevant items (score > 0) within the top ``top_k``, over ``top_k`` (over the list
    length when ``top_k`` is None, or with ``adaptive_k`` when ``top_k`` exceeds it).

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_precision
      >>> float(retrieval_precision([0.2, 0.3, 0.5], [True, False, True], top_k=2))
      0.5
    """
    preds, target = _functional_inputs(preds, target)
    return _jit(_precision)(preds, target, None, top_k=_top_k(top_k), adaptive_k=_adaptive(adaptive_k))


def retrieval_recall(preds, target, top_k: Optional[int] = None) -> Array:
    """Relevant items (score > 0) within the top ``top_k``, over all relevant items; 0 without one.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_recall
      >>> float(retrieval_recall([0.2, 0.3, 0.5], [True, False, True], top_k=2))
      0.5
    """
    preds, target = _functional_inputs(preds, target)
    return _jit(_recall)(preds, target, None, top_k=_top_k(top_k))


def retrieval_hit_rate(preds, target, top_k: Optional[int] = None) -> Array:
    """1 when a relevant item is within the top ``top_k``, else 0.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_hit_rate
      >>> float(retrieval_hit_rate([0.2, 0.3, 0.5], [True, False, False], top_k=2))
      0.0
    """
    preds, target = _functional_inputs(preds, target)
    return _jit(_hit_rate)(preds, target, None, top_k=_top_k(top_k))


def retrieval_fall_out(preds, target, top_k: Optional[int] = None) -> Array:
    """Non-relevant items within the top ``top_k``, over all non-relevant items; 0 without one.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_fall_out
      >>> float(retrieval_fall_out([0.2, 0.3, 0.5], [True, False, True], top_k=2))
      1.0
    """
    preds, target = _functional_inputs(preds, target)
    return _jit(_fall_out)(preds, target, None, top_k=_top_k(top_k))


def retrieval_r_precision(preds, target) -> Array:
    """Precision at :math:`R`, the number of relevant items; 0 without one.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_r_precision
      >>> float(retrieval_r_precision([0.2, 0.3, 0.5], [True, False, True]))
      0.5
    """
    preds, target = _functional_inputs(preds, target)
    return _jit(_r_precision)(preds, target, None)


def retrieval_auroc(preds, target, top_k: Optional[int] = None, max_fpr: Optional[float] = None) -> Array:
    """ROC AUC of the top ``top_k`` items (tied scores count one half; McClish-corrected
    partial AUC up to ``max_fpr``); 0 unless they hold a relevant and a non-relevant item.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_auroc
      >>> float(retrieval_auroc([0.2, 0.3, 0.5, 0.1], [False, False, True, True]))
      0.5
    """
    preds, target = _functional_inputs(preds, target)
    return _jit(_auroc)(preds, target, None, top_k=_top_k(top_k), max_fpr=_max_fpr(max_fpr))


def retrieval_precision_recall_curve(
    preds, target, max_k: Optional[int] = None, adaptive_k: bool = False
) -> tuple[Array, Array, Array]:
    """Precision and recall at every ``k = 1..max_k`` (``max_k`` defaults to the list
    length), and those ``k``; with ``adaptive_k``, ``k`` stops at the list length.

    Example:
      >>> from jaxrank.compat.torchmetrics import retrieval_precision_recall_curve
      >>> p, r, k = retrieval_precision_recall_curve([0.2, 0.3, 0.5], [True, False, True], max_k=2)
      >>> p.tolist(), r.tolist(), k.tolist()
      ([1.0, 0.5], [0.5, 0.5], [1, 2])
    """
    preds, target = _functional_inputs(preds, target)
    adaptive_k = _adaptive(adaptive_k)
    max_k = _top_k(max_k, "max_k") or preds.shape[-1]
    precision, recall, top_k = _jit(_precision_recall_curve)(preds, target, None, max_k=max_k, adaptive_k=adaptive_k)
    return precision, recall, jnp.minimum(top_k, preds.shape[-1]) if adaptive_k else top_k


# Module interface ----------------------------------------------------------------------------
def _reduce(values: Array, aggregation: Aggregation) -> Array:
    """torchmetrics' ``_retrieval_aggregate`` over the first axis."""
    dim = None if values.ndim == 1 else 0
    if aggregation == "mean":
        return jnp.mean(values, axis=0)
    if aggregation == "median":  # torch.median: the lower of the two middle values
        return jnp.sort(values, axis=0)[(values.shape[0] - 1) // 2]
    if aggregation == "min":
        return jnp.min(values, axis=0)
    if aggregation == "max":
        return jnp.max(values, axis=0)
    return aggregation(values, dim=dim)


def _aggregate(values: Array, empty, action: str, aggregation: Aggregation, message: str) -> Array:
    empty = np.asarray(empty)
    if action == "error" and empty.any():
        raise ValueError(message)
    if action == "skip":
        values = values[~empty]
    else:
        flags = jnp.asarray(empty).reshape(empty.shape + (1,) * (values.ndim - 1))
        values = jnp.where(flags, 1.0 if action == "pos" else 0.0, values)
    if values.shape[0] == 0:
        return jnp.zeros(values.shape[1:], values.dtype)
    return _reduce(values, aggregation)


def _axes(ax):
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ModuleNotFoundError("plot() needs matplotlib: pip install 'jaxrank[plot]'") from e
    return plt.subplots() if ax is None else (None, ax)


class _RetrievalMetric:
    """torchmetrics' ``RetrievalMetric``: state, ``update``, ``compute``, ``reset``, ``forward``."""

    _allow_non_binary = False
    _empty_message = "`compute` method was provided with a query with no positive target."

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        aggregation: Aggregation = "mean",
    ) -> None:
        if empty_target_action not in _ACTIONS:
            raise ValueError(f"Argument `empty_target_action` received a wrong value `{empty_target_action}`.")
        if ignore_index is not None and not _is_int(ignore_index):
            raise ValueError("Argument `ignore_index` must be an integer or None.")
        if not (aggregation in ("mean", "median", "min", "max") or callable(aggregation)):
            raise ValueError(
                "Argument `aggregation` must be one of `mean`, `median`, `min`, `max` or a custom callable function"
                f"which takes tensor of values, but got {aggregation}."
            )
        self.empty_target_action = empty_target_action
        self.ignore_index = ignore_index
        self.aggregation = aggregation
        self.reset()

    def reset(self) -> None:
        """Forget every ``update``."""
        self._preds: list[np.ndarray] = []
        self._target: list[np.ndarray] = []
        self._indexes: list[np.ndarray] = []

    def update(self, preds, target, indexes) -> None:
        """Add items: ``preds``, ``target`` and integer query ``indexes`` of one shape (flattened)."""
        if indexes is None:
            raise ValueError("Argument `indexes` cannot be None")
        preds, target, indexes = (np.asarray(x) for x in (preds, target, indexes))
        if indexes.shape != preds.shape or preds.shape != target.shape:
            raise ValueError("`indexes`, `preds` and `target` must be of the same shape")
        if not np.issubdtype(indexes.dtype, np.integer):
            raise ValueError("`indexes` must be a tensor of long integers")
        if self.ignore_index is not None:
            keep = target != self.ignore_index
            preds, target, indexes = preds[keep], target[keep], indexes[keep]
        if indexes.ndim == 0 or indexes.size == 0:
            raise ValueError("`indexes`, `preds` and `target` must be non-empty and non-scalar tensors")
        _types(jnp.asarray(preds), jnp.asarray(target), self._allow_non_binary)
        self._preds.append(preds.ravel())
        self._target.append(target.ravel())
        self._indexes.append(indexes.ravel())

    def _grouped(self):
        if not self._preds:
            raise ValueError("compute() was called before any update()")
        return group_by_query(*(np.concatenate(x) for x in (self._preds, self._target, self._indexes)))

    def _empty(self, target: Array, where: Array) -> Array:
        return jnp.sum(jnp.where(where, target, 0), axis=-1) == 0

    def compute(self) -> Array:
        """The aggregate of the per-query values over every query seen."""
        g = self._grouped()
        values = self._kernel(g.preds, g.target, g.where)
        return _aggregate(
            values, self._empty(g.target, g.where), self.empty_target_action, self.aggregation, self._empty_message
        )

    def __call__(self, preds, target, indexes):
        """torchmetrics' ``forward``: update the state and return this batch's value alone."""
        batch = object.__new__(type(self))
        batch.__dict__.update(self.__dict__)
        batch.reset()
        batch.update(preds, target, indexes)
        self.update(preds, target, indexes)
        return batch.compute()

    forward = __call__


class _TopK(_RetrievalMetric):
    _fn: Callable

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        aggregation: Aggregation = "mean",
    ) -> None:
        super().__init__(empty_target_action, ignore_index, aggregation)
        self.top_k = _top_k(top_k)
        self._kernel = partial(_jit(type(self)._fn), top_k=self.top_k)


class RetrievalMAP(_TopK):
    """Mean over queries of :func:`retrieval_average_precision`."""

    _fn = staticmethod(_average_precision)


class RetrievalMRR(_TopK):
    """Mean over queries of :func:`retrieval_reciprocal_rank`."""

    _fn = staticmethod(_reciprocal_rank)


class RetrievalNormalizedDCG(_TopK):
    """Mean over queries of :func:`retrieval_normalized_dcg` (graded targets allowed)."""

    _fn = staticmethod(_normalized_dcg)
    _allow_non_binary = True


class RetrievalRecall(_TopK):
    """Mean over queries of :func:`retrieval_recall`."""

    _fn = staticmethod(_recall)


class RetrievalHitRate(_TopK):
    """Mean over queries of :func:`retrieval_hit_rate`."""

    _fn = staticmethod(_hit_rate)


class RetrievalFallOut(_TopK):
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


class RetrievalPrecision(_RetrievalMetric):
    """Mean over queries of :func:`retrieval_precision`."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        adaptive_k: bool = False,
        aggregation: Aggregation = "mean",
    ) -> None:
        super().__init__(empty_target_action, ignore_index, aggregation)
        self.top_k, self.adaptive_k = _top_k(top_k), _adaptive(adaptive_k)
        self._kernel = partial(_jit(_precision), top_k=self.top_k, adaptive_k=self.adaptive_k)


class RetrievalRPrecision(_RetrievalMetric):
    """Mean over queries of :func:`retrieval_r_precision`."""

    def __init__(
        self, empty_target_action: str = "neg", ignore_index: Optional[int] = None, aggregation: Aggregation = "mean"
    ) -> None:
        super().__init__(empty_target_action, ignore_index, aggregation)
        self._kernel = _jit(_r_precision)


class RetrievalAUROC(_RetrievalMetric):
    """Mean over queries of :func:`retrieval_auroc`."""

    def __init__(
        self,
        empty_target_action: str = "neg",
        ignore_index: Optional[int] = None,
        top_k: Optional[int] = None,
        max_fpr: Optional[float] = None,
        aggregation: Aggregation = "mean",
    ) -> None:
        super().__init__(empty_target_action, ignore_index, aggregation)
        self.top_k, self.max_fpr = _top_k(top_k), _max_fpr(max_fpr)
        self._kernel = partial(_jit(_auroc), top_k=self.top_k, max_fpr=self.max_fpr)


class RetrievalPrecisionRecallCurve(_RetrievalMetric):
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
        self.max_k, self.adaptive_k = _top_k(max_k, "max_k"), _adaptive(adaptive_k)
        self._kernel = _jit(_precision_recall_curve)

    def compute(self) -> tuple[Array, Array, Array]:
        g = self._grouped()
        max_k = self.max_k or g.preds.shape[-1]
        precision, recall, top_k = self._kernel(g.preds, g.target, g.where, max_k=max_k, adaptive_k=self.adaptive_k)
        empty = self._empty(g.target, g.where)
        args = (empty, self.empty_target_action, self.aggregation, self._empty_message)
        return _aggregate(precision, *args), _aggregate(recall, *args), top_k

    def plot(self, curve=None, ax=None):
        """Plot the curve (``compute()``'s unless given) as torchmetrics does: precision on
        x, recall on y. Needs matplotlib (the ``plot`` extra). Returns ``(figure, axes)``."""
        curve = curve or self.compute()
        fig, ax = _axes(ax)
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
        fig, ax = _axes(ax)
        ax.plot(np.arange(values.size), values, marker="o")
        ax.set_ylabel("Recall")
        ax.set_title(type(self).__name__)
        return fig, ax
