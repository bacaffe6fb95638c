"""Hard metrics: hand-computed values, trec_eval parity, laws, jit/vmap, errors."""

import math

import chex
import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import pytrec_eval
from absl.testing import parameterized
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxrank
from tests.brute import CUTOFF_METRICS, reference

pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)

STABLE = jaxrank.hard("stable")
BOUNDED = {
    "precision",
    "recall",
    "average_precision",
    "reciprocal_rank",
    "success",
    "ndcg",
    "err",
    "rbp",
    "fallout",
    "r_precision",
}


# Hand-computed values ----------------------------------------------------------------
# One list, ranked by score: labels in rank order are [0, 2, 1, 0, 1]; 3 relevant.
SCORES = jnp.array([0.1, 0.9, 0.5, 0.7, 0.3])  # order: 1, 3, 2, 4, 0
LABELS = jnp.array([1, 0, 1, 2, 0])  # in rank order: 0, 2, 1, 0, 1


def test_precision_at_k_by_hand():
    # top 3 in rank order: 0, 2, 1 -> 2 relevant
    assert float(jaxrank.precision(SCORES, LABELS, k=3)) == pytest.approx(2 / 3)
    # k beyond the list still divides by k (trec_eval); adaptive divides by 5
    assert float(jaxrank.precision(SCORES, LABELS, k=10)) == pytest.approx(3 / 10)
    assert float(jaxrank.precision(SCORES, LABELS, k=10, adaptive=True)) == pytest.approx(3 / 5)


def test_recall_counts_judged_documents_outside_the_list():
    assert float(jaxrank.recall(SCORES, LABELS, k=2)) == pytest.approx(1 / 3)
    judged = jnp.array([1, 2, 1, 0, 3])  # 4 relevant in the qrels
    assert float(jaxrank.recall(SCORES, LABELS, k=2, judgments=judged)) == pytest.approx(1 / 4)


def test_average_precision_by_hand():
    # relevant at ranks 2, 3, 5: (1/2 + 2/3 + 3/5) / 3
    want = (1 / 2 + 2 / 3 + 3 / 5) / 3
    assert float(jaxrank.average_precision(SCORES, LABELS)) == pytest.approx(want)
    # cut at 3, still divided by all 3 relevant (trec_eval map_cut)
    assert float(jaxrank.average_precision(SCORES, LABELS, k=3)) == pytest.approx((1 / 2 + 2 / 3) / 3)


def test_reciprocal_rank_and_success_by_hand():
    assert float(jaxrank.reciprocal_rank(SCORES, LABELS)) == pytest.approx(1 / 2)
    assert float(jaxrank.reciprocal_rank(SCORES, LABELS, k=1)) == 0.0
    np.testing.assert_allclose(jaxrank.success(SCORES, LABELS, k=(1, 2)), [0.0, 1.0])


def test_dcg_and_ndcg_by_hand():
    dcg = 2 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(6)
    ideal = 2 / math.log2(2) + 1 / math.log2(3) + 1 / math.log2(4)
    assert float(jaxrank.dcg(SCORES, LABELS)) == pytest.approx(dcg, rel=1e-6)
    assert float(jaxrank.ndcg(SCORES, LABELS)) == pytest.approx(dcg / ideal, rel=1e-6)
    exp_dcg = 3 / math.log2(3) + 1 / math.log2(4) + 1 / math.log2(6)
    assert float(jaxrank.dcg(SCORES, LABELS, gain="exp")) == pytest.approx(exp_dcg, rel=1e-6)
    # a callable gain and discount: unit gain, 1/rank discount
    dcg_rr = jaxrank.dcg(SCORES, LABELS, gain=lambda y: (y > 0) * 1.0, discount=lambda r: 1 / r)
    assert float(dcg_rr) == pytest.approx(1 / 2 + 1 / 3 + 1 / 5)


