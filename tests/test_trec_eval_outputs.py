"""``jaxrank eval`` reproduces trec_eval 10.0's own test outputs byte for byte.

The inputs and expected outputs are trec_eval's test suite (``tests/data/trec_eval``);
the command lines are those of trec_eval's Makefile target ``quicktest``. The CLI runs
in-process (``main(argv)``), which is much faster than a subprocess per file.
"""

from pathlib import Path

import pytest

from jaxrank.cli import main

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"

# expected output file -> trec_eval arguments (files relative to DATA)
CASES = {
    "out.test": ["qrels.test", "results.test"],
    "out.comment.test": ["qrels.comment.test", "results.comment.test"],  # '#' comment lines (trec_eval 10)
    "out.test.a": ["-m", "all_trec", "qrels.test", "results.test"],
    "out.test.aq": ["-m", "all_trec", "-q", "qrels.test", "results.test"],
    "out.test.aqc": ["-m", "all_trec", "-q", "-c", "qrels.test", "results.trunc"],
    "out.test.aqcM": ["-m", "all_trec", "-q", "-c", "-M100", "qrels.test", "results.trunc"],
    "out.test.aql": ["-m", "all_trec", "-mrelstring.20", "-q", "-l2", "qrels.rel_level", "results.test"],
    "out.test.meas_params": [
        "-q",
        "-miprec_at_recall..10,.20,.25,.75,.50",
        "-m",
        "P.5,7,3",
        "-m",
        "recall.20,2000",
        "-m",
        "Rprec_mult.5.0,0.2,0.35",
        "-mutility.2,-1,0,0",
        "-m",
        "11pt_avg..25,.5,.75",
        "-mndcg.1=3,2=9,4=4.5",
        "-mndcg_cut.10,20,23.4",
        "-msuccess.2,5,20",
        "qrels.test",
        "results.test",
    ],
}

# run queries absent from the qrels, per case (the comment test's run answers 301 topics, its
# qrels judge 31)
SKIPPED = {"out.comment.test": 270}


def _argv(args):
    return ["eval"] + [str(DATA / a) if (DATA / a).is_file() else a for a in args]


@pytest.fixture(scope="module")
def data():
    if not DATA.is_dir():
        pytest.fail(f"trec_eval reference data missing: {DATA}")
    return DATA


@pytest.mark.parametrize("expected", sorted(CASES))
def test_byte_identical(data, expected, capsysbinary):
    status = main(_argv(CASES[expected]))
    out, err = capsysbinary.readouterr()
    assert status == 0, err.decode()
    if expected in SKIPPED:  # run queries trec_eval skips without a word: counted on stderr
        note = f"jaxrank eval: skipped {SKIPPED[expected]} run queries with no judgments in the qrels"
        assert err.startswith(note.encode()) and err.count(b"\n") == 1, err
    else:
        assert err == b""
    want = (data / expected).read_bytes()
    if out != want:  # show the first differing lines
        got_lines, want_lines = out.decode().splitlines(), want.decode().splitlines()
        diff = [(i, g, w) for i, (g, w) in enumerate(zip(got_lines, want_lines)) if g != w][:5]
        pytest.fail(f"{expected}: {len(got_lines)} vs {len(want_lines)} lines; first diffs {diff}")


def test_qrels_with_comments_give_the_same_output(data, capsysbinary):
    assert main(_argv(["qrels.test.with-comments", "results.test"])) == 0
    assert capsysbinary.readouterr().out == (data / "out.test").read_bytes()


