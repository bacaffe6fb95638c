"""``jaxrank eval`` against trec_eval's C binary, byte for byte, on generated inputs.

Random qrels and runs -- tied scores, ``-0.0`` beside ``0.0``, graded and ``-1`` labels,
queries missing on either side, runs shorter and longer than the relevant sets -- each
evaluated under a set of trec_eval's flags. The binary is built from ``../shared/ref``
by the ``trec_eval_binary`` fixture (tests/conftest.py); jaxrank runs in-process.

Without ``-c``, trec_eval stops (exit status 4) when a qrels query has no results;
jaxrank skips such queries instead, so there its output is compared with trec_eval's on
the qrels of the run's queries.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

import numpy as np
import pytest

from jaxrank.cli import main
from jaxrank.trec import _parse, files, report

DATA = Path(__file__).resolve().parent / "data" / "trec_eval"

# trec_eval's flags; every set is run on every generated case
FLAGS = (
    ["-q"],
    ["-q", "-c"],
    ["-q", "-M3"],
    ["-q", "-c", "-M7"],
    ["-q", "-J"],
    ["-q", "-c", "-J", "-M5"],
    ["-q", "-c", "-l2", "-N", "300"],
    ["-n", "-q", "-c", "-M1"],
    ["-c"],
    ["-q", "-M40", "-J"],
)
# parameterised measures (gain maps, cutoffs past the runs' ends), under one more flag set
PARAMETERISED = [
    "-m",
    "ndcg.1=3,2=9",
    "-m",
    "ndcg_cut.3,100",
    "-m",
    "Rndcg.1=2",
    "-m",
    "ndcg_rel.2=5,1=0",
    "-m",
    "G.2=4",
    "-m",
    "11pt_avg..25,.5,.75",
    "-m",
    "Rprec_mult.0.5,2",
    "-m",
    "map_cut.5,100",
    "-m",
    "rbp.p=0.8,2=3",
    "-m",
    "recall.3,200",
]
PARAMETERISED_FLAGS = ["-q", "-c", "-M9"]
N_CASES = 30  # x len(FLAGS) comparisons
QIDS = ("1", "2", "9", "10", "11", "q3", "q20", "7a")


def _score(rng: np.random.Generator, mode: int) -> str:
    if mode == 0:  # one decimal: ties, and -0.0 beside 0.0
        return repr(float(np.round(0.3 * rng.standard_normal(), 1)))
    if mode == 1:  # few distinct values: long ties
        return str(int(rng.integers(-2, 3)))
    return repr(float(rng.standard_normal()))


def _case(rng: np.random.Generator) -> tuple[str, str]:
    """A random (qrels text, run text); at least one query is on both sides."""
    qids = list(rng.choice(QIDS, size=int(rng.integers(1, 7)), replace=False))
    sides = rng.random((len(qids), 2)) < 0.85
    sides[0] = True
    qrels, run = [], []
    for q, (in_qrels, in_run) in zip(qids, sides):
        pool = [f"d{j}" for j in rng.permutation(80)[: int(rng.integers(1, 40))]]
        if in_qrels:
            labels = rng.choice([-1, 0, 0, 1, 1, 2, 3], size=len(pool))
            qrels += [f"{q} 0 {d} {y}" for d, y in zip(pool, labels)]
        if in_run:
            extra = [f"u{j}" for j in range(int(rng.integers(0, 25)))]
            docs = list(rng.permutation(pool + extra))
            depth = int(rng.choice([1, 2, 4, len(docs) // 2 + 1, len(docs)]))
            mode = int(rng.integers(0, 3))
            run += [f"{q} Q0 {d} {i} {_score(rng, mode)} tag" for i, d in enumerate(docs[:depth])]
    rng.shuffle(run)  # the reader must order the lines itself
    return "\n".join(qrels) + "\n", "\n".join(run) + "\n"


def _trec_eval(binary: Path, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary), *args], capture_output=True, check=False)


def _jaxrank(args: list[str]) -> tuple[int, bytes]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["eval", *args])
    assert status == 0, err.getvalue()
    return status, out.getvalue().encode()


def _first_diffs(got: bytes, want: bytes) -> list:
    g, w = got.decode().splitlines(), want.decode().splitlines()
    return [(i, a, b) for i, (a, b) in enumerate(zip(g, w)) if a != b][:4] + [(len(g), len(w))]


def _compare(binary: Path, tmp: Path, qrels: str, run: str, flags: list[str], measures: list[str]) -> int:
    """Assert that jaxrank prints trec_eval's bytes; the number of lines compared."""
    qrels_path, run_path = tmp / "qrels", tmp / "run"
    qrels_path.write_text(qrels)
    run_path.write_text(run)
    args = [*measures, *flags, str(qrels_path), str(run_path)]
    want = _trec_eval(binary, args)
    if want.returncode == 4 and "-c" not in flags:  # a qrels query without results
        run_qids = {line.split()[0] for line in run.splitlines() if line.strip()}
        kept = "".join(line + "\n" for line in qrels.splitlines() if line.split()[0] in run_qids)
        (tmp / "qrels.kept").write_text(kept)
        want = _trec_eval(binary, [*measures, *flags, str(tmp / "qrels.kept"), str(run_path)])
    assert want.returncode == 0, want.stderr.decode()
    _, got = _jaxrank(args)
    assert got == want.stdout, (flags, _first_diffs(got, want.stdout))
    return got.count(b"\n")


