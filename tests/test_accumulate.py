"""jaxrank.compute (many measures, one ranking) and jaxrank.accumulator (mergeable state):
against jaxrank.evaluate / pytrec_eval on TREC dicts, against each metric alone, under jit,
padding, chunking, empty-query policies, psum over 8 devices, and as a clu metric."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.measures.accumulate import accumulator, compute
from tests.devices import run_with_host_devices

pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)

# Measures of both spellings, with cutoffs longer and shorter than the lists, a rel level,
# judged-only, and the measures that read unjudged documents (bpref, infAP, Judged, unj).
TREC_MEASURES = [
    "map",
    "gm_map",
    "P.5,10",
    "recall.10",
    "ndcg",
    "ndcg_cut.5,10",
    "recip_rank",
    "Rprec",
    "bpref",
    "infAP",
    "iprec_at_recall",
    "11pt_avg",
    "set_F",
    "unj.5",
    "rbp",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "num_q",
    "success.1",
]
IR_MEASURES = [
    "nDCG@10",
    "AP",
    "R@100",
    "P(rel=2)@5",
    "RR@10",
    "ERR@10",
    "Judged@5",
    "Success@3",
    "P(judged_only=True)@5",
    "RBP(p=0.8,rel=1)",
]


def trec_dicts(seed: int, queries: int = 12):
    """Random qrels and run: graded and negative (pooled) rels, unjudged retrieved documents,
    tied scores, a query without a relevant document, runs shorter and longer than the qrels."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(queries):
        docs = [f"d{i:03d}" for i in rng.choice(60, size=rng.integers(8, 30), replace=False)]
        judged = docs[: rng.integers(3, len(docs))]
        rels = rng.choice([-1, 0, 0, 1, 2, 3], size=len(judged)) if q else np.zeros(len(judged), int)
        qrels[f"q{q}"] = {d: int(r) for d, r in zip(judged, rels)}
        retrieved = list(rng.choice(docs, size=rng.integers(2, len(docs)), replace=False))
        retrieved += [f"x{i}" for i in range(rng.integers(0, 4))]  # never judged
        run[f"q{q}"] = {d: float(rng.integers(0, 8)) / 8 for d in retrieved}
    return qrels, run


def trec_arrays(qrels, run):
    """Padded arrays in trec_eval's order convention: documents by docno descending, so that
    the stable tie policy is trec_eval's (score descending, then docno descending)."""
    qids = sorted(q for q in run if q in qrels)
    n = max(len(run[q]) for q in qids)
    m = max(len(qrels[q]) for q in qids)
    s = np.zeros((len(qids), n))
    y = np.zeros((len(qids), n))
    w = np.zeros((len(qids), n), bool)
    j = np.zeros((len(qids), m))
    jw = np.zeros((len(qids), m), bool)
    for i, q in enumerate(qids):
        docs = sorted(run[q], reverse=True)
        s[i, : len(docs)] = [run[q][d] for d in docs]
        # -1: absent from the qrels; a negative qrel (pooled, unjudged) is -2
        y[i, : len(docs)] = [qrels[q].get(d, -1) if qrels[q].get(d, 0) >= 0 else -2 for d in docs]
        w[i, : len(docs)] = True
        j[i, : len(qrels[q])] = list(qrels[q].values())
        jw[i, : len(qrels[q])] = True
    return qids, dict(scores=s, labels=y, where=w), dict(judgments=j, judgments_where=jw)


@pytest.fixture(scope="module")
def trec_case():
    qrels, run = trec_dicts(0)
    qids, lists, judg = trec_arrays(qrels, run)
    return jaxrank.evaluate(qrels, run, TREC_MEASURES + IR_MEASURES, per_query=True), qrels, run, qids, lists, judg


# ----------------------------------------------------------------------------- compute


