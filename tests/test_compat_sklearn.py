"""jaxrank.compat.sklearn against scikit-learn itself (its whole test file: test_compat_sklearn_suite.py)."""

import sys
import warnings

import jax
import numpy as np
import pytest
import sklearn.exceptions
import sklearn.metrics as skm

from jaxrank.compat import sklearn as sk


def rows(seed, ties, graded=True, shape=(6, 20)):
    """Rows with ties or without, one without any relevant item, one all relevant."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, shape).astype(float) if ties else rng.random(shape)
    labels = rng.integers(0, 4 if graded else 2, shape)
    labels[0] = 0
    labels[1] = np.maximum(labels[1], 1)
    return labels, scores


@pytest.mark.parametrize("ties", [False, True])
def test_dcg_and_ndcg_equal_sklearn(ties):
    labels, scores = rows(0, ties)
    weights = np.linspace(0.5, 2.0, labels.shape[0])
    for k in (None, 1, 4):
        # With ignore_ties, scikit-learn orders tied scores as np.argsort happens to (unspecified).
        for ignore_ties in (False,) if ties else (False, True):
            kw = dict(k=k, ignore_ties=ignore_ties)
            assert float(sk.ndcg_score(labels, scores, **kw)) == pytest.approx(
                skm.ndcg_score(labels, scores, **kw), abs=1e-12
            )
            assert float(sk.dcg_score(labels, scores, log_base=3, sample_weight=weights, **kw)) == pytest.approx(
                skm.dcg_score(labels, scores, log_base=3, sample_weight=weights, **kw), abs=1e-12
            )


@pytest.mark.parametrize("ties", [False, True])
def test_roc_auc_and_average_precision_equal_sklearn(ties):
    labels, scores = rows(1, ties, graded=False, shape=(9, 5))  # columns are the lists
    labels[:, 0] = labels[:, 1] = 0
    labels[0, :] = 1 - labels[1, :]  # each column has both classes
    for n in (2, 9):
        y, s = labels[:n], scores[:n]
        y[0], y[1] = 1, 0
        ours = sk.average_precision_score(y, s, average=None)
        np.testing.assert_allclose(ours, skm.average_precision_score(y, s, average=None), atol=1e-12)
        assert float(sk.average_precision_score(y[:, 2], s[:, 2])) == pytest.approx(
            skm.average_precision_score(y[:, 2], s[:, 2]), abs=1e-12
        )
        for max_fpr in (None, 0.3, 1.0):
            assert float(sk.roc_auc_score(y, s, max_fpr=max_fpr)) == pytest.approx(
                np.mean([skm.roc_auc_score(y[:, j], s[:, j], max_fpr=max_fpr) for j in range(y.shape[1])]), abs=1e-12
            )


def called(fn, *args, **kwargs):
    """``fn``'s value, or the type and message of what it raised, and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - compared with scikit-learn's
            value = (type(e), str(e))
    return value, sorted({(w.category.__name__, str(w.message)) for w in caught})


def assert_same(name, *args, **kwargs):
    """jaxrank's ``name`` gives scikit-learn's value (to 1e-12, NaN included), type, error or warnings."""
    ours, our_warnings = called(getattr(sk, name), *args, **kwargs)
    theirs, their_warnings = called(getattr(skm, name), *args, **kwargs)
    assert our_warnings == their_warnings
    if isinstance(theirs, tuple):
        assert ours == theirs
        return
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray) and ours.dtype == np.float64
    else:
        assert type(ours) is float
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)


def multilabel(seed, n=40, labels=4, ties=True):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, (n, labels))
    s = rng.integers(0, 6, (n, labels)) / 5 if ties else rng.random((n, labels))
    return y, s, rng.random(n) * (rng.random(n) > 0.2)  # some weights 0