def test_the_command_with_its_xla_flags_and_compilation_cache_is_byte_identical(data, tmp_path):
    # As a command (not main(argv)), jaxrank sets its XLA flags and keeps compiled code in a
    # cache directory: the first run fills the cache, the second runs from it.
    import os
    import subprocess
    import sys

    # The warm run loads the whole measure program stored by the cold one (measures/engine.py,
    # "programs on disk"): XLA compiles no stage; a damaged stored program is compiled again
    # and stored anew, and the run after that loads it.
    env = dict(os.environ, JAXRANK_CACHE_DIR=str(tmp_path / "xla"), JAX_LOG_COMPILES="1")
    env.pop("XLA_FLAGS", None)
    want = (data / "out.test.a").read_bytes()
    compiled_stage = "XLA compilation of jit(_stage_rest"
    stored: list = []
    for attempt in ("cold", "warm", "damaged", "warm again"):
        if attempt == "damaged":
            for program in stored:
                program.write_bytes(program.read_bytes()[:100])
        done = subprocess.run(
            [sys.executable, "-m", "jaxrank.cli", *_argv(CASES["out.test.a"])],
            capture_output=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout == want, attempt
        assert (compiled_stage in done.stderr.decode()) == (not attempt.startswith("warm")), attempt
        stored = list((tmp_path / "xla" / "programs").glob("*.program"))
        assert stored, f"{attempt}: no measure program was stored"


# -- the run (or the qrels) from standard input: the path "-", as trec_eval 10 reads a run


def _stdin(monkeypatch, data: bytes) -> None:
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.parametrize("expected", ["out.test", "out.test.aq", "out.test.aqcM"])
def test_run_from_standard_input_is_byte_identical(data, expected, monkeypatch, capsysbinary):
    args = CASES[expected]
    _stdin(monkeypatch, (data / args[-1]).read_bytes())
    assert main(_argv([*args[:-1], "-"])) == 0
    out, err = capsysbinary.readouterr()
    assert err == b""
    assert out == (data / expected).read_bytes()


def test_qrels_from_standard_input_is_byte_identical(data, monkeypatch, capsysbinary):
    _stdin(monkeypatch, (data / "qrels.test").read_bytes())
    assert main(_argv(["-m", "all_trec", "-q", "-", "results.test"])) == 0
    assert capsysbinary.readouterr().out == (data / "out.test.aq").read_bytes()


def test_run_from_standard_input_with_scattered_queries(data, monkeypatch, capsysbinary):
    # lines of a query apart: the run is read once, whole (standard input cannot be re-read)
    lines = (data / "results.test").read_bytes().splitlines(keepends=True)
    _stdin(monkeypatch, b"".join(lines[::2] + lines[1::2]))
    assert main(_argv(["-m", "all_trec", "-q", "qrels.test", "-"])) == 0
    assert capsysbinary.readouterr().out == (data / "out.test.aq").read_bytes()


@pytest.mark.parametrize(
    "argv, stdin, message",
    [
        (["qrels.test", "-"], b"301 Q0 d1 1\n", b"jaxrank: <stdin>:1: expected 6 fields"),
        (["-", "results.test"], b"301 0 d1\n", b"jaxrank: <stdin>:1: expected 4 fields"),
        (["qrels.test", "-"], b"", b"jaxrank: <stdin>:1: no data lines"),
        (["-", "-"], b"", b"jaxrank: only one of the qrels, the run and the z-scores can be read from standard input"),
        (["-Z", "-", "qrels.test", "-"], b"", b"jaxrank: only one of the qrels, the run and the z-scores can be read"),
        (["-Z", "-", "qrels.test", "results.test"], b"301 map 0.1\n", b"jaxrank: <stdin>:1: expected 4 fields"),
    ],
)
def test_bad_standard_input_is_one_line_naming_it(data, argv, stdin, message, monkeypatch, capsysbinary):
    _stdin(monkeypatch, stdin)
    assert main(_argv(argv)) == 1
    out, err = capsysbinary.readouterr()
    assert out == b""
    assert err.startswith(message), err
    assert err.count(b"\n") == 1


def test_run_from_standard_input_as_the_c_binary_reads_it(data, trec_eval_binary, tmp_path):
    import subprocess
    import sys

    cases = [(["-q", "-m", "all_trec"], "results.test"), (["-q", "-c", "-m", "all_trec", "-M", "50"], "results.trunc")]
    for flags, name in cases:
        run = (data / name).read_bytes()
        cmd = [*flags, str(data / "qrels.test"), "-"]
        want = subprocess.run([str(trec_eval_binary), *cmd], input=run, capture_output=True, check=True).stdout
        got = subprocess.run(
            [sys.executable, "-m", "jaxrank.cli", "eval", *cmd], input=run, capture_output=True, timeout=300
        )
        assert got.returncode == 0, got.stderr.decode()
        assert got.stdout == want, flags


@pytest.mark.parametrize(
    "argv, stdin, expected",
    [
        (["-q", "-m", "all_trec", "-Z", "-", "qrels.test", "results.test"], "zscores_file", "out.test.aqZ"),
        (["-m", "all_prefs", "-q", "-R", "prefs", "-", "prefs.results.test"], "prefs.test", "out.test.prefs"),
        (["-m", "qrels_jg", "-q", "-R", "qrels_jg", "-", "results.test"], "qrels.123", "out.test.qrels_jg"),
        (["-m", "qrels_jg", "-q", "-R", "qrels_jg", "qrels.123", "-"], "results.test", "out.test.qrels_jg"),
    ],
)
def test_other_input_modes_read_standard_input(data, argv, stdin, expected, monkeypatch, capsysbinary):
    _stdin(monkeypatch, (data / stdin).read_bytes())
    assert main(_argv(argv)) == 0
    out, err = capsysbinary.readouterr()
    assert err == b""
    assert out == (data / expected).read_bytes()
