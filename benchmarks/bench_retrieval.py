"""Exact dense retrieval: jaxrank.retrieval.search beside faiss IndexFlatIP, k = 10, 100, 1000.

The driver builds the synthetic collection of examples/dense_retrieval.py once per corpus
size, writes it to a temporary folder, and runs every search in a process of its own:

* ``faiss``: ``faiss.IndexFlatIP.search`` (exact) in a fresh interpreter that imports only
  numpy and faiss, with faiss's default threads (no thread-capping variable in its
  environment): the way its users run it.
* ``jaxrank``: ``retrieval.search`` (exact) in a fresh interpreter, default XLA settings.
* ``full``: the old way, the ``[Q, N]`` score and label matrices, then the metrics.

A worker loads the collection, keeps one copy of the corpus (faiss's index, or a jax
array), times the first call (jaxrank compiles in it) and ``--repeats`` calls after it
(median), and reports the peak RSS from the moment the collection is resident (its
loading left out). The driver then checks jaxrank's ids against faiss's, computes
nDCG@10 and R@100 of both with jaxrank's metrics, and prints one row per corpus size,
``k`` and implementation, with the load average before and after each worker and
"noisy" where the machine was not quiet (benchmarks/_machine.py).

    python benchmarks/bench_retrieval.py                    # 2000 queries x {300k, 1M} docs x 128, k = 10, 100, 1000
    python benchmarks/bench_retrieval.py --docs 300000 --k 100 --runs 3
    python benchmarks/bench_retrieval.py --impl full --docs 50000 --k 100   # the old way, smaller
    python benchmarks/bench_retrieval.py --join                              # join: comparison vs sort
    python benchmarks/bench_retrieval.py --bound                             # products and top_k merges apart
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

_ARRAYS = ("queries", "corpus", "judged_ids", "judged_labels")


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> None:
    # The peak then covers the measured phase only (with the data already resident),
    # not the loading of the collection.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _timed(fn, repeats: int):
    start = time.perf_counter()
    out = fn()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, first, statistics.median(times) if times else first


def worker(args) -> dict:
    """One search (or the old way) on the collection in ``args.data``; nothing imported before it."""
    data = {name: np.load(os.path.join(args.data, f"{name}.npy")) for name in _ARRAYS}
    queries, corpus = data.pop("queries"), data.pop("corpus")
    if args.impl == "faiss":
        import faiss

        index = faiss.IndexFlatIP(corpus.shape[1])
        index.add(corpus)
        del corpus  # the index holds the corpus
        rss_data = _status_mb("VmRSS")
        _reset_peak()
        (scores, ids), first, search_s = _timed(lambda: index.search(queries, args.k), args.repeats)
        extra = {"faiss_threads": faiss.omp_get_max_threads()}
    elif args.impl == "jaxrank":
        import jax

        from jaxrank.retrieval import search

        # device_put is asynchronous: wait for the copies (and let numpy's arrays go) before
        # the peak is reset, or the numpy and jax copies of the corpus both count as the search's.
        corpus, queries = jax.block_until_ready((jax.device_put(corpus), jax.device_put(queries)))
        gc.collect()
        rss_data = _status_mb("VmRSS")
        _reset_peak()

        def run():
            return jax.block_until_ready(search(queries, corpus, args.k, block_size=args.block_size))

        (scores, ids), first, search_s = _timed(run, args.repeats)
        extra = {}
    else:  # the old way: every score, every label
        import jax
        import jax.numpy as jnp

        import jaxrank

        corpus, queries = jax.block_until_ready((jax.device_put(corpus), jax.device_put(queries)))
        gc.collect()
        judged_ids, judged_labels = data["judged_ids"], data["judged_labels"]
        rss_data = _status_mb("VmRSS")
        _reset_peak()

        def run():
            full = queries @ corpus.T
            dense = jnp.zeros(full.shape, jnp.int32)
            rows = jnp.arange(full.shape[0])[:, None]
            dense = dense.at[rows, jnp.maximum(judged_ids, 0)].max(jnp.where(judged_ids >= 0, judged_labels, 0))
            return jax.block_until_ready((jaxrank.ndcg(full, dense, k=10), jaxrank.recall(full, dense, k=100)))

        (ndcg, recall), first, total_s = _timed(run, args.repeats)
        return {
            "first_s": first,
            "search_s": total_s,
            "nDCG@10": float(np.mean(ndcg)),
            "R@100": float(np.mean(recall)),
            "rss_data_mb": rss_data,
            "search_peak_mb": _status_mb("VmHWM"),
        }
    search_peak = _status_mb("VmHWM")
    np.save(os.path.join(args.data, f"{args.impl}_ids.npy"), np.asarray(ids).astype(np.int32))
    np.save(os.path.join(args.data, f"{args.impl}_scores.npy"), np.asarray(scores))
    return {"first_s": first, "search_s": search_s, "rss_data_mb": rss_data, "search_peak_mb": search_peak, **extra}


def _metrics(folder: str, impl: str) -> dict:
    """nDCG@10 and R@100 (trec_eval semantics) of a worker's saved result, by jaxrank."""
    import jaxrank
    from jaxrank.retrieval import join

    ids = np.load(os.path.join(folder, f"{impl}_ids.npy"))
    scores = np.load(os.path.join(folder, f"{impl}_scores.npy"))
    judged_ids = np.load(os.path.join(folder, "judged_ids.npy"))
    judged_labels = np.load(os.path.join(folder, "judged_labels.npy"))
    labels, _ = join(ids, judged_ids, judged_labels)
    trec = dict(where=ids >= 0, judgments=judged_labels, judgments_where=judged_ids >= 0)
    out = {"nDCG@10": float(np.mean(jaxrank.ndcg(scores, labels, k=10, **trec)))}
    if ids.shape[1] >= 100:
        out["R@100"] = float(np.mean(jaxrank.recall(scores, labels, k=100, **trec)))
    return out


