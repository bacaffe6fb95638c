"""``jaxrank ndeval`` and the arrays path against ndeval's C binary on a diversity run.

Times, each a median over ``--repeats`` runs taken round-robin (so a burst of load elsewhere
hits every tool alike):

  1. ndeval's binary (built with ``cc -O2`` from ``../shared/ref/ndeval/ndeval.c`` unless
     ``--ndeval PATH`` names one), from process start to output;
  2. ``jaxrank ndeval QRELS RUN`` (this environment's console script), cold
     (``JAXRANK_CACHE_DIR=``: XLA compiles in every run) and warm (the persistent
     compilation cache filled by one untimed run);
  3. the arrays path: the diversity functions over every topic at once, on the padded
     ``[topics, n, t]`` arrays, and over ndeval's greedy ideal ranking of the judgments (one
     jitted program, ``jaxrank.trec.diversity._quantities``, in a fresh interpreter; the
     first call compiles and is reported apart).

The outputs of 1 and 2 are compared byte for byte. The header records the machine, the
versions and the load (``benchmarks/_machine.py``); ``noisy`` marks a row taken while the
1-minute load exceeded 0.5 (this run's own share set aside).

    python benchmarks/bench_ndeval.py                       # 200 topics x 1000 docs x 6 subtopics
    python benchmarks/bench_ndeval.py --topics 20 --docs 100 --repeats 1   # quick check
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _machine
import numpy as np

SOURCE = Path(__file__).resolve().parents[2] / "shared" / "ref" / "ndeval" / "ndeval.c"


def generate(directory: Path, topics: int, docs: int, subtopics: int, judged: int, seed: int = 0) -> tuple[Path, Path]:
    """A qrels file (``judged`` documents per topic, each judged for every subtopic, about a
    third relevant) and a run of ``docs`` documents per topic, ranks 1..docs."""
    rng = np.random.default_rng(seed)
    qrels, run = [], []
    for topic in range(1, topics + 1):
        retrieved = rng.choice(3 * docs, size=docs, replace=False)
        pool = rng.choice(3 * docs, size=judged, replace=False)
        for d in pool.tolist():
            rel = (rng.random(subtopics) < 0.35).astype(int)
            qrels.extend(f"{topic} {s} doc{d} {r}\n" for s, r in enumerate(rel.tolist()))
        scores = np.sort(rng.normal(size=docs))[::-1]
        run.extend(
            f"{topic} Q0 doc{d} {i + 1} {s:.6f} bench\n" for i, (d, s) in enumerate(zip(retrieved.tolist(), scores))
        )
    paths = directory / "qrels", directory / "run"
    paths[0].write_text("".join(qrels))
    paths[1].write_text("".join(run))
    return paths


def build_ndeval(into: Path) -> Path:
    binary = into / "ndeval"
    subprocess.run(["cc", "-O2", "-o", str(binary), str(SOURCE), "-lm"], check=True)
    return binary


def timed(command: list[str], env: dict) -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, check=True)
    return time.perf_counter() - start, done.stdout


ARRAYS_SETUP = """
from jaxrank.trec import diversity
qrels = diversity.read_subtopic_qrels({qrels!r}, ndeval=True)
run = diversity.read_ndeval_run({run!r})
place = {{t: i for i, t in enumerate(qrels.topics)}}
rows = [i for i, t in enumerate(run.topics.tolist()) if t in place]
lists = diversity._lists(qrels, [place[int(run.topics[i])] for i in rows], [run.lists()[i] for i in rows], 1)
"""
ARRAYS_STMT = "out = diversity._quantities(lists, (5, 10, 20), 0.5, 0.5)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--subtopics", type=int, default=6)
    parser.add_argument("--judged", type=int, default=300, help="judged documents per topic")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ndeval", help="ndeval's binary (default: built from ../shared/ref/ndeval)")
    parser.add_argument("--data", help="directory for the generated files (default: a temporary one)")
    args = parser.parse_args()

    run = _machine.start(extra={"data": f"{args.topics} topics x {args.docs} docs x {args.subtopics} subtopics"})
    print(run.header())
    work = Path(args.data or tempfile.mkdtemp(prefix="bench-ndeval-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        qrels, run_file = generate(work, args.topics, args.docs, args.subtopics, args.judged)
        binary = Path(args.ndeval) if args.ndeval else build_ndeval(work)
        jaxrank = shutil.which("jaxrank") or str(Path(sys.executable).parent / "jaxrank")
        cache = work / "xla-cache"
        envs = {
            "ndeval (C)": ([str(binary), str(qrels), str(run_file)], dict(os.environ)),
            "jaxrank ndeval, cold": (
                [jaxrank, "ndeval", str(qrels), str(run_file)],
                {**os.environ, "JAXRANK_CACHE_DIR": ""},
            ),
            "jaxrank ndeval, warm": (
                [jaxrank, "ndeval", str(qrels), str(run_file)],
                {**os.environ, "JAXRANK_CACHE_DIR": str(cache)},
            ),
        }
        timed(*envs["jaxrank ndeval, warm"])  # fills the compilation cache
        times: dict[str, list[float]] = {name: [] for name in envs}
        outputs: dict[str, bytes] = {}
        flags: dict[str, list[str]] = {name: [] for name in envs}
        for _ in range(args.repeats):
            for name, (command, env) in envs.items():
                with run.watch() as w:
                    seconds, outputs[name] = timed(command, env)
                times[name].append(seconds)
                flags[name].append(w.flag)
        arrays = _machine.time_in_subprocess(
            ARRAYS_SETUP.format(qrels=str(qrels), run=str(run_file)), ARRAYS_STMT, repeats=args.repeats + 1
        )
        same = outputs["ndeval (C)"] == outputs["jaxrank ndeval, cold"] == outputs["jaxrank ndeval, warm"]
        print(f"# outputs byte for byte identical: {'yes' if same else 'NO'}")
        print("| what | median s | runs s | |")
        print("|---|---|---|---|")
        for name in envs:
            noisy = "noisy" if "noisy" in flags[name] else ""
            runs = " ".join(f"{t:.3f}" for t in times[name])
            print(f"| {name} | {statistics.median(times[name]):.3f} | {runs} | {noisy} |")
        later = arrays["runs_s"][1:]
        print(
            f"| arrays path (all topics, one program), first call with compilation | {arrays['runs_s'][0]:.3f} | | "
            f"{'noisy' if arrays['noisy'] else ''} |"
        )
        print(f"| arrays path, compiled | {statistics.median(later):.4f} | {' '.join(f'{t:.4f}' for t in later)} | |")
    finally:
        if not args.data:
            shutil.rmtree(work, ignore_errors=True)
    print(run.finish())


if __name__ == "__main__":
    main()