def test_r_precision_err_rbp_fallout_by_hand():
    # R = 3: top 3 holds 2 relevant
    assert float(jaxrank.r_precision(SCORES, LABELS)) == pytest.approx(2 / 3)
    # ERR with max grade 4: p(y) = (2^y - 1) / 16; ranks 2 (y=2), 3 (y=1), 5 (y=1)
    p2, p1 = 3 / 16, 1 / 16
    want = p2 / 2 + (1 - p2) * p1 / 3 + (1 - p2) * (1 - p1) * p1 / 5
    assert float(jaxrank.err(SCORES, LABELS)) == pytest.approx(want, rel=1e-6)
    # RBP p=0.5: relevant at ranks 2, 3, 5 -> 0.5 * (0.5 + 0.25 + 0.0625)
    assert float(jaxrank.rbp(SCORES, LABELS, p=0.5)) == pytest.approx(0.5 * (0.5 + 0.25 + 0.0625))
    # fallout@2: one of the two non-relevant documents is in the top 2
    assert float(jaxrank.fallout(SCORES, LABELS, k=2)) == pytest.approx(1 / 2)


def test_counts_by_hand():
    assert int(jaxrank.num_ret(SCORES, LABELS)) == 5
    assert int(jaxrank.num_ret(SCORES, LABELS, k=3)) == 3
    assert int(jaxrank.num_rel(SCORES, LABELS)) == 3
    assert int(jaxrank.num_rel(SCORES, LABELS, rel=2)) == 1
    np.testing.assert_allclose(jaxrank.num_rel_ret(SCORES, LABELS, k=(1, 3, 5)), [0, 2, 3])


def test_a_query_without_relevant_documents_scores_zero():
    labels = jnp.zeros(5, int)
    for name in ["recall", "average_precision", "ndcg", "r_precision", "reciprocal_rank"]:
        assert float(getattr(jaxrank, name)(SCORES, labels)) == 0.0


# Parity with trec_eval (pytrec_eval) ---------------------------------------------------
def _random_trec_batch(seed, batch=60, n=40, outside=15):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.standard_normal((batch, n)), 1)  # many ties
    labels = rng.integers(0, 5, (batch, n)) * (rng.random((batch, n)) < 0.4)
    where = rng.random((batch, n)) < 0.85
    where[0] = False  # an empty list
    where[1, 3:] = False  # a short list
    labels[2] = 0  # no relevant retrieved
    extra = rng.integers(0, 3, (batch, outside)) * (rng.random((batch, outside)) < 0.5)
    judgments = np.concatenate([labels, extra], 1)
    judged_where = np.concatenate([where, rng.random((batch, outside)) < 0.9], 1)
    return scores, labels, where, judgments, judged_where


def _to_trec(scores, labels, where, judgments, judged_where):
    """qrels/run dicts whose docno-descending tie order is the input order."""
    batch, n = scores.shape
    qrels, run = {}, {}
    for b in range(batch):
        q = f"q{b:03d}"
        qrels[q] = {f"x{j:03d}": int(judgments[b, j]) for j in range(n, judgments.shape[1]) if judged_where[b, j]}
        run[q] = {}
        for i in range(n):
            if where[b, i]:
                docno = f"d{n - i:03d}"  # earlier index = larger docno = first among ties
                qrels[q][docno] = int(labels[b, i])
                run[q][docno] = float(scores[b, i])
        if not qrels[q]:
            qrels[q]["x999"] = 0
    return qrels, run


