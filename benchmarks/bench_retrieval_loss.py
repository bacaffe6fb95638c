"""Value and gradient of retrieval losses over in-batch lists and a corpus, beside InfoNCE.

    python benchmarks/bench_retrieval_loss.py                       # every size and row
    python benchmarks/bench_retrieval_loss.py --sizes 4096x4096     # one size
    python benchmarks/bench_retrieval_loss.py --rows infonce,default --json out.json
    python benchmarks/bench_retrieval_loss.py --sizes 4096x4096 45x700 --relevant 1 16 64 \
        --rows infonce,softmax,default,temperature     # several relevant documents a query

A dual encoder's step: queries ``[Q, d]`` and documents ``[M, d]`` (unit vectors, d = 128),
scores ``q @ D.T``, ``r`` relevant documents per query (``--relevant``, 1 by default:
document ``i`` for query ``i`` in a batch, ``M = Q``, a random document of the corpus
otherwise; with ``r > 1`` the first is that one and the other ``r - 1`` are drawn at random
without repetition), and the value and gradient of the mean loss in both embeddings, under
``jit``. Rows:

* ``infonce``: InfoNCE as its users write it, ``optax.softmax_cross_entropy_with_integer_labels``
  of the scores over a temperature of 0.05 (the floor: one pass over the score matrix); with
  ``r > 1`` each (query, relevant document) pair is an example, the query's other relevant
  documents masked out of its denominator (``bench_retriever.py``'s InfoNCE: ``r`` lists a query);
* ``softmax``: softmax cross-entropy against every relevant document at once
  (``optax.softmax_cross_entropy`` of the scores over 0.05, the target uniform over the ``r``
  relevant documents): one list a query whatever ``r``, the floor with several positives;
* ``default``: ``jaxrank.losses.retrieval_loss(q, D, positives)`` (its defaults: nDCG of
  bounds of the ranks at each list's top gaps), blocks of queries with rematerialisation,
  the ``[Q, M]`` matrix never held;
* ``temperature``: the same at InfoNCE's temperature, ``temperature=0.05`` (as an InfoNCE
  user calls it: no top of the list to take);
* ``logrr``: the same with ``ranker=jaxrank.bound(1.0, top=10), metric=jaxrank.reciprocal_rank,
  log=True`` (the log of each pair's bound rank, the recipe for a pretrained encoder);
* ``approx``: the same with ``ranker=jaxrank.approx(), k=None`` (each relevant item's rank a
  sum over the list, no cutoff);
* ``dense``: ``losses.metric_loss(q @ D.T, labels, k=10)`` with the labels dense, the
  pre-retrieval way (metric_loss's default ranker);
* ``rax_approx_ndcg``, ``rax_softmax``: rax 0.4's ``approx_t12n(ndcg_metric)`` loss and
  ``softmax_loss`` on the same dense lists (where they fit in memory);
* ``pairs_floor``: not a loss, a floor: each relevant document's sum of ``max(s_j - s_i, 0)``
  over its query's documents, the cheapest pass a rank read per (query, relevant document)
  pair can make (no exponential): ``Q r M`` terms;
* ``sort_floor``: not a loss, a floor: each query's scores sorted (``jnp.sort``), the first
  step of a pair rank read from sorted scores by prefix sums (``O(M log M + r log M)`` a query).

Each (size, row) runs in its own interpreter: its peak RSS (``resource.getrusage``) is its
own, beside XLA's own account of the compiled program (arguments + outputs + temporaries,
``compiled.memory_analysis()``) and, on a GPU, the device's peak bytes in use. Compile time
(``lower().compile()``) is apart from the run time (median of ``--repeats`` calls). The header
records the machine, versions and load; a row taken while the machine was busy is flagged
"noisy" (docs/reports/index.md). Results: docs/reports/retrieval_loss_speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402

SIZES = {"4096x4096": (4096, 4096), "16384x16384": (16384, 16384), "1024x1000000": (1024, 1_000_000)}
ROWS = (
    "infonce",
    "softmax",
    "default",
    "temperature",
    "logrr",
    "approx",
    "dense",
    "rax_approx_ndcg",
    "rax_softmax",
    "pairs_floor",
    "sort_floor",
)
DIM = 128
# Rows that hold the dense [Q, M] lists, and the [Q, M, M] pair matrices of rax's ApproxNDCG.
DENSE = {"dense", "rax_approx_ndcg", "rax_softmax"}


def _loss(row: str, positives, n_docs: int):
    """The row's mean loss ``(q, d) -> scalar``; ``positives``: ``int[Q, r]``."""
    import jax
    import jax.numpy as jnp
    import optax

    import jaxrank
    from jaxrank import losses

    labels = (
        jnp.zeros((positives.shape[0], n_docs), jnp.float32)
        .at[jnp.arange(positives.shape[0])[:, None], positives]
        .set(1.0)
    )
    if row == "infonce":
        if positives.shape[1] == 1:
            return lambda q, d: optax.softmax_cross_entropy_with_integer_labels(q @ d.T / 0.05, positives[:, 0]).mean()

        def pairs(q, d):  # a list per (query, relevant document), the query's other ones masked out
            logits = q @ d.T / 0.05
            own = jax.nn.one_hot(positives, n_docs, dtype=bool)  # [Q, r, M]
            lists = jnp.where((labels[:, None, :] > 0) & ~own, -jnp.inf, logits[:, None, :])
            return optax.softmax_cross_entropy_with_integer_labels(lists, positives).mean()

        return pairs
    if row == "softmax":
        return lambda q, d: optax.softmax_cross_entropy(q @ d.T / 0.05, labels / positives.shape[1]).mean()
    if row == "default":
        return lambda q, d: losses.retrieval_loss(q, d, positives).mean()
    if row == "temperature":
        return lambda q, d: losses.retrieval_loss(q, d, positives, temperature=0.05).mean()
    if row == "logrr":
        ranker = jaxrank.bound(1.0, top=10)
        return lambda q, d: losses.retrieval_loss(
            q, d, positives, ranker=ranker, metric=jaxrank.reciprocal_rank, log=True
        ).mean()
    if row == "approx":
        return lambda q, d: losses.retrieval_loss(q, d, positives, ranker=jaxrank.approx(), k=None).mean()
    if row == "dense":
        return lambda q, d: losses.metric_loss(q @ d.T, labels, k=10).mean()
    if row == "pairs_floor":

        def pairs_floor(q, d):
            scores = q @ d.T
            at = jnp.take_along_axis(scores, positives, axis=1)
            return jnp.mean(jnp.sum(jax.nn.relu(scores[:, None, :] - at[:, :, None]), axis=-1))

        return pairs_floor
    if row == "sort_floor":
        return lambda q, d: jnp.mean(jnp.sort(q @ d.T, axis=-1) * jnp.linspace(1.0, 0.0, n_docs))
    import _peers

    rax = _peers.rax()
    if row == "rax_approx_ndcg":
        ndcg = rax.approx_t12n(rax.ndcg_metric)
        return lambda q, d: -ndcg(q @ d.T, labels, topn=10)
    if row == "rax_softmax":
        return lambda q, d: rax.softmax_loss(q @ d.T / 0.05, labels)
    raise ValueError(f"unknown row {row!r}")


