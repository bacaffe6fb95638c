"""scikit-learn's ranking scores, value for value, over jaxrank's core.

``roc_auc_score`` and ``average_precision_score`` take one binary list ``[n]`` or a
multilabel indicator ``[n, L]`` (one list per column, ``average="macro"`` or ``None``);
``dcg_score`` and ``ndcg_score`` take one list per row ``[Q, n]`` and average the rows.
scikit-learn's conventions, kept here (``docs/compat/sklearn.md``):

* Tied scores: ROC AUC counts tied pairs one half; AP makes each group of tied scores one
  threshold (``average_precision(threshold_ties=True)``); DCG averages over tied scores
  unless ``ignore_ties=True``; scikit-learn then orders them as ``np.argsort`` happens to
  (reversed), which is unspecified: here, by decreasing index (a stable argsort, reversed).
* DCG's gain is the label itself, its discount :math:`1 / \\log_{base}(1 + r)`.
* A list without a positive (or without a negative) is an error for ROC AUC; AP of a
  list without a positive is 0 (with scikit-learn's warning left out).

Example:
  >>> from jaxrank.compat.sklearn import ndcg_score
  >>> round(float(ndcg_score([[10, 0, 0, 1, 5]], [[0.1, 0.2, 0.3, 4, 70]])), 4)
  0.6957
"""

from __future__ import annotations

import math
from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import metrics
from jaxrank.compat._common import EXPECTED, STABLE, as_array, cutoff

Array = jax.Array


@partial(jax.jit, static_argnames=("max_fpr",))
def _roc_auc(scores, labels, max_fpr):
    return metrics.roc_auc(scores, labels, max_fpr=max_fpr, ranker=EXPECTED)


@jax.jit
def _average_precision(scores, labels):
    return metrics.average_precision(scores, labels, threshold_ties=True, ranker=STABLE)


def _columns(y_true, y_score, average) -> tuple[Array, Array]:
    """``[n]`` or ``[n, L]`` inputs as lists ``[..., n]`` (one per label)."""
    y_true, y_score = as_array(y_true), as_array(y_score)
    if y_true.shape != y_score.shape or y_true.ndim not in (1, 2):
        raise ValueError(
            f"y_true and y_score must have one shape, [n] or [n, n_labels]; got {y_true.shape} and {y_score.shape}"
        )
    if average not in ("macro", None):
        raise ValueError(f"average must be 'macro' or None here, got {average!r}")
    if not isinstance(y_true, jax.core.Tracer) and not bool(jnp.all((y_true == 0) | (y_true == 1))):
        raise ValueError("y_true must be binary (0/1) here")
    return y_true.T.astype(jnp.result_type(float)), y_score.T.astype(jnp.result_type(float))


def _average(values: Array, labels: Array, average) -> Array:
    """Per column, or their mean (``labels`` is ``_columns``' output, as many axes as y_true)."""
    return values if average is None or labels.ndim == 1 else jnp.mean(values)


def roc_auc_score(y_true, y_score, *, average: Optional[str] = "macro", max_fpr: Optional[float] = None) -> Array:
    """Area under the ROC curve; tied pairs count one half; ``max_fpr`` gives the
    McClish-corrected partial area.

    .. math:: AUC = \\frac{1}{P N} \\sum_{i: y_i = 1} \\sum_{j: y_j = 0} ([s_i > s_j] + \\tfrac12 [s_i = s_j])

    Shapes: ``[n] -> []``; ``[n, L] -> []`` (macro) or ``[L]`` (``average=None``).

    Example:
      >>> from jaxrank.compat.sklearn import roc_auc_score
      >>> float(roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]))
      0.75
    """
    if max_fpr is not None and not 0 < max_fpr <= 1:
        raise ValueError(f"Expected max_fpr in range (0, 1], got: {max_fpr}")
    labels, scores = _columns(y_true, y_score, average)
    if not isinstance(labels, jax.core.Tracer):
        positives = np.asarray(jnp.sum(labels, axis=-1))
        if np.any((positives == 0) | (positives == labels.shape[-1])):
            raise ValueError("Only one class present in y_true. ROC AUC score is not defined in that case.")
    values = _roc_auc(scores, labels, max_fpr=None if max_fpr == 1 else max_fpr)
    return _average(values, labels, average)


