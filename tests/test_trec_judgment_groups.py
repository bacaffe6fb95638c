"""trec_eval's ``-R qrels_jg`` (judgment groups; ``-m qrels_jg``): byte for byte against
trec_eval's own test output and against the C binary on generated judge groups and runs
(``-q``, ``-c``, ``-M``, ``-J``, ``-l``, measure parameters), and bad qrels_jg lines refused
with one line naming the file and line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from jaxrank.cli import main
from jaxrank.trec import TrecFormatError
from jaxrank.trec.judgment_groups import read_qrels_jg
from tests.test_trec_differential import _case, _compare

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"
JG = ["-m", "qrels_jg", "-R", "qrels_jg"]
JG_FLAGS = (["-q"], ["-q", "-c"], ["-q", "-c", "-M5"], ["-q", "-J"], ["-q", "-l2"], ["-q", "-c", "-J", "-M3"], ["-c"])
PARAMETERISED = ["-R", "qrels_jg", "-m", "P_avgjg.1,3,100", "-m", "Rprec_mult_avgjg.0.5,1,3", "-m", "map_avgjg"]
N_CASES = 12  # x (len(JG_FLAGS) + 1) comparisons


@pytest.mark.parametrize("qrels", ["qrels.123", "qrels.comments.123"])
def test_reference_output_with_judgment_groups_is_byte_identical(qrels, capsysbinary):
    assert main(["eval", "-m", "qrels_jg", "-q", "-R", "qrels_jg", str(DATA / qrels), str(DATA / "results.test")]) == 0
    out, err = capsysbinary.readouterr()
    assert err == b""
    assert out == (DATA / "out.test.qrels_jg").read_bytes()


def _jg_case(rng: np.random.Generator) -> tuple[str, str]:
    """A generated run and qrels_jg: each qrels line of test_trec_differential's case judged
    by 1 to 3 groups (named so that strcmp and numeric order differ), with their own labels."""
    qrels, run = _case(rng)
    names = ["0", "10", "9", "b", "A"]
    lines = []
    groups: dict[str, list[str]] = {}
    for line in qrels.splitlines():
        q, _, d, y = line.split()
        jgs = groups.setdefault(q, list(rng.choice(names, size=int(rng.integers(1, 4)), replace=False)))
        for k, jg in enumerate(jgs):
            if k == 0 or rng.random() < 0.7:
                label = y if k == 0 else str(rng.choice([-1, 0, 0, 1, 1, 2]))
                lines.append(f"{q} {jg} {d} {label}")
    rng.shuffle(lines)  # trec_eval sorts them
    return "\n".join(lines) + "\n", run


@pytest.mark.parametrize("seed", range(N_CASES))
def test_generated_judgment_groups_match_trec_eval(trec_eval_binary, tmp_path, seed):
    qrels, run = _jg_case(np.random.default_rng(9000 + seed))
    n = sum(_compare(trec_eval_binary, tmp_path, qrels, run, flags, JG) for flags in JG_FLAGS)
    n += _compare(trec_eval_binary, tmp_path, qrels, run, ["-q", "-c"], PARAMETERISED)
    assert n > 0


def test_judgment_groups_with_zscores_match_trec_eval(trec_eval_binary, tmp_path):
    qrels, run = _jg_case(np.random.default_rng(17))
    rng = np.random.default_rng(18)
    qids = sorted({line.split()[0] for line in qrels.splitlines()})
    names = ["map_avgjg"] + [f"P_avgjg_{c}" for c in (5, 10, 15, 20, 30, 100, 200, 500, 1000)]
    names += [f"Rprec_mult_avgjg_{x / 10:3.2f}" for x in range(2, 21, 2)]
    z = tmp_path / "zscores"
    z.write_text(
        "".join(f"{q} {m} {rng.normal(0.3, 0.2):.4f} {rng.uniform(0.05, 1):.4f}\n" for q in qids for m in names)
    )
    for flags in (["-q"], ["-q", "-c"]):
        _compare(trec_eval_binary, tmp_path, qrels, run, flags, [*JG, "-Z", str(z)])


def test_python_api_takes_rel_format():
    import jaxrank

    got = jaxrank.evaluate(
        str(DATA / "qrels.123"), str(DATA / "results.test"), "map_avgjg", rel_format="qrels_jg", per_query=True
    )
    assert round(got["all"]["map_avgjg"], 4) == 0.1130
    assert sorted(got["per_query"]) == ["301", "302", "303"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("301 0 d1 1\n301 0 d2\n", "qrels_jg:2: expected 4 fields (qid jg docno rel), got 3"),
        ("301 0 d1 1\n301 1 d1 0\n301 0 d1 2\n", "qrels_jg:3: document d1 twice in judgment group 0 (lines 1 and 3)"),
        (
            "# nothing\n\n",
            "qrels_jg:1: no data lines (empty, or only comments and blank lines); expected qid jg docno rel",
        ),
    ],
)
def test_malformed_qrels_jg_is_refused_with_file_and_line(tmp_path, text, message):
    path = tmp_path / "qrels_jg"
    path.write_text(text)
    with pytest.raises(TrecFormatError) as e:
        read_qrels_jg(path)
    assert str(e.value) == f"{tmp_path}/{message}"


@pytest.mark.parametrize(
    "text, measure, message",
    [
        ("301 0 d1 yes\n", "qrels_jg", "qrels_jg:1: "),
        ("301 0 d1 1\n", "map", "measure 'map' cannot be computed from -R qrels_jg judgments"),
    ],
)
def test_bad_qrels_jg_input_is_one_line(tmp_path, capsysbinary, text, measure, message):
    path = tmp_path / "qrels_jg"
    path.write_text(text)
    assert main(["eval", "-m", measure, "-R", "qrels_jg", str(path), str(DATA / "results.test")]) == 1
    out, err = capsysbinary.readouterr()
    assert out == b""
    assert err.startswith(b"jaxrank: ") and message.encode() in err and err.count(b"\n") == 1, err