@pytest.mark.parametrize("average", ["micro", "macro", "weighted", "samples", None])
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_averages_and_weights_equal_sklearn(average, weighted):
    y, s, w = multilabel(2)
    w = w if weighted else None
    assert_same("average_precision_score", y, s, average=average, sample_weight=w)
    for max_fpr in (None, 0.3, 1):
        assert_same("roc_auc_score", y, s, average=average, sample_weight=w, max_fpr=max_fpr)
    y[:, 1] = 0  # a label without a positive: NaN (ROC AUC) or 0 (AP), each with scikit-learn's warning
    assert_same("roc_auc_score", y, s, average=average, sample_weight=w)
    assert_same("average_precision_score", y, s, average=average, sample_weight=w)
    y[:] = 0  # no positive at all: "weighted" gives 0 at once, without a warning
    assert_same("roc_auc_score", y, s, average=average, sample_weight=w)
    assert_same("average_precision_score", y, s, average=average, sample_weight=w)


@pytest.mark.parametrize(
    "y",
    [
        [0, 1, 1, 0, 1, 0],
        [-1, 1, 1, -1, 1, -1],
        [1, 2, 2, 1, 2, 1],
        ["no", "yes", "yes", "no", "yes", "no"],
        [False, True, True, False, True, False],
        [0.0, 1.0, 1.0, 0.0, 1.0, 0.0],
    ],
)
def test_two_valued_labels_equal_sklearn(y):
    s = [0.2, 0.7, 0.2, 0.5, 0.9, 0.1]
    w = [1.0, 2.0, 0.5, 0.0, 1.0, 3.0]
    assert_same("roc_auc_score", y, s)
    assert_same("roc_auc_score", y, s, sample_weight=w, max_fpr=0.4)
    for pos_label in {1, y[0], y[1]}:
        assert_same("average_precision_score", y, s, pos_label=pos_label)
        assert_same("average_precision_score", y, s, pos_label=pos_label, sample_weight=w)


@pytest.mark.parametrize("multi_class", ["ovr", "ovo"])
@pytest.mark.parametrize("average", ["micro", "macro", "weighted", None])
def test_multiclass_equal_sklearn(multi_class, average):
    rng = np.random.default_rng(3)
    y = rng.integers(0, 4, 60)
    p = rng.integers(1, 5, (60, 4)).astype(float)
    p /= p.sum(1, keepdims=True)  # probabilities with ties
    w = rng.random(60)
    assert_same("roc_auc_score", y, p, multi_class=multi_class, average=average)
    assert_same("roc_auc_score", y, p, multi_class=multi_class, average=average, sample_weight=w)
    names = np.array(["a", "b", "c", "d", "e"])
    missing = np.where(y == 3, 4, y)  # class "d" has no item: named by labels=
    assert_same(
        "roc_auc_score", names[missing], p, multi_class=multi_class, average=average, labels=list(names[[0, 1, 2, 4]])
    )
    assert_same("average_precision_score", y, p, average=average or "samples", sample_weight=w)


def test_one_class_is_nan_with_sklearns_warning(monkeypatch):
    with pytest.warns(sklearn.exceptions.UndefinedMetricWarning, match="Only one class is present in y_true"):
        assert np.isnan(sk.roc_auc_score([0, 0], [0.25, 0.75]))
    with pytest.warns(sk.UndefinedMetricWarning):
        assert np.isnan(sk.roc_auc_score(["a", "a", "a"], [0.2, 0.1, 0.3]))
    # Without scikit-learn loaded, jaxrank's own class (a UserWarning), never an import of scikit-learn.
    monkeypatch.delitem(sys.modules, "sklearn.exceptions")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sk.roc_auc_score([1, 1], [0.25, 0.75])
    assert [w.category for w in caught] == [sk.UndefinedMetricWarning]
    assert "sklearn.exceptions" not in sys.modules


def test_no_positive_average_precision_is_zero_with_warning():
    with pytest.warns(UserWarning, match="No positive class found in y_true"):
        assert sk.average_precision_score([0, 0, 0], [0.1, 0.2, 0.3]) == 0.0


