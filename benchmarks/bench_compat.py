"""torchmetrics' RetrievalNormalizedDCG(top_k=10) beside jaxrank.compat.torchmetrics' class.

1M flat items (20,000 queries x 50, shuffled), graded targets 0..4; both end to end from the
flat arrays: update(), then compute() (grouping included). Prints a markdown table.
torchmetrics runs in its own interpreter (default threads, only numpy and torch imported),
as its users run it; the header records machine, versions and load, and "noisy" marks a
result taken while the machine was busy (benchmarks/_machine.py, docs/reports/index.md).

    python benchmarks/bench_compat.py [--queries 20000] [--size 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import _machine
import jax
import numpy as np

from jaxrank import group_by_query
from jaxrank.compat import torchmetrics as tm


def data(queries: int, size: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    indexes = np.repeat(np.arange(queries), size)
    preds = rng.random(queries * size, dtype=np.float32)
    target = rng.integers(0, 5, queries * size)
    order = rng.permutation(indexes.size)
    return preds[order], target[order], indexes[order]


def timed(fn, repeats: int):
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return min(times), times[0], value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    run = _machine.start(
        peers=("torch", "torchmetrics"), extra={"backend": jax.default_backend(), "x64": jax.config.jax_enable_x64}
    )
    print(run.header(), flush=True)
    preds, target, indexes = data(args.queries, args.size)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.npz")
        np.savez(path, preds=preds, target=target, indexes=indexes)
        theirs_run = _machine.time_in_subprocess(
            f"""import numpy as np, torch
from torchmetrics.retrieval import RetrievalNormalizedDCG
with np.load({path!r}) as z:
    tp, tt, ti = (torch.from_numpy(z[k]) for k in ("preds", "target", "indexes"))""",
            """metric = RetrievalNormalizedDCG(top_k=10)
metric.update(tp, tt, indexes=ti)
value = float(metric.compute())""",
            repeats=args.repeats,
            value="value",
        )
    theirs_best, theirs_first, theirs = min(theirs_run["runs_s"]), theirs_run["runs_s"][0], theirs_run["value"]
    theirs_flag = "noisy" if theirs_run["noisy"] else ""

    def jaxrank_run():
        metric = tm.RetrievalNormalizedDCG(top_k=10)
        metric.update(preds, target, indexes=indexes)
        return float(jax.block_until_ready(metric.compute()))

    with run.watch() as ours_watch:
        ours_best, ours_first, ours = timed(jaxrank_run, args.repeats)
    grouping_best, _, _ = timed(lambda: jax.block_until_ready(group_by_query(preds, target, indexes)), args.repeats)
    print(f"\n{args.queries} queries x {args.size} items, shuffled; best of {args.repeats} (first run in brackets)\n")
    print("| | seconds | value | load |")
    print("|---|---|---|---|")
    print(
        f"| torchmetrics RetrievalNormalizedDCG(top_k=10), own process | {theirs_best:.3f} ({theirs_first:.3f}) "
        f"| {theirs:.7f} | {theirs_flag} |"
    )
    print(
        f"| jaxrank.compat.torchmetrics (same) | {ours_best:.3f} ({ours_first:.3f}, compiles) | {ours:.7f} "
        f"| {ours_watch.flag} |"
    )
    print(f"\nspeed-up (best): {theirs_best / ours_best:.1f}x; |difference| {abs(theirs - ours):.1e}")
    print(f"of jaxrank's time, group_by_query on the host (best): {grouping_best:.3f} s")
    print("\n" + run.finish())


if __name__ == "__main__":
    main()
