"""``jaxrank ndeval`` against ndeval's C binary (the ``ndeval_binary`` fixture): the same
bytes on stdout for generated qrels and runs with every flag, the same exit status on
bad input with one line on stderr naming the file and line; and the subtopic qrels
readers (file, ``.gz``, dict, records, DataFrame) agreeing with each other."""

from __future__ import annotations

import collections
import gzip
import subprocess
from pathlib import Path

import numpy as np
import pytest

from jaxrank.cli import main
from jaxrank.trec import TrecFormatError
from jaxrank.trec.ndeval import COLUMNS, evaluate_run
from jaxrank.trec.subtopics import read_ndeval_run, read_subtopic_qrels
from tests import oracles

BASELINE = "BASELINE"  # replaced by the baseline run's path


def _qrels_lines(rng: np.random.Generator, topics: list[int]) -> list[str]:
    """Judgments of each topic: subtopic ids with gaps, graded judgments (2 and 3 count as
    1), documents judged for several subtopics, one topic judged all 0."""
    lines = []
    for n, topic in enumerate(topics):
        subtopics = np.sort(rng.choice(12, size=rng.integers(1, 7), replace=False))
        pool = [f"d{i:03d}" for i in rng.choice(60, size=rng.integers(3, 30), replace=False)]
        for docno in pool:
            for s in subtopics[rng.random(subtopics.size) < 0.6]:
                judgment = 0 if n == 0 else int(rng.choice([0, 0, 1, 1, 2, 3]))
                lines.append(f"{topic} {s} {docno} {judgment}")
    return lines


def _run_lines(rng: np.random.Generator, topics: list[int], tag: str) -> list[str]:
    """A run: lists of 1 to 40 documents (judged and unjudged), ranks with gaps in a
    shuffled order, scores with ties, some topics prefixed as TREC Web runs write them."""
    lines = []
    for topic in topics:
        n = int(rng.integers(1, 41))
        docnos = [f"d{i:03d}" for i in rng.choice(80, size=n, replace=False)]
        ranks = np.sort(rng.choice(200, size=n, replace=False)) if rng.random() < 0.5 else np.arange(1, n + 1)
        scores = np.round(rng.normal(size=n), 1)  # ties
        name = f"wt09-{topic}" if rng.random() < 0.3 else str(topic)
        lines.extend(f"{name} Q0 {d} {r} {s:g} {tag}" for d, r, s in zip(docnos, ranks, scores))
    rng.shuffle(lines)
    return lines


def _case(tmp_path: Path, seed: int) -> tuple[str, str, str]:
    """Qrels, run and baseline run files; topics are missing on either side."""
    rng = np.random.default_rng(seed)
    judged = sorted(rng.choice(np.arange(1, 30), size=8, replace=False).tolist())
    qrels = _qrels_lines(rng, judged)
    run_topics = judged[1:7] + [40 + seed]  # the all-0 topic judged[0] is not in the run
    run_topics[0] = judged[0]  # ... in this one it is
    base_topics = judged[2:] + [50 + seed]
    paths = []
    for name, lines in (("qrels", qrels), ("run", _run_lines(rng, run_topics, "runA"))):
        paths.append(tmp_path / name)
        paths[-1].write_text("\n".join(lines) + "\n")
    base = tmp_path / "base"
    base.write_text("\n".join(_run_lines(rng, base_topics, "baseRun")) + "\n")
    return str(paths[0]), str(paths[1]), str(base)


def _ndeval(binary: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *args], capture_output=True, text=True)


def _ours(capsys, *args: str) -> tuple[int, str, str]:
    status = main(["ndeval", *args])
    out, err = capsys.readouterr()
    return status, out, err


