"""torchmetrics' RetrievalNormalizedDCG(top_k=10) beside jaxrank.compat.torchmetrics' class.

1M flat items (20,000 queries x 50, shuffled), graded targets 0..4; both end to end from the
flat arrays: update(), then compute() (grouping included). Prints a markdown table.

    python benchmarks/bench_compat.py [--queries 20000] [--size 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import numpy as np
import torch
import torchmetrics
from torchmetrics.retrieval import RetrievalNormalizedDCG

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
    preds, target, indexes = data(args.queries, args.size)
    tp, tt, ti = map(torch.from_numpy, (preds, target, indexes))

    def torchmetrics_run():
        metric = RetrievalNormalizedDCG(top_k=10)
        metric.update(tp, tt, indexes=ti)
        return float(metric.compute())

    def jaxrank_run():
        metric = tm.RetrievalNormalizedDCG(top_k=10)
        metric.update(preds, target, indexes=indexes)
        return float(jax.block_until_ready(metric.compute()))

    theirs_best, theirs_first, theirs = timed(torchmetrics_run, args.repeats)
    ours_best, ours_first, ours = timed(jaxrank_run, args.repeats)
    grouping_best, _, _ = timed(lambda: jax.block_until_ready(group_by_query(preds, target, indexes)), args.repeats)
    print(f"{args.queries} queries x {args.size} items, shuffled; best of {args.repeats} (first run in brackets)")
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
        f"jax {jax.__version__} ({jax.default_backend()}), torch {torch.__version__}, "
        f"torchmetrics {torchmetrics.__version__}, x64 {jax.config.jax_enable_x64}\n"
    )
    print("| | seconds | value |")
    print("|---|---|---|")
    print(f"| torchmetrics RetrievalNormalizedDCG(top_k=10) | {theirs_best:.3f} ({theirs_first:.3f}) | {theirs:.7f} |")
    print(f"| jaxrank.compat.torchmetrics (same) | {ours_best:.3f} ({ours_first:.3f}, compiles) | {ours:.7f} |")
    print(f"\nspeed-up (best): {theirs_best / ours_best:.1f}x; |difference| {abs(theirs - ours):.1e}")
    print(f"of jaxrank's time, group_by_query on the host (best): {grouping_best:.3f} s")


if __name__ == "__main__":
    main()
