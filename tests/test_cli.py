"""``jaxrank eval``: formats, the demo default, and bad input (exit 1, one line on stderr)."""

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from jaxrank import trec
from jaxrank.cli import main

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq1 0 d3 2\nq2 0 d1 1\n"
RUN = "q1 Q0 d1 1 0.9 tag\nq1 Q0 d2 2 0.8 tag\nq1 Q0 d4 3 0.7 tag\nq2 Q0 d9 1 0.5 tag\n"


@pytest.fixture
def files(tmp_path):
    def write(qrels=QRELS, run=RUN):
        q, r = tmp_path / "test.qrels", tmp_path / "test.run"
        q.write_text(qrels)
        r.write_text(run)
        return str(q), str(r)

    return write


def run_cli(capsys, *argv):
    status = main(["eval", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_demo_pair_by_default(capsys):
    status, out, err = run_cli(capsys)
    assert status == 0
    assert "demo" in err and err.count("\n") == 1
    qrels, run = trec.demo_paths()
    status2, out2, _ = run_cli(capsys, str(qrels), str(run))
    assert out == out2  # the same as naming the files; stdout stays trec_eval's
    names = [line.split("\t")[0].rstrip() for line in out.splitlines()]
    assert names[:6] == ["runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map"]
    assert names[-1] == "P_1000"


@pytest.mark.parametrize("flags", [[], ["-q", "-c"], ["--format", "json"]])
def test_run_queries_without_judgments_are_counted_on_stderr(capsys, files, flags):
    """trec_eval skips them without a word (with -c too); jaxrank eval's stdout stays
    trec_eval's and one line on stderr says how many, naming the first five."""
    status, plain, err = run_cli(capsys, *flags, *files())
    assert (status, err) == (0, "")
    extra = "".join(f"u{i} Q0 d1 1 0.5 tag\n" for i in range(7))
    status, out, err = run_cli(capsys, *flags, *files(run=RUN + extra))
    assert (status, out) == (0, plain)
    assert err == (
        "jaxrank eval: skipped 7 run queries with no judgments in the qrels (trec_eval skips them too): "
        "u0, u1, u2, u3, u4, ...\n"
    )


def test_json_and_csv(capsys, files):
    q, r = files()
    status, out, err = run_cli(capsys, "-q", "-m", "map", "-m", "P.2", "-m", "nDCG@3", "--format", "json", q, r)
    assert status == 0 and err == ""
    data = json.loads(out)
    assert set(data) == {"all", "per_query"}
    assert data["all"]["map"] == pytest.approx((1 + 0) / 2 / 2)  # q1: (1/1) / 2 relevant; q2: 0
    assert data["per_query"]["q1"]["P_2"] == 0.5
    assert set(data["per_query"]) == {"q1", "q2"}
    status, out, err = run_cli(capsys, "-q", "-m", "map", "-m", "P.2", "--format", "csv", q, r)
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["measure", "qid", "value"]
    assert rows[1:] == [
        ["map", "q1", "0.5"],
        ["P_2", "q1", "0.5"],
        ["map", "q2", "0.0"],
        ["P_2", "q2", "0.0"],
        ["map", "all", "0.25"],
        ["P_2", "all", "0.25"],
    ]
    status, out, _ = run_cli(capsys, "-m", "map", "--format", "json", q, r)
    assert json.loads(out) == {"all": {"map": 0.25}}
    status, out, _ = run_cli(capsys, "-q", "-m", "relstring", "-m", "runid", "-m", "num_ret", "--format", "json", q, r)
    assert json.loads(out) == {
        "all": {"runid": "tag", "num_ret": 4},
        "per_query": {"q1": {"relstring": "10-", "num_ret": 3}, "q2": {"relstring": "-", "num_ret": 1}},
    }
    status, out, _ = run_cli(capsys, "-q", "-m", "relstring", "--format", "csv", q, r)
    assert out == "measure,qid,value\nrelstring,q1,10-\nrelstring,q2,-\n"


def test_trec_flags(capsys, files):
    q, r = files()
    status, out, _ = run_cli(capsys, "-m", "num_ret", "-m", "num_q", "-c", "-M1", q, r)
    assert out == "num_q                 \tall\t2\nnum_ret               \tall\t2\n"
    status, out, _ = run_cli(capsys, "-m", "num_rel", "-l2", q, r)
    assert out == "num_rel               \tall\t1\n"
    status, out, _ = run_cli(capsys, "-m", "num_ret", "-J", "-q", "-n", q, r)
    assert out == "num_ret               \tq1\t2\nnum_ret               \tq2\t0\n"


@pytest.mark.parametrize(
    "qrels, run, where",
    [
        (QRELS, "q1 Q0 d1 1 0.9\n", "test.run:1"),  # too few fields
        (QRELS, RUN + "q3 Q0 d1 1 high tag\n", "test.run:5"),  # score not a number
        (QRELS + "q2 0 d2\n", RUN, "test.qrels:5"),  # too few fields
        (QRELS + "q2 0 d2 yes\n", RUN, "test.qrels:5"),  # rel not a number
        (QRELS + "q2 0 d2 0.5\n", RUN, "test.qrels:5"),  # rel not an integer
        (QRELS, RUN + "q3 Q0 d1 1 nan tag\n", "test.run:5"),  # a NaN score
        (QRELS + "q2 0 d2 1 extra\n", RUN, "test.qrels:5"),  # too many fields
        (QRELS, RUN + "q1 Q0 d2 9 0.1 tag\n", "test.run:5"),  # a document twice in a query
        ("", RUN, "test.qrels"),  # empty file
        (QRELS, "\n# nothing\n", "test.run"),  # no data lines
    ],
)
def test_malformed_input(capsys, files, qrels, run, where):
    q, r = files(qrels, run)
    status, out, err = run_cli(capsys, "-m", "all_trec", "-q", q, r)
    assert status == 1
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("jaxrank: ")
    assert where in err
    assert "Traceback" not in err


def test_relevance_with_a_decimal_point_is_its_integer(capsys, files):
    q, r = files()
    want = run_cli(capsys, "-q", "-m", "all_trec", q, r)
    assert want[0] == 0 and "q1" in want[1]
    q, r = files(QRELS.replace(" 1\n", " 1.0\n").replace(" 2\n", " 2.00\n").replace(" 0\n", " 0e0\n"))
    assert run_cli(capsys, "-q", "-m", "all_trec", q, r) == want


def test_missing_file(capsys, files, tmp_path):
    q, r = files()
    missing = str(tmp_path / "nope.run")
    status, out, err = run_cli(capsys, q, missing)
    assert (status, out) == (1, "")
    assert err.count("\n") == 1 and "nope.run" in err


@pytest.mark.parametrize("measure, hint", [("nDGC@10", "nDCG"), ("mapp", "map"), ("P(rel=x)@5", "rel")])
def test_unknown_measure(capsys, files, measure, hint):
    q, r = files()
    status, out, err = run_cli(capsys, "-m", "map", "-m", measure, q, r)
    assert (status, out) == (1, "")
    assert err.count("\n") == 1 and measure in err and hint in err


def test_usage_errors_are_one_line(capsys, files):
    q, r = files()
    for argv in (["-l", "two", q, r], ["--format", "xml", q, r], [q], ["-M", "-3", q, r]):
        status, out, err = run_cli(capsys, *argv)
        assert (status, out) == (1, ""), argv
        assert err.count("\n") == 1, (argv, err)


def test_no_common_query(capsys, files):
    q, r = files(run="q9 Q0 d1 1 0.9 tag\n")
    status, out, err = run_cli(capsys, q, r)
    assert (status, out) == (1, "") and "no query" in err


def test_ir_measures_strings_in_trec_format(capsys):
    assert DATA.is_dir(), f"reference data missing: {DATA}"
    q, r = str(DATA / "qrels.test"), str(DATA / "results.test")
    status, out, _ = run_cli(capsys, "-m", "P.10", "-m", "P@10", "-m", "nDCG@10", "-m", "ndcg_cut.10", q, r)
    lines = dict(line.split("\tall\t") for line in out.splitlines())
    assert lines["P_10                  "] == lines["P@10                  "] == "0.3000"
    assert lines["nDCG@10               "] == lines["ndcg_cut_10           "] == "0.3016"


@pytest.mark.parametrize("measure, suggested", [("ndcg_10", "nDCG@10, ndcg_cut.10"), ("ndcg_cut@5", "ndcg_cut.5")])
def test_cutoff_spelled_ambiguously_suggests_both_conventions(capsys, files, measure, suggested):
    q, r = files()
    status, out, err = run_cli(capsys, "-m", measure, q, r)
    assert (status, out) == (1, "")
    assert err == f"jaxrank: unknown measure {measure!r}; did you mean {suggested}?\n"


def test_case_and_separator_variants_are_accepted_where_unambiguous(capsys, files):
    q, r = files()
    canonical = ["-m", "nDCG@2", "-m", "ndcg_cut.2", "-m", "P.1", "-m", "recall.3"]
    variants = ["-m", "ndcg@2", "-m", "NDCG_CUT.2", "-m", "P_1", "-m", "RECALL_3"]
    assert (
        run_cli(capsys, *canonical, q, r)[:2]
        == run_cli(capsys, *variants, q, r)[:2]
        == (0, run_cli(capsys, *canonical, q, r)[1])
    )
    assert "nDCG@2" in run_cli(capsys, "-m", "ndcg@2", q, r)[1]


def test_no_background_compilation_outlives_the_evaluation(capsys, files, monkeypatch):
    """The compilation started for the guessed shape is waited for before ``main`` returns,
    even when the run does not use it (a later query deeper than the first): a compilation
    left running beside the caller's later work crashed XLA's compiler (docs/bench_trec.md)."""
    import threading
    import time

    from jaxrank import cli

    started = []

    def late(work):  # the guessed shape's compilation, still under way when the run is read
        started.append(work)
        threading.Thread(target=lambda: (time.sleep(1.5), work()), name="jaxrank-compile").start()

    monkeypatch.setattr(cli, "_in_background", late)
    run = "q1 Q0 d1 1 0.9 t\n" + "".join(f"q2 Q0 e{i} {i} {1 - i / 100} t\n" for i in range(40))
    status, out, err = run_cli(capsys, "-m", "ndcg_cut.13", "-m", "P.7", *files("q1 0 d1 1\nq2 0 e3 1\n", run))
    assert (status, err) == (0, "") and "ndcg_cut_13" in out
    assert len(started) == 1
    assert not [t for t in threading.enumerate() if t.name == "jaxrank-compile"]


def test_several_runs_print_what_each_prints_alone(capsys, tmp_path):
    """`jaxrank eval QRELS RUN1 RUN2 ...`: each run's output as alone, in order (json: one
    object per line with "run" first; csv: one table with a run column); a bad run is named
    on stderr, the others are still evaluated, and the exit status is 1."""
    q = tmp_path / "q"
    q.write_text("# comment\n" + QRELS)
    runs = []
    for i, text in enumerate([RUN, RUN.replace("0.9", "0.1"), "q1 Q0 d1 1 0.9\n", RUN.replace("tag", "other")]):
        runs.append(str(tmp_path / f"r{i}"))
        Path(runs[-1]).write_text(text)
    good = [runs[0], runs[1], runs[3]]
    flags = ["-q", "-c", "-M", "2", "-m", "official", "-m", "hits@2", "-m", "nDCG@2"]
    for fmt in ("trec", "json", "csv"):
        alone = [run_cli(capsys, *flags, "--format", fmt, str(q), r)[1] for r in good]
        status, out, err = run_cli(capsys, *flags, "--format", fmt, str(q), *runs)
        assert status == 1 and err.count("\n") == 1 and err.startswith(f"jaxrank: {runs[2]}:1: "), err
        if fmt == "trec":
            assert out == "".join(alone)
        elif fmt == "json":
            assert [json.loads(line) for line in out.splitlines()] == [
                {"run": r, **json.loads(a)} for r, a in zip(good, alone)
            ]
            assert all(line.startswith('{"run": ') for line in out.splitlines())
        else:
            rows = list(csv.reader(io.StringIO(out)))
            want = [row for r, a in zip(good, alone) for row in [[r, *x] for x in csv.reader(io.StringIO(a))][1:]]
            assert rows == [["run", "measure", "qid", "value"], *want]
    assert run_cli(capsys, str(q), runs[0], runs[1])[0] == 0


def test_later_runs_deeper_than_the_first_runs_guess_print_what_they_print_alone(capsys, tmp_path):
    """Several runs share the batch shape guessed from the first run's first MiB: a later run
    with deeper queries than that guess (its stream stops) or shallower ones still prints
    exactly what it prints alone."""
    rng = np.random.default_rng(0)
    q = tmp_path / "q"
    q.write_text("".join(f"q{t} 0 d{d} {rng.integers(0, 3)}\n" for t in range(3) for d in range(60)))

    def run(depth: int, name: str) -> str:
        path = tmp_path / name
        lines = [
            f"q{t} Q0 d{d} {r} {s:.4f} x\n"
            for t in range(3)
            for r, (d, s) in enumerate(zip(rng.permutation(80)[:depth], np.sort(rng.random(depth))[::-1]))
        ]
        path.write_text("".join(lines))
        return str(path)

    runs = [run(3, "shallow"), run(70, "deep"), run(5, "shallow2")]
    flags = ["-q", "-m", "official", "-m", "nDCG@10"]
    alone = [run_cli(capsys, *flags, str(q), r)[1] for r in runs]
    status, out, err = run_cli(capsys, *flags, str(q), *runs)
    assert status == 0 and out == "".join(alone), err