FLAGS = [
    [],
    ["-traditional"],
    ["-c"],
    ["-M", "5"],
    ["-alpha", "0.3", "-beta", "0.7"],
    ["-baseline", BASELINE],
    ["-c", "-baseline", BASELINE],
    ["-baseline", BASELINE, "-riskAlpha", "1.5"],
    ["-c", "-traditional", "-M", "12", "-riskAlpha", "1.50", "-baseline", BASELINE, "-alpha", "1"],
    ["-ca", "-alpha", "0", "-beta", "1"],
]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("flags", FLAGS, ids=lambda f: " ".join(f).replace(BASELINE, "B") or "plain")
def test_prints_ndevals_bytes(ndeval_binary, tmp_path, capsys, seed, flags):
    qrels, run, base = _case(tmp_path, seed)
    args = [base if f == BASELINE else f for f in flags] + [qrels, run]
    want = _ndeval(ndeval_binary, *args)
    assert want.returncode == 0, want.stderr
    status, out, err = _ours(capsys, *args)
    assert (status, err) == (0, "")
    assert out == want.stdout


@pytest.fixture(scope="module")
def ndeval_full_precision(ndeval_binary, tmp_path_factory) -> Path:
    """ndeval printing ``%.17g`` instead of ``%.6f``: its doubles, to compare beyond the
    printed digits."""
    source = tmp_path_factory.mktemp("ndeval17") / "ndeval.c"
    source.write_text(oracles.NDEVAL_SOURCE.read_text().replace("%.6f", "%.17g"))
    return oracles.build_ndeval(source, source.parent)


@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize("alpha, beta", [(0.5, 0.5), (0.3, 0.7)])
def test_topic_values_equal_ndevals_doubles(ndeval_full_precision, tmp_path, seed, alpha, beta):
    """Closer than the printed digits: the same doubles up to a few units in the last place
    (the sums run in another order), nNRBP's 0/0 included."""
    qrels, run, _ = _case(tmp_path, seed)
    out = _ndeval(ndeval_full_precision, "-alpha", str(alpha), "-beta", str(beta), qrels, run).stdout
    rows = [line.split(",") for line in out.splitlines()[1:-1]]
    table = evaluate_run(read_subtopic_qrels(qrels, ndeval=True), read_ndeval_run(run), alpha=alpha, beta=beta)
    assert table.topics.tolist() == [int(r[1]) for r in rows]
    want = np.array([[float(v) for v in r[2:]] for r in rows])
    assert want.shape == (table.topics.size, len(COLUMNS))
    np.testing.assert_allclose(table.values, want, rtol=4e-15, atol=0)


def test_prints_ndevals_bytes_when_no_run_topic_is_judged(ndeval_binary, tmp_path, capsys):
    """Every row zero and the amean row 0/0: ndeval's -nan."""
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "r").write_text("2 Q0 d1 1 1.0 r\n3 Q0 d1 1 1.0 r\n")
    args = [str(tmp_path / "q"), str(tmp_path / "r")]
    want = _ndeval(ndeval_binary, *args)
    assert "nan" in want.stdout
    assert _ours(capsys, *args) == (0, want.stdout, "")


def test_a_topic_field_without_digits_or_dash_reads_the_next_field_as_ndeval(ndeval_binary, tmp_path, capsys):
    (tmp_path / "q").write_text("3 0 d1 1\n3 1 d2 1\n")
    (tmp_path / "r").write_text("abc 3 d1 1 1.0 r\nabc 3 d2 2 0.5 r\n")
    args = [str(tmp_path / "q"), str(tmp_path / "r")]
    want = _ndeval(ndeval_binary, *args)
    assert want.returncode == 0 and ",3," in want.stdout
    assert _ours(capsys, *args) == (0, want.stdout, "")


def test_a_duplicate_docno_beyond_the_depth_cut_is_no_error(ndeval_binary, tmp_path, capsys):
    (tmp_path / "q").write_text("1 0 d1 1\n1 1 d2 1\n")
    (tmp_path / "r").write_text("1 Q0 d1 1 3 r\n1 Q0 d2 2 2 r\n1 Q0 d1 3 1 r\n")
    args = ["-M", "2", str(tmp_path / "q"), str(tmp_path / "r")]
    want = _ndeval(ndeval_binary, *args)
    assert want.returncode == 0
    assert _ours(capsys, *args) == (0, want.stdout, "")