@pytest.mark.parametrize("seed", [0, 1])
def test_metrics_match_trec_eval(seed):
    scores, labels, where, judgments, jwhere = _random_trec_batch(seed)
    qrels, run = _to_trec(scores, labels, where, judgments, jwhere)
    measures = {
        "P",
        "recall",
        "map",
        "map_cut",
        "recip_rank",
        "ndcg",
        "ndcg_cut",
        "Rprec",
        "success",
        "num_rel",
        "num_rel_ret",
        "num_ret",
    }
    results = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    # a query with nothing retrieved is trec_eval's -c case, covered in the trec tests
    qids = [q for q in sorted(results) if run[q]]
    rows = [int(q[1:]) for q in qids]

    def ref(name):
        return np.array([results[q][name] for q in qids])

    J = dict(judgments=judgments, judgments_where=jwhere)
    common = dict(where=where, ranker=STABLE)
    cuts = (5, 10, 15, 20, 30, 100)
    checks = {
        "P": jaxrank.precision(scores, labels, k=cuts, **common),
        "recall": jaxrank.recall(scores, labels, k=cuts, **common, **J),
        "map_cut": jaxrank.average_precision(scores, labels, k=cuts, **common, **J),
        "ndcg_cut": jaxrank.ndcg(scores, labels, k=cuts, **common, **J),
    }
    for prefix, values in checks.items():
        for c, cut in enumerate(cuts):
            if prefix in ("ndcg_cut", "map_cut") and cut not in (5, 10, 15, 20, 30, 100):
                continue
            np.testing.assert_allclose(
                np.asarray(values)[rows, c], ref(f"{prefix}_{cut}"), atol=1e-6, err_msg=f"{prefix}_{cut}"
            )
    singles = {
        "map": jaxrank.average_precision(scores, labels, **common, **J),
        "recip_rank": jaxrank.reciprocal_rank(scores, labels, **common),
        "ndcg": jaxrank.ndcg(scores, labels, **common, **J),
        "Rprec": jaxrank.r_precision(scores, labels, **common, **J),
        "num_rel": jaxrank.num_rel(scores, labels, where=where, **J),
        "num_rel_ret": jaxrank.num_rel_ret(scores, labels, **common),
        "num_ret": jaxrank.num_ret(scores, labels, **common),
    }
    for name, values in singles.items():
        np.testing.assert_allclose(np.asarray(values)[rows], ref(name), atol=1e-6, err_msg=name)
    success = jaxrank.success(scores, labels, k=(1, 5, 10), **common)
    for c, cut in enumerate((1, 5, 10)):
        np.testing.assert_allclose(np.asarray(success)[rows, c], ref(f"success_{cut}"), atol=1e-6)


# Laws -------------------------------------------------------------------------------
def _call(name, scores, labels, where=None, k=5, ranker=jaxrank.hard()):
    kwargs = dict(where=where, ranker=ranker)
    if name != "r_precision":
        kwargs["k"] = k
    return getattr(jaxrank, name)(scores, labels, **kwargs)


MAX_N, PAD = 8, 6
lists = st.tuples(
    hnp.arrays(np.float64, MAX_N, elements=st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0, np.nan])),
    hnp.arrays(np.int64, MAX_N, elements=st.integers(0, 3)),
    st.integers(1, MAX_N),
    st.sampled_from(["stable", "expected", "optimistic", "pessimistic"]),
    st.integers(0, 2**31),
)
_JITTED = {}


def _jitted(ties):
    """Every metric in one compiled function per policy: fixed shapes keep hypothesis fast,
    and one program per policy compiles faster than one per metric."""
    if ties not in _JITTED:
        names = CUTOFF_METRICS + ["r_precision"]
        _JITTED[ties] = jax.jit(
            lambda s, y, w: {name: _call(name, s, y, w, ranker=jaxrank.hard(ties)) for name in names}
        )
    return _JITTED[ties]


@settings(max_examples=40, deadline=None)
@given(lists)
def test_padding_never_changes_a_value(case):
    scores, labels, length, ties, seed = case
    rng = np.random.default_rng(seed)
    where = np.arange(MAX_N) < length
    n = MAX_N + PAD
    # masked items go anywhere; the real items keep their relative order ("stable")
    slots = np.sort(rng.choice(n, MAX_N, replace=False))
    padded_scores = rng.standard_normal(n) * 5
    padded_labels = rng.integers(0, 4, n)
    padded_where = np.zeros(n, bool)
    padded_scores[slots], padded_labels[slots], padded_where[slots] = scores, labels, where
    plain = _jitted(ties)(scores, labels, where)
    padded = _jitted(ties)(padded_scores, padded_labels, padded_where)
    for name in CUTOFF_METRICS + ["r_precision"]:
        np.testing.assert_allclose(padded[name], plain[name], atol=1e-12, err_msg=name)


