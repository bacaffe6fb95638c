"""jaxrank.compare against ranx.compare: every pair of systems, two measures, Fisher's
randomization test with 10,000 random sign assignments, end to end (evaluation included).

    python benchmarks/bench_compare.py [N_SYSTEMS] [N_QUERIES] [N_DOCS] [N_PERMUTATIONS]

Defaults: 10 systems x 5000 queries x 100 documents, 10,000 permutations (issue 20's
setting). Both libraries read the same TREC run and qrels files (written to a temporary
folder first, not timed). Each is called twice in this process: the first
call includes compilation (XLA for jaxrank, numba for ranx), the second is warm. The ratio
is of the first calls (a user's one comparison) and of the second. jaxrank also computes
bootstrap confidence intervals of every mean (10,000 resamples), which ranx does not.
Results taken while the machine was busy are marked noisy (benchmarks/_machine.py).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

import _machine
import numpy as np


def make_files(folder: Path, n_systems: int, n_queries: int, n_docs: int, seed: int = 0):
    """A qrels file (10 % of each query's documents relevant, graded 1-2) and run files whose
    scores carry the relevance with a strength that grows with the system's index."""
    rng = np.random.default_rng(seed)
    rel = rng.integers(1, 3, size=(n_queries, n_docs)) * (rng.random((n_queries, n_docs)) < 0.1)
    qrels = folder / "qrels"
    q, d = np.nonzero(rel)
    qrels.write_text("".join(f"q{a} 0 d{b} {rel[a, b]}\n" for a, b in zip(q, d)))
    runs = {}
    for s in range(n_systems):
        scores = np.round(rng.random((n_queries, n_docs)) + 0.05 * s * rel, 4)
        order = np.argsort(-scores, axis=1)
        runs[f"s{s}"] = path = folder / f"s{s}.run"
        with open(path, "w") as f:
            for a in range(n_queries):
                f.write("".join(f"q{a} Q0 d{b} {r + 1} {scores[a, b]:.4f} s{s}\n" for r, b in enumerate(order[a])))
    return qrels, runs


def time_jaxrank(qrels: Path, runs: dict, n_permutations: int) -> float:
    import jaxrank

    t0 = time.perf_counter()
    report = jaxrank.compare(
        str(qrels), {k: str(v) for k, v in runs.items()}, ["map", "ndcg_cut.10"], n_resamples=n_permutations
    )
    report.to_records()
    return time.perf_counter() - t0


def time_ranx(qrels: Path, runs: dict, n_permutations: int) -> float:
    from ranx import Qrels, Run, compare

    t0 = time.perf_counter()
    ranx_runs = [Run.from_file(str(path), kind="trec", name=name) for name, path in runs.items()]
    compare(
        Qrels.from_file(str(qrels), kind="trec"),
        ranx_runs,
        ["map", "ndcg@10"],
        stat_test="fisher",
        n_permutations=n_permutations,
        max_p=0.05,
    )
    return time.perf_counter() - t0


def main(argv: list[str]) -> None:
    n_systems, n_queries, n_docs, n_permutations = [int(a) for a in argv[:4]] + [10, 5000, 100, 10000][len(argv) :]
    run = _machine.start(peers=("ranx", "numba", "scipy"), extra={"backend": "cpu"})
    print(run.header())
    folder = Path(tempfile.mkdtemp(prefix="bench_compare_"))
    qrels, runs = make_files(folder, n_systems, n_queries, n_docs)
    print(
        f"{n_systems} systems x {n_queries} queries x {n_docs} docs, {n_systems * (n_systems - 1) // 2} pairs, "
        f"2 measures, {n_permutations} permutations\n"
    )
    print("| library | call | seconds | load |")
    print("|---|---|---|---|")
    times = {}
    for name, fn in (("jaxrank", time_jaxrank), ("ranx", time_ranx)):
        for call in ("first", "second"):
            with run.watch() as w:
                seconds = fn(qrels, runs, n_permutations)
            times[name, call] = seconds
            print(f"| {name} | {call} | {seconds:.2f} | {w.flag} |")
    for call in ("first", "second"):
        print(f"\nranx / jaxrank, {call} call: {times['ranx', call] / times['jaxrank', call]:.1f}x")
    print(run.finish())
    shutil.rmtree(folder)


if __name__ == "__main__":
    main(sys.argv[1:])