def average_precision_score(y_true, y_score, *, average: Optional[str] = "macro") -> Array:
    """Average precision with each group of tied scores one threshold:
    :math:`\\sum_t (R_t - R_{t-1}) P_t` over the distinct scores :math:`t`, descending.

    Shapes as :func:`roc_auc_score`.

    Example:
      >>> from jaxrank.compat.sklearn import average_precision_score
      >>> round(float(average_precision_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])), 4)
      0.8333
    """
    labels, scores = _columns(y_true, y_score, average)
    values = _average_precision(scores, labels)
    return _average(values, labels, average)


def _rows(y_true, y_score, k, log_base, sample_weight):
    y_true, y_score = as_array(y_true), as_array(y_score)
    if y_true.ndim != 2:
        raise ValueError(
            "Only ('multilabel-indicator', 'continuous-multioutput', 'multiclass-multioutput') formats are supported."
            f" Got y_true of shape {y_true.shape} instead."
        )
    if y_true.shape != y_score.shape:
        raise ValueError(f"Input arrays use different shapes: {y_true.shape} and {y_score.shape}")
    cutoff(k)
    if not (log_base > 1):
        raise ValueError(f"log_base must be greater than 1, got {log_base!r}")
    weights = None if sample_weight is None else as_array(sample_weight).astype(jnp.result_type(float))
    if weights is not None and weights.shape != y_true.shape[:1]:
        raise ValueError(f"sample_weight must have shape ({y_true.shape[0]},), got {weights.shape}")
    return y_true.astype(jnp.result_type(float)), y_score.astype(jnp.result_type(float)), weights


def _dcg_like(metric, y_true, y_score, k, log_base, sample_weight, ignore_ties):
    labels, scores, weights = _rows(y_true, y_score, k, log_base, sample_weight)
    return _dcg_rows(
        labels, scores, weights, metric=metric, k=k, log_base=float(log_base), ignore_ties=bool(ignore_ties)
    )


@partial(jax.jit, static_argnames=("metric", "k", "log_base", "ignore_ties"))
def _dcg_rows(labels, scores, weights, *, metric, k, log_base, ignore_ties):
    if ignore_ties:  # by decreasing index among ties: stable ranks of the reversed rows
        labels, scores, ranker = labels[:, ::-1], scores[:, ::-1], STABLE
    else:
        ranker = EXPECTED
    scale = math.log(log_base)
    values = metric(scores, labels, k=k, ranker=ranker, gain=lambda y: y, discount=lambda pos: scale / jnp.log1p(pos))
    return jnp.average(values, weights=weights)


def dcg_score(
    y_true, y_score, *, k: Optional[int] = None, log_base: float = 2, sample_weight=None, ignore_ties: bool = False
) -> Array:
    """Mean over rows of :math:`DCG@k = \\sum_i y_i [r_i \\le k] / \\log_{base}(1 + r_i)`,
    tied scores averaged (``ignore_ties=False``). Shapes: ``[Q, n] -> []``.

    Example:
      >>> from jaxrank.compat.sklearn import dcg_score
      >>> round(float(dcg_score([[10, 0, 0, 1, 5]], [[0.1, 0.2, 0.3, 4, 70]])), 4)
      9.4995
    """
    return _dcg_like(metrics.dcg, y_true, y_score, k, log_base, sample_weight, ignore_ties)


def ndcg_score(y_true, y_score, *, k: Optional[int] = None, sample_weight=None, ignore_ties: bool = False) -> Array:
    """Mean over rows of :math:`DCG@k / IDCG@k` (0 for a row whose ideal is 0), tied
    scores averaged (``ignore_ties=False``). Shapes: ``[Q, n] -> []``; ``n > 1``.

    Example:
      >>> from jaxrank.compat.sklearn import ndcg_score
      >>> round(float(ndcg_score([[10, 0, 0, 1, 5]], [[0.1, 0.2, 0.3, 4, 70]], k=1)), 4)
      0.5
    """
    y_true = as_array(y_true)
    if not isinstance(y_true, jax.core.Tracer) and bool(jnp.any(y_true < 0)):
        raise ValueError("ndcg_score should not be used on negative y_true values.")
    if y_true.ndim == 2 and y_true.shape[1] <= 1:
        raise ValueError(
            f"Computing NDCG is only meaningful when there is more than 1 document. Got {y_true.shape[1]} instead."
        )
    return _dcg_like(metrics.ndcg, y_true, y_score, k, 2, sample_weight, ignore_ties)