@settings(max_examples=40, deadline=None)
@given(lists)
def test_values_stay_within_their_bounds(case):
    scores, labels, length, ties, _ = case
    where = np.arange(MAX_N) < length
    values = _jitted(ties)(scores, labels, where)
    for name in BOUNDED:
        v = float(values[name])
        assert 0.0 <= v <= 1.0 + 1e-12, name


class JitVariantsTest(chex.TestCase):
    """Each metric, with and without jit, against the plain-numpy reference."""

    @chex.variants(with_jit=True, without_jit=True)
    @parameterized.parameters(*(CUTOFF_METRICS + ["r_precision"]))
    def test_jit_and_eager_match_the_reference(self, name):
        rng = np.random.default_rng(8)
        scores = rng.standard_normal((4, 30))
        labels = rng.integers(0, 3, (4, 30))
        where = rng.random((4, 30)) < 0.8
        fn = self.variant(lambda s, y, w: _call(name, s, y, w, ranker=STABLE))
        got = np.asarray(fn(jnp.asarray(scores), jnp.asarray(labels), jnp.asarray(where)))
        for b in range(4):
            s, y = scores[b][where[b]], labels[b][where[b]]
            ranked = y[np.argsort(-s, kind="stable")]
            want = reference(name, ranked, **({} if name == "r_precision" else dict(k=5)))
            np.testing.assert_allclose(got[b], want, atol=1e-12)


@pytest.mark.parametrize("ties", ["stable", "expected", "optimistic"])
def test_vmap_equals_a_loop(ties):
    rng = np.random.default_rng(9)
    scores = jnp.asarray(np.round(rng.standard_normal((5, 25)), 1))
    labels = jnp.asarray(rng.integers(0, 3, (5, 25)))
    ranker = jaxrank.hard(ties)
    # one program for every metric (jit equals eager: test_metrics_core.py)
    fn = lambda s, y: {name: _call(name, s, y, k=(3, 10), ranker=ranker) for name in CUTOFF_METRICS}
    one = jax.jit(fn)
    looped = [one(scores[i], labels[i]) for i in range(5)]
    mapped = jax.jit(jax.vmap(fn))(scores, labels)
    for name in CUTOFF_METRICS:
        want = np.stack([row[name] for row in looped])
        np.testing.assert_allclose(mapped[name], want, atol=1e-12, err_msg=name)


def test_leading_batch_axes_are_kept():
    rng = np.random.default_rng(10)
    scores, labels = rng.standard_normal((2, 3, 12)), rng.integers(0, 3, (2, 3, 12))
    out = jaxrank.ndcg(scores, labels, k=(1, 5))
    assert out.shape == (2, 3, 2)
    np.testing.assert_allclose(out.reshape(6, 2), jaxrank.ndcg(scores.reshape(6, 12), labels.reshape(6, 12), k=(1, 5)))


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_low_precision_scores_give_the_float32_value(dtype):
    rng = np.random.default_rng(12)
    scores = jnp.asarray(rng.standard_normal((6, 20)), dtype)
    labels = rng.integers(0, 3, (6, 20))
    for name in CUTOFF_METRICS:
        np.testing.assert_allclose(
            _call(name, scores, labels), _call(name, scores.astype(jnp.float32), labels), rtol=1e-6, err_msg=name
        )


def test_all_cutoffs_come_from_one_ranking_pass():
    scores = jnp.asarray(np.random.default_rng(13).standard_normal((3, 50)))
    labels = jnp.asarray(np.random.default_rng(14).integers(0, 3, (3, 50)))
    jaxpr = str(jax.make_jaxpr(lambda s: jaxrank.ndcg(s, labels, k=(1, 5, 10, 50)))(scores))
    # one ranking of the scores (a host sort) and one of the ideal (top_k or sort)
    assert jaxpr.count("pure_callback") + jaxpr.count("top_k") <= 2


