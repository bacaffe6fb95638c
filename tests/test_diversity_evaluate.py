"""The ir_measures diversity names in ``jaxrank.evaluate`` and ``jaxrank eval -m``, per query
equal to ``ir_measures.iter_calc`` with its pyndeval provider on generated qrels and runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import jaxrank
from jaxrank.cli import main
from jaxrank.trec import MeasureError

ir_measures = pytest.importorskip("ir_measures")
pytest.importorskip("pyndeval")
pd = pytest.importorskip("pandas")

MEASURES = [
    *("alpha_nDCG@20", "alpha_nDCG(alpha=0.3)@10", "alpha_DCG@5", "alpha_DCG(alpha=0.9)@20", "alpha_nDCG@1"),
    *("ERR_IA@20", "ERR_IA@1", "nERR_IA@10", "nERR_IA@1", "ERR_IA(rel=2)@5", "nERR_IA(judged_only=True)@20"),
    *("NRBP", "NRBP(alpha=0.2, beta=0.8)", "nNRBP", "nNRBP(beta=0.3)", "AP_IA", "AP_IA(rel=2)"),
    *("AP_IA(judged_only=True)", "P_IA@5", "P_IA@20", "P_IA(rel=3)@10", "StRecall@5", "StRecall@20", "StRecall@3"),
]


def _data(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Subtopic qrels (graded judgments, negative ones, a query with nothing relevant) and
    a run with tied scores, unjudged documents and queries missing on either side."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for q in range(12):
        qid = f"q{q}"
        subtopics = [f"s{s}" for s in rng.choice(9, size=rng.integers(1, 6), replace=False)]
        pool = [f"doc{d}" for d in rng.choice(50, size=rng.integers(2, 25), replace=False)]
        if q < 10:
            for d in pool:
                for s in subtopics:
                    if rng.random() < 0.6:
                        rel = 0 if q == 0 else int(rng.choice([-1, 0, 0, 1, 1, 2, 3]))
                        qrels.append((qid, d, rel, s))
        if q >= 2:
            n = int(rng.integers(1, 35))
            docs = rng.choice(70, size=n, replace=False)
            scores = np.round(rng.normal(size=n), 1)  # ties
            run.extend((qid, f"doc{d}", float(s)) for d, s in zip(docs, scores))
    qrels_frame = pd.DataFrame(qrels, columns=["query_id", "doc_id", "relevance", "iteration"])
    return qrels_frame, pd.DataFrame(run, columns=["query_id", "doc_id", "score"])


def _ir_measures(qrels: pd.DataFrame, run: pd.DataFrame, measures: list[str]) -> dict[str, dict[str, float]]:
    """ir_measures' values, one measure per call: its pyndeval provider hands one run
    iterator to each invocation (one per rel, alpha, beta and judged_only), so the second
    finds it spent and every query gets the default 0; and its judged_only filter indexes
    that iterator (a TypeError). judged_only is therefore asked as ir_measures means it:
    the measure without it, on the run's judged documents only."""
    judged = set(zip(qrels.query_id, qrels.doc_id))
    keep = np.array([pair in judged for pair in zip(run.query_id, run.doc_id)], bool)
    provider = ir_measures.providers.registry["pyndeval"]
    out: dict[str, dict[str, float]] = {}
    for name in measures:
        measure = ir_measures.parse_measure(name)
        on = run
        if measure.params.get("judged_only"):
            measure, on = measure(judged_only=False), run[keep]
        for metric in provider.iter_calc([measure], qrels, on):
            out.setdefault(metric.query_id, {})[name] = metric.value
    return out


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_values_per_query_equal_ir_measures_with_pyndeval(seed):
    """ir_measures gives the qrels queries the run lacks its default, 0, and averages over
    every qrels query: jaxrank's queries="qrels" (the default, "run", skips them)."""
    qrels, run = _data(seed)
    want = _ir_measures(qrels, run, MEASURES)
    got = jaxrank.evaluate(qrels, run, MEASURES, per_query=True, queries="qrels")
    assert sorted(got["per_query"]) == sorted(want)
    for qid, values in want.items():
        for name, value in values.items():
            assert _same(got["per_query"][qid][name], value), (qid, name, got["per_query"][qid][name], value)
    for name in MEASURES:  # ir_measures' aggregate: the mean over the queries
        mean = float(np.mean([want[q][name] for q in want]))
        assert _same(got["all"][name], mean), name
    in_both = jaxrank.evaluate(qrels, run, MEASURES, per_query=True)["per_query"]
    assert sorted(in_both) == sorted(set(qrels.query_id) & set(run.query_id))
    assert all(_same(v, got["per_query"][q][name]) for q in in_both for name, v in in_both[q].items())


def test_the_same_qrels_file_and_eval_m_read_the_second_column_as_the_subtopic(tmp_path, capsys):
    qrels, run = _data(3)
    qrels_path, run_path = tmp_path / "qrels", tmp_path / "run"
    qrels_path.write_text("".join(f"{r.query_id} {r.iteration} {r.doc_id} {r.relevance}\n" for r in qrels.itertuples()))
    run_path.write_text("".join(f"{r.query_id} Q0 {r.doc_id} 0 {r.score} tag\n" for r in run.itertuples()))
    measures = ["alpha_nDCG@20", "nERR_IA@10", "StRecall@10"]
    from_frame = jaxrank.evaluate(qrels, run, measures, per_query=True)
    assert jaxrank.evaluate(str(qrels_path), str(run_path), measures, per_query=True) == from_frame
    status = main(["eval", "-q", *(f"-m{m}" for m in measures), str(qrels_path), str(run_path)])
    out, err = capsys.readouterr()
    assert status == 0
    assert err.startswith("jaxrank eval: skipped 2 run queries") and err.endswith(": q10, q11\n")  # not judged
    lines = [line.split("\t") for line in out.splitlines()]
    for name, qid, value in lines:
        want = from_frame["all"][name.strip()] if qid == "all" else from_frame["per_query"][qid][name.strip()]
        assert value == f"{want:6.4f}"


