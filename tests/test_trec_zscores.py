"""trec_eval's ``-Z zscores_file``: byte for byte against trec_eval's own test output and
against the C binary on generated runs and random z-score files (``-q``, ``-c``, ``-M``,
``-l``), and bad z-score files refused with one line naming the file (and line)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from jaxrank.cli import main
from jaxrank.trec import TrecFormatError, report
from jaxrank.trec.zscores import read_zscores
from tests.test_trec_differential import _case, _compare

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"
QIDS = ("1", "2", "9", "10", "11", "q3", "q20", "7a")  # test_trec_differential's
Z_FLAGS = (["-q"], ["-q", "-c"], ["-c"], ["-q", "-c", "-M5"], ["-q", "-l2"], ["-q", "-c", "-J"])
N_CASES = 12  # x len(Z_FLAGS) comparisons


def test_reference_output_with_zscores_is_byte_identical(capsysbinary):
    argv = ["eval", "-q", "-m", "all_trec", "-Z", str(DATA / "zscores_file")]
    assert main([*argv, str(DATA / "qrels.test"), str(DATA / "results.test")]) == 0
    out, err = capsysbinary.readouterr()
    assert err == b""
    assert out == (DATA / "out.test.aqZ").read_bytes()


def _zscores_text(rng: np.random.Generator, qrels: Path, run: Path) -> str:
    """Lines for every query of QIDS and every value all_trec has (gm_map and gm_bpref as
    their logs): random means and deviations, some deviations 0 with the mean the value
    itself (z = 0) or not (-1000000), some at full precision."""
    rep = report(str(qrels), str(run), "all_trec", complete=True)
    lines = []
    for q in QIDS:
        i = rep.qids.index(q) if q in rep.qids else None
        for c in rep.columns:
            if c.kind == "str" or c.agg == "count":
                continue
            x = float(rep.values[c.name][i]) if i is not None else 0.0
            if c.agg == "gmean":
                x = math.log(max(x, 1e-5))
            u = rng.random()
            if u < 0.1:
                mean, sd = repr(x), "0"
            elif u < 0.15:
                mean, sd = repr(x + 1.0), "0.0000"
            elif u < 0.4:
                mean, sd = repr(float(rng.normal(0.3, 0.3))), repr(float(rng.uniform(0.01, 2)))
            else:
                mean, sd = f"{rng.normal(0.3, 0.3):.4f}", f"{rng.uniform(0.05, 1):.4f}"
            lines.append(f"{q}\t{c.name} {mean}  {sd}")
    rng.shuffle(lines)  # trec_eval sorts them
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("seed", range(N_CASES))
def test_generated_zscores_match_trec_eval(trec_eval_binary, tmp_path, seed):
    rng = np.random.default_rng(7000 + seed)
    qrels, run = _case(rng)
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    z = tmp_path / "zscores"
    z.write_text(_zscores_text(rng, tmp_path / "qrels", tmp_path / "run"))
    lines = sum(_compare(trec_eval_binary, tmp_path, qrels, run, f, ["-m", "all_trec", "-Z", str(z)]) for f in Z_FLAGS)
    assert lines > 0


def test_missing_geometric_mean_lines_give_trec_eval_values(trec_eval_binary, tmp_path):
    # trec_eval's own zscores_file has no gm_map/gm_bpref lines: -1000000 per query, as trec_eval
    rng = np.random.default_rng(3)
    qrels, run = _case(rng)
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    text = _zscores_text(rng, tmp_path / "qrels", tmp_path / "run")
    z = tmp_path / "zscores"
    z.write_text("".join(line + "\n" for line in text.splitlines() if "\tgm_" not in line))
    for flags in (["-q"], ["-q", "-c"]):
        _compare(trec_eval_binary, tmp_path, qrels, run, flags, ["-m", "all_trec", "-Z", str(z)])


def test_python_api_takes_zscores_as_a_file_or_a_dict():
    import jaxrank

    qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d1": 1}}
    run = {"q1": {"d1": 0.9, "d2": 0.8}, "q2": {"d2": 1.0, "d1": 0.5}}
    zs = {"q1": {"map": (0.5, 0.25), "P_5": (0.1, 0.0)}, "q2": {"map": (0.5, 0.5), "P_5": (0.2, 0.0)}}
    got = jaxrank.evaluate(qrels, run, ["map", "P.5"], per_query=True, zscores=zs)
    assert got["per_query"]["q1"] == {"map": 2.0, "P_5": -1000000.0}  # (1 - .5) / .25; 0.2 != 0.1
    assert got["per_query"]["q2"] == {"map": 0.0, "P_5": 0.0}  # (.5 - .5) / .5; 0.2 == 0.2 with sd 0
    assert got["all"] == {"map": 1.0, "P_5": -500000.0}


@pytest.mark.parametrize(
    "text, message",
    [
        ("301 map 0.1\n", "zscores:1: expected 4 fields (qid measure mean stddev), got 3"),
        ("301 map 0.1 0.2\n301 P_5 0.1 0.2 x\n", "zscores:2: expected 4 fields (qid measure mean stddev), got 5"),
        ("301 map 0.1 0.2\n\n301 P_5 0.1x 0.2\n", "zscores:3: mean is not a number: '0.1x'"),
        ("301 map 0.1 abc\n", "zscores:1: stddev is not a number: 'abc'"),
        ("301 map 0.1 0.2\n301 map 0.1 0.3\n", "zscores:2: query 301, measure map twice (lines 1 and 2)"),
        ("# only a comment\n", "zscores:1: no data lines; expected qid measure mean stddev"),
    ],
)
def test_malformed_zscores_file_is_refused_with_file_and_line(tmp_path, text, message):
    path = tmp_path / "zscores"
    path.write_text(text)
    with pytest.raises(TrecFormatError) as e:
        read_zscores(path)
    assert str(e.value) == f"{tmp_path}/{message}"


@pytest.mark.parametrize(
    "drop, message",
    [
        ("302 ", "no z-scores for query 302 (trec_eval would print -1000000 for its every measure)"),
        ("302 P_10 ", "no z-score for query 302, measure P_10 (trec_eval would print -1000000)"),
    ],
)
def test_a_query_or_measure_missing_from_the_zscores_is_one_line(tmp_path, capsysbinary, drop, message):
    lines = (DATA / "zscores_file").read_text().splitlines(keepends=True)
    path = tmp_path / "zscores"
    path.write_text("".join(line for line in lines if not line.startswith(drop)))
    argv = ["eval", "-m", "all_trec", "-Z", str(path), str(DATA / "qrels.test"), str(DATA / "results.test")]
    assert main(argv) == 1
    out, err = capsysbinary.readouterr()
    assert out == b""
    assert err == f"jaxrank: {path}: {message}\n".encode()


def test_lookup_is_trec_evals_binary_search_one_past_a_query():
    # trec_eval's find_meas searches [0, n] inclusive: a measure missing from a query but first
    # in the next query's lines is found there
    z = read_zscores({"a": {"P_5": (0.0, 1.0)}, "b": {"map": (2.0, 4.0)}})
    k = z.find_query(b"a")
    assert z.measures[z.find_measure(k, b"map")] == b"map"
    assert z.find_measure(z.find_query(b"b"), b"zzz") is None
    assert z.find_query(b"c") is None
