"""jaxrank.compare and `jaxrank compare`: p-values against scipy applied to trec_eval's own
per-query values, corrections against statsmodels, the report's formats, bad input."""

import json
import subprocess

import numpy as np
import pytest
import scipy.stats as st
from statsmodels.stats.multitest import multipletests

import jaxrank
from jaxrank.cli import main

N_QUERIES, N_DOCS = 24, 30


@pytest.fixture(scope="module")
def trec_files(tmp_path_factory):
    """Synthetic qrels and three runs on every qrels query (so that trec_eval's query set,
    -c or not, is the compared one)."""
    rng = np.random.default_rng(11)
    path = tmp_path_factory.mktemp("compare")
    rels = rng.integers(0, 3, size=(N_QUERIES, N_DOCS)) * (rng.random((N_QUERIES, N_DOCS)) < 0.4)
    with open(path / "qrels", "w") as f:
        for q in range(N_QUERIES):
            for d in range(N_DOCS):
                f.write(f"q{q} 0 d{d} {rels[q, d]}\n")
    runs = {}
    for name, signal in (("a.run", 0.0), ("b.run", 0.6), ("c.run", 0.3)):
        scores = rng.random((N_QUERIES, N_DOCS)) + signal * rels
        runs[name] = path / name
        with open(runs[name], "w") as f:
            for q in range(N_QUERIES):
                for rank, d in enumerate(np.argsort(-scores[q])):
                    f.write(f"q{q} Q0 d{d} {rank + 1} {scores[q, d]:.6f} {name}\n")
    return path / "qrels", runs


