"""Compile time of a metric loss whose labels are arguments, closed over, or built inside jit.

    python benchmarks/bench_compile.py                  # [256, 1000] and in-batch 1024, 4096
    python benchmarks/bench_compile.py --sizes 256x1000
    python benchmarks/bench_compile.py --loss retrieval --sizes 1024x1024 4096x4096

Value and gradient of ``losses.metric_loss(scores, labels, k=10)`` (its default ranker) under
``jit``, compiled (``lower().compile()``) three ways: the labels an argument of the jitted
function, closed over by it (a constant of the program), and built inside it from an
argument (``jax.nn.one_hot`` of the positives, for the in-batch sizes; graded labels for
``[256, 1000]``). ``--loss retrieval``: ``losses.retrieval_loss(queries, documents,
positives)`` at its defaults, ``Q x M`` unit embeddings of 64 dimensions, query ``i``'s
positive document ``i mod M`` (``int[Q, 1]``; built inside: from a permutation given as
an argument). Arrays closed over are constants, and XLA folds what is computed from
constants at compile time: the three must compile in about the same time. Each compile runs
in a fresh interpreter (no cache shared between the ways). Results: docs/reports/retrieval_loss_speed.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402

SIZES = ("256x1000", "1024x1024", "4096x4096")
WAYS = ("argument", "closed over", "built inside")


def worker(size: str, way: str, kind: str = "metric") -> float:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxrank import losses

    batch, n = (int(x) for x in size.split("x"))
    rng = np.random.default_rng(0)
    if kind == "retrieval":
        return _retrieval(batch, n, way, rng)
    scores = jnp.asarray(rng.normal(size=(batch, n)).astype(np.float32))
    in_batch = batch == n
    positives = jnp.arange(batch)
    labels = jax.nn.one_hot(positives, n) if in_batch else jnp.asarray(rng.integers(0, 5, (batch, n)))

    def loss(s, y):
        return losses.metric_loss(s, y, k=10).mean()

    if way == "argument":
        fn, args = jax.jit(jax.value_and_grad(loss)), (scores, labels)
    elif way == "closed over":
        fn, args = jax.jit(jax.value_and_grad(lambda s: loss(s, labels))), (scores,)
    else:
        make = (lambda p: jax.nn.one_hot(p, n)) if in_batch else (lambda p: jnp.round(jnp.abs(p)) % 5)
        given = positives if in_batch else jnp.asarray(rng.normal(size=(batch, n)) * 3, jnp.float32)
        fn, args = jax.jit(jax.value_and_grad(lambda s, p: loss(s, make(p)))), (scores, given)
    return _compile_seconds(fn, args)


def _retrieval(n_queries: int, n_docs: int, way: str, rng) -> float:
    import jax
    import jax.numpy as jnp

    from jaxrank import losses

    def unit(shape):
        x = rng.normal(size=shape).astype("float32")
        return jnp.asarray(x / (x**2).sum(-1, keepdims=True) ** 0.5)

    q, d = unit((n_queries, 64)), unit((n_docs, 64))
    positives = (jnp.arange(n_queries) % n_docs)[:, None]

    def loss(q, d, p):
        return losses.retrieval_loss(q, d, p).mean()

    if way == "argument":
        fn, args = jax.jit(jax.value_and_grad(loss)), (q, d, positives)
    elif way == "closed over":
        fn, args = jax.jit(jax.value_and_grad(lambda q, d: loss(q, d, positives))), (q, d)
    else:
        order = jnp.asarray(rng.permutation(n_queries))
        fn, args = jax.jit(jax.value_and_grad(lambda q, d, o: loss(q, d, (o % n_docs)[:, None]))), (q, d, order)
    return _compile_seconds(fn, args)


def _compile_seconds(fn, args) -> float:
    start = time.perf_counter()
    fn.lower(*args).compile()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=list(SIZES))
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per compile")
    parser.add_argument("--loss", choices=("metric", "retrieval"), default="metric")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        size, way, kind = json.loads(args.worker)
        print(json.dumps(worker(size, way, kind)))
        return
    run = _machine.start()
    print(run.header())
    print("\n| size | labels | compile s | note |")
    print("|---|---|---|---|")
    for size in args.sizes:
        for way in WAYS:
            with run.watch() as watch:
                try:
                    proc = subprocess.run(
                        [sys.executable, __file__, "--worker", json.dumps([size, way, args.loss])],
                        capture_output=True,
                        text=True,
                        timeout=args.timeout,
                        check=False,
                    )
                    ok = proc.returncode == 0
                    seconds = json.loads(proc.stdout.strip().splitlines()[-1]) if ok else None
                    note = "" if ok else "failed: " + (proc.stderr.strip().splitlines() or ["?"])[-1][:100]
                except subprocess.TimeoutExpired:
                    seconds, note = None, f"not finished in {args.timeout:.0f} s"
            note = note or ("noisy" if watch.noisy else "")
            print(f"| {size} | {way} | {'' if seconds is None else f'{seconds:.1f}'} | {note} |", flush=True)
    print(run.finish())


if __name__ == "__main__":
    main()
