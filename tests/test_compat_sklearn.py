"""jaxrank.compat.sklearn against scikit-learn itself."""

import numpy as np
import pytest
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


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sk.roc_auc_score([1, 1], [0.1, 0.2]), "Only one class"),
        (lambda: sk.roc_auc_score([1, 0], [0.1, 0.2], max_fpr=0.0), "max_fpr"),
        (lambda: sk.average_precision_score([2, 0], [0.1, 0.2]), "binary"),
        (lambda: sk.average_precision_score([1, 0], [0.1, 0.2], average="micro"), "average"),
        (lambda: sk.ndcg_score([1, 0], [0.1, 0.2]), "formats are supported"),
        (lambda: sk.ndcg_score([[1], [0]], [[0.1], [0.2]]), "more than 1 document"),
        (lambda: sk.ndcg_score([[-1, 0]], [[0.1, 0.2]]), "negative y_true"),
        (lambda: sk.dcg_score([[1, 0]], [[0.1, 0.2, 0.3]]), "different shapes"),
    ],
)
def test_bad_input_raises(call, match):
    with pytest.raises(ValueError, match=match):
        call()