def _trec_eval_per_query(binary, qrels, run, measures):
    args = [str(binary), "-q"] + [f"-m{m}" for m in measures] + [str(qrels), str(run)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    values = {}
    for line in out.splitlines():
        measure, qid, value = line.split()
        if qid != "all":
            values.setdefault(measure, {})[qid] = float(value)
    return values


def _cli_json(capsys, *argv):
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("test", ["ttest", "wilcoxon", "sign"])
def test_cli_pvalues_equal_scipy_on_trec_eval_values(capsys, trec_files, trec_eval_binary, test):
    """P@k per-query values print exactly in trec_eval's 4 decimals: the p-values must equal
    scipy's on them."""
    qrels, runs = trec_files
    measures = ["P.5,10"]
    records = _cli_json(
        capsys, "compare", str(qrels), str(runs["a.run"]), str(runs["b.run"]), str(runs["c.run"]),
        "-m", "P.5,10", "--baseline", "a.run", "--test", test, "--format", "json", "--n-resamples", "200",
    )  # fmt: skip
    ref = {name: _trec_eval_per_query(trec_eval_binary, qrels, path, measures) for name, path in runs.items()}
    tested = [r for r in records if r["baseline"] is not None]
    assert {(r["system"], r["measure"]) for r in tested} == {
        (s, m) for s in ("b.run", "c.run") for m in ("P_5", "P_10")
    }
    for measure in ("P_5", "P_10"):
        qids = sorted(ref["a.run"][measure])
        base = np.array([ref["a.run"][measure][q] for q in qids])
        pvalues = []
        for system in ("b.run", "c.run"):
            x = np.array([ref[system][measure][q] for q in qids])
            if test == "ttest":
                p = st.ttest_rel(x, base).pvalue
            elif test == "wilcoxon":
                p = st.wilcoxon(x, base).pvalue
            else:
                p = st.binomtest(int((x > base).sum()), int((x != base).sum())).pvalue
            pvalues.append(p)
            (rec,) = [r for r in tested if r["system"] == system and r["measure"] == measure]
            np.testing.assert_allclose(rec["pvalue"], p, rtol=1e-9)
            np.testing.assert_allclose(rec["mean"], x.mean(), rtol=1e-12)
            assert rec["ci_low"] <= rec["mean"] <= rec["ci_high"]
        adjusted = multipletests(pvalues, method="holm")[1]
        got = [next(r for r in tested if r["system"] == s and r["measure"] == measure) for s in ("b.run", "c.run")]
        np.testing.assert_allclose([r["pvalue_adjusted"] for r in got], adjusted, rtol=1e-9)
        assert [r["significant"] for r in got] == [bool(a < 0.05) for a in adjusted]


def test_every_pair_randomization_and_formats(trec_files, trec_eval_binary):
    """Every pair, the randomization test (Monte Carlo, 24 queries) within its error of
    scipy's on trec_eval's map values (4 decimals), and the report's formats."""
    qrels, runs = trec_files
    report = jaxrank.compare(str(qrels), {k: str(v) for k, v in runs.items()}, ["map"], n_resamples=4000)
    assert report.pairs == ((1, 0), (2, 0), (2, 1))
    ref = {name: _trec_eval_per_query(trec_eval_binary, qrels, path, ["map"])["map"] for name, path in runs.items()}
    qids = list(report.queries)
    for p, (s, b) in enumerate(report.pairs):
        x = np.array([ref[report.systems[s]][q] for q in qids])
        y = np.array([ref[report.systems[b]][q] for q in qids])
        np.testing.assert_allclose(report.values[s, 0], x, atol=5e-5)  # trec_eval prints 4 decimals
        want = st.permutation_test(
            (x, y), lambda a, c, axis: np.mean(a - c, axis=axis), permutation_type="samples", n_resamples=4000, rng=0
        ).pvalue
        assert abs(report.pvalue[p, 0] - want) < 5 * np.sqrt(want * (1 - want) / 4000) * 2 + 2e-3
    frame = report.to_frame()
    assert list(frame.columns) == [
        "system", "baseline", "measure", "mean", "ci_low", "ci_high", "pvalue", "pvalue_adjusted", "significant",
    ]  # fmt: skip
    assert len(frame) == 3
    # b (the strongest signal) beats a and c: marked with their letters in both tables
    assert report.significant[0, 0] and report.significant[2, 0]
    assert (
        report.to_markdown().splitlines()[3].startswith("| (b) b.run")
        and " ac |" in report.to_markdown().splitlines()[3]
    )
    latex = report.to_latex()
    assert latex.startswith("\\begin{tabular}{lr}") and "$^{ac}$" in latex and "b.run" in latex
    assert report.to_csv().splitlines()[0] == ",".join(frame.columns)
    ax = report.plot("b.run", "a.run", "map")
    assert len(ax.patches) == N_QUERIES


def test_missing_queries_score_zero_or_are_dropped(trec_files):
    qrels, runs = trec_files
    full = jaxrank.trec.read_run(str(runs["b.run"])).to_dict()
    partial = {q: docs for q, docs in full.items() if q != "q3"}
    runs = {"a": str(runs["a.run"]), "b": partial}
    every = jaxrank.compare(str(qrels), runs, "P.5", test="ttest")
    assert len(every.queries) == N_QUERIES and every.values[1, 0, every.queries.index("q3")] == 0
    common = jaxrank.compare(str(qrels), runs, "P.5", test="ttest", queries="common")
    assert len(common.queries) == N_QUERIES - 1 and "q3" not in common.queries


def test_a_list_of_runs_is_named_as_the_command_line_names_its_files(trec_files):
    """ranx's form: a list. Paths are named by file name (as ``jaxrank compare`` names them),
    other runs ``run_2``, ``run_3``, ... by position (ranx's names for unnamed runs); a path
    also names its run as ``baseline``. Values and p-values are the dict form's."""
    qrels, runs = trec_files
    b = jaxrank.trec.read_run(str(runs["b.run"])).to_dict()
    kwargs = {"test": "ttest", "n_resamples": 50}
    listed = jaxrank.compare(str(qrels), [str(runs["a.run"]), b], "P.5", baseline=str(runs["a.run"]), **kwargs)
    named = jaxrank.compare(str(qrels), {"a.run": str(runs["a.run"]), "run_2": b}, "P.5", baseline="a.run", **kwargs)
    assert listed.systems == named.systems == ("a.run", "run_2") and listed.baseline == "a.run"
    np.testing.assert_array_equal(listed.values, named.values)
    np.testing.assert_array_equal(listed.pvalue, named.pvalue)
    with pytest.raises(TypeError, match="got one run"):  # {qid: {docno: score}} is one run, not runs by name
        jaxrank.compare(str(qrels), b)


def test_bad_input(capsys, trec_files):
    qrels, runs = trec_files
    a = str(runs["a.run"])
    with pytest.raises(ValueError, match="at least two runs"):
        jaxrank.compare(str(qrels), {"a": a})
    with pytest.raises(ValueError, match="baseline"):
        jaxrank.compare(str(qrels), {"a": a, "b": a}, baseline="z")
    with pytest.raises(ValueError, match="test"):
        jaxrank.compare(str(qrels), {"a": a, "b": a}, test="anova")
    with pytest.raises(ValueError, match="n_resamples"):
        jaxrank.compare(str(qrels), {"a": a, "b": a}, n_resamples=0)
    one = {"q1": {"d1": 1.0}}
    with pytest.raises(ValueError, match="at least two"):
        jaxrank.compare({"q1": {"d1": 1}}, {"a": one, "b": one})
    # the command line: one line on stderr, exit status 1
    for argv in (["compare", str(qrels), a], ["compare", str(qrels), a, "nosuch.run"], ["compare", str(qrels), a, a]):
        assert main(argv) == 1
        captured = capsys.readouterr()
        assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err


def test_docs_compare_md_runs():
    """docs/compare.md's examples, as a doctest."""
    import doctest
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "docs" / "compare.md"
    result = doctest.testfile(str(path), module_relative=False, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 5


def test_tukey_equals_scipy_in_every_format(capsys, trec_files):
    """``test="tukey"``: scipy.stats.tukey_hsd over all the systems' per-query values (what
    ranx's compare does), the same p-values every pair or against a baseline, reported
    unadjusted further (Tukey's p-values are family-wise), in every output format."""
    qrels, runs = trec_files
    paths = {k: str(v) for k, v in runs.items()}
    report = jaxrank.compare(str(qrels), paths, ["map", "P.5"], test="tukey", correction="bonferroni")
    assert report.correction == "tukey" and report.pairs == ((1, 0), (2, 0), (2, 1))
    for m in range(2):
        want = st.tukey_hsd(*report.values[:, m]).pvalue
        for p, (s, b) in enumerate(report.pairs):
            np.testing.assert_allclose(report.pvalue[p, m], want[s, b], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(report.pvalue_adjusted, report.pvalue)
    np.testing.assert_array_equal(report.significant, report.pvalue < 0.05)
    assert report.significant[0, 0] and report.pvalue[0, 0] < 1e-3  # b (the strongest signal) beats a on map
    against = jaxrank.compare(str(qrels), paths, ["map", "P.5"], test="tukey", baseline="a.run")
    assert against.pairs == ((1, 0), (2, 0))
    np.testing.assert_array_equal(against.pvalue, report.pvalue[:2])  # one test of all systems, its pairs
    # every format carries them: table legend and marks, LaTeX, CSV, JSON; the command line too
    assert (
        report.to_markdown().splitlines()[-1].startswith("Tukey's HSD test between every pair, tukey-adjusted p < 0.05")
    )
    assert "% Tukey's HSD test" in report.to_latex()
    csv_rows = [line.split(",") for line in report.to_csv().splitlines()[1:]]
    assert [float(r[6]) for r in csv_rows] == [float(v) for v in report.pvalue.ravel()]
    argv = ["compare", str(qrels), *paths.values(), "-m", "map", "-m", "P.5", "--test", "tukey"]
    records = _cli_json(capsys, *argv, "--format", "json")
    assert [r["pvalue"] for r in records] == [r["pvalue"] for r in report.to_records()]
    assert [r["pvalue_adjusted"] for r in records] == [r["pvalue_adjusted"] for r in report.to_records()]
    for fmt, method in (("csv", report.to_csv), ("latex", report.to_latex), ("table", report.to_markdown)):
        assert main([*argv, "--format", fmt]) == 0
        assert capsys.readouterr().out == method()


def test_tukey_equals_ranx_compare(trec_files):
    """ranx.compare(stat_test="tukey") itself, on measures whose per-query values ranx and
    trec_eval define alike (P@5, nDCG@10 with graded qrels): p-values to 1e-9 (measured:
    3e-14 on 60 queries x 4 runs; ranx reports p < ~1e-11 as 0, from scipy's 1 - cdf)."""
    ranx = pytest.importorskip("ranx")
    qrels, runs = trec_files
    judged = {}
    for line in open(qrels):
        q, _, d, rel = line.split()
        if int(rel) > 0:
            judged.setdefault(q, {})[d] = int(rel)
    ranx_runs = []
    for name, path in runs.items():
        run = ranx.Run(jaxrank.trec.read_run(str(path)).to_dict(), name=name)
        ranx_runs.append(run)
    want = ranx.compare(ranx.Qrels(judged), ranx_runs, ["precision@5", "ndcg@10"], stat_test="tukey", max_p=0.05)
    report = jaxrank.compare(str(qrels), {k: str(v) for k, v in runs.items()}, ["P.5", "ndcg_cut.10"], test="tukey")
    for p, (s, b) in enumerate(report.pairs):
        for m, measure in enumerate(["precision@5", "ndcg@10"]):
            theirs = want.comparisons[report.systems[s], report.systems[b]][measure]
            assert abs(report.pvalue[p, m] - theirs["p_value"]) < 1e-9
            assert report.significant[p, m] == theirs["significant"]  # ranx: p <= max_p; no p equals 0.05 here
