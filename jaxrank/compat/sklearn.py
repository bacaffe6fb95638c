"""scikit-learn 1.9's ranking scores, value for value, over jaxrank's ranking.

``roc_auc_score``, ``average_precision_score``, ``dcg_score`` and ``ndcg_score`` with
scikit-learn's signatures, defaults, label handling, warnings and error messages; checked
against scikit-learn itself and by scikit-learn's own test file (``docs/compat/sklearn.md``).

* Labels: binary ``y_true`` holds any two values (ROC AUC: the greater is positive; AP: the
  one equal to ``pos_label``, default 1); a multilabel indicator ``[n, L]`` is one list per
  column; multiclass ``y_true`` (three or more values) with ``y_score[n, classes]`` is
  one-vs-rest (``multi_class="ovr"``, AP always) or one-vs-one (``"ovo"``, Hand & Till's
  pairwise mean) for ROC AUC; ``labels=`` names the classes of ``y_score``'s columns.
* ``average``: ``"macro"`` (mean over lists), ``"weighted"`` (by positives), ``"micro"`` (every
  cell one list), ``"samples"`` (every row one list), ``None`` (per list).
* ``sample_weight`` weighs the items of each list (ROC AUC, AP) or the rows (DCG, nDCG).
* Ties: ROC AUC and AP take each group of tied scores as one threshold (a tied positive and
  negative pair counts one half for AUC); DCG averages over tied scores unless
  ``ignore_ties=True``, when tied items rank by decreasing index (scikit-learn's
  ``np.argsort(...)[::-1]`` order, unspecified in general).
* Undefined values, as scikit-learn gives them: ROC AUC of a list with one class is NaN with an
  :class:`UndefinedMetricWarning`; AP of a list without a positive is 0 with a ``UserWarning``.

Precision and where it runs: scikit-learn computes in float64 on the host, and its tests compare
to 7 decimals or exactly. These functions read concrete arrays (the classes come from the label
values; warnings and NaN depend on them), so they run eagerly, like jaxrank.stats: inputs become
float64 and the computation runs under ``jax.enable_x64(True)`` for the call only (the caller's
``jax_enable_x64`` is left as it is), and results come back as Python floats or NumPy float64
arrays, never JAX arrays. The ranking is jaxrank's, ``hard("expected")`` (its tie groups give the
thresholds; DCG's expected ties are scikit-learn's tie averaging), and DCG and nDCG are
:func:`jaxrank.dcg` and :func:`jaxrank.ndcg`. ROC AUC and AP sum their curves here, over those
ranks: scikit-learn weighs items (``sample_weight``), which jaxrank's ``roc_auc`` and
``average_precision`` do not. Lists are padded (masked) to a few sizes so that calls share
compiled programs. Traced inputs (under ``jit``) raise a ``TypeError``: use :func:`jaxrank.roc_auc`,
:func:`jaxrank.average_precision` (``threshold_ties=True``), :func:`jaxrank.dcg`,
:func:`jaxrank.ndcg` there.

Example:
  >>> from jaxrank.compat.sklearn import ndcg_score
  >>> round(ndcg_score([[10, 0, 0, 1, 5]], [[0.1, 0.2, 0.3, 4, 70]]), 4)
  0.6957
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
import warnings
from itertools import combinations
from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import metrics
from jaxrank.ranking import hard
from jaxrank.ranking.backend import bucket

__all__ = ["UndefinedMetricWarning", "average_precision_score", "dcg_score", "ndcg_score", "roc_auc_score"]

Score = Union[float, np.ndarray]

Array = jax.Array  # a public name of this module before (tests/test_layout.py)

_EXPECTED = hard("expected")  # tie groups: scikit-learn's thresholds, DCG's tie averaging
_STABLE = hard("stable")


class UndefinedMetricWarning(UserWarning):
    """A score is undefined for this input and NaN is returned (scikit-learn's warning of that name).

    Where scikit-learn is already imported, the warning issued is a subclass of both this class and
    ``sklearn.exceptions.UndefinedMetricWarning``, so either catches it; jaxrank never imports
    scikit-learn (code that names scikit-learn's class has imported it).
    """


@functools.cache
def _both(theirs: type) -> type:
    return type("UndefinedMetricWarning", (theirs, UndefinedMetricWarning), {"__module__": __name__})


def _warn_undefined(message: str) -> None:
    theirs = getattr(sys.modules.get("sklearn.exceptions"), "UndefinedMetricWarning", None)
    warnings.warn(message, UndefinedMetricWarning if theirs is None else _both(theirs), stacklevel=3)


# Input ------------------------------------------------------------------------------------------
def _concrete(*values) -> None:
    if any(isinstance(v, jax.core.Tracer) for v in values):
        raise TypeError(
            "jaxrank.compat.sklearn computes on concrete arrays, as scikit-learn does (the classes come from "
            "the label values); under jit use jaxrank.roc_auc, average_precision, dcg or ndcg"
        )


def _option(value, name: str, options: tuple, func: str) -> None:
    if not any(value is o or (isinstance(value, str) and value == o) for o in options):
        names = ", ".join(repr(o) for o in options)
        raise ValueError(f"The {name!r} parameter of {func} must be one of ({names}). Got {value!r} instead.")


def _finite(x: np.ndarray, name: str) -> None:
    if x.dtype.kind in "fc" and not np.isfinite(x).all():
        what = "NaN" if np.isnan(x).any() else "infinity or a value too large for dtype('float64')"
        raise ValueError(f"Input {name} contains {what}.")


def _labels(y, name: str = "y_true") -> np.ndarray:
    y = np.asarray(y)
    if y.ndim == 0 or y.size == 0:
        raise ValueError(f"{name} must be a non-empty array, got {y!r}")
    _finite(y, name)
    return y


def _floats(x, name: str) -> np.ndarray:
    try:
        x = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must hold numbers: {e}") from None
    if x.ndim == 0:
        raise ValueError(f"{name} must be an array, got a scalar")
    _finite(x, name)
    return x


def _sample_weight(sample_weight) -> Optional[np.ndarray]:
    if sample_weight is None:
        return None
    w = _floats(sample_weight, "sample_weight")
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.ndim != 1:
        raise ValueError(f"sample_weight must be 1d, got shape {w.shape}")
    return w


def _same_length(**arrays) -> None:
    lengths = [len(a) for a in arrays.values() if a is not None]
    if len(set(lengths)) > 1:
        names = ", ".join(k for k, a in arrays.items() if a is not None)
        raise ValueError(f"Found input variables with inconsistent numbers of samples: {lengths} ({names})")


def _target_type(y: np.ndarray) -> str:
    """scikit-learn's ``type_of_target`` for the arrays these functions take (its documented rules)."""
    if y.ndim > 2:
        return "unknown"
    suffix = "-multioutput" if y.ndim == 2 and y.shape[1] > 1 else ""
    values = np.unique(y)
    integral = y.dtype.kind in "biu" or (y.dtype.kind == "f" and bool(np.all(values == np.floor(values))))
    if suffix and len(values) < 3 and integral:
        return "multilabel-indicator"
    if y.dtype.kind == "f" and not integral:
        return "continuous" + suffix
    return ("multiclass" if len(values) > 2 or suffix else "binary") + suffix


def _one_column(y: np.ndarray, name: str, like: str) -> np.ndarray:
    if y.ndim == 2 and y.shape[1] == 1:
        return y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1d for {like}, got shape {y.shape}")
    return y


def _indicator(y: np.ndarray, y_score: np.ndarray, func: str) -> np.ndarray:
    """A multilabel indicator as booleans (1 is positive), ``y_score`` of its shape."""
    if y_score.shape != y.shape:
        raise ValueError(
            f"y_true and y_score must have one shape for multilabel y_true, got {y.shape} and {y_score.shape}"
        )
    values = set(np.unique(y).tolist())
    if not (values <= {0, 1} or values <= {-1, 1}):
        raise ValueError(f"{func}: multilabel y_true takes values in {sorted(values)}, not {{0, 1}} or {{-1, 1}}")
    return y == 1


# ROC AUC and AP of binary lists -----------------------------------------------------------------
def _padded(n: int) -> int:
    """``n`` rounded up to a power of two (at least 8; past 4096 to jaxrank's size buckets, at most
    1/8 larger): calls of similar sizes share one compiled program."""
    return 1 << max(3, (n - 1).bit_length()) if n <= 4096 else bucket(n)


@jax.jit
def _thresholds(scores, positive, negative, valid):
    """Weights of the positives and of the negatives scored at least each threshold (each distinct
    score of a list ``[m, n]``), read at every position: the cumulative sums at the end of the
    position's tie group, after a leading 0. Invalid items weigh 0 and add nothing."""
    r = _EXPECTED(scores, valid)

    def at_thresholds(w):
        running = jnp.cumsum(r.in_rank_order(w), axis=-1)
        points = jnp.take_along_axis(running, r.end - 1, axis=-1)
        return jnp.concatenate([jnp.zeros_like(points[..., :1]), points], axis=-1)

    return at_thresholds(positive), at_thresholds(negative)


def _roc_auc_of(tp: np.ndarray, fp: np.ndarray, max_fpr: float) -> np.ndarray:
    """Area under the ROC curve through the points ``(fp, tp)``, normalised, up to ``max_fpr``
    (the curve cut there by linear interpolation) and McClish-corrected below 1; in NumPy:
    XLA:CPU's fused float64 division is not correctly rounded, and scikit-learn's tests compare
    some of these values exactly."""
    with np.errstate(invalid="ignore", divide="ignore"):
        x, y = fp / fp[..., -1:], tp / tp[..., -1:]
        x0, x1, y0, y1 = x[..., :-1], x[..., 1:], y[..., :-1], y[..., 1:]
        x0c, x1c = np.minimum(x0, max_fpr), np.minimum(x1, max_fpr)
        cut = y0 + (y1 - y0) * (max_fpr - x0) / (x1 - x0)  # only where the segment crosses max_fpr
        y1c = np.where(x1 <= max_fpr, y1, np.where(x0 < max_fpr, cut, y0))
        area = np.sum((x1c - x0c) * (y0 + y1c) / 2, axis=-1)
    if max_fpr == 1:
        return area
    low = max_fpr * max_fpr / 2
    return 0.5 * (1 + (area - low) / (max_fpr - low))


def _average_precision_of(tp: np.ndarray, fp: np.ndarray) -> np.ndarray:
    """Sum over thresholds of the recall gained times the precision there."""
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = tp / tp[..., -1:]
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        return np.maximum(np.sum(np.diff(recall, axis=-1) * precision[..., 1:], axis=-1), 0.0)


def _binary(
    metric: str,
    positive: np.ndarray,
    scores: np.ndarray,
    weights: Optional[np.ndarray] = None,
    valid: Optional[np.ndarray] = None,
    max_fpr: Optional[float] = None,
) -> np.ndarray:
    """``metric`` ("roc" or "ap") of each list (row) of ``positive[m, n]`` (bool) and ``scores``,
    items weighted by ``weights`` ([m, n] or None) where ``valid``; NaN or 0 with scikit-learn's
    warning where undefined."""
    m, n = scores.shape
    valid = np.ones((m, n), bool) if valid is None else valid
    w = np.where(valid, 1.0 if weights is None else weights, 0.0)
    pos_w, neg_w = np.where(positive, w, 0.0), np.where(positive, 0.0, w)
    size, lists = _padded(n), _padded(m)
    pad = ((0, lists - m), (0, size - n))
    with jax.enable_x64(True):
        points = _thresholds(*(jnp.asarray(np.pad(a, pad)) for a in (scores, pos_w, neg_w, valid)))
        tp, fp = (np.asarray(p)[:m] for p in points)
    if metric == "ap":
        if not (pos_w.sum(-1) > 0).all():
            warnings.warn("No positive class found in y_true, recall is set to one for all thresholds.", stacklevel=3)
        return np.where(pos_w.sum(-1) > 0, _average_precision_of(tp, fp), 0.0)
    has_pos, has_neg = (positive & valid).any(-1), (~positive & valid).any(-1)
    if not (has_pos & has_neg).all():
        _warn_undefined("Only one class is present in y_true. ROC AUC score is not defined in that case.")
    for total, which, rate in ((neg_w, "negative", "false"), (pos_w, "positive", "true")):
        if (has_pos & has_neg & ~(total.sum(-1) > 0)).any():  # the class present, with weight 0
            _warn_undefined(f"No {which} samples in y_true, {rate} positive value should be meaningless")
    defined = has_pos & has_neg & (pos_w.sum(-1) > 0) & (neg_w.sum(-1) > 0)
    return np.where(defined, _roc_auc_of(tp, fp, 1.0 if max_fpr is None else max_fpr), np.nan)


def _averaged(
    metric: str,
    positive: np.ndarray,
    scores: np.ndarray,
    weights: Optional[np.ndarray],
    average: Optional[str],
    max_fpr: Optional[float] = None,
) -> Score:
    """``metric`` of a multilabel indicator ``positive[n, L]``, averaged as scikit-learn's ``average``."""
    _same_length(y_true=positive, y_score=scores, sample_weight=weights)
    n, labels = positive.shape
    if average == "micro":
        w = None if weights is None else np.repeat(weights, labels)[None]
        return float(_binary(metric, positive.reshape(1, -1), scores.reshape(1, -1), w, max_fpr=max_fpr)[0])
    if average == "samples":  # each row a list; the sample weights weigh the rows
        values, by = _binary(metric, positive, scores, max_fpr=max_fpr), weights
    else:
        by = None
        if average == "weighted":  # by each label's (weighted) positives; none at all: 0, nothing computed
            by = (positive * (1.0 if weights is None else weights[:, None])).sum(0)
            if np.isclose(by.sum(), 0):
                return 0.0
        w = None if weights is None else np.broadcast_to(weights, (labels, n))
        values = _binary(metric, positive.T, scores.T, w, max_fpr=max_fpr)
        if average is None:
            return values
    if by is not None:
        values = np.where(by == 0, 0.0, values)  # a list of weight 0 counts 0, even when undefined
    return float(np.average(values, weights=by))


def roc_auc_score(
    y_true,
    y_score,
    *,
    average: Optional[str] = "macro",
    sample_weight=None,
    max_fpr: Optional[float] = None,
    multi_class: str = "raise",
    labels=None,
) -> Score:
    """Area under the ROC curve (scikit-learn's ``roc_auc_score``).

    .. math:: AUC = \\frac{\\sum_{i: y_i = 1} \\sum_{j: y_j = 0} w_i w_j ([s_i > s_j] + \\tfrac12 [s_i = s_j])}
        {\\sum_{i: y_i = 1} w_i \\sum_{j: y_j = 0} w_j}

    ``max_fpr`` in ``(0, 1]``: the area up to that false positive rate, McClish-corrected
    (binary and multilabel input). Multiclass ``y_true`` needs ``y_score[n, classes]`` of
    probabilities and ``multi_class="ovr"`` or ``"ovo"``.

    Shapes: ``[n] -> float``; ``[n, L]`` (multilabel) or multiclass ``-> float``, ``[L]`` with
    ``average=None``.

    Example:
      >>> from jaxrank.compat.sklearn import roc_auc_score
      >>> roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8])
      0.75
      >>> roc_auc_score(["no", "no", "yes"], [0.2, 0.6, 0.6])  # the tied pair counts one half
      0.75
    """
    _concrete(y_true, y_score, sample_weight)
    func = "roc_auc_score"
    _option(average, "average", ("micro", "macro", "samples", "weighted", None), func)
    real = isinstance(max_fpr, numbers.Real) and not isinstance(max_fpr, bool)
    if max_fpr is not None and not (real and 0 < max_fpr <= 1):
        raise ValueError(
            f"The 'max_fpr' parameter of {func} must be a float in the range (0.0, 1.0] or None. Got {max_fpr!r} instead."
        )
    _option(multi_class, "multi_class", ("raise", "ovr", "ovo"), func)
    y_true, y_score, weights = _labels(y_true), _floats(y_score, "y_score"), _sample_weight(sample_weight)
    _same_length(y_true=y_true, y_score=y_score)
    kind = _target_type(y_true)
    if kind == "multiclass" or (kind == "binary" and y_score.ndim == 2 and y_score.shape[1] > 2):
        if max_fpr is not None and max_fpr != 1:
            raise ValueError(
                "Partial AUC computation not available in multiclass setting, 'max_fpr' must be set to `None`, "
                f"received `max_fpr={max_fpr}` instead"
            )
        if multi_class == "raise":
            raise ValueError("multi_class must be in ('ovo', 'ovr')")
        return _multiclass_roc_auc(
            _one_column(y_true, "y_true", "multiclass input"), y_score, labels, multi_class, average, weights
        )
    if kind == "binary":
        y, s = _one_column(y_true, "y_true", "binary input"), _one_column(y_score, "y_score", "binary y_true")
        _same_length(y_true=y, y_score=s, sample_weight=weights)
        positive = y == np.unique(y)[-1]  # the greater value; one class: no negative (NaN, warned)
        w = None if weights is None else weights[None]
        return float(_binary("roc", positive[None], s[None], w, max_fpr=max_fpr)[0])
    if kind == "multilabel-indicator":
        return _averaged("roc", _indicator(y_true, y_score, func), y_score, weights, average, max_fpr)
    raise ValueError(f"y_true of {kind} format is not supported")


def _multiclass_roc_auc(y, y_score, labels, multi_class, average, weights) -> Score:
    if y_score.ndim != 2:
        raise ValueError(
            "`y_score` needs to be of shape `(n_samples, n_classes)`, since `y_true` contains multiple classes. "
            f"Got `y_score.shape={y_score.shape}`."
        )
    if not np.allclose(1, y_score.sum(axis=1)):
        raise ValueError(
            "Target scores need to be probabilities for multiclass roc_auc, i.e. they should sum up to 1.0 over classes"
        )
    options = ("macro", "weighted", None) if multi_class == "ovo" else ("micro", "macro", "weighted", None)
    if average not in options:
        raise ValueError(f"average must be one of {options} for multiclass problems")
    if average is None and multi_class == "ovo":
        raise NotImplementedError("average=None is not implemented for multi_class='ovo'.")
    if labels is not None:
        labels = np.asarray(labels).ravel()
        classes = np.unique(labels)
        if len(classes) != len(labels):
            raise ValueError("Parameter 'labels' must be unique")
        if not np.array_equal(classes, labels):
            raise ValueError("Parameter 'labels' must be ordered")
        if len(classes) != y_score.shape[1]:
            raise ValueError(
                f"Number of given labels, {len(classes)}, not equal to the number of columns in 'y_score', {y_score.shape[1]}"
            )
        if len(np.setdiff1d(y, classes)):
            raise ValueError("'y_true' contains labels not in parameter 'labels'")
    else:
        classes = np.unique(y)
        if len(classes) != y_score.shape[1]:
            raise ValueError("Number of classes in y_true not equal to the number of columns in 'y_score'")
    code = np.searchsorted(classes, y)  # the column of each item's class
    if multi_class == "ovr":
        return _averaged("roc", code[:, None] == np.arange(len(classes)), y_score, weights, average)
    if weights is not None:
        raise ValueError(
            "sample_weight is not supported for multiclass one-vs-one ROC AUC, 'sample_weight' must be None in this case."
        )
    # Hand & Till: for each pair of classes present, the mean of the AUC of a against b (column a)
    # and of b against a (column b) over the items of either; pairs weighted by their prevalence.
    pairs = list(combinations(np.unique(code), 2))
    member = np.stack([np.isin(code, pair) for pair in pairs])  # [P, n]
    scores = np.stack([y_score[:, c] for pair in pairs for c in pair])  # [2P, n]: a's column, then b's
    positive = np.stack([code == c for pair in pairs for c in pair])
    auc = _binary("roc", positive, scores, valid=np.repeat(member, 2, axis=0))
    pair_auc = (auc[0::2] + auc[1::2]) / 2
    return float(np.average(pair_auc, weights=member.mean(axis=1) if average == "weighted" else None))


def average_precision_score(
    y_true, y_score, *, average: Optional[str] = "macro", pos_label=1, sample_weight=None
) -> Score:
    """Average precision (scikit-learn's ``average_precision_score``): every distinct score a
    threshold, :math:`AP = \\sum_t (R_t - R_{t-1}) P_t` over the thresholds :math:`t`, descending
    (precision and recall of the items scored at least :math:`t`, weighted by ``sample_weight``).

    Binary ``y_true``: the positives are the items equal to ``pos_label``. Multiclass
    ``y_true`` (with ``y_score[n, classes]``): one-vs-rest over the classes present.

    Shapes: ``[n] -> float``; ``[n, L]`` (multilabel) or multiclass ``-> float``, ``[L]`` with
    ``average=None``.

    Example:
      >>> from jaxrank.compat.sklearn import average_precision_score
      >>> round(average_precision_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]), 4)
      0.8333
      >>> average_precision_score([-1, 1, -1, 1], [0.1, 0.4, 0.35, 0.8])
      1.0
    """
    _concrete(y_true, y_score, sample_weight)
    func = "average_precision_score"
    _option(average, "average", ("micro", "samples", "weighted", "macro", None), func)
    if not isinstance(pos_label, (numbers.Real, str, np.bool_)):
        raise ValueError(
            f"The 'pos_label' parameter of {func} must be a number, a str or a bool. Got {pos_label!r} instead."
        )
    y_true, y_score, weights = _labels(y_true), _floats(y_score, "y_score"), _sample_weight(sample_weight)
    _same_length(y_true=y_true, y_score=y_score)
    kind = _target_type(y_true)
    present = np.unique(y_true)
    if kind == "binary":
        if len(present) == 2 and not (present == pos_label).any():
            raise ValueError(f"pos_label={pos_label} is not a valid label. It should be one of {present}")
        y, s = _one_column(y_true, "y_true", "binary input"), _one_column(y_score, "y_score", "binary y_true")
        _same_length(y_true=y, y_score=s, sample_weight=weights)
        w = None if weights is None else weights[None]
        return float(_binary("ap", (y == pos_label)[None], s[None], w)[0])
    if kind in ("multilabel-indicator", "multiclass") and pos_label != 1:
        which = "multilabel-indicator" if kind == "multilabel-indicator" else "multiclass"
        raise ValueError(
            f"Parameter pos_label is fixed to 1 for {which} y_true. Do not set pos_label or set pos_label to 1."
        )
    if kind == "multilabel-indicator":
        return _averaged("ap", _indicator(y_true, y_score, func), y_score, weights, average)
    if kind == "multiclass":
        positive = _one_column(y_true, "y_true", "multiclass input")[:, None] == present
        if y_score.shape != positive.shape:
            raise ValueError(
                "`y_score` needs to be of shape `(n_samples, n_classes)`, since `y_true` contains multiple classes. "
                f"Got `y_score.shape={y_score.shape}`."
            )
        return _averaged("ap", positive, y_score, weights, average)
    raise ValueError(f"y_true of {kind} format is not supported")


# DCG and nDCG --------------------------------------------------------------------------------------
@functools.partial(jax.jit, static_argnames=("normalized", "k", "ignore_ties"))
def _dcg_rows(labels, scores, valid, scale, *, normalized: bool, k: Optional[int], ignore_ties: bool):
    metric = metrics.ndcg if normalized else metrics.dcg
    ranker = _STABLE if ignore_ties else _EXPECTED
    discount = lambda pos: scale / jnp.log1p(pos)  # 1 / log_base(1 + r)
    return metric(scores, labels, k=k, where=valid, ranker=ranker, gain=lambda y: y, discount=discount)


def _dcg_score(func, y_true, y_score, k, log_base, sample_weight, ignore_ties, normalized) -> float:
    _concrete(y_true, y_score, sample_weight)
    if k is not None and not (isinstance(k, numbers.Integral) and k >= 1):
        raise ValueError(
            f"The 'k' parameter of {func} must be an int in the range [1, inf) or None. Got {k!r} instead."
        )
    if not (isinstance(log_base, numbers.Real) and not isinstance(log_base, bool) and 0 < log_base < math.inf):
        raise ValueError(
            f"The 'log_base' parameter of {func} must be a float in the range (0.0, inf). Got {log_base!r} instead."
        )
    if not isinstance(ignore_ties, (bool, np.bool_)):
        raise ValueError(
            f"The 'ignore_ties' parameter of {func} must be an instance of 'bool'. Got {ignore_ties!r} instead."
        )
    y_true, y_score, weights = _floats(y_true, "y_true"), _floats(y_score, "y_score"), _sample_weight(sample_weight)
    _same_length(y_true=y_true, y_score=y_score, sample_weight=weights)
    if normalized and y_true.min() < 0:
        raise ValueError("ndcg_score should not be used on negative y_true values.")
    if normalized and y_true.ndim > 1 and y_true.shape[1] <= 1:
        raise ValueError(
            f"Computing NDCG is only meaningful when there is more than 1 document. Got {y_true.shape[1]} instead."
        )
    kind = _target_type(y_true)
    formats = ("multilabel-indicator", "continuous-multioutput", "multiclass-multioutput")
    if kind not in formats:
        raise ValueError(f"Only {formats} formats are supported. Got {kind} instead")
    if y_score.shape != y_true.shape:
        raise ValueError(f"y_true and y_score have different shapes: {y_true.shape} and {y_score.shape}")
    rows, n = y_true.shape
    if ignore_ties:  # tied items by decreasing index: stable ranks of the reversed rows
        y_true, y_score = y_true[:, ::-1], y_score[:, ::-1]
    pad = ((0, _padded(rows) - rows), (0, _padded(n) - n))
    with jax.enable_x64(True):
        values = _dcg_rows(
            jnp.asarray(np.pad(y_true, pad)),
            jnp.asarray(np.pad(y_score, pad)),
            jnp.asarray(np.pad(np.ones((rows, n), bool), pad)),
            jnp.float64(math.log(log_base)),
            normalized=normalized,
            k=None if k is None or k >= n else int(k),
            ignore_ties=bool(ignore_ties),
        )
        values = np.asarray(values)[:rows]
    return float(np.average(values, weights=weights))


def dcg_score(
    y_true, y_score, *, k: Optional[int] = None, log_base: float = 2, sample_weight=None, ignore_ties: bool = False
) -> float:
    """Mean over rows of :math:`DCG@k = \\sum_i y_i [r_i \\le k] / \\log_{base}(1 + r_i)`, tied
    scores averaged (``ignore_ties=False``), rows weighted by ``sample_weight``: scikit-learn's
    ``dcg_score``, through :func:`jaxrank.dcg`. Shapes: ``[Q, n] -> float``.

    Example:
      >>> from jaxrank.compat.sklearn import dcg_score
      >>> round(dcg_score([[10, 0, 0, 1, 5]], [[0.1, 0.2, 0.3, 4, 70]]), 4)
      9.4995
    """
    return _dcg_score("dcg_score", y_true, y_score, k, log_base, sample_weight, ignore_ties, normalized=False)


def ndcg_score(y_true, y_score, *, k: Optional[int] = None, sample_weight=None, ignore_ties: bool = False) -> float:
    """Mean over rows of :math:`DCG@k / IDCG@k` (0 for a row whose ideal is 0), tied scores
    averaged (``ignore_ties=False``), rows weighted by ``sample_weight``: scikit-learn's
    ``ndcg_score``, through :func:`jaxrank.ndcg`. Shapes: ``[Q, n] -> float``; ``n > 1``,
    ``y_true >= 0``.

    Example:
      >>> from jaxrank.compat.sklearn import ndcg_score
      >>> ndcg_score([[10, 0, 0, 1, 5]], [[0.1, 0.2, 0.3, 4, 70]], k=1)
      0.5
    """
    return _dcg_score("ndcg_score", y_true, y_score, k, 2, sample_weight, ignore_ties, normalized=True)