@pytest.fixture(scope="module")
def widest_case_compiled(trec_eval_binary, tmp_path_factory):
    """Compile once for the widest generated batch: later cases are padded to that shape
    (``jaxrank.evaluate`` reuses a compiled shape that fits), so the cases cost no compilation."""
    tmp = tmp_path_factory.mktemp("widest")
    qrels = "".join(f"{q} 0 d{j} 1\n" for q in QIDS for j in range(48))
    run = "".join(f"{q} Q0 {d}{j} 0 {-j} t\n" for q in QIDS for d in "du" for j in range(40))
    for flags in (["-q"], ["-q", "-c", "-l2", "-N", "300"]):
        _compare(trec_eval_binary, tmp, qrels, run, flags, ["-m", "all_trec"])
    _compare(trec_eval_binary, tmp, qrels, run, PARAMETERISED_FLAGS, PARAMETERISED)


@pytest.mark.parametrize("seed", range(N_CASES))
def test_generated_case_matches_trec_eval_under_every_flag_set(widest_case_compiled, trec_eval_binary, tmp_path, seed):
    qrels, run = _case(np.random.default_rng(seed))
    for flags in FLAGS:
        _compare(trec_eval_binary, tmp_path, qrels, run, flags, ["-m", "all_trec"])
    _compare(trec_eval_binary, tmp_path, qrels, run, PARAMETERISED_FLAGS, PARAMETERISED)


def test_rounded_scores_with_negative_zero_match_trec_eval(widest_case_compiled, trec_eval_binary, tmp_path):
    """Scores ``round(0.3 * normal, 1)``: one line in eight is ``-0.0`` or ``0.0``; the two
    are one score, and docno breaks the tie."""
    rng = np.random.default_rng(11)
    qrels, run = [], []
    for q in range(8):
        docs = [f"d{i}" for i in range(int(rng.integers(20, 80)))]
        qrels += [f"q{q} 0 {d} {rng.integers(-1, 3)}" for d in docs if rng.random() < 0.5]
        run += [
            f"q{q} Q0 {d} {r} {float(np.round(0.3 * rng.standard_normal(), 1))!r} t"
            for r, d in enumerate(docs)
            if rng.random() < 0.8
        ]
    run_text = "\n".join(run) + "\n"
    assert run_text.count(" -0.0 ") > 20 and run_text.count(" 0.0 ") > 20
    _compare(trec_eval_binary, tmp_path, "\n".join(qrels) + "\n", run_text, ["-q"], ["-m", "all_trec"])


def test_one_short_query_counts_every_relevant_document_in_the_ideal(trec_eval_binary, tmp_path):
    """4 retrieved (3 relevant) for 26 relevant: the ideal DCG runs past the run's end."""
    qrels = "".join(f"7 0 r{i:02d} 1\n" for i in range(26)) + "7 0 n1 0\n"
    run = "7 Q0 r00 1 4.0 t\n7 Q0 n1 2 3.0 t\n7 Q0 r01 3 2.0 t\n7 Q0 r02 4 1.0 t\n"
    _compare(trec_eval_binary, tmp_path, qrels, run, ["-q"], ["-m", "all_trec", "-m", "dcg", "-m", "ideal_dcg"])