def worker(row: str, n_queries: int, n_docs: int, relevant: int, repeats: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)

    def unit(x):
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    docs = unit(rng.normal(size=(n_docs, DIM))).astype(np.float32)
    first = np.arange(n_queries) if n_docs == n_queries else rng.integers(0, n_docs, n_queries)
    others = [rng.choice(np.delete(np.arange(n_docs), f), relevant - 1, replace=False) for f in first]
    positives = np.concatenate([first[:, None], np.array(others, dtype=np.int64).reshape(n_queries, relevant - 1)], 1)
    # each query near its relevant documents, as after some training
    queries = unit(unit(docs[positives].mean(1)) + 0.5 * unit(rng.normal(size=(n_queries, DIM)))).astype(np.float32)
    q, d, pos = jnp.asarray(queries), jnp.asarray(docs), jnp.asarray(positives, jnp.int32)
    # the positives are an argument of the step, as in training (not a constant of the program)
    step = jax.jit(lambda q, d, pos: jax.value_and_grad(_loss(row, pos, n_docs), argnums=(0, 1))(q, d))
    start = time.perf_counter()
    compiled = step.lower(q, d, pos).compile()
    compile_s = time.perf_counter() - start
    analysis = compiled.memory_analysis()
    xla_bytes = None
    if analysis is not None:
        xla_bytes = analysis.argument_size_in_bytes + analysis.output_size_in_bytes + analysis.temp_size_in_bytes
    times = []
    for _ in range(repeats + 1):  # the first call warms up
        start = time.perf_counter()
        value, grads = jax.block_until_ready(compiled(q, d, pos))
        times.append(time.perf_counter() - start)
    finite = bool(np.isfinite(float(value)) and all(np.all(np.isfinite(np.asarray(g))) for g in grads))
    stats = jax.devices()[0].memory_stats() or {}
    return dict(
        compile_s=compile_s,
        run_s=statistics.median(times[1:]),
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        xla_mb=None if xla_bytes is None else xla_bytes / 2**20,
        device_peak_mb=stats.get("peak_bytes_in_use", 0) / 2**20 or None,
        value=float(value),
        finite=finite,
        platform=jax.devices()[0].platform,
    )