def test_compute_equals_evaluate_per_query_on_trec_dicts(trec_case):
    want, _, _, qids, lists, judg = trec_case
    want = want["per_query"]
    got = compute(lists["scores"], lists["labels"], TREC_MEASURES + IR_MEASURES, where=lists["where"], **judg)
    names = set(want[qids[0]])
    assert set(got) == names  # every per-query measure, no summary-only one (gm_map, num_q)
    for name in names:
        np.testing.assert_allclose(got[name], [want[q][name] for q in qids], rtol=1e-12, atol=1e-12, err_msg=name)


def test_compute_equals_pytrec_eval(trec_case):
    import pytrec_eval

    _, qrels, run, qids, lists, judg = trec_case
    names = {"map", "ndcg_cut_10", "P_5", "recip_rank", "bpref", "Rprec", "recall_10", "infAP"}
    want = pytrec_eval.RelevanceEvaluator(
        qrels, {n.rsplit("_", 1)[0] if n[-1].isdigit() else n for n in names}
    ).evaluate(run)
    # the measure list of the test above: the compiled computation is reused
    got = compute(lists["scores"], lists["labels"], TREC_MEASURES + IR_MEASURES, where=lists["where"], **judg)
    for name in names:
        np.testing.assert_allclose(got[name], [want[q][name] for q in qids], rtol=1e-9, atol=1e-12, err_msg=name)


def random_lists(seed, shape=(6, 9), m=12, ties=True):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 4, shape) / 4 if ties else rng.standard_normal(shape)
    y = rng.integers(0, 4, shape).astype(float)
    w = rng.random(shape) < 0.8
    j = rng.integers(0, 4, shape[:-1] + (m,)).astype(float)
    j[..., : shape[-1]] = np.where(w, y, 0)  # the retrieved judged documents are among the judgments
    jw = rng.random(j.shape) < 0.9
    jw[..., : shape[-1]] = w
    return s, y, w, j, jw


@pytest.mark.parametrize("ties, with_judgments", [("stable", False), ("expected", True)])
def test_compute_equals_each_metric_called_alone(ties, with_judgments):
    s, y, w, j, jw = random_lists(1)
    r = jaxrank.hard(ties)

    @jax.jit
    def alone(s, y, w, j, jw):
        extra = dict(judgments=j, judgments_where=jw) if with_judgments else {}
        return {
            "nDCG@10": jaxrank.ndcg(s, y, k=10, where=w, ranker=r, **extra),
            "ndcg_cut.5": jaxrank.ndcg(s, y, k=5, where=w, ranker=r, **extra),
            "AP": jaxrank.average_precision(s, y, where=w, ranker=r, **extra),
            "R@5": jaxrank.recall(s, y, k=5, where=w, ranker=r, **extra),
            "P(rel=2)@5": jaxrank.precision(s, y, k=5, where=w, rel=2, ranker=r),
            "RR": jaxrank.reciprocal_rank(s, y, where=w, ranker=r),
            "Rprec": jaxrank.r_precision(s, y, where=w, ranker=r, **extra),
            "ERR@10": jaxrank.err(s, y, k=10, where=w, max_label=4, ranker=r),
            "RBP(p=0.8,rel=1)": jaxrank.rbp(s, y, p=0.8, where=w, ranker=r),
        }

    want = alone(s, y, w, j, jw)
    extra = dict(judgments=j, judgments_where=jw) if with_judgments else {}
    got = compute(s, y, list(want), where=w, ties=ties, **extra)
    assert len(got) == len(want)
    for name, value in want.items():
        np.testing.assert_allclose(
            got[name.replace(".", "_") if name[0].islower() else name], value, rtol=1e-12, atol=1e-12, err_msg=name
        )


