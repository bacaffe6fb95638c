"""``jaxrank.evaluate`` against pytrec_eval-terrier and ir_measures on random data.

The data have tied scores, graded labels 0..3, unjudged retrieved documents, negative rels
(pooled but unjudged), relevant documents that were not retrieved, and queries missing on
either side. Each reference is called once per data set; every measure it supports is
compared per query within 1e-6 (tests run with jax x64).

pytrec_eval-terrier bundles trec_eval 9.x, so jaxrank is called with ``version="9"`` (the
recall cutoffs of ``iprec_at_recall``/``11pt_avg`` and float32 score comparisons differ
from trec_eval 10.0, which the reference outputs of test_trec_eval_outputs.py pin down).
"""

import importlib
import math
import subprocess

import numpy as np
import pytest
import pytrec_eval

import jaxrank
from jaxrank.measures.parse import MeasureError, parse_measures


def random_data(seed, n_queries=20, ties=True, numeric_qids=False):
    """qrels and run dicts; see the module docstring."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for i in range(n_queries):
        qid = str(101 + i) if numeric_qids else f"q{i:02d}"
        pool = [f"D{rng.integers(0, 10**6):06d}-{j}" for j in range(int(rng.integers(4, 50)))]
        if i % 7 != 3:  # 3, 10, 17: only in the run
            judged = rng.choice(len(pool), size=int(rng.integers(1, len(pool))), replace=False)
            rels = rng.choice([-1, 0, 0, 0, 1, 1, 2, 3], size=judged.size)
            qrels[qid] = {pool[j]: int(r) for j, r in zip(judged, rels)}
            for j in range(int(rng.integers(0, 4))):  # judged, never retrieved
                qrels[qid][f"X{i}-{j}"] = int(rng.integers(0, 4))
        if i % 7 != 5:  # 5, 12, 19: only in the qrels
            retrieved = rng.choice(len(pool), size=int(rng.integers(1, len(pool) + 1)), replace=False)
            if ties:
                scores = rng.integers(0, 6, size=retrieved.size) / 4.0
            else:
                scores = rng.permutation(retrieved.size) + rng.random() / 2
            run[qid] = {pool[j]: float(s) for j, s in zip(retrieved, scores)}
    return qrels, run


def close(a, b, tol=1e-6):
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return abs(a - b) <= tol * max(1.0, abs(b))


# pytrec_eval reports these as 0.0 (they are strings in trec_eval)
NOT_NUMERIC = {"runid", "relstring"}
PYTREC_MEASURES = sorted(set(pytrec_eval.supported_measures) - NOT_NUMERIC)
SUMMARY_ONLY = {"num_q", "gm_map", "gm_bpref"}


@pytest.mark.parametrize(
    "seed, level, judged_only, cells_per_call", [(0, 1, False, None), (1, 2, True, None), (2, 1, False, 64)]
)
def test_agrees_with_pytrec_eval(seed, level, judged_only, cells_per_call, monkeypatch):
    if cells_per_call is not None:  # evaluate in slices of 8 queries (one compiled call each)
        monkeypatch.setattr(importlib.import_module("jaxrank.measures.engine"), "_CELLS_PER_CALL", cells_per_call)
    qrels, run = random_data(seed)
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, set(PYTREC_MEASURES), relevance_level=level, judged_docs_only_flag=judged_only
    )
    want = evaluator.evaluate(run)
    got = jaxrank.evaluate(
        qrels, run, PYTREC_MEASURES, per_query=True, rel_level=level, judged_only=judged_only, version="9"
    )
    assert set(got["per_query"]) == set(want) == set(qrels) & set(run)
    names = set(next(iter(want.values())))
    bad = []
    for qid, values in want.items():
        for name, value in values.items():
            if name in SUMMARY_ONLY:
                continue
            if name == "num_rel" and level != 1:
                continue  # pytrec_eval counts num_rel at level 1 whatever relevance_level is
            mine = got["per_query"][qid][name]
            if not close(float(mine), value):
                bad.append((qid, name, mine, value))
    assert not bad, bad[:10]
    for name in ("gm_map", "gm_bpref"):
        agg = pytrec_eval.compute_aggregated_measure(name, [v[name] for v in want.values()])
        assert close(got["all"][name], agg), name
    assert got["all"]["num_q"] == len(want)
    covered = {c.name for m in parse_measures(PYTREC_MEASURES) for c in m.columns}
    assert names - NOT_NUMERIC <= covered


IR_MEASURES = [
    "nDCG@10",
    "nDCG(dcg='exp-log2')@10",
    "P(rel=2)@5",
    "R@100",
    "AP",
    "AP@100",
    "RR",
    "RR@10",
    "ERR@20",
    "Judged@10",
    "infAP",
    "IPrec@0.5",
    "Bpref",
    "Rprec",
    "Success@5",
    "SetP",
    "SetR",
    "SetF(beta=0.5)",
    "SetAP",
    "NumQ",
    "NumRel",
    "NumRet(rel=1)",
    "NumRet",
    "MAP",
    "MRR",
    "NDCG",
    "BPref",
    "RPrec",
    "NumRelRet",
    "SetRelP",
    "nDCG",
    "P@5",
    "nDCG(gains={0:0,1:1,2:5,3:20})@10",
]
# gdeval (a perl script bundled with ir_measures) prints 5 decimals
GDEVAL = {"nDCG(dcg='exp-log2')@10", "ERR@20"}


def test_agrees_with_ir_measures():
    import ir_measures

    # numeric qids for gdeval; no tied scores: ir_measures' msmarco and judged providers
    # break ties by docno ascending, trec_eval (and jaxrank) by docno descending
    qrels, run = random_data(2, ties=False, numeric_qids=True)
    parsed = {s: ir_measures.parse_measure(s) for s in IR_MEASURES}
    got = jaxrank.evaluate(qrels, run, IR_MEASURES, per_query=True)
    want: dict = {}
    # One measure per call: asked for nDCG, nDCG@10 and nDCG(gains=...)@10 at once, ir_measures
    # (0.4.x, pytrec_eval provider) can report one's value under another's name, depending on
    # the set's order, which string hashing randomises per process (PYTHONHASHSEED=0 shows it).
    for measure in set(parsed.values()):
        for metric in ir_measures.iter_calc([measure], qrels, run):
            want.setdefault(metric.measure, {})[metric.query_id] = metric.value
    bad, seen = [], set()
    for s, measure in parsed.items():
        assert measure in want, f"ir_measures gave nothing for {s}"
        tol = 1e-5 if s in GDEVAL else 1e-6
        for qid, value in want[measure].items():
            if s == "NumQ":
                continue
            if qid not in run:  # some providers score queries missing from the run: 0
                assert value == 0, (s, qid, value)
                continue
            mine = got["per_query"][qid][s]
            seen.add(s)
            if not close(float(mine), float(value), tol):
                bad.append((s, qid, mine, value))
    assert not bad, bad[:10]
    assert len(seen) == len(IR_MEASURES) - 1
    agg = ir_measures.calc_aggregate([parsed[s] for s in ("NumQ", "NumRel", "NumRet", "NumRelRet", "AP")], qrels, run)
    assert got["all"]["NumQ"] == agg[parsed["NumQ"]]
    assert got["all"]["NumRel"] == agg[parsed["NumRel"]]
    assert got["all"]["NumRet"] == agg[parsed["NumRet"]]
    assert got["all"]["NumRelRet"] == agg[parsed["NumRelRet"]]
    # ir_measures averages over every query of the qrels, 0 for those the run lacks: -c
    assert close(jaxrank.evaluate(qrels, run, ["AP"], complete=True)["AP"], agg[parsed["AP"]])


def test_rbp():
    # No ir_measures provider computes RBP offline (trectools and cwl_eval are not
    # installed), so RBP is checked against trec_eval's rbp and against metrics.rbp.
    qrels, run = random_data(3)
    got = jaxrank.evaluate(qrels, run, ["RBP(p=0.8)", "rbp.p=0.8", "RBP(p=0.5, rel=2)", "RBP(p=0.5)@5"], per_query=True)
    one = {q: {d: min(max(r, 0), 1) for d, r in docs.items()} for q, docs in qrels.items()}
    binary = jaxrank.evaluate(one, run, ["RBP(p=0.8)", "rbp.p=0.8"], per_query=True)
    for qid, values in got["per_query"].items():
        assert values["RBP(p=0.8)"] == values["rbp_p=0.8"]
        # binary labels: trec_eval's graded rbp is RBP with rel=1
        assert close(binary["per_query"][qid]["RBP(p=0.8)"], binary["per_query"][qid]["rbp_p=0.8"])
        docs = sorted(run[qid].items(), key=lambda kv: (-kv[1], tuple(-b for b in kv[0].encode())))
        labels = [qrels[qid].get(d, 0) for d, _ in docs]
        want = sum((1 - 0.5) * 0.5**i for i, y in enumerate(labels) if y >= 2)
        assert close(values["RBP(p=0.5, rel=2)"], want)
        top = max([0] + [y for y in qrels[qid].values()])
        want5 = sum(0.5 * 0.5**i * (max(y, 0) / top if top > 1 else max(y, 0)) for i, y in enumerate(labels[:5]))
        assert close(values["RBP(p=0.5)@5"], want5)


def test_measure_strings_and_aliases():
    names = lambda ms: [c.name for m in parse_measures(ms) for c in m.columns]  # noqa: E731
    assert names(["P.10,5", "ndcg_cut.10"]) == ["P_5", "P_10", "ndcg_cut_10"]
    assert names(["all_trec", "P.5"])[names(["all_trec", "P.5"]).index("P_5") + 1] == "relstring"
    assert names(["P.5", "map"]) == ["map", "P_5"]  # trec_eval's order
    assert names(["iprec_at_recall..5,.25"]) == ["iprec_at_recall_0.25", "iprec_at_recall_0.50"]
    assert names(["ndcg.1=3,2=9"]) == ["ndcg_1=3,2=9"]
    assert len(names(["official"])) == 1 + 1 + 3 + 5 + 11 + 9
    qrels, run = random_data(4)
    got = jaxrank.evaluate(
        qrels,
        run,
        [
            "MAP",
            "AP",
            "map",
            "MRR",
            "RR",
            "recip_rank",
            "NDCG",
            "nDCG",
            "ndcg",
            "BPref",
            "Bpref",
            "bpref",
            "RPrec",
            "Rprec",
            "NumRelRet",
            "NumRet(rel=1)",
            "num_rel_ret",
            "SetRelP",
            "SetP(relative=True)",
            "set_relative_P",
            "nDCG@10",
            "ndcg_cut.10",
            "P@5",
            "P.5",
            "IPrec@0.5",
            "iprec_at_recall.0.5",
        ],
    )
    for group in (
        ("MAP", "AP", "map"),
        ("MRR", "RR", "recip_rank"),
        ("NDCG", "nDCG", "ndcg"),
        ("BPref", "Bpref", "bpref"),
        ("RPrec", "Rprec"),
        ("NumRelRet", "NumRet(rel=1)", "num_rel_ret"),
        ("SetRelP", "SetP(relative=True)", "set_relative_P"),
        ("nDCG@10", "ndcg_cut_10"),
        ("P@5", "P_5"),
        ("IPrec@0.5", "iprec_at_recall_0.50"),
    ):
        assert len({got[n] for n in group}) == 1, group


@pytest.mark.parametrize(
    "bad, hint",
    [
        ("nDGC@10", "nDCG"),
        ("ndcg_cutt.10", "ndcg_cut"),
        ("mapp", "map"),
        ("P(rell=2)@5", "rel"),
        ("P", None),
        ("P@0", "positive"),
        ("utility.1,2", "4 coefficients"),
        ("P.5,5", "duplicate"),
    ],
)
def test_bad_measures(bad, hint):
    if bad == "P":  # trec_eval's P with its default cutoffs: fine
        parse_measures([bad])
        return
    with pytest.raises(MeasureError) as e:
        parse_measures([bad])
    assert hint in str(e.value)


def test_inputs_and_outputs():
    qrels, run = random_data(5)
    records_q = [(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    records_r = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    import pandas as pd

    frame_q = pd.DataFrame(records_q, columns=["query_id", "doc_id", "relevance"])
    frame_r = pd.DataFrame(records_r, columns=["query_id", "doc_id", "score"])
    a = jaxrank.evaluate(qrels, run, ["map", "P.5", "nDCG@10"])
    b = jaxrank.evaluate(frame_q, frame_r, ["map", "P.5", "nDCG@10"])
    assert a == b
    frame = jaxrank.evaluate(qrels, run, ["map", "num_ret", "runid"], per_query=True, as_frame=True)
    assert list(frame.columns) == ["runid", "num_ret", "map"]  # trec_eval's order
    assert frame.loc["all", "map"] == pytest.approx(a["map"])
    assert len(frame) == len(set(qrels) & set(run)) + 1
    complete = jaxrank.evaluate(qrels, run, ["map", "num_q"], complete=True)
    assert complete["num_q"] == len(qrels)
    assert complete["map"] == pytest.approx(a["map"] * len(set(qrels) & set(run)) / len(qrels))
    with pytest.raises(ValueError, match="no query"):
        jaxrank.evaluate({"a": {"d": 1}}, {"b": {"d": 1.0}}, ["map"])


def test_judgments_are_put_in_ideal_order_once_per_gain_map():
    # nDCG (inside metrics.ndcg), ndcg_cut, G and Rndcg share the ideal ordering of the judgments;
    # a gain map has its own. On CPU every exact ranking is one host callback.
    import jax

    from jaxrank.measures.engine import _stage_sort
    from jaxrank.measures.parse import Plan

    def sorts(names):
        plan = Plan(parse_measures(names))
        q, n, m = 3, 8, 6
        arrays = (
            np.zeros((q, n)),
            np.zeros((q, n), np.int32),
            np.ones((q, n), bool),
            np.zeros((q, m), np.int32),
            np.ones((q, m), bool),
        )
        with jax.enable_x64(True):
            return str(jax.make_jaxpr(lambda *a: _stage_sort(plan, *a))(*arrays)).count("pure_callback")

    assert sorts(["ndcg", "ndcg_cut.5,10", "G", "Rndcg", "ndcg_rel"]) == 2  # the run, the judgments
    assert sorts(["ndcg", "nDCG(dcg='exp-log2')@10", "G"]) == 2
    assert sorts(["ndcg", "G", "nDCG(gains={0:0,1:1,2:5})@10"]) == 3  # + the order by the mapped gains


def _signed_zero_data(seed):
    """:func:`random_data` with scores rounded to one decimal: ties, and ``-0.0`` beside ``0.0``."""
    rng = np.random.default_rng(seed)
    qrels, run = random_data(seed, numeric_qids=True)
    run = {q: {d: float(np.round(0.3 * rng.standard_normal(), 1)) for d in docs} for q, docs in run.items()}
    assert sum(str(s) == "-0.0" for docs in run.values() for s in docs.values()) >= 5
    return qrels, run


def test_negative_zero_ties_zero_as_in_pytrec_eval():
    qrels, run = _signed_zero_data(6)
    unsigned = {q: {d: s + 0.0 for d, s in docs.items()} for q, docs in run.items()}  # -0.0 + 0.0 = 0.0
    want = pytrec_eval.RelevanceEvaluator(qrels, set(PYTREC_MEASURES)).evaluate(run)
    got = jaxrank.evaluate(qrels, run, PYTREC_MEASURES, per_query=True, version="9")
    assert got == jaxrank.evaluate(qrels, unsigned, PYTREC_MEASURES, per_query=True, version="9")
    bad = [
        (q, n, got["per_query"][q][n], v)
        for q, values in want.items()
        for n, v in values.items()
        if n not in SUMMARY_ONLY and not close(float(got["per_query"][q][n]), v, 1e-9)
    ]
    assert not bad, bad[:10]


def test_negative_zero_ties_zero_as_in_ir_measures():
    import ir_measures

    qrels, run = _signed_zero_data(7)
    names = ["AP", "nDCG", "Bpref", "infAP", "ERR@20", "nDCG@10", "RR"]
    got = jaxrank.evaluate(qrels, run, names, per_query=True)
    for s in names:
        for metric in ir_measures.iter_calc([ir_measures.parse_measure(s)], qrels, run):
            if metric.query_id in got["per_query"]:
                tol = 1e-5 if s == "ERR@20" else 1e-9  # gdeval prints 5 decimals
                assert close(got["per_query"][metric.query_id][s], float(metric.value), tol), (s, metric)


def test_query_set_choice_follows_trec_eval_or_ir_measures(trec_eval_binary, tmp_path):
    """``queries="run"``: plain trec_eval (qrels queries without results skipped);
    ``queries="qrels"``: ``trec_eval -c`` and ir_measures (they score 0)."""
    import ir_measures

    qrels, run = random_data(8)
    assert set(qrels) - set(run) and set(run) - set(qrels)
    names = ["map", "ndcg_cut.10", "P.5", "recip_rank"]
    by_run = jaxrank.evaluate(qrels, run, names, queries="run")
    by_qrels = jaxrank.evaluate(qrels, run, names, queries="qrels")
    assert by_run == jaxrank.evaluate(qrels, run, names)  # the default
    assert by_qrels == jaxrank.evaluate(qrels, run, names, complete=True)
    both = set(qrels) & set(run)
    for s, name in [("AP", "map"), ("nDCG@10", "ndcg_cut_10"), ("P@5", "P_5"), ("RR", "recip_rank")]:
        want = ir_measures.calc_aggregate([ir_measures.parse_measure(s)], qrels, run)
        assert close(by_qrels[name], float(next(iter(want.values())))), s
        assert close(by_run[name], by_qrels[name] * len(qrels) / len(both)), s
    # trec_eval: -c on every qrels query; without -c on the qrels of the run's queries (it
    # stops with exit status 4 when a qrels query has no results)
    lines = lambda d, fmt: "".join(fmt(q, k, v) for q in sorted(d) for k, v in d[q].items())  # noqa: E731
    (tmp_path / "run").write_text(lines(run, lambda q, d, s: f"{q} Q0 {d} 0 {s!r} t\n"))
    (tmp_path / "qrels").write_text(lines(qrels, lambda q, d, r: f"{q} 0 {d} {r}\n"))
    (tmp_path / "kept").write_text(lines({q: qrels[q] for q in both}, lambda q, d, r: f"{q} 0 {d} {r}\n"))
    for qrels_file, flags, mine in [("qrels", ["-c"], by_qrels), ("kept", [], by_run)]:
        args = [
            str(trec_eval_binary),
            *flags,
            "-m",
            "map",
            "-m",
            "ndcg_cut.10",
            "-m",
            "P.5",
            "-m",
            "recip_rank",
            str(tmp_path / qrels_file),
            str(tmp_path / "run"),
        ]
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            name, _, value = line.split()
            assert f"{mine[name]:.4f}" == value, (flags, name)
    missing = {q: qrels[q] for q in list(set(qrels) - set(run))[:1]}
    trec_eval_stops = subprocess.run(
        [str(trec_eval_binary), str(tmp_path / "qrels"), str(tmp_path / "run")], capture_output=True, check=False
    )
    assert trec_eval_stops.returncode == 4 and missing


@pytest.mark.parametrize("queries, complete", [("all", False), ("run", True), ("QRELS", False)])
def test_bad_query_set_is_a_value_error(queries, complete):
    with pytest.raises(ValueError, match="queries"):
        jaxrank.evaluate({"a": {"d": 1}}, {"a": {"d": 1.0}}, ["map"], queries=queries, complete=complete)


@pytest.mark.parametrize(
    "variant, canonical",
    [
        ("ndcg@10", "nDCG@10"),
        ("Ndcg(dcg='exp-log2')@5", "nDCG(dcg='exp-log2')@5"),
        ("map@100", "AP@100"),
        ("rr", "RR"),
        ("NDCG_CUT.10", "ndcg_cut.10"),
        ("ndcg_cut_10", "ndcg_cut.10"),
        ("P_5", "P.5"),
        ("iprec_at_recall_0.10", "iprec_at_recall.0.1"),
        ("ALL_TREC", "all_trec"),
    ],
)
def test_case_and_separator_variants_name_the_same_measure(variant, canonical):
    assert [m.family for m in parse_measures([variant])] == [m.family for m in parse_measures([canonical])]
    assert [m.cuts for m in parse_measures([variant])] == [m.cuts for m in parse_measures([canonical])]


def test_ambiguous_cutoff_spelling_suggests_ir_measures_and_trec_eval_names():
    with pytest.raises(MeasureError, match=r"did you mean nDCG@10, ndcg_cut\.10\?"):
        parse_measures(["ndcg_10"])
    with pytest.raises(MeasureError, match=r"did you mean nDCG@5, ndcg_cut\.5\?"):
        parse_measures(["NDCG_5"])


def test_several_runs_by_name_give_each_runs_result():
    """jaxrank.evaluate(qrels, {name: run, ...}): the qrels read once, {name: result}, each
    result what the run alone gives (a {qid: {docno: score}} dict stays one run)."""
    qrels, run = random_data(4, n_queries=6)
    other = {q: {d: -s for d, s in docs.items()} for q, docs in run.items()}
    alone = [jaxrank.evaluate(qrels, r, ["map", "hits@3"], per_query=True) for r in (run, other)]
    both = jaxrank.evaluate(qrels, {"a": run, "b": other}, ["map", "hits@3"], per_query=True)
    assert both == {"a": alone[0], "b": alone[1]}