def _skip(row: str, n_queries: int, n_docs: int, memory_gb: float, relevant: int = 1):
    if row in DENSE and n_queries * n_docs * 4 * 6 > 0.6 * memory_gb * 2**30:
        return "skipped: dense [Q, M] lists do not fit"
    if row == "infonce" and n_queries * relevant * n_docs * 4 * 6 > 0.6 * memory_gb * 2**30:
        return "skipped: the [Q, r, M] lists of its pairs do not fit"
    if row == "rax_approx_ndcg" and n_queries * n_docs * n_docs * 4 * 3 > 0.6 * memory_gb * 2**30:
        return "skipped: [Q, M, M] pair matrices do not fit"
    return None


def _fmt(v, digits=3):
    return "" if v is None else f"{v:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), help=f"QxM sizes, of {list(SIZES)} or any")
    parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows")
    parser.add_argument("--relevant", nargs="+", type=int, default=[1], help="relevant documents per query (r axis)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per (size, row)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        row, n_queries, n_docs, relevant = json.loads(args.worker)
        print(json.dumps(worker(row, n_queries, n_docs, relevant, args.repeats)))
        return
    rows = [r for r in args.rows.split(",") if r]
    for r in rows:
        if r not in ROWS:
            parser.error(f"--rows: unknown row {r!r} (known: {', '.join(ROWS)})")
    run = _machine.start(peers=("optax", "rax"), extra={"d": DIM})
    print(run.header())
    memory_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    results = []
    print(
        "\n| Q x M | r | loss | run s | vs InfoNCE | vs softmax | compile s | peak RSS MB | XLA MB | device peak MB | note |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        n_queries, n_docs = SIZES.get(size) or tuple(int(x) for x in size.split("x"))
        for relevant in args.relevant:
            if not 1 <= relevant < n_docs:
                parser.error(f"--relevant: {relevant} relevant documents per query need 1 <= r < M = {n_docs}")
            floors = {}
            for row in rows:
                result = dict(size=size, relevant=relevant, row=row)
                reason = _skip(row, n_queries, n_docs, memory_gb, relevant)
                if reason is None:
                    with run.watch() as watch:
                        proc = subprocess.run(
                            [
                                sys.executable,
                                __file__,
                                "--worker",
                                json.dumps([row, n_queries, n_docs, relevant]),
                                "--repeats",
                                str(args.repeats),
                            ],
                            capture_output=True,
                            text=True,
                            timeout=args.timeout,
                            check=False,
                        )
                    if proc.returncode != 0:
                        reason = "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:120]
                    else:
                        result.update(json.loads(proc.stdout.strip().splitlines()[-1]), noisy=watch.noisy)
                result["note"] = reason or ("noisy" if result.get("noisy") else "")
                if row in ("infonce", "softmax") and "run_s" in result:
                    floors[row] = result
                ratios = [
                    f"{result['run_s'] / floors[f]['run_s']:.2f}x t, {result['peak_rss_mb'] / floors[f]['peak_rss_mb']:.2f}x RSS"
                    if f in floors and "run_s" in result
                    else ""
                    for f in ("infonce", "softmax")
                ]
                print(
                    f"| {size} | {relevant} | {row} | {_fmt(result.get('run_s'))} | {ratios[0]} | {ratios[1]} | "
                    f"{_fmt(result.get('compile_s'), 1)} | {_fmt(result.get('peak_rss_mb'), 0)} | "
                    f"{_fmt(result.get('xla_mb'), 0)} | {_fmt(result.get('device_peak_mb'), 0)} | {result['note']} |",
                    flush=True,
                )
                results.append(result)
    print(run.finish())
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(run=run.as_dict(), results=results), f, indent=1)


if __name__ == "__main__":
    main()