BAD_QRELS = {
    "negative judgment": ("1 0 d1 1\n1 0 d2 -1\n", 2),
    "three fields": ("1 0 d1 1\n1 0 d2\n", 2),
    "non-numeric topic": ("1 0 d1 1\n1 0 d2 1\nq3 0 d1 1\n", 3),
    "non-numeric subtopic": ("1 a d1 1\n", 1),
    "fractional judgment": ("1 0 d1 1\n1 0 d2 0.5\n", 2),
    "blank line": ("1 0 d1 1\n\n1 0 d2 1\n", 2),
    "topic past ndeval's limit": ("1000010 0 d1 1\n", 1),
}
GOOD_RUN = "1 Q0 d1 1 1.0 r\n"
BAD_RUNS = {
    "five fields": ("1 Q0 d1 1 1.0 r\n1 Q0 d2 2 0.5\n", 2),
    "non-numeric rank": ("1 Q0 d1 1 1.0 r\n1 Q0 d2 x 0.5 r\n", 2),
    "negative rank": ("1 Q0 d1 -1 1.0 r\n", 1),
    "prefix without number": ("wt09- Q0 d1 1 1.0 r\n", 1),
    "duplicate rank": ("1 Q0 d1 1 1.0 r\n2 Q0 d1 1 1.0 r\n1 Q0 d2 1 0.5 r\n", 3),
    "duplicate docno": ("1 Q0 d1 1 1.0 r\n1 Q0 d2 2 0.5 r\n1 Q0 d1 3 0.2 r\n", 3),
}


def _assert_refused_alike(ndeval_binary, capsys, args: list[str], path: str, line: int | None):
    want = _ndeval(ndeval_binary, *args)
    status, out, err = _ours(capsys, *args)
    assert want.returncode != 0 and want.stdout == ""
    assert (status, out) == (want.returncode, "")
    assert err.startswith("jaxrank ndeval: ") and err.count("\n") == 1 and "Traceback" not in err
    assert path in err
    if line is not None:
        assert f"{path}:{line}:" in err


@pytest.mark.parametrize("case", BAD_QRELS)
def test_refuses_the_qrels_ndeval_refuses(ndeval_binary, tmp_path, capsys, case):
    text, line = BAD_QRELS[case]
    (tmp_path / "q").write_text(text)
    (tmp_path / "r").write_text(GOOD_RUN)
    path = str(tmp_path / "q")
    _assert_refused_alike(ndeval_binary, capsys, [path, str(tmp_path / "r")], path, line)


@pytest.mark.parametrize("case", BAD_RUNS)
@pytest.mark.parametrize("as_baseline", [False, True])
def test_refuses_the_runs_ndeval_refuses(ndeval_binary, tmp_path, capsys, case, as_baseline):
    text, line = BAD_RUNS[case]
    (tmp_path / "q").write_text("1 0 d1 1\n2 0 d2 1\n")
    (tmp_path / "bad").write_text(text)
    (tmp_path / "good").write_text(GOOD_RUN)
    bad, good = str(tmp_path / "bad"), str(tmp_path / "good")
    args = ["-baseline", bad, str(tmp_path / "q"), good] if as_baseline else [str(tmp_path / "q"), bad]
    _assert_refused_alike(ndeval_binary, capsys, args, bad, line)


@pytest.mark.parametrize("which", ["qrels", "run"])
@pytest.mark.parametrize("problem", ["empty", "missing"])
def test_refuses_empty_and_missing_files(ndeval_binary, tmp_path, capsys, which, problem):
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "r").write_text(GOOD_RUN)
    target = tmp_path / ("q" if which == "qrels" else "r")
    if problem == "empty":
        target.write_text("")
    else:
        target.unlink()
    _assert_refused_alike(ndeval_binary, capsys, [str(tmp_path / "q"), str(tmp_path / "r")], str(target), None)