def test_compute_under_jit_and_with_batch_axes():
    s, y, w, j, jw = random_lists(2, shape=(6, 9))
    names = ["nDCG@10", "AP", "bpref", "P.3"]
    eager = compute(s, y, names, where=w, judgments=j, judgments_where=jw)
    jitted = jax.jit(lambda *a: compute(a[0], a[1], names, where=a[2], judgments=a[3], judgments_where=a[4]))(
        s, y, w, j, jw
    )
    stacked = compute(
        s.reshape(2, 3, 9),
        y.reshape(2, 3, 9),
        names,
        where=w.reshape(2, 3, 9),
        judgments=j.reshape(2, 3, -1),
        judgments_where=jw.reshape(2, 3, -1),
    )
    for name in eager:
        np.testing.assert_allclose(jitted[name], eager[name], rtol=1e-12)
        np.testing.assert_allclose(stacked[name].reshape(-1), eager[name], rtol=1e-12)


def test_compute_padding_changes_nothing(trec_case):
    want, _, _, qids, lists, judg = trec_case
    rng = np.random.default_rng(4)

    def pad(a, k, fill):
        return np.concatenate([a, fill(a.shape[:-1] + (k,))], -1)

    got = compute(
        pad(lists["scores"], 5, lambda sh: rng.standard_normal(sh) * 100),
        pad(lists["labels"], 5, lambda sh: rng.integers(-2, 4, sh)),
        TREC_MEASURES + IR_MEASURES,
        where=pad(lists["where"], 5, lambda sh: np.zeros(sh, bool)),
        judgments=pad(judg["judgments"], 4, lambda sh: rng.integers(0, 4, sh)),
        judgments_where=pad(judg["judgments_where"], 4, lambda sh: np.zeros(sh, bool)),
    )
    for name in got:
        np.testing.assert_allclose(
            got[name], [want["per_query"][q][name] for q in qids], rtol=1e-12, atol=1e-12, err_msg=name
        )


def test_compute_rejects_bad_input_by_name():
    s, y, w, _, _ = random_lists(5)
    with pytest.raises(ValueError, match="labels must have the shape"):
        compute(s, y[:, :3], "AP")
    with pytest.raises(ValueError, match="where must have the shape"):
        compute(s, y, "AP", where=w[:2])
    with pytest.raises(ValueError, match="judgments must have shape"):
        compute(s, y, "AP", judgments=np.zeros((2, 4)))
    with pytest.raises(ValueError, match="judgments_where was given without judgments"):
        compute(s, y, "AP", judgments_where=w)
    with pytest.raises(ValueError, match="unknown measure 'nDGC@10'"):
        compute(s, y, "nDGC@10")
    with pytest.raises(ValueError, match=r"ties='expected': \['bpref'\]"):
        compute(s, y, ["AP", "bpref"], ties="expected")
    with pytest.raises(ValueError, match="no value of this kind"):
        compute(s, y, "gm_map")  # a summary only: accumulator
    with pytest.raises(ValueError, match="scores must be floating point"):
        compute(y.astype(int), y, "AP")


# ----------------------------------------------------------------------------- accumulator


def test_accumulator_equals_evaluate_summary(trec_case):
    want, _, _, _, lists, judg = trec_case
    want = want["all"]
    names = TREC_MEASURES + IR_MEASURES
    acc = accumulator(names)
    got = acc.compute(acc.update(acc.init(), lists["scores"], lists["labels"], where=lists["where"], **judg))
    assert set(got) == set(want)
    for name, value in want.items():
        assert float(got[name]) == pytest.approx(value, rel=1e-12, abs=1e-12), name


def chunks(arrays, size):
    """The queries in chunks of ``size`` rows, the last one padded with rows marked absent."""
    q = arrays[0].shape[0]
    for lo in range(0, q, size):
        part = [a[lo : lo + size] for a in arrays]
        rows = part[0].shape[0]
        qw = np.arange(size) < rows
        yield [np.concatenate([a, np.zeros((size - rows,) + a.shape[1:], a.dtype)]) for a in part], qw


