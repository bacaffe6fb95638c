"""The curve, correlation and set metrics against scipy, scikit-learn, torchmetrics and
the blog's code; one keyword set for every metric; padding, vmap and jit laws."""

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import simpson
from scipy.stats import kendalltau, spearmanr
from sklearn.metrics import average_precision_score, roc_auc_score
from torchmetrics.functional.retrieval import retrieval_auroc, retrieval_precision_recall_curve
from torchmetrics.retrieval import RetrievalRecallAtFixedPrecision

import jaxrank
from tests.brute import reference

N = 16  # every list is padded to N; its length is 1..N


def _batch(seed, ties: bool, graded: bool = False, rows: int = 48):
    """Lists of every length 1..N (padded with junk), with rows of no and of all relevant."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.standard_normal((rows, N)), 0) if ties else rng.standard_normal((rows, N))
    labels = rng.integers(0, 4 if graded else 2, (rows, N))
    labels[0], labels[1] = 0, 1
    length = np.arange(rows) % N + 1
    where = np.arange(N) < length[:, None]
    return scores, labels, where, length


def _every_row(length):
    return [(i, int(n)) for i, n in enumerate(length)]


@jax.jit
def _curves(scores, labels, where):
    out = {}
    for max_k in (4, N, N + 4):
        for adaptive in (False, True):
            out[max_k, adaptive] = jaxrank.precision_recall_curve(
                scores, labels, max_k=max_k, adaptive_k=adaptive, where=where
            )[:2]
    return out


def test_precision_recall_curve_matches_torchmetrics():
    scores, labels, where, length = _batch(0, ties=False)
    got = _curves(scores, labels, where)
    for (max_k, adaptive), (p, r) in got.items():
        for i, n in _every_row(length):
            want_p, want_r, want_k = retrieval_precision_recall_curve(
                torch.tensor(scores[i, :n]), torch.tensor(labels[i, :n]), max_k=max_k, adaptive_k=adaptive
            )
            np.testing.assert_allclose(p[i], want_p.double().numpy(), atol=1e-6, err_msg=f"{max_k} {adaptive} {i}")
            np.testing.assert_allclose(r[i], want_r.double().numpy(), atol=1e-6)
    _, _, top_k = jaxrank.precision_recall_curve(scores[0], labels[0], max_k=5)
    np.testing.assert_array_equal(top_k, np.arange(1, 6))


def test_recall_at_fixed_precision_matches_torchmetrics():
    scores, labels, where, length = _batch(1, ties=False)
    for bound in (0.0, 0.4, 0.75, 1.0):
        recall, k = jax.jit(
            lambda s, y, w, b=bound: jaxrank.recall_at_fixed_precision(s, y, min_precision=b, max_k=N, where=w)
        )(scores, labels, where)
        for i, n in _every_row(length):
            metric = RetrievalRecallAtFixedPrecision(min_precision=bound, max_k=N)
            want_r, want_k = metric(
                torch.tensor(scores[i, :n]), torch.tensor(labels[i, :n]), indexes=torch.zeros(n, dtype=torch.long)
            )
            assert float(recall[i]) == pytest.approx(float(want_r), abs=1e-6), (bound, i)
            assert int(k[i]) == int(want_k), (bound, i)


@pytest.mark.parametrize("ties", [False, True])
def test_roc_auc_matches_scikit_learn(ties):
    scores, labels, where, length = _batch(2, ties=ties)
    for max_fpr in (None, 0.3, 1.0):
        got = jax.jit(lambda s, y, w, m=max_fpr: jaxrank.roc_auc(s, y, max_fpr=m, where=w))(scores, labels, where)
        for i, n in _every_row(length):
            y = labels[i, :n]
            want = roc_auc_score(y, scores[i, :n], max_fpr=max_fpr) if 0 < y.sum() < n else 0.0
            assert float(got[i]) == pytest.approx(want, abs=1e-9), (max_fpr, i)


def test_roc_auc_of_the_top_k_matches_torchmetrics():
    scores, labels, where, length = _batch(3, ties=False)
    for k in (3, 8):
        for max_fpr in (None, 0.5):
            got = jax.jit(lambda s, y, w, k=k, m=max_fpr: jaxrank.roc_auc(s, y, k=k, max_fpr=m, where=w))(
                scores, labels, where
            )
            for i, n in _every_row(length):
                want = retrieval_auroc(
                    torch.tensor(scores[i, :n]), torch.tensor(labels[i, :n]), top_k=k, max_fpr=max_fpr
                )
                assert float(got[i]) == pytest.approx(float(want), abs=1e-6), (k, max_fpr, i)


@pytest.mark.parametrize("ties", [False, True])
def test_spearman_and_kendall_tau_match_scipy(ties):
    scores, labels, where, length = _batch(4, ties=ties, graded=True)
    real = np.random.default_rng(5).standard_normal(labels.shape)
    labels = np.where(np.arange(len(labels))[:, None] % 3 == 2, real, labels)  # real-valued labels too
    rho, tau = jax.jit(lambda s, y, w: (jaxrank.spearman(s, y, where=w), jaxrank.kendall_tau(s, y, where=w)))(
        scores, labels, where
    )
    for i, n in _every_row(length):
        s, y = scores[i, :n], labels[i, :n]
        if n < 2 or np.ptp(s) == 0 or np.ptp(y) == 0:  # scipy: nan; jaxrank: 0
            assert float(rho[i]) == 0 and float(tau[i]) == 0
            continue
        assert float(rho[i]) == pytest.approx(spearmanr(s, y).statistic, abs=1e-9), i
        assert float(tau[i]) == pytest.approx(kendalltau(s, y).statistic, abs=1e-9), i


def test_average_precision_with_threshold_ties_matches_scikit_learn():
    scores, labels, where, length = _batch(6, ties=True)
    scores = np.round(scores / 2)  # many ties
    got = jax.jit(lambda s, y, w: jaxrank.average_precision(s, y, where=w, threshold_ties=True))(scores, labels, where)
    plain = jaxrank.average_precision(scores, labels, where=where)
    for i, n in _every_row(length):
        y = labels[i, :n]
        want = average_precision_score(y, scores[i, :n]) if y.sum() else 0.0
        assert float(got[i]) == pytest.approx(want, abs=1e-9), i
    assert not np.allclose(got, plain)  # the ties do matter here
    with pytest.raises(ValueError, match="threshold_ties needs the exact ranker"):
        jaxrank.average_precision(scores, labels, threshold_ties=True, ranker=jaxrank.softrank(1.0))


# The blog's set ------------------------------------------------------------------------
def _blog_pr_area(rec_list, pre_list):
    """The blog's PR_curve without its plot (scipy's simps is now simpson)."""
    rec_list, pre_list = list(rec_list) + [1, 0], list(pre_list) + [0, 1]
    rec_dict = {}
    for r, p in zip(rec_list, pre_list):
        rec_dict.setdefault(r, []).append(p)
    rec = sorted(rec_dict)
    return simpson([sum(rec_dict[r]) / len(rec_dict[r]) for r in rec], x=rec)


def test_set_precision_recall_and_pr_auc_match_the_blogs_code():
    rng = np.random.default_rng(7)
    retrieved = np.where(rng.random((40, 9)) < 0.8, rng.integers(0, 12, (40, 9)), -1)
    relevant = np.where(rng.random((40, 6)) < 0.8, rng.integers(0, 12, (40, 6)), -1)
    p = jax.jit(jaxrank.set_precision)(retrieved, relevant)
    r = jax.jit(jaxrank.set_recall)(retrieved, relevant)
    for i in range(40):
        got_ids, want_ids = [v for v in retrieved[i] if v >= 0], [v for v in relevant[i] if v >= 0]
        tp = len(set(got_ids) & set(want_ids))
        assert float(p[i]) == pytest.approx(tp / len(got_ids) if got_ids else 0.0)
        assert float(r[i]) == pytest.approx(tp / len(want_ids) if want_ids else 0.0)
    # curves of 1..8 points with repeated recalls (equal recalls are averaged)
    recall = np.round(rng.random((40, 8)) * 4) / 4
    precision = rng.random((40, 8))
    count = np.arange(40) % 8 + 1
    mask = np.arange(8) < count[:, None]
    got = jax.jit(lambda x, y, w: jaxrank.pr_auc(x, y, where=w))(recall, precision, mask)
    for i in range(40):
        want = _blog_pr_area(recall[i, : count[i]], precision[i, : count[i]])
        assert float(got[i]) == pytest.approx(want, abs=1e-9), i


# One keyword set for every metric -----------------------------------------------------
SCORE_METRICS = [
    "precision",
    "recall",
    "average_precision",
    "reciprocal_rank",
    "dcg",
    "ndcg",
    "success",
    "r_precision",
    "err",
    "rbp",
    "fallout",
    "num_ret",
    "num_rel",
    "num_rel_ret",
]


def test_every_metric_takes_the_same_keywords():
    rng = np.random.default_rng(8)
    scores, labels = rng.standard_normal((5, 10)), rng.integers(0, 3, (5, 10))
    where = rng.random((5, 10)) < 0.8
    judgments, jwhere = rng.integers(0, 3, (5, 14)), rng.random((5, 14)) < 0.9

    @jax.jit
    def every_metric(scores, labels, where, judgments, jwhere):
        common = dict(k=5, where=where, rel=1, ranker=jaxrank.hard(), judgments=judgments, judgments_where=jwhere)
        return {name: getattr(jaxrank, name)(scores, labels, **common) for name in SCORE_METRICS}

    values = every_metric(scores, labels, where, judgments, jwhere)
    for name, v in values.items():
        assert v.shape == (5,), name
    # where judgments matter, against the plain-numpy reference over the judged set
    for b in range(5):
        s, y = scores[b][where[b]], labels[b][where[b]]
        ranked = y[np.argsort(-s, kind="stable")]
        big_r = int(np.sum((judgments[b] >= 1) & jwhere[b]))
        hits = np.sum(ranked[:5] >= 1)
        assert values["recall"][b] == pytest.approx(hits / big_r if big_r else 0.0)
        assert values["num_rel"][b] == big_r
        ideal = np.sort(judgments[b][jwhere[b]])[::-1][:5]
        idcg = np.sum(ideal / np.log2(np.arange(2, len(ideal) + 2)))
        assert values["ndcg"][b] == pytest.approx(reference("dcg", ranked, k=5) / idcg if idcg else 0.0)
        assert values["precision"][b] == pytest.approx(reference("precision", ranked, k=5))
    # the new metrics take the keywords that can mean something to them
    plain = dict(where=where, ranker=jaxrank.hard("expected"), judgments=judgments, judgments_where=jwhere)
    jax.eval_shape(
        lambda: [
            jaxrank.spearman(scores, labels, **plain),
            jaxrank.kendall_tau(scores, labels, **plain),
            jaxrank.roc_auc(scores, labels, k=5, rel=1, **plain),
            jaxrank.precision_recall_curve(scores, labels, rel=1, **plain),
            jaxrank.graded_average_precision(scores, labels, rel=1, **plain),
        ]
    )


# Laws -------------------------------------------------------------------------------------
def _all_new(s, y, w):
    p, r, _ = jaxrank.precision_recall_curve(s, y, max_k=6, where=w)
    best, k = jaxrank.recall_at_fixed_precision(s, y, min_precision=0.5, max_k=6, where=w)
    return dict(
        curve_p=p,
        curve_r=r,
        best=best,
        best_k=k,
        auc=jaxrank.roc_auc(s, y, where=w),
        auc_fpr=jaxrank.roc_auc(s, y, where=w, max_fpr=0.4),
        auc_k=jaxrank.roc_auc(s, y, k=4, where=w),
        rho=jaxrank.spearman(s, y, where=w),
        tau=jaxrank.kendall_tau(s, y, where=w),
        ap_sk=jaxrank.average_precision(s, y, where=w, threshold_ties=True),
        graded_ap=jaxrank.graded_average_precision(s, y, where=w, rel=2),
        opa=jaxrank.ordered_pair_accuracy(s, y, where=w),
        opa_expected=jaxrank.ordered_pair_accuracy(s, y, where=w, ranker=jaxrank.hard("expected")),
    )


_ALL_JIT = jax.jit(_all_new)
MAX_N, PAD = 8, 6
lists = st.tuples(
    hnp.arrays(np.float64, MAX_N, elements=st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0])),
    hnp.arrays(np.int64, MAX_N, elements=st.integers(0, 3)),
    st.integers(1, MAX_N),
    st.integers(0, 2**31),
)


@settings(max_examples=15, deadline=None)
@given(lists)
def test_padding_never_changes_a_value(case):
    scores, labels, length, seed = case
    rng = np.random.default_rng(seed)
    where = np.arange(MAX_N) < length
    n = MAX_N + PAD
    slots = np.sort(rng.choice(n, MAX_N, replace=False))
    padded_scores, padded_labels = rng.standard_normal(n) * 5, rng.integers(0, 4, n)
    padded_where = np.zeros(n, bool)
    padded_scores[slots], padded_labels[slots], padded_where[slots] = scores, labels, where
    plain = _ALL_JIT(scores, labels, where)
    padded = _ALL_JIT(padded_scores, padded_labels, padded_where)
    for name in plain:
        np.testing.assert_allclose(padded[name], plain[name], atol=1e-12, err_msg=name)


def test_vmap_equals_a_loop_and_jit_equals_eager():
    scores, labels, where, _ = _batch(9, ties=True, graded=True, rows=6)
    mapped = jax.jit(jax.vmap(_all_new))(scores, labels, where)
    looped = [_ALL_JIT(scores[i], labels[i], where[i]) for i in range(6)]
    eager = _all_new(scores[5], labels[5], where[5])
    for name in mapped:
        np.testing.assert_allclose(mapped[name], np.stack([v[name] for v in looped]), atol=1e-12, err_msg=name)
        np.testing.assert_allclose(eager[name], looped[5][name], atol=1e-12, err_msg=name)


@pytest.mark.parametrize("n, std", [(200, 0.01), (200, 100.0), (1000, 1.0)])
def test_soft_spearman_loss_has_finite_nonzero_gradients_under_jit(n, std):
    rng = np.random.default_rng(n)
    labels = jnp.asarray(rng.integers(0, 5, (4, n)))
    scores = jnp.asarray(rng.standard_normal((4, n)) * std)
    ranker = jaxrank.softrank(std)  # strength on the scale of the score gaps

    @jax.jit
    def check(s):
        def loss_fn(v):  # the metric-loss pattern covers Spearman: no loss of its own is needed
            return jnp.mean(jaxrank.losses.metric_loss(v, labels, metric=jaxrank.spearman, ranker=ranker))

        loss, grad = jax.value_and_grad(loss_fn)(s)
        step = s - 0.5 * std * n * grad / jnp.linalg.norm(grad)
        exact = [jnp.mean(jaxrank.spearman(v, labels)) for v in (s, step)]
        return loss, grad, exact

    loss, grad, (before, after) = check(scores)
    assert np.isfinite(float(loss)) and np.all(np.isfinite(grad))
    assert float(jnp.linalg.norm(grad)) > 0
    assert float(after) > float(before)  # a step against the gradient raises the exact correlation


def test_bad_arguments_are_rejected_naming_them():
    s, y = jnp.array([0.3, 0.2, 0.1]), jnp.array([1, 0, 1])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="max_k must be"):
            jaxrank.precision_recall_curve(s, y, max_k=bad)
    with pytest.raises(ValueError, match="adaptive_k must be"):
        jaxrank.precision_recall_curve(s, y, adaptive_k=1)
    for bad in (-0.1, 1.5, "0.5"):
        with pytest.raises(ValueError, match="min_precision must be"):
            jaxrank.recall_at_fixed_precision(s, y, min_precision=bad)
    for bad in (0, 1.5, -0.2):
        with pytest.raises(ValueError, match="max_fpr must be"):
            jaxrank.roc_auc(s, y, max_fpr=bad)
    with pytest.raises(ValueError, match="k must be"):
        jaxrank.roc_auc(s, y, k=0)
    with pytest.raises(ValueError, match="labels must have the shape"):
        jaxrank.spearman(s, y[:2])
    with pytest.raises(ValueError, match="retrieved must be integer ids"):
        jaxrank.set_precision(jnp.array([0.5]), jnp.array([1]))
    with pytest.raises(ValueError, match="precision must have the shape of recall"):
        jaxrank.pr_auc(jnp.array([0.5, 1.0]), jnp.array([0.5]))