@pytest.mark.parametrize(
    "args",
    [[], ["q"], ["-x", "q", "r"], ["-alpha", "2", "q", "r"], ["-beta", "-0.1", "q", "r"], ["-M", "0", "q", "r"]]
    + [["-riskAlpha", "-1", "q", "r"], ["q", "r", "-c"], ["-alpha", "q", "r"]],
    ids=" ".join,
)
def test_usage_errors_exit_as_ndevals(ndeval_binary, tmp_path, capsys, args):
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "r").write_text(GOOD_RUN)
    args = [str(tmp_path / a) if a in ("q", "r") else a for a in args]
    want = _ndeval(ndeval_binary, *args)
    status, out, err = _ours(capsys, *args)
    assert want.returncode == 1 and "Usage" in want.stderr
    assert (status, out) == (1, "")
    assert err.startswith("jaxrank ndeval: ") and err.count("\n") == 1 and "usage" in err


def test_version_and_help_exit_0(ndeval_binary, capsys):
    assert _ndeval(ndeval_binary, "-version").returncode == _ndeval(ndeval_binary, "-help").returncode == 0
    status, out, _ = _ours(capsys, "-version")
    assert status == 0 and "4.5" in out
    status, out, _ = _ours(capsys, "-help")  # ndeval prints nothing (its help is commented out)
    assert status == 0 and "-traditional" in out and "-riskAlpha" in out


def test_reads_gzipped_files_as_plain_ones(tmp_path, capsys):
    qrels, run, _ = _case(tmp_path, 3)
    for path in (qrels, run):
        Path(path + ".gz").write_bytes(gzip.compress(Path(path).read_bytes()))
    assert _ours(capsys, qrels + ".gz", run + ".gz") == _ours(capsys, qrels, run)


def test_subtopic_qrels_from_a_dict_records_and_a_dataframe_equal_the_file(tmp_path):
    pd = pytest.importorskip("pandas")
    qrels, _, _ = _case(tmp_path, 4)
    rows = [line.split() for line in Path(qrels).read_text().splitlines()]
    Record = collections.namedtuple("Record", "query_id doc_id relevance iteration")
    records = [Record(t, d, int(j), s) for t, s, d, j in rows]
    nested: dict = {}
    for t, s, d, j in rows:
        nested.setdefault(t, {}).setdefault(s, {})[d] = int(j)
    frame = pd.DataFrame(records)
    want = read_subtopic_qrels(qrels).to_dict()
    for source in (nested, records, frame):
        assert read_subtopic_qrels(source).to_dict() == want


def test_subtopic_qrels_refuse_a_pair_judged_twice(tmp_path):
    (tmp_path / "q").write_text("1 0 d1 1\n1 1 d1 1\n1 0 d1 0\n")
    with pytest.raises(TrecFormatError, match=r"q:3: .*judged twice.*line 1"):
        read_subtopic_qrels(tmp_path / "q", ndeval=True)


@pytest.mark.parametrize("flags", [[], ["-traditional"]])
def test_extra_fields_are_ignored_as_ndeval_ignores_them(ndeval_binary, tmp_path, capsys, flags):
    """Lines with more fields than 4 (qrels) and 6 (run) are read line by line, the others
    a column at a time: the same bytes either way, and ndeval's."""
    qrels, run, _ = _case(tmp_path, 7)
    plain = _ours(capsys, *flags, qrels, run)
    for path, extra in ((qrels, " x"), (run, " extra field")):
        lines = Path(path).read_text().splitlines()
        lines[-1] += extra
        Path(path).write_text("\n".join(lines) + "\n")
    want = _ndeval(ndeval_binary, *flags, qrels, run)
    assert want.returncode == 0
    assert _ours(capsys, *flags, qrels, run) == plain == (0, want.stdout, "")