def test_accumulator_chunked_and_merged_equals_one_shot(trec_case):
    _, _, _, _, lists, judg = trec_case
    arrays = [lists["scores"], lists["labels"], lists["where"], judg["judgments"], judg["judgments_where"]]
    acc = accumulator(TREC_MEASURES + IR_MEASURES, empty="skip")
    whole = acc.update(
        acc.init(), arrays[0], arrays[1], where=arrays[2], judgments=arrays[3], judgments_where=arrays[4]
    )
    merged = acc.init()
    for lo in (0, 5, 10):  # 12 queries: 5 + 5 + 2, each chunk padded to the whole shape
        rows = np.zeros(12, bool)
        rows[lo : lo + 5] = True
        part = [np.where(rows.reshape(-1, 1), a, np.zeros_like(a)) for a in arrays]
        state = acc.update(
            acc.init(), part[0], part[1], where=part[2], judgments=part[3], judgments_where=part[4], query_where=rows
        )
        merged = acc.merge(merged, state)
    # O(number of outputs), whatever the number of queries
    assert all(leaf.shape == (len(acc.names),) for leaf in jax.tree_util.tree_leaves(merged))
    a, b = acc.compute(whole), acc.compute(merged)
    for name in acc.names:
        np.testing.assert_allclose(b[name], a[name], rtol=1e-9, atol=1e-12, err_msg=name)


def test_accumulator_follows_aggregate_policies():
    s, y, w, j, jw = random_lists(6, shape=(10, 9))
    j[:3], y[:3] = 0, np.minimum(y[:3], 0)  # three queries without a relevant document
    names = ["AP", "nDCG@5", "P(rel=2)@3"]
    per_query = compute(s, y, names, where=w, judgments=j, judgments_where=jw)
    empties = [
        np.asarray(jaxrank.num_rel(s, y, where=w, rel=r, judgments=j, judgments_where=jw)) == 0 for r in (1, 1, 2)
    ]
    cases = [
        ("mean", None),
        ("mean", "zero"),
        ("mean", "one"),
        ("mean", "skip"),
        ("mean", "nan"),
        ("gmean", "skip"),
        ("min", "nan"),
        ("max", "one"),
    ]
    for how, empty in cases:
        weights = np.linspace(0.5, 2.0, 10) if how in ("mean", "gmean") else None
        acc = accumulator(names, how=how, empty=empty)
        got = acc.compute(acc.update(acc.init(), s, y, where=w, judgments=j, judgments_where=jw, weights=weights))
        for name, is_empty in zip(names, empties):
            want = jaxrank.aggregate(
                per_query[name],
                how=how,
                empty=empty or "zero",
                is_empty=None if empty is None else is_empty,
                weights=weights,
            )
            np.testing.assert_allclose(got[name], want, rtol=1e-12, equal_nan=True, err_msg=f"{name} {how} {empty}")
        assert math.isnan(float(got["AP"])) == (empty == "nan")


def test_accumulator_error_policy_and_median():
    s, y, w, j, jw = random_lists(7)
    j[0], y[0] = 0, 0
    acc = accumulator("AP", empty="error")
    with pytest.raises(ValueError, match=r"empty='error'\) for \['AP'\]: \[1\]"):
        acc.compute(acc.update(acc.init(), s, y, where=w, judgments=j, judgments_where=jw))
    rows = np.arange(6) > 0  # the empty query marked as padding
    state = acc.update(acc.init(), s, y, where=w, judgments=j, judgments_where=jw, query_where=rows)
    assert float(acc.compute(state)["AP"]) > 0
    with pytest.raises(ValueError, match="a median does not stream"):
        accumulator("AP", how="median")
    with pytest.raises(ValueError, match="weights are not supported with how='min'"):
        acc = accumulator("AP", how="min")
        acc.update(acc.init(), s, y, weights=np.ones(6))