@pytest.mark.parametrize("flags", [["-q", "-c", "-J"], ["-q", "-c", "-M50"], ["-q", "-c", "-M10", "-J"]])
def test_truncated_trec_eval_run_matches_under_cutoffs(trec_eval_binary, flags):
    args = ["-m", "all_trec", *flags, str(DATA / "qrels.test"), str(DATA / "results.trunc")]
    want = _trec_eval(trec_eval_binary, args)
    assert want.returncode == 0, want.stderr.decode()
    _, got = _jaxrank(args)
    assert got == want.stdout, _first_diffs(got, want.stdout)


def test_summary_mean_is_a_sequential_sum_in_query_order(trec_eval_binary, tmp_path):
    """P_20 = .10 .35 .20 .25 .25 .05 .05 0 over 8 queries: exactly 0.15625, printed 0.1562."""
    qrels, run = [], []
    for i, hits in enumerate([2, 7, 4, 5, 5, 1, 1, 0]):
        q = f"q{i}"
        qrels.append(f"{q} 0 r0 1" if hits == 0 else "")
        qrels += [f"{q} 0 r{j} 1" for j in range(hits)]
        run += [f"{q} Q0 {'r' if j < hits else 'n'}{j} {j} {-j} t" for j in range(20)]
    qrels_text = "\n".join(line for line in qrels if line) + "\n"
    _compare(trec_eval_binary, tmp_path, qrels_text, "\n".join(run) + "\n", ["-q"], ["-m", "P.20", "-m", "unj.20"])
    assert "0.1562" in _jaxrank(["-m", "P.20", str(tmp_path / "qrels"), str(tmp_path / "run")])[1].decode()


DECIMAL_INTEGERS = {-1: ["-1.0", "-1.", "-01.00"], 0: ["0.0", "-0.0", ".0", "0e5"], 1: ["1.0", "+1.00", "1e0", "1."]}
DECIMAL_INTEGERS |= {2: ["2.00", "2.0E0", "+2."], 3: ["3.000", "3e0"]}


def test_relevance_written_with_a_decimal_point_reads_as_trec_eval_reads_it(
    widest_case_compiled, trec_eval_binary, tmp_path
):
    """``1.0``, ``-1.``, ``2.0E0``: trec_eval reads a relevance with ``atol`` (the leading
    integer), which here is the number's value; jaxrank gives trec_eval's output."""
    rng = np.random.default_rng(5)
    for _ in range(3):
        qrels, run = _case(rng)
        lines = [line.split() for line in qrels.splitlines()]
        options = [DECIMAL_INTEGERS[int(rel)] for *_, rel in lines]
        written = "".join(
            f"{q} {i} {d} {opts[rng.integers(len(opts))]}\n" for (q, i, d, _), opts in zip(lines, options)
        )
        assert written.count(".") > len(lines) // 2
        (tmp_path / "qrels.int").write_text(qrels)  # the same judgments written as integers
        for flags in (["-q"], ["-q", "-c", "-J"]):
            _compare(trec_eval_binary, tmp_path, written, run, flags, ["-m", "all_trec"])
            same = [
                _trec_eval(trec_eval_binary, [*flags, str(tmp_path / q), str(tmp_path / "run")])
                for q in ("qrels", "qrels.int")
            ]
            assert same[0].stdout == same[1].stdout and same[0].returncode == same[1].returncode