def test_float64_without_x64():
    """scikit-learn's digits, and the caller's jax_enable_x64 left off (the suite's conftest turns it on)."""
    rng = np.random.default_rng(4)
    y, s = rng.integers(0, 2, 500), rng.random(500)
    labels, scores = rng.integers(0, 4, (5, 300)), rng.random((5, 300))
    with jax.enable_x64(False):
        ours = [
            sk.roc_auc_score(y, s, max_fpr=0.50005),
            sk.average_precision_score(y, s),
            sk.ndcg_score(labels, scores, k=50),
            sk.dcg_score(labels, scores),
        ]
        assert not jax.config.jax_enable_x64
    theirs = [
        skm.roc_auc_score(y, s, max_fpr=0.50005),
        skm.average_precision_score(y, s),
        skm.ndcg_score(labels, scores, k=50),
        skm.dcg_score(labels, scores),
    ]
    assert all(type(v) is float for v in ours)
    np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=0)


def test_traced_input_raises():
    with pytest.raises(TypeError, match="concrete arrays"):
        jax.jit(lambda s: sk.roc_auc_score(np.array([0, 1]), s))(np.array([0.1, 0.2]))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sk.roc_auc_score([1, 0], [0.1, 0.2], max_fpr=0.0), "max_fpr"),
        (lambda: sk.roc_auc_score([1, 0], [0.1, 0.2], average="mean"), "'average' parameter"),
        (lambda: sk.roc_auc_score([1, 0], [0.1, 0.2], multi_class="all"), "'multi_class' parameter"),
        (lambda: sk.roc_auc_score([1, 0], [0.1, np.nan]), "Input y_score contains NaN"),
        (lambda: sk.roc_auc_score([1, 0, 1], [0.1, 0.2]), "inconsistent numbers of samples"),
        (lambda: sk.roc_auc_score([1, 0], [0.1, 0.2], sample_weight=[1.0]), "inconsistent numbers of samples"),
        (lambda: sk.roc_auc_score([0.5, 1.5], [0.1, 0.2]), "continuous format is not supported"),
        (lambda: sk.roc_auc_score([0, 1, 2], [0.1, 0.2, 0.3]), "multi_class must be in"),
        (lambda: sk.roc_auc_score([[0, 1], [1, 0]], [0.1, 0.2]), "one shape"),
        (
            lambda: sk.average_precision_score([2, 0], [0.1, 0.2]),
            r"pos_label=1 is not a valid label. It should be one of \[0 2\]",
        ),
        (
            lambda: sk.average_precision_score([[1, 0], [0, 1]], [[0.1, 0.2]] * 2, pos_label=0),
            "fixed to 1 for multilabel",
        ),
        (lambda: sk.average_precision_score([0, 1, 2], [0.1, 0.2, 0.3]), "needs to be of shape"),
        (lambda: sk.ndcg_score([1, 0], [0.1, 0.2]), "formats are supported"),
        (lambda: sk.ndcg_score([[1], [0]], [[0.1], [0.2]]), "more than 1 document"),
        (lambda: sk.ndcg_score([[-1, 0]], [[0.1, 0.2]]), "negative y_true"),
        (lambda: sk.dcg_score([[1, 0]], [[0.1, 0.2, 0.3]]), "different shapes"),
        (lambda: sk.dcg_score([[1, 0]], [[0.1, 0.2]], k=0), "'k' parameter"),
        (lambda: sk.dcg_score([[1, 0]], [[0.1, 0.2]], log_base=0), "'log_base' parameter"),
        (lambda: sk.dcg_score([[1, 0]], [[0.1, 0.2]], ignore_ties=1), "'ignore_ties' parameter"),
        (lambda: sk.dcg_score([[1, 0]], [[0.1, 0.2]], sample_weight=[1, 2]), "inconsistent numbers of samples"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()