def test_accumulator_psum_over_8_devices_equals_one_shot():
    out = run_with_host_devices(
        """
        import jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        from jax.sharding import Mesh, PartitionSpec as P
        from jaxrank.measures.accumulate import accumulator
        from tests.test_accumulate import random_lists

        s, y, w, j, jw = random_lists(8, shape=(64, 20), m=24)
        mesh = Mesh(np.array(jax.devices()), ("d",))
        for how in ("mean", "max"):
            acc = accumulator(["nDCG@10", "AP", "R@5", "P(rel=2)@5", "gm_map", "num_rel_ret", "RR"], how=how)
            # for means the plain psum of the state is the merge; acc.psum also pmax-es
            merge = (lambda st: jax.lax.psum(st, "d")) if how == "mean" else (lambda st: acc.psum(st, "d"))

            def step(s, y, w, j, jw):
                return merge(acc.update(acc.init(), s, y, where=w, judgments=j, judgments_where=jw))

            sharded = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P("d"),) * 5, out_specs=P()))
            got = acc.compute(sharded(s, y, w, j, jw))
            want = acc.compute(acc.update(acc.init(), s, y, where=w, judgments=j, judgments_where=jw))
            for name in acc.names:
                np.testing.assert_allclose(got[name], want[name], rtol=1e-9, err_msg=f"{how} {name}")
        print("ok", len(jax.devices()))
        """
    )
    assert out.strip().endswith("ok 8")


# ----------------------------------------------------------------------------- clu adapter


def test_clu_metric_merges_masked_chunks_to_the_accumulator_values():
    import clu.metrics
    import flax.struct

    from jaxrank.compat import clu as jclu

    s, y, w, j, jw = random_lists(9, shape=(8, 9))

    @flax.struct.dataclass
    class Metrics(clu.metrics.Collection):
        ndcg: jclu.metric("nDCG@5", ties="expected")
        ap: jclu.metric("map", ties="expected")
        p: jclu.metric("P(rel=2)@3", ties="expected", empty="skip")

    def chunk(rows):  # padded to 5 queries (mask=False rows) and 12 items (where=False)
        part = [np.pad(a[rows], [(0, 5 - a[rows].shape[0]), (0, 3)]) for a in (s, y, w)]
        jpart = [np.pad(a[rows], [(0, 5 - a[rows].shape[0]), (0, 0)]) for a in (j, jw)]
        return dict(
            scores=part[0],
            labels=part[1],
            where=part[2].astype(bool),
            judgments=jpart[0],
            judgments_where=jpart[1].astype(bool),
            mask=np.arange(5) < (rows.stop - rows.start),
        )

    chunks = [chunk(slice(0, 3)), chunk(slice(3, 8))]
    collected = Metrics.empty()
    for c in chunks:
        collected = collected.merge(Metrics.single_from_model_output(**c, logits="ignored"))
    got = collected.compute()
    # the reference: per-query values (tested against each metric alone above), aggregated
    per_query = compute(
        s, y, ["nDCG@5", "map", "P(rel=2)@3"], where=w, judgments=j, judgments_where=jw, ties="expected"
    )
    empty2 = np.asarray(jaxrank.num_rel(s, y, where=w, rel=2, judgments=j, judgments_where=jw)) == 0
    np.testing.assert_allclose(got["ndcg"], np.mean(per_query["nDCG@5"]), rtol=1e-12)
    np.testing.assert_allclose(got["ap"], np.mean(per_query["map"]), rtol=1e-12)
    np.testing.assert_allclose(
        got["p"], jaxrank.aggregate(per_query["P(rel=2)@3"], empty="skip", is_empty=empty2), rtol=1e-12
    )
    # an item mask ([B, n]) works as where: the 2 padding rows, unmarked, count as queries
    # without items (AP 0); reduce() (clu's merge of a gathered stack) merges
    AP = Metrics.__annotations__["ap"]
    items = [AP.from_model_output(**dict(c, where=None, mask=c["where"] & c["mask"][:, None])) for c in chunks]
    stacked = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *items).reduce()
    np.testing.assert_allclose(stacked.compute(), np.sum(per_query["map"]) / 10, rtol=1e-12)
    with pytest.raises(ValueError, match="has 2 outputs"):
        jclu.metric("P.5,10")
    with pytest.raises(ValueError, match="mask must have the batch shape"):
        AP.from_model_output(scores=s, labels=y, mask=w[:, :2])