def test_ndcg_with_given_ideal_ranks_equals_ndcg_without():
    rng = np.random.default_rng(15)
    scores = jnp.asarray(rng.standard_normal((4, 9)))
    labels = jnp.asarray(rng.integers(0, 4, (4, 9)))
    where = jnp.asarray(rng.random((4, 9)) < 0.8)
    judgments = jnp.asarray(rng.integers(-1, 4, (4, 6)))
    jwhere = jnp.asarray(rng.random((4, 6)) < 0.9)
    keep = jwhere & (judgments > 0)  # items of gain 0 may be left out of the ideal ranking

    @jax.jit
    def both(scores, judgments, jwhere):
        kw = dict(k=(1, 3, 9), where=where, judgments=judgments, judgments_where=jwhere)
        ideal = STABLE(judgments.astype(scores.dtype), keep, depth=None)
        return jaxrank.ndcg(scores, labels, **kw), jaxrank.ndcg(scores, labels, ideal_ranks=ideal, **kw)

    plain, shared = both(scores, judgments, jwhere)
    np.testing.assert_allclose(shared, plain, rtol=1e-12)
    # vmap under jit: the same batching rules, one program instead of every operation alone
    mapped = jax.jit(
        jax.vmap(
            lambda s, j, jw, w, kp: jaxrank.ndcg(
                s,
                labels[0],
                k=(1, 3, 9),
                where=w,
                judgments=j,
                judgments_where=jw,
                ideal_ranks=STABLE(j.astype(s.dtype), kp, depth=None),
            )
        )
    )(scores, judgments, jwhere, where, keep)
    np.testing.assert_allclose(
        mapped,
        jaxrank.ndcg(
            scores,
            jnp.broadcast_to(labels[0], scores.shape),
            k=(1, 3, 9),
            where=where,
            judgments=judgments,
            judgments_where=jwhere,
        ),
        rtol=1e-12,
    )
    ideal = STABLE(labels.astype(scores.dtype), where & (labels > 0), depth=None)
    np.testing.assert_allclose(
        jaxrank.ndcg(scores, labels, where=where, ideal_ranks=ideal, gain="exp"),
        jaxrank.ndcg(scores, labels, where=where, gain="exp"),
        rtol=1e-12,
    )
    with pytest.raises(ValueError, match="ideal_ranks must be exact"):
        jaxrank.ndcg(scores, labels, ideal_ranks=jaxrank.approx(1.0)(scores, where, depth=None))


# Bad input --------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, -1, 2.5, True, "5", (), (3, 0)])
def test_bad_cutoff_is_rejected_naming_k(k):
    with pytest.raises(ValueError, match="k must be"):
        jaxrank.ndcg(SCORES, LABELS, k=k)


def test_mismatched_shapes_are_rejected():
    with pytest.raises(ValueError, match="labels must have the shape of scores"):
        jaxrank.precision(SCORES, LABELS[:3], k=2)
    with pytest.raises(ValueError, match="where must have the shape of scores"):
        jaxrank.precision(SCORES, LABELS, k=2, where=jnp.ones(4, bool))
    with pytest.raises(ValueError, match="judgments must have shape"):
        jaxrank.recall(SCORES, LABELS, judgments=jnp.ones((2, 3)))
    with pytest.raises(ValueError, match="judgments_where must have the shape of judgments"):
        jaxrank.recall(SCORES, LABELS, judgments=jnp.ones(7), judgments_where=jnp.ones(6, bool))
    with pytest.raises(ValueError, match="scores must have at least one axis"):
        jaxrank.ndcg(1.0, 1)
    with pytest.raises(ValueError, match="scores must be floating point"):
        jaxrank.ndcg(jnp.arange(3), jnp.arange(3))


def test_unknown_gain_discount_and_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="gain must be"):
        jaxrank.ndcg(SCORES, LABELS, gain="cubic")
    with pytest.raises(ValueError, match="discount must be"):
        jaxrank.dcg(SCORES, LABELS, discount="log10")
    with pytest.raises(ValueError, match="p must be in"):
        jaxrank.rbp(SCORES, LABELS, p=1.5)
    with pytest.raises(ValueError, match="ranker must be"):
        jaxrank.ndcg(SCORES, LABELS, ranker="hard")
    for mult in (0, -0.5, (), (0.5, "2"), True):
        with pytest.raises(ValueError, match="mult must be"):
            jaxrank.r_precision(SCORES, LABELS, mult=mult)