def test_infinite_scores_and_their_ties_match_trec_eval(widest_case_compiled, trec_eval_binary, tmp_path):
    rng = np.random.default_rng(8)
    qrels, run = _case(rng)
    lines = run.splitlines()
    for i in rng.choice(len(lines), size=len(lines) // 2, replace=False):
        q, z, d, r, _, t = lines[i].split()
        lines[i] = f"{q} {z} {d} {r} {rng.choice(['inf', '-inf', 'Infinity', '-INF', '+inf'])} {t}"
    _compare(trec_eval_binary, tmp_path, qrels, "\n".join(lines) + "\n", ["-q", "-c"], ["-m", "all_trec"])


REFUSED = [
    ("1 0 a 1\n1 0 b 0.5\n", "1 Q0 a 1 2 t\n1 Q0 b 2 1 t\n", "qrels:2: relevance is not an integer: '0.5'"),
    ("1 0 a 1\n1 0 b 1e1\n", "1 Q0 a 1 2 t\n1 Q0 b 2 1 t\n", "qrels:2: relevance is not an integer: '1e1'"),
    ("1 0 a 1\n1 0 b 0\n", "1 Q0 a 1 nan t\n1 Q0 b 2 1 t\n", "run:1: score is NaN"),
    ("1 0 a 1\n1 0 c 2\n", "1 Q0 a 1 inf t\n1 Q0 b 2 -inf t\n1 Q0 c 3 -nan t\n1 Q0 d 4 0 t\n", "run:3: score is NaN"),
]


@pytest.mark.parametrize("qrels, run, message", REFUSED)
def test_values_trec_eval_reads_by_accident_are_refused_with_file_and_line(
    trec_eval_binary, tmp_path, qrels, run, message
):
    """A non-integral relevance (trec_eval truncates it) and a NaN score (whose place in
    trec_eval's ranking depends on its C library's ``qsort``): trec_eval prints numbers,
    jaxrank one line naming the file and line, and exits 1."""
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    args = ["-m", "all_trec", "-q", str(tmp_path / "qrels"), str(tmp_path / "run")]
    assert _trec_eval(trec_eval_binary, args).returncode == 0
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["eval", *args])
    assert (status, out.getvalue()) == (1, "")
    assert err.getvalue().count("\n") == 1 and "Traceback" not in err.getvalue()
    assert f"{tmp_path}/{message}" in err.getvalue()


@pytest.mark.parametrize("seed", [100, 104, 111])  # cases with 3 to 5 run queries
def test_run_read_in_many_parts_matches_trec_eval(widest_case_compiled, trec_eval_binary, tmp_path, monkeypatch, seed):
    """``jaxrank eval`` reads a run a few queries at a time (``files._run_parts``); here parts
    of 5 lines and blocks of 128 bytes, so queries span blocks and parts end mid-block. The
    lines of each query are kept together (a shuffled file takes the whole-file path)."""
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", 128)
    monkeypatch.setattr(files, "_PART_LINES", 5)
    qrels, run = _case(np.random.default_rng(seed))
    run = "".join(sorted(run.splitlines(keepends=True), key=lambda line: line.split()[0]))
    (tmp_path / "run").write_text(run)
    assert len(list(files._run_parts(tmp_path / "run"))) >= 2
    for flags in (["-q"], ["-q", "-c", "-J"], ["-q", "-c", "-M3"], ["-c", "-M0"]):
        _compare(trec_eval_binary, tmp_path, qrels, run, flags, ["-m", "all_trec"])


# ------------------------------------------------------------------ values on rounding ties
# Realistic runs whose per-query values often lie exactly on a rounding tie of the 4th decimal
# (issue 28): 50 queries, 120 judged documents each, 8 to 80 of them relevant with grades 1-3
# (mostly round counts: with R = 40, bpref is (40 r - A) / 1600, a tie whenever A = 2 mod 4),
# a few pooled-but-unjudged, and runs of 1000 documents with scores on a grid (ties broken by
# docno). trec_eval prints such a value by the last bit of its double, so each value must be
# formed as trec_eval forms it (jaxrank.measures._exact).
HALFWAY_RELEVANT = (8, 16, 25, 32, 40, 40, 40, 50, 64, 75, 80, 80, 80)
HALFWAY_FLAGS = (["-q"], ["-q", "-c"], ["-q", "-l2"], ["-q", "-c", "-M100"], ["-q", "-J"], ["-c"])
HALFWAY_SEEDS = (2, 4)  # before the fix, jaxrank printed 2 and 3 lines of -q differently


