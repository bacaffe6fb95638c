"""Value and gradient of soft nDCG@10 per smooth ranker, beside a dense O(n^2) baseline.

    python benchmarks/bench_soft.py            # every configuration, markdown table
    python benchmarks/bench_soft.py --quick    # [256, 1000] only
    python benchmarks/bench_soft.py --grid     # gradient norms over list sizes and score scales

Each configuration runs in its own subprocess, so its peak RSS
(``resource.getrusage``) is its own. Compile time (``lower().compile()``) is
reported apart from run time (median of up to ``--repeats`` runs, fewer when a
configuration exceeds ``--budget`` seconds). Scores are float32 (jax default),
labels are passed as arguments (not baked-in constants). The dense baseline is
the plain pairwise-sigmoid ApproxNDCG written below with the full ``[B, n, n]``
matrix; configurations that cannot fit in memory are skipped and said so. The header and
footer give the machine, the versions and the load average before and after; a row taken
while the machine was busy is marked "noisy" (benchmarks/_machine.py, docs/reports/index.md).
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

SHAPES = [(256, 1000), (8, 16384), (8, 65536)]
RANKERS = {
    "dense pairwise (baseline)": None,
    "approx(1.0)": "jaxrank.approx(1.0)",
    "softrank(1.0, 'l2')": "jaxrank.softrank(1.0)",
    "softrank(1.0, 'kl')": "jaxrank.softrank(1.0, 'kl')",
    "neuralsort(1.0)": "jaxrank.neuralsort(1.0)",
    "softsort(1.0)": "jaxrank.softsort(1.0)",
    "laplace()": "jaxrank.laplace()",
    "gumbel(softrank(1.0), 8)": "jaxrank.gumbel(jaxrank.softrank(1.0), samples=8)",
}
# Rankers holding [B, n, n] float32 arrays, and how many are live at the peak of
# value + gradient (peak RSS at [256, 1000] over 4 * 256 * 1000^2 bytes, rounded up).
QUADRATIC = {"dense pairwise (baseline)": 3, "neuralsort(1.0)": 6}


def _dense_ndcg(scores, labels, k=10, temperature=1.0):
    """ApproxNDCG@k with the whole pair matrix in memory: the O(n^2) baseline."""
    import jax
    import jax.numpy as jnp

    diff = (scores[..., None, :] - scores[..., :, None]) / temperature
    ranks = 0.5 + jnp.sum(jax.nn.sigmoid(diff), axis=-1)  # 1 + sum_{j != i}
    weight = jax.nn.sigmoid((k + 0.5 - ranks) / temperature) / jnp.log2(1 + ranks)
    dcg = jnp.sum(labels * weight, axis=-1)
    ideal = -jnp.sort(-labels, axis=-1)[..., :k]
    idcg = jnp.sum(ideal / jnp.log2(2 + jnp.arange(k)), axis=-1)
    return jnp.where(idcg > 0, dcg / jnp.where(idcg > 0, idcg, 1), 0.0)


def worker(name: str, batch: int, n: int, repeats: int, budget: float) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxrank

    rng = np.random.default_rng(0)
    scores = jnp.asarray(rng.normal(size=(batch, n)).astype(np.float32))
    labels = jnp.asarray(rng.integers(0, 5, (batch, n)).astype(np.float32))
    if RANKERS[name] is None:
        loss = lambda s, y: jnp.mean(_dense_ndcg(s, y))
    else:
        ranker = eval(RANKERS[name], {"jaxrank": jaxrank})
        loss = lambda s, y: jnp.mean(jaxrank.ndcg(s, y, k=10, ranker=ranker))
    start = time.perf_counter()
    compiled = jax.jit(jax.value_and_grad(loss)).lower(scores, labels).compile()
    compile_s = time.perf_counter() - start
    times = []
    while len(times) < repeats:
        start = time.perf_counter()
        value, grad = jax.block_until_ready(compiled(scores, labels))
        times.append(time.perf_counter() - start)
        if sum(times) > budget:
            break
    assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad)))
    return dict(
        compile_s=compile_s,
        run_s=statistics.median(times),
        runs=len(times),
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        value=float(value),
    )


def _skip_reason(name: str, batch: int, n: int, memory_gb: float):
    if name in QUADRATIC:
        need = QUADRATIC[name] * 4 * batch * n * n / 2**30
        if need > 0.6 * memory_gb:
            return f"skipped: O(n^2) memory, ~{need:.0f} GB of [B, n, n] arrays"
    return None


def _total_memory_gb() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30


def gradient_grid() -> None:
    """Norms of d nDCG / d scores (one list of n float32 scores at each std) for the
    default rankers and a few explicit settings, with and without a cutoff: the data of
    the grid test."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxrank

    rankers = {
        "approx()": jaxrank.approx(),
        "softrank()": jaxrank.softrank(),
        "softrank(regularization='kl')": jaxrank.softrank(regularization="kl"),
        "neuralsort()": jaxrank.neuralsort(),
        "softsort()": jaxrank.softsort(),
        "gumbel(softrank(), 2)": jaxrank.gumbel(jaxrank.softrank(), samples=2, key=0),
        "softrank(0.5)": jaxrank.softrank(0.5),
        "approx(0.1, units='std')": jaxrank.approx(0.1, units="std"),
        "softrank(0.5, units='score')": jaxrank.softrank(0.5, units="score"),
        "approx(0.1, units='score')": jaxrank.approx(0.1, units="score"),
    }
    stds = (0.01, 1.0, 100.0)
    print("| ranker | n | k | grad norm at std 0.01 / 1 / 100 |")
    print("|---|---|---|---|")
    for name, ranker in rankers.items():

        @jax.jit
        def grads(scores, labels, ranker=ranker):
            def both(s):
                return jnp.stack([jaxrank.ndcg(s, labels, k=k, ranker=ranker).sum() for k in (None, 10)])

            return jax.jacrev(both)(scores)

        for n in (10, 200, 1000):
            rng = np.random.default_rng(n)  # the draws of tests/test_soft.py's grid test
            base = rng.normal(size=(1, n))
            labels = np.repeat(rng.integers(0, 5, (1, n)) * (rng.random((1, n)) < 0.3), len(stds), 0)
            scores = jnp.asarray(base * np.asarray(stds)[:, None], jnp.float32)
            norms = np.linalg.norm(np.asarray(grads(scores, jnp.asarray(labels)), np.float64), axis=-1)
            for j, k in enumerate(("none", "10")):
                print(f"| {name} | {n} | {k} | " + " / ".join(f"{v:.3g}" for v in norms[j]) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only [256, 1000]")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=120.0, help="seconds of runs per configuration")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per configuration")
    parser.add_argument("--grid", action="store_true", help="gradient norms over list sizes and score scales")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.grid:
        gradient_grid()
        return
    if args.worker:
        name, batch, n = json.loads(args.worker)
        print(json.dumps(worker(name, batch, n, args.repeats, args.budget)))
        return

    memory_gb = _total_memory_gb()
    shapes = SHAPES[:1] if args.quick else SHAPES
    run = _machine.start()
    print(run.header(), flush=True)
    rows, results = [], {}
    for batch, n in shapes:
        for name in RANKERS:
            reason = _skip_reason(name, batch, n, memory_gb)
            flag = ""
            if reason is None:
                cmd = [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--worker",
                    json.dumps([name, batch, n]),
                    "--repeats",
                    str(args.repeats),
                    "--budget",
                    str(args.budget),
                ]
                try:
                    with run.watch() as watch:
                        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                    flag = watch.flag
                    if proc.returncode == 0:
                        results[name, batch, n] = json.loads(proc.stdout.strip().splitlines()[-1])
                    else:
                        reason = f"failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1][:80]}"
                except subprocess.TimeoutExpired:
                    reason = f"timed out after {args.timeout:.0f} s"
            r = results.get((name, batch, n))
            if r is None:
                rows.append(f"| {name} | [{batch}, {n}] | - | - | - | - | {reason} |")
            else:
                rows.append(
                    f"| {name} | [{batch}, {n}] | {r['compile_s']:.2f} | {r['run_s']:.3f} | "
                    f"{r['runs']} | {r['peak_rss_mb']:.0f} | {flag} |"
                )
            print(rows[-1], file=sys.stderr, flush=True)
    print()
    print("| ranker | shape | compile (s) | value+grad, median (s) | runs | peak RSS (MB) | note |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    dense = results.get(("dense pairwise (baseline)", 256, 1000))
    for name in ("softrank(1.0, 'l2')", "softrank(1.0, 'kl')", "approx(1.0)"):
        r = results.get((name, 256, 1000))
        if dense and r:
            ratio = r["run_s"] / dense["run_s"]
            verdict = "meets" if ratio <= 0.1 or not name.startswith("softrank") else "MISSES"
            print(
                f"- {name} at [256, 1000]: {ratio:.3f} of the dense time"
                + (f" ({verdict} the 1/10 target)" if name.startswith("softrank") else "")
            )
    for name, shape, limit in [
        ("softrank(1.0, 'l2')", (8, 65536), 2048),
        ("softrank(1.0, 'kl')", (8, 65536), 2048),
        ("approx(1.0)", (8, 16384), 4096),
    ]:
        r = results.get((name, *shape))
        if r:
            verdict = "meets" if r["peak_rss_mb"] < limit else "MISSES"
            print(
                f"- {name} at {list(shape)}: peak RSS {r['peak_rss_mb']:.0f} MB "
                f"({verdict} the {limit // 1024} GB target)"
            )
    print()
    print(run.finish())


if __name__ == "__main__":
    main()