def test_r_precision_with_many_mults_equals_one_call_per_mult():
    rng = np.random.default_rng(4)
    scores = jnp.asarray(rng.standard_normal((5, 12)))
    labels = jnp.asarray(rng.integers(0, 3, (5, 12)))
    judgments = jnp.asarray(rng.integers(0, 3, (5, 20)))
    mults = [0.2, 0.7, 1.0, 1.4, 2.0]
    many = jaxrank.r_precision(scores, labels, judgments=judgments, mult=mults)
    assert many.shape == (5, len(mults))
    for j, mult in enumerate(mults):
        np.testing.assert_array_equal(many[:, j], jaxrank.r_precision(scores, labels, judgments=judgments, mult=mult))


def test_nan_scores_are_ranked_last_under_jit():
    scores = jnp.array([jnp.nan, 0.2, 0.1])
    labels = jnp.array([1, 0, 0])
    rr = jax.jit(lambda s: jaxrank.reciprocal_rank(s, labels))(scores)
    assert float(rr) == pytest.approx(1 / 3)


# weights= and ordered pair accuracy, against rax ------------------------------------
def rax_case(seed, rows=6, n=9):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.standard_normal((rows, n)), 0)  # many ties
    labels = rng.integers(0, 4, (rows, n)).astype(np.float64)
    weights = rng.random((rows, n)) * 2
    where = rng.random((rows, n)) < 0.8
    where[0] = False  # an empty list
    segments = rng.choice(np.array([3, -1, 8]), (rows, n))
    return scores, labels, weights, where, segments


@pytest.mark.parametrize("k", [None, 1, 4])
@pytest.mark.parametrize("name", ["dcg", "ndcg"])
def test_weights_give_rax_values(name, k):
    import rax

    scores, labels, weights, where, _ = rax_case(k or 0)
    ours = getattr(jaxrank, name)(scores, labels, k=k, where=where, weights=weights, gain="exp")
    theirs = getattr(rax, f"{name}_metric")(scores, labels, topn=k, where=where, weights=weights, reduce_fn=None)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    unweighted = getattr(jaxrank, name)(scores, labels, k=k, where=where, gain="exp")
    assert not np.allclose(ours, unweighted)


@pytest.mark.parametrize("name", ["dcg", "ndcg", "precision", "recall", "average_precision", "reciprocal_rank"])
def test_segments_give_rax_segmented_values_in_its_per_item_layout(name):
    import rax

    rax_name = {"average_precision": "ap", "reciprocal_rank": "mrr"}.get(name, name)
    scores, labels, weights, where, segments = rax_case(7)
    kw = dict(weights=weights, gain="exp") if name in ("dcg", "ndcg") else {}
    ours_kw = dict(adaptive=True) if name == "precision" else {}  # rax divides by the retrieved
    ours = getattr(jaxrank, name)(scores, labels, k=3, where=where, segments=segments, num_segments=3, **kw, **ours_kw)
    slot, present, _ = jaxrank.metrics.segment_slots(segments, where, num_segments=3)
    # rax puts each list's value at its first valid item, 0 elsewhere
    slot = np.asarray(slot)
    first = (slot >= 0) & np.array([[s not in row[:i] for i, s in enumerate(row)] for row in slot])
    per_item = np.where(first, np.take_along_axis(np.asarray(ours), np.maximum(slot, 0), -1), 0)
    kw.pop("gain", None)
    theirs = getattr(rax, f"{rax_name}_metric")(
        scores, labels, topn=3, where=where, segments=segments, reduce_fn=None, **kw
    )
    np.testing.assert_allclose(per_item, theirs, rtol=1e-12, atol=1e-12)
    mean = getattr(rax, f"{rax_name}_metric")(scores, labels, topn=3, where=where, segments=segments, **kw)
    np.testing.assert_allclose(np.sum(ours) / np.sum(present), mean, rtol=1e-12)