def _halfway_case(rng: np.random.Generator, queries: int = 50, judged: int = 120, depth: int = 1000):
    qrels, run = [], []
    for qi in range(queries):
        q = f"q{qi}"
        n_rel = int(rng.choice(HALFWAY_RELEVANT)) if rng.random() < 0.85 else int(rng.integers(8, 81))
        labels = np.concatenate([rng.integers(1, 4, n_rel), np.zeros(judged - n_rel, int)])
        labels[rng.random(judged) < 0.03] = -1
        docs = [f"d{qi}x{j}" for j in rng.permutation(judged)]
        qrels += [f"{q} 0 {d} {y}" for d, y in zip(docs, labels)]
        k = int(rng.integers(judged // 2, judged + 1))  # judged documents retrieved
        picked = rng.choice(judged, k, replace=False)
        ret = [docs[i] for i in picked] + [f"u{qi}x{j}" for j in range(depth - k)]
        gain = np.array([max(labels[i], 0) for i in picked] + [0] * (depth - k))
        scores = np.round(rng.standard_normal(depth) + rng.uniform(0.3, 1.5) * gain, 3)
        run += [f"{q} Q0 {d} 0 {s} t" for d, s in zip(ret, scores)]
    return "\n".join(qrels) + "\n", "\n".join(run) + "\n"


def _on_a_tie(values: np.ndarray) -> int:
    """How many values print differently one ulp below and one ulp above (``%6.4f``)."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    below = np.char.mod("%6.4f", np.nextafter(v, -np.inf))
    above = np.char.mod("%6.4f", np.nextafter(v, np.inf))
    return int(np.sum(below != above))


@pytest.mark.parametrize("seed", HALFWAY_SEEDS)
def test_values_on_rounding_ties_print_as_trec_eval_prints_them(trec_eval_binary, tmp_path, seed):
    """Every line of ``-q -m all_trec`` (and of ``-c``, ``-l``, ``-M``, ``-J``) equals the C
    binary's, on runs made to hold many values within an ulp of a rounding tie."""
    qrels, run = _halfway_case(np.random.default_rng(seed))
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    rep = report(tmp_path / "qrels", tmp_path / "run", "all_trec")
    ties = sum(_on_a_tie(rep.values[c.name]) for c in rep.columns if c.kind == "float" and c.per_query)
    assert ties >= 20, ties  # the case does what it is for
    lines = sum(_compare(trec_eval_binary, tmp_path, qrels, run, flags, ["-m", "all_trec"]) for flags in HALFWAY_FLAGS)
    assert lines > 20000, lines


def test_exact_operations_give_the_bits_of_c_arithmetic():
    """``jaxrank.measures._exact`` under ``jit``, against numpy (IEEE, one operation at a time):
    the rewrites it guards against (reciprocal multiplication, FMA, tree sums) change these
    values when left to XLA."""
    import math

    import jax
    import jax.numpy as jnp

    from jaxrank.measures import _exact
    from jaxrank.ranking import backend

    rng = np.random.default_rng(0)
    a = rng.integers(0, 100, (16, 200)).astype(np.float64)
    b = rng.integers(1, 100, (16, 1)).astype(np.float64)
    x, y, z = rng.random((3, 16, 200)) - 0.5
    pos = np.arange(1, 201, dtype=np.float64)
    checks = {
        "divide by a broadcast": (jax.jit(lambda a, b: backend.divide(a, b))(a, b), a / b),
        "divide by a constant": (jax.jit(lambda a: backend.divide(a, 11.0))(a), a / 11.0),
        "divide by positions": (jax.jit(lambda a: backend.divide(a, jnp.arange(1, 201, dtype=a.dtype)))(a), a / pos),
        "rounded product": (jax.jit(lambda x, y, z: z - _exact.rounded(x * y))(x, y, z), z - x * y),
        "running sum": (jax.jit(_exact.running_sum)(x), np.cumsum(x, axis=-1)),  # numpy's is sequential
        "total": (jax.jit(_exact.total)(x), np.cumsum(x, axis=-1)[:, -1]),
        "log2": (jax.jit(lambda: _exact.log2_positions(3000, jnp.float64))(), [math.log2(i + 2) for i in range(3000)]),
    }
    for name, (got, want) in checks.items():
        assert np.array_equal(np.asarray(got), np.asarray(want)), name
