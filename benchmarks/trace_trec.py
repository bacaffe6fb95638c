"""Where ``jaxrank eval`` spends time and memory: the command run in-process as the console
script runs it (its XLA flags, compilation cache, malloc settings), its resident memory
sampled every 5 ms, and the start and end of each phase marked (reading the qrels and the
run, lowering, compiling, evaluating, each compiled call).

    python benchmarks/trace_trec.py QRELS RUN [-m all_trec ...] > /dev/null

prints to stderr one line per phase mark (wall s, RSS MB, process CPU s) and the peak RSS.
Set ``JAXRANK_CACHE_DIR=`` for a cold run (no compilation cache).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import time

T0 = time.perf_counter()
SAMPLES: list[tuple[float, float]] = []
MARKS: list[tuple[float, str, float, float]] = []


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _sample() -> None:
    while True:
        SAMPLES.append((time.perf_counter() - T0, _rss_mb()))
        time.sleep(0.005)


def _mark(name: str) -> None:
    MARKS.append((time.perf_counter() - T0, name, _rss_mb(), time.process_time()))


def _wrap(owner, name: str, label: str) -> None:
    f = getattr(owner, name)

    @functools.wraps(f)
    def marked(*args, **kwargs):
        _mark(f"> {label}")
        try:
            return f(*args, **kwargs)
        finally:
            _mark(f"< {label}")

    setattr(owner, name, marked)


def main() -> None:
    threading.Thread(target=_sample, daemon=True).start()
    import jaxrank.cli as cli

    _mark("imported jaxrank.cli")
    files, evaluate, engine = (
        importlib.import_module(f"jaxrank.{m}") for m in ("trec.files", "trec.evaluate", "measures.engine")
    )
    _wrap(files, "read_qrels", "read qrels")
    _wrap(evaluate, "_collect", "read and join the run")
    _wrap(evaluate, "_group", "evaluate (slices)")
    _wrap(engine, "lower_plan", "lower")
    _wrap(engine.Lowered, "compile", "compile (background)")
    _wrap(engine.Compiled, "__call__", "one compiled call")
    finish = cli._finish

    def report_and_finish(status: int, command: bool) -> int:
        for t in threading.enumerate():
            if t.name == "jaxrank-compile":
                t.join()
        _mark("output written")
        calls = [m for m in MARKS if m[1].endswith("one compiled call")]
        for t, name, rss, cpu in MARKS:
            if not name.endswith("one compiled call"):
                print(f"{t:8.3f} s {rss:7.0f} MB  cpu {cpu:6.2f} s  {name}", file=sys.stderr)
        peak_t, peak = max(SAMPLES, key=lambda s: s[1])
        print(f"{len(calls) // 2} compiled calls; peak RSS {peak:.0f} MB at {peak_t:.3f} s", file=sys.stderr)
        return finish(status, command)

    cli._finish = report_and_finish
    sys.argv = ["jaxrank", "eval", *sys.argv[1:]]
    cli.main()


if __name__ == "__main__":
    main()
