"""Exact dense retrieval + nDCG@10 / R@100: jaxrank.retrieval beside faiss IndexFlatIP.

Each implementation runs in its own process (peak memory is per process):

* ``jaxrank``: ``retrieval.search`` (blockwise exact top-k) -> ``join`` -> metrics.
* ``faiss``: ``faiss.IndexFlatIP.search`` (exact), then the same join and metrics.
* ``full``: the old way, the ``[Q, N]`` score and label matrices, then the metrics.

Every process builds the same synthetic collection (examples/dense_retrieval.py),
keeps one copy of the corpus (faiss's index, or a jax array), times the search and
the metrics apart from the first call (which compiles), and reports the peak RSS
from the moment the collection is resident (its building is left out): after the
search (``search_peak_mb``) and at the end, metrics included (``peak_mb``).
The driver runs each implementation ``--runs`` times, interleaved, and prints the
medians, and how many of faiss's ids jaxrank returns at the same positions.

    python benchmarks/bench_retrieval.py                          # 2000 x 300,000 x 128, k=100
    python benchmarks/bench_retrieval.py --impl full --docs 50000 # the old way, smaller
    python benchmarks/bench_retrieval.py --join                   # join: comparison vs sort
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    # The peak then covers the measured phase only (with the data already resident),
    # not the building of the synthetic collection.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _collection(args):
    spec = importlib.util.spec_from_file_location("dense_retrieval", ROOT / "examples" / "dense_retrieval.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example.synthetic_collection(args.queries, args.docs, args.dim, seed=args.seed)


def _timed(fn, repeats: int):
    start = time.perf_counter()
    out = fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, first, statistics.median(times)


def worker(args) -> dict:
    data = _collection(args)
    queries, corpus = data.queries, data.corpus
    import jax
    import jax.numpy as jnp

    import jaxrank
    from jaxrank.retrieval import join, search

    def metrics(scores, ids):
        labels, _ = join(ids, data.judged_ids, data.judged_labels)
        trec = dict(where=ids >= 0, judgments=data.judged_labels, judgments_where=data.judged_ids >= 0)
        out = (jaxrank.ndcg(scores, labels, k=10, **trec), jaxrank.recall(scores, labels, k=100, **trec))
        return jax.block_until_ready(out)

    if args.impl == "faiss":
        import faiss

        index = faiss.IndexFlatIP(args.dim)
        index.add(corpus)
        data = data._replace(queries=None, corpus=None)
        del corpus  # the index holds the corpus
        rss_data = _status_mb("VmRSS")
        _reset_peak()
        (scores, ids), first, search_s = _timed(lambda: index.search(queries, args.k), args.repeats)
        ids = ids.astype(np.int32)
        versions = {"faiss": faiss.__version__, "faiss_threads": faiss.omp_get_max_threads()}
    elif args.impl == "jaxrank":
        corpus = jax.device_put(corpus)
        queries = jax.device_put(queries)
        data = data._replace(corpus=None)
        rss_data = _status_mb("VmRSS")
        _reset_peak()

        def run():
            return jax.block_until_ready(search(queries, corpus, args.k, block_size=args.block_size))

        (scores, ids), first, search_s = _timed(run, args.repeats)
        versions = {}
    else:  # the old way: every score, every label
        corpus = jax.device_put(corpus)
        queries = jax.device_put(queries)
        rss_data = _status_mb("VmRSS")
        _reset_peak()

        def run():
            full = queries @ corpus.T
            dense = jnp.zeros(full.shape, jnp.int32)
            rows = jnp.arange(full.shape[0])[:, None]
            dense = dense.at[rows, jnp.maximum(data.judged_ids, 0)].max(
                jnp.where(data.judged_ids >= 0, data.judged_labels, 0)
            )
            out = (jaxrank.ndcg(full, dense, k=10), jaxrank.recall(full, dense, k=100))
            return jax.block_until_ready(out)

        (ndcg, recall), first, total_s = _timed(run, args.repeats)
        return {
            "impl": "full",
            "first_s": first,
            "total_s": total_s,
            "nDCG@10": float(np.mean(ndcg)),
            "R@100": float(np.mean(recall)),
            "rss_data_mb": rss_data,
            "peak_mb": _status_mb("VmHWM"),
        }
    search_peak = _status_mb("VmHWM")  # before the metrics compile
    (ndcg, recall), metrics_first, metrics_s = _timed(lambda: metrics(scores, ids), args.repeats)
    if args.save_ids:
        np.save(args.save_ids, np.asarray(ids))
    return {
        "impl": args.impl,
        "first_s": first,
        "search_s": search_s,
        "metrics_first_s": metrics_first,
        "metrics_s": metrics_s,
        "total_s": search_s + metrics_s,
        "nDCG@10": float(np.mean(ndcg)),
        "R@100": float(np.mean(recall)),
        "rss_data_mb": rss_data,
        "search_peak_mb": search_peak,
        "peak_mb": _status_mb("VmHWM"),
        **versions,
    }


def driver(args) -> None:
    import jax

    impls = ["jaxrank", "faiss"] if args.impl == "both" else [args.impl]
    results = {impl: [] for impl in impls}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for impl in impls:
                cmd = [sys.executable, __file__, "--worker", "--impl", impl, "--save-ids", f"{tmp}/{impl}.npy"]
                for name in ("queries", "docs", "dim", "k", "repeats", "seed", "block_size"):
                    value = getattr(args, name)
                    if value is not None:
                        cmd += [f"--{name.replace('_', '-')}", str(value)]
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if proc.returncode:
                    sys.exit(f"{impl} failed:\n{proc.stderr[-3000:]}")
                result = json.loads(proc.stdout.strip().splitlines()[-1])
                results[impl].append(result)
                print(
                    f"run {run + 1} {impl}: "
                    + json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}),
                    flush=True,
                )
        if set(impls) == {"jaxrank", "faiss"}:
            a, b = np.load(f"{tmp}/jaxrank.npy"), np.load(f"{tmp}/faiss.npy")
            print(
                f"ids identical to faiss: {np.mean(a == b):.6f} of positions; same sets per query: {np.mean([len(set(x) & set(y)) for x, y in zip(a, b)]) / a.shape[1]:.6f}"
            )
    keys = [
        "first_s",
        "search_s",
        "metrics_s",
        "total_s",
        "rss_data_mb",
        "search_peak_mb",
        "peak_mb",
        "nDCG@10",
        "R@100",
    ]
    print(
        f"\nmedians over {args.runs} processes each ({args.queries} queries x {args.docs} docs x {args.dim}, k={args.k}):"
    )
    print("| impl | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for impl, rows in results.items():
        cells = [statistics.median(r[k] for r in rows) if k in rows[0] else float("nan") for k in keys]
        print(f"| {impl} | " + " | ".join(f"{c:.4g}" for c in cells) + " |")
    print(
        f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}, jax {jax.__version__}, numpy {np.__version__}"
        + (
            f", faiss {results['faiss'][0]['faiss']} ({results['faiss'][0]['faiss_threads']} threads)"
            if "faiss" in results
            else ""
        )
    )


def join_paths(args) -> None:
    """Milliseconds of join's two lookups (pairwise comparison, sort + binary search) as m grows."""
    import jax
    import jax.numpy as jnp

    from jaxrank.retrieval import _join_jit

    rng = np.random.default_rng(args.seed)
    print(f"join, {args.queries} queries, k={args.k}: best of 5 calls, ms")
    print("| m | k x m | compare | sort + search |\n|---|---|---|---|")
    for m in (8, 32, 128, 512, 2048):
        ids = jnp.asarray(rng.integers(0, 10**6, (args.queries, args.k)), jnp.int32)
        judged_ids = jnp.asarray(rng.integers(0, 10**6, (args.queries, m)), jnp.int32)
        judged_labels = jnp.asarray(rng.integers(0, 4, (args.queries, m)), jnp.int32)
        cells = []
        for by_sort in (False, True):
            call = partial(_join_jit, ids, judged_ids, judged_labels, None, by_sort)
            jax.block_until_ready(call())
            times = []
            for _ in range(5):
                start = time.perf_counter()
                jax.block_until_ready(call())
                times.append(time.perf_counter() - start)
            cells.append(f"{min(times) * 1e3:.1f}")
        print(f"| {m} | {args.k * m} | {cells[0]} | {cells[1]} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["both", "jaxrank", "faiss", "full"], default="both")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--docs", type=int, default=300_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--block-size", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per process after the first")
    parser.add_argument("--runs", type=int, default=3, help="processes per implementation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--join", action="store_true", help="time join's two lookup paths instead")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--save-ids", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.join:
        join_paths(args)
    elif args.worker:
        print(json.dumps(worker(args)))
    else:
        driver(args)


if __name__ == "__main__":
    main()
