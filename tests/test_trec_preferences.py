"""trec_eval's ``-R prefs`` and ``-R qrels_prefs`` with ``-m all_prefs``: byte for byte
against trec_eval's own test outputs and against the C binary on generated preferences
(judgment groups of one sub-group and of several, consistent across sub-groups, many
nonrelevant documents) and graded qrels, on runs with tied scores (``-q``, ``-c``, ``-M``),
and bad lines refused with one line naming the file and line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jaxrank.cli import main
from jaxrank.trec import TrecFormatError
from jaxrank.trec.preferences import read_prefs
from tests.test_trec_differential import _case, _compare

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"
FLAGS = (["-q"], ["-q", "-c"], ["-q", "-M5"], ["-c", "-M3"], ["-q", "-c", "-M1"])
N_CASES = 12  # x len(FLAGS) comparisons, for each format


@pytest.mark.parametrize(
    "fmt, rels, run, expected",
    [
        ("prefs", "prefs.test", "prefs.results.test", "out.test.prefs"),
        ("prefs", "prefs.comment.test", "prefs.results.test", "out.test.prefs"),
        ("qrels_prefs", "qrels.test", "results.test", "out.test.qrels_prefs"),
    ],
)
def test_reference_preference_outputs_are_byte_identical(fmt, rels, run, expected, capsysbinary):
    assert main(["eval", "-m", "all_prefs", "-q", "-R", fmt, str(DATA / rels), str(DATA / run)]) == 0
    out, err = capsysbinary.readouterr()
    assert err == b""
    assert out == (DATA / expected).read_bytes()


def _prefs_text(rng: np.random.Generator, qrels: str) -> str:
    """Preferences over the documents of each query of a generated qrels: per query 1 to 3
    judgment groups, each with one or several sub-groups; a group's hidden grade per document
    (0: nonrelevant) orders every sub-group, so no group contradicts itself (trec_eval aborts
    on that); sub-groups write the grades scaled differently."""
    docs: dict[str, list[str]] = {}
    for line in qrels.splitlines():
        q, _, d, _ = line.split()
        docs.setdefault(q, []).append(d)
    lines = []
    for q, pool in docs.items():
        for g in rng.choice(["u1", "u2", "U10", "9"], size=int(rng.integers(1, 4)), replace=False):
            grade = {d: int(rng.choice([0, 0, 0, 1, 2, 3])) for d in pool}
            for s in range(int(rng.choice([1, 1, 2, 3]))):
                subset = [d for d in pool if rng.random() < 0.6] or pool[:1]
                scale = float(rng.choice([1.0, 2.5]))
                lines += [f"{q} {g} s{s} {d} {grade[d] * scale}" for d in subset]
    rng.shuffle(lines)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(N_CASES))
def test_generated_preferences_match_trec_eval(trec_eval_binary, tmp_path, seed):
    rng = np.random.default_rng(5000 + seed)
    qrels, run = _case(rng)
    prefs = _prefs_text(rng, qrels)
    n = sum(_compare(trec_eval_binary, tmp_path, prefs, run, f, ["-m", "all_prefs", "-R", "prefs"]) for f in FLAGS)
    assert n > 0


@pytest.mark.parametrize("seed", range(N_CASES))
def test_generated_qrels_prefs_match_trec_eval(trec_eval_binary, tmp_path, seed):
    rng = np.random.default_rng(6000 + seed)
    qrels, run = _case(rng)
    # two judgment groups (the iter column), graded labels (-1 read as 0: a level below 0 makes
    # trec_eval's Rnonrel measures read memory it did not write, which jaxrank refuses)
    qrels = "".join(
        f"{q} {rng.choice(['0', '1'])} {d} {max(int(y), 0)}\n"
        for q, _, d, y in (line.split() for line in qrels.splitlines())
    )
    n = sum(
        _compare(trec_eval_binary, tmp_path, qrels, run, f, ["-m", "all_prefs", "-R", "qrels_prefs"]) for f in FLAGS
    )
    assert n > 0


def test_python_api_takes_preferences():
    import jaxrank

    got = jaxrank.evaluate(str(DATA / "prefs.test"), str(DATA / "prefs.results.test"), "prefs_simp", rel_format="prefs")
    assert round(got["prefs_simp"], 4) == 0.3881


@pytest.mark.parametrize(
    "fmt, text, message",
    [
        ("prefs", "1 a s d1 1\n1 a s d2\n", "prefs:2: expected 5 fields (qid jg jsg docno rel_level), got 4"),
        ("prefs", "1 a s d1 high\n", "prefs:1: rel_level is not a number: 'high'"),
        ("qrels_prefs", "1 0 d1 1 x\n", "prefs:1: expected 4 fields (qid jg docno rel_level), got 5"),
        (
            "prefs",
            "# only\n",
            "prefs:1: no data lines (empty, or only comments and blank lines); expected qid jg jsg docno rel_level",
        ),
    ],
)
def test_malformed_prefs_are_refused_with_file_and_line(tmp_path, fmt, text, message):
    path = tmp_path / "prefs"
    path.write_text(text)
    with pytest.raises(TrecFormatError) as e:
        read_prefs(path, fmt)
    assert str(e.value) == f"{tmp_path}/{message}"


@pytest.mark.parametrize(
    "text, message",
    [
        # the same document at two levels of one sub-group (trec_eval: "Can't calculate measure")
        ("301 a s CR93E-10505 1\n301 a s CR93E-10505 0\n", "prefs:2: document CR93E-10505 has two rel_levels"),
        # preferences that contradict each other within a group (trec_eval aborts)
        ("301 a s d1 2\n301 a s d2 1\n301 a t d1 1\n301 a t d2 2\n", "inconsistent preferences in judgment group"),
        ("301 a s d1 1\n", "measure 'map' cannot be computed from preference judgments"),
        # a level below 0 in a class smaller than the relevant ones: trec_eval reads unwritten memory
        (
            "301 a s d1 2\n301 a s d2 2\n301 a s d3 0\n301 a s d4 0\n301 a s d5 0\n301 a s d6 -1\n",
            "query 301: a judgment group's lowest rel_level is below 0",
        ),
    ],
)
def test_bad_preferences_are_one_line(tmp_path, capsysbinary, text, message):
    path = tmp_path / "prefs"
    path.write_text(text)
    measure = "map" if "map" in message else "all_prefs"
    assert main(["eval", "-m", measure, "-R", "prefs", str(path), str(DATA / "results.test")]) == 1
    out, err = capsysbinary.readouterr()
    assert out == b""
    assert err.startswith(b"jaxrank: ") and message.encode() in err and err.count(b"\n") == 1, err