def _write_collection(folder: str, docs: int, args) -> None:
    spec = importlib.util.spec_from_file_location("dense_retrieval", ROOT / "examples" / "dense_retrieval.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    data = example.synthetic_collection(args.queries, docs, args.dim, seed=args.seed)
    for name in _ARRAYS:
        np.save(os.path.join(folder, f"{name}.npy"), getattr(data, name))


def _run_worker(impl: str, folder: str, k: int, args) -> dict:
    cmd = [sys.executable, __file__, "--worker", "--impl", impl, "--data", folder, "--k", str(k)]
    cmd += ["--repeats", str(args.repeats)]
    if args.block_size is not None:
        cmd += ["--block-size", str(args.block_size)]
    # Default threads for every library, as their users run them.
    env = {key: v for key, v in os.environ.items() if key not in _machine.THREAD_VARIABLES}
    _machine.settle(args.settle)  # not in the wake of the worker before
    with _machine.Watch() as watch:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode:
        sys.exit(f"{impl} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result.update(load_before=watch.load_before[0], load_after=watch.load_after[0], noisy=watch.noisy)
    return result


def driver(args) -> None:
    impls = ["jaxrank", "faiss"] if args.impl == "both" else [args.impl]
    run = _machine.start(peers=("faiss-cpu",), extra={"queries": args.queries, "dim": args.dim})
    print(run.header(), flush=True)
    print(
        f"\n{args.queries} queries x d={args.dim}; search s: median of {args.repeats} calls after the first, "
        f"median over {args.runs} process(es); peak MB: RSS peak during the search, data included; "
        f"load: 1-min load average before / after the worker (each worker waits up to {args.settle:.0f} s "
        "for it to fall to 0.5 first)\n"
    )
    print(
        "| docs | k | impl | search s | first call s | x faiss | RSS with data MB | peak MB | nDCG@10 | R@100 | load | |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for docs in args.docs:
        with tempfile.TemporaryDirectory() as folder:
            _write_collection(folder, docs, args)
            for k in args.k:
                rows = {impl: [] for impl in impls}
                for _ in range(args.runs):
                    for impl in impls:
                        rows[impl].append(_run_worker(impl, folder, k, args))
                quality = {impl: _metrics(folder, impl) for impl in impls if impl != "full"}
                med = {impl: statistics.median(r["search_s"] for r in rows[impl]) for impl in impls}
                for impl in impls:
                    r = rows[impl]
                    ratio = f"{med[impl] / med['faiss']:.2f}" if "faiss" in med else "-"
                    q = quality.get(impl, r[-1])
                    loads = ", ".join(f"{x['load_before']:.2f}/{x['load_after']:.2f}" for x in r)
                    print(
                        f"| {docs} | {k} | {impl} | {med[impl]:.3f} | {statistics.median(x['first_s'] for x in r):.2f} "
                        f"| {ratio} | {statistics.median(x['rss_data_mb'] for x in r):.0f} "
                        f"| {statistics.median(x['search_peak_mb'] for x in r):.0f} "
                        f"| {q.get('nDCG@10', float('nan')):.4f} | {q.get('R@100', float('nan')):.4f} | {loads} "
                        f"| {'noisy' if any(x['noisy'] for x in r) else ''} |",
                        flush=True,
                    )
                if {"jaxrank", "faiss"} <= set(impls):
                    a = np.load(os.path.join(folder, "jaxrank_ids.npy"))
                    b = np.load(os.path.join(folder, "faiss_ids.npy"))
                    same_sets = np.mean([len(set(x) & set(y)) for x, y in zip(a, b)]) / a.shape[1]
                    print(
                        f"|  |  | ids equal to faiss's at {np.mean(a == b):.6f} of positions, "
                        f"same sets {same_sets:.6f} |  |  |  |  |  |  |  |  |  |",
                        flush=True,
                    )
    if "faiss" in impls:
        print(f"\nfaiss threads: {rows['faiss'][0]['faiss_threads']} (its default)")
    print(run.finish())


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


def bound(args) -> None:
    """What bounds the exact search on this machine: the products alone, and the depth-k
    ``lax.top_k`` merges the search makes, each timed apart, beside the search itself; the
    rest is the screening (group maxima, the choice of the groups above the threshold, the
    gathers into the pool)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from jaxrank import retrieval

    rng = np.random.default_rng(args.seed)
    print(
        "| docs | k | products s | one merge s | merges per query | products + merges s | search s | rest (screening) s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for docs in args.docs:
        queries = jnp.asarray(rng.standard_normal((args.queries, args.dim), dtype=np.float32))
        corpus = jnp.asarray(rng.standard_normal((docs, args.dim), dtype=np.float32))
        for k in args.k:
            block = args.block_size or retrieval._default_block(args.queries, k)
            tile = retrieval._tile_rows(args.queries, retrieval._QUERY_TILE["cpu"])
            blocks = docs // block

            @jax.jit
            def products(queries, corpus, block=block, blocks=blocks):
                # every block's product, kept alive by a running column maximum
                def per_tile(q):
                    def body(j, acc):
                        s = retrieval._scores(q, lax.dynamic_slice_in_dim(corpus, j * block, block), None)
                        return jnp.maximum(acc, s.max(axis=-1))

                    return lax.fori_loop(0, blocks, body, jnp.full((q.shape[0],), -jnp.inf))

                return lax.map(per_tile, queries[: queries.shape[0] // tile * tile].reshape(-1, tile, args.dim))

            # a merge as the search makes it: the running top-k of the rows seen (here 4 blocks),
            # sorted, then a new block; fresh random rows would cost more (every row of the
            # new block competes for the heap)
            seen = jnp.asarray(rng.standard_normal((args.queries, 4 * block), dtype=np.float32))
            fresh = jnp.asarray(rng.standard_normal((args.queries, block), dtype=np.float32))
            merge_input = jnp.concatenate([lax.top_k(seen, k)[0], fresh], axis=-1)
            del seen
            merge = jax.jit(lambda x, k=k: lax.top_k(x, k))
            first = max(block, k)
            plan = retrieval._epochs(first, (docs - first) // block, block, k)
            merges = 1 + sum(stop - start if cap is None else 1 for start, stop, cap in plan)
            times = []
            for fn in (
                lambda: products(queries, corpus),
                lambda: merge(merge_input),
                lambda: retrieval.search(queries, corpus, k),
            ):
                jax.block_until_ready(fn())
                times.append(_timed(lambda fn=fn: jax.block_until_ready(fn()), max(args.repeats, 3))[2])
            floor_s, merge_s, search_s = times
            print(
                f"| {docs} | {k} | {floor_s:.3f} | {merge_s:.3f} | {merges} | {floor_s + merges * merge_s:.3f} "
                f"| {search_s:.3f} | {search_s - floor_s - merges * merge_s:.3f} |",
                flush=True,
            )


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", choices=["both", "jaxrank", "faiss", "full"], default="both")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--docs", type=_ints, default=[300_000, 1_000_000], help="corpus sizes, comma-separated")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--k", type=_ints, default=[10, 100, 1000], help="results per query, comma-separated")
    parser.add_argument("--block-size", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1, help="timed calls per process after the first")
    parser.add_argument("--runs", type=int, default=1, help="processes per implementation")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--settle",
        type=float,
        default=240.0,
        help="seconds to wait at most, before each worker, for the load to fall to 0.5",
    )
    parser.add_argument("--join", action="store_true", help="time join's two lookup paths instead")
    parser.add_argument("--bound", action="store_true", help="time the products and top_k merges apart instead")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.k = args.k[0]
        print(json.dumps(worker(args)))
    elif args.join:
        args.k = args.k[0]
        join_paths(args)
    elif args.bound:
        bound(args)
    else:
        driver(args)


if __name__ == "__main__":
    main()