def test_records_and_nested_dicts_read_as_the_dataframe():
    qrels, run = _data(4)
    Qrel = ir_measures.Qrel  # query_id, doc_id, relevance, iteration
    records = [Qrel(r.query_id, r.doc_id, r.relevance, r.iteration) for r in qrels.itertuples()]
    nested: dict = {}
    for r in qrels.itertuples():
        nested.setdefault(r.query_id, {}).setdefault(r.iteration, {})[r.doc_id] = r.relevance
    want = jaxrank.evaluate(qrels, run, ["alpha_nDCG@10", "AP_IA"], per_query=True)
    for source in (records, nested):
        assert jaxrank.evaluate(source, run, ["alpha_nDCG@10", "AP_IA"], per_query=True) == want


def test_complete_counts_the_qrels_queries_the_run_lacks_as_0():
    qrels, run = _data(5)
    some = jaxrank.evaluate(qrels, run, ["alpha_nDCG@20"], per_query=True)
    every = jaxrank.evaluate(qrels, run, ["alpha_nDCG@20"], per_query=True, queries="qrels")
    missing = set(every["per_query"]) - set(some["per_query"])
    assert missing == {"q0", "q1"}
    assert all(every["per_query"][q]["alpha_nDCG@20"] == 0.0 for q in missing)


@pytest.mark.parametrize(
    "measure, message",
    [
        ("alpha_nDCG", "needs @cutoff"),
        ("alpha_nDCG@21", "go to 20"),
        ("ERR_IA(alpha=0.3)@5", "no parameter 'alpha'"),
        ("NRBP(beta=1.5)", r"beta must be in \[0, 1\]"),
    ],
)
def test_bad_diversity_measures_are_refused(measure, message):
    qrels, run = _data(0)
    with pytest.raises(MeasureError, match=message):
        jaxrank.evaluate(qrels, run, [measure])


def test_diversity_and_other_measures_are_evaluated_apart():
    qrels, run = _data(0)
    with pytest.raises(MeasureError, match="not a diversity measure"):
        jaxrank.evaluate(qrels, run, ["alpha_nDCG@10", "nDCG@10"])


def test_max_docs_keeps_the_first_documents_in_pyndevals_order():
    """-M / max_docs cuts each query after score descending, docno ascending: the same as
    evaluating those first documents alone."""
    qrels, run = _data(6)
    ordered = run.assign(neg=-run.score).sort_values(["query_id", "neg", "doc_id"])
    first = ordered.groupby("query_id").head(5)[["query_id", "doc_id", "score"]]
    measures = ["alpha_nDCG@10", "AP_IA", "nNRBP"]
    cut = jaxrank.evaluate(qrels, run, measures, per_query=True, max_docs=5)["per_query"]
    alone = jaxrank.evaluate(qrels, first, measures, per_query=True)["per_query"]
    assert cut.keys() == alone.keys()
    assert all(_same(cut[q][m], alone[q][m]) for q in cut for m in measures)


def test_eval_m_names_the_file_and_line_of_a_bad_subtopic_qrels_line(tmp_path, capsys):
    (tmp_path / "qrels").write_text("q1 s1 d1 1\nq1 s2 d1 x\n")
    (tmp_path / "run").write_text("q1 Q0 d1 1 1.0 tag\n")
    status = main(["eval", "-m", "alpha_nDCG@5", str(tmp_path / "qrels"), str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert f"{tmp_path / 'qrels'}:2:" in err and err.count("\n") == 1


def test_subtopic_qrels_with_comments_read_as_trec_eval_10_reads_qrels(tmp_path, capsys):
    """`#` comment lines and blank lines are skipped for the ir_measures names, as the
    ordinary qrels reader skips them; line numbers still count them; messages show text.
    ndeval's own reading (jaxrank ndeval) still refuses them."""
    plain = "q1 s1 d1 1\nq1 s2 d2 2\nq1 s1 d3 0\n"
    (tmp_path / "plain").write_text(plain)
    (tmp_path / "commented").write_text("# topic subtopic docno judgment\n\n" + plain.replace("\n", "\n  # x y z\n", 1))
    (tmp_path / "bad").write_text("# a comment\nq1 s1 d1 1\n\nq1 s2 d2 two\n")
    (tmp_path / "run").write_text("q1 Q0 d2 1 3.0 tag\nq1 Q0 d3 2 2.0 tag\nq1 Q0 d1 3 1.0 tag\n")
    outs = []
    for name in ("plain", "commented"):
        assert main(["eval", "-q", "-m", "alpha_nDCG@5", str(tmp_path / name), str(tmp_path / "run")]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and outs[0].startswith("alpha_nDCG@5          \tq1\t")
    status = main(["eval", "-m", "alpha_nDCG@5", str(tmp_path / "bad"), str(tmp_path / "run")])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert err == f"jaxrank: {tmp_path / 'bad'}:4: the judgment must be an integer, got 'two'\n"
    status = main(["ndeval", str(tmp_path / "commented"), str(tmp_path / "run")])
    assert status == 1 and "the topic must be a natural number, got '#'" in capsys.readouterr().err