def test_weights_errors_name_the_argument():
    s, y = jnp.array([0.3, 0.2]), jnp.array([1, 0])
    with pytest.raises(ValueError, match=r"weights must have the shape of scores \(2,\)"):
        jaxrank.dcg(s, y, weights=jnp.ones(3))
    with pytest.raises(ValueError, match="weights cannot be combined with judgments"):
        jaxrank.ndcg(s, y, weights=jnp.ones(2), judgments=jnp.ones(4))


def brute_opa(scores, labels, where, tied):
    """Pairs with y_i > y_j: 1 when s_i > s_j, ``tied`` when equal."""
    good = total = 0.0
    for i in np.flatnonzero(where):
        for j in np.flatnonzero(where):
            if labels[i] > labels[j]:
                total += 1
                good += 1.0 if scores[i] > scores[j] else tied if scores[i] == scores[j] else 0.0
    return good / total if total else 0.0


def test_ordered_pair_accuracy_gives_rax_values_and_counts_ties_by_the_policy():
    import rax

    scores, labels, _, where, _ = rax_case(3, rows=8, n=10)
    binary = (labels >= 2).astype(np.float64)
    policies = [("pessimistic", 0.0), ("expected", 0.5), ("optimistic", 1.0)]

    @jax.jit  # every value in one program (eagerly, every operation compiles alone)
    def values(scores, labels, binary, where):
        opa = jaxrank.ordered_pair_accuracy
        return dict(
            ours=opa(scores, labels, where=where),
            rax=rax.opa_metric(scores, labels, where=where, reduce_fn=None),
            ties={ties: opa(scores, labels, where=where, ranker=jaxrank.hard(ties)) for ties, _ in policies},
            binary=opa(scores, binary, where=where, ranker=jaxrank.hard("expected")),
            auc=jaxrank.roc_auc(scores, binary, where=where, rel=1),
        )

    v = values(scores, labels, binary, where)
    np.testing.assert_allclose(v["ours"], v["rax"], rtol=1e-12)
    for ties, tied in policies:
        want = [brute_opa(s, y, w, tied) for s, y, w in zip(scores, labels, where)]
        np.testing.assert_allclose(v["ties"][ties], want, rtol=1e-12, err_msg=ties)
    # binary labels, half credit for ties: the ROC AUC
    np.testing.assert_allclose(v["binary"], v["auc"], rtol=1e-12)


def test_smooth_ordered_pair_accuracy_is_the_mean_pair_probability_and_has_a_gradient():
    scores, labels, _, where, _ = rax_case(4, rows=3, n=7)
    scores = scores + np.random.default_rng(0).standard_normal(scores.shape) * 0.3
    ranker = jaxrank.approx(0.5, units="score")

    @jax.jit  # one program (eagerly, every operation compiles alone)
    def opa(s):
        return jaxrank.ordered_pair_accuracy(s, labels, where=where, ranker=ranker)

    # approx's chance that i is above j: sigmoid((s_i - s_j) / 0.5)
    want = []
    for s, y, w in zip(scores, labels, where):
        pairs = [(i, j) for i in np.flatnonzero(w) for j in np.flatnonzero(w) if y[i] > y[j]]
        want.append(np.mean([1 / (1 + np.exp(-(s[i] - s[j]) / 0.5)) for i, j in pairs]) if pairs else 0.0)
    np.testing.assert_allclose(opa(scores), want, rtol=1e-10)
    grad = jax.jit(jax.grad(lambda s: jnp.sum(opa(s))))(scores)
    assert np.all(np.isfinite(grad)) and np.abs(grad).sum() > 0
    one = jax.jit(jax.vmap(lambda s, y, w: jaxrank.ordered_pair_accuracy(s, y, where=w, ranker=ranker)))
    np.testing.assert_allclose(one(scores, labels, where), opa(scores), rtol=1e-12)
