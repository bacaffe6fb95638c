"""Every public metric on 1 host device beside 8 host devices, each setup in its own process.

Times precision, recall, average_precision, reciprocal_rank, dcg, ndcg, success,
err, rbp and fallout with ``k=(5, 10, 100)``, and r_precision (no cutoff), on a
[batch, n] batch of float32 scores, integer labels 0..4 and a padding mask, in
three configurations:

  * ``1dev``: one CPU device, plain ``jax.jit``;
  * ``shard_map``: 8 host devices, ``jax.shard_map`` over the batch axis
    (``in_specs=P("d")``, per-query values ``out_specs=P("d")``);
  * ``jit-sharded``: 8 host devices, ``jax.jit`` on inputs placed with
    ``NamedSharding(mesh, P("d"))``.

XLA reads ``--xla_force_host_platform_device_count`` once, at start-up, so each
configuration runs in a fresh subprocess. The sharded values must equal the
1-device values (max abs diff <= 1e-6). Compile time (first call minus the
median run) is reported apart from the median run time over ``--repeats`` runs.
Host devices share the machine's cores: with fewer cores than devices the
sharded runs cannot be faster; they show that the paths run, stay correct, and
what they cost. The header records machine, versions and load; the "load" row says
"noisy" for a configuration taken while the machine was busy (docs/reports/index.md).

    python benchmarks/bench_sharding.py [--batch 8192] [--n 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import _machine

CUTS = (5, 10, 100)
METRICS = (
    "precision",
    "recall",
    "average_precision",
    "reciprocal_rank",
    "dcg",
    "ndcg",
    "success",
    "r_precision",
    "err",
    "rbp",
    "fallout",
)
CONFIGS = (("1dev", 1), ("shard_map", 8), ("jit-sharded", 8))


def _data(batch: int, n: int):
    import numpy as np

    rng = np.random.default_rng(0)
    scores = rng.standard_normal((batch, n)).astype(np.float32)
    labels = rng.integers(0, 5, (batch, n)).astype(np.int32)
    # Each row keeps a random length between n // 2 and n; the rest is padding.
    lengths = rng.integers(n // 2, n + 1, (batch, 1))
    where = np.arange(n)[None, :] < lengths
    return scores, labels, where


def _worker(config: str, batch: int, n: int, repeats: int, out: str) -> None:
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    import jaxrank

    scores, labels, where = _data(batch, n)
    mesh = Mesh(jax.devices(), ("d",))
    if batch % len(jax.devices()):
        raise ValueError(f"--batch={batch} must divide by the {len(jax.devices())} devices")
    results, values = {}, {}
    for name in METRICS:
        metric = getattr(jaxrank, name)
        kw = {} if name == "r_precision" else {"k": CUTS}

        def f(s, y, w, metric=metric, kw=kw):
            return metric(s, y, where=w, **kw)

        if config == "shard_map":
            fn = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=(P("d"),) * 3, out_specs=P("d")))
            args = (scores, labels, where)
        elif config == "jit-sharded":
            fn = jax.jit(f)
            sharding = NamedSharding(mesh, P("d"))
            args = tuple(jax.device_put(a, sharding) for a in (scores, labels, where))
        else:
            fn = jax.jit(f)
            args = tuple(jax.device_put(a) for a in (scores, labels, where))
        t0 = time.perf_counter()
        value = jax.block_until_ready(fn(*args))
        first = time.perf_counter() - t0
        runs = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(*args))
            runs.append(time.perf_counter() - t0)
        median = statistics.median(runs)
        results[name] = {"run_s": median, "compile_s": max(first - median, 0.0)}
        values[name] = np.asarray(value)
    np.savez(out, **values)
    json.dump({"devices": len(jax.devices()), "times": results}, sys.stdout)


def _run_config(config: str, devices: int, args, out: str) -> dict:
    env = dict(os.environ)
    flags = env.get("XLA_FLAGS", "")
    env["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={devices}".strip()
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, __file__, "--worker", config, "--out", out]
    cmd += ["--batch", str(args.batch), "--n", str(args.n), "--repeats", str(args.repeats)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{config} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8192)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--worker", choices=[c for c, _ in CONFIGS], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.batch, args.n, args.repeats, args.out)
        return

    import numpy as np

    run = _machine.start(extra={"batch": args.batch, "n": args.n, "repeats": args.repeats, "k": CUTS})
    print(run.header(), flush=True)
    runs, values, flags = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for config, devices in CONFIGS:
            out = os.path.join(tmp, f"{config}.npz")
            with run.watch() as watch:
                runs[config] = _run_config(config, devices, args, out)
            flags[config] = watch.flag
            with np.load(out) as z:
                values[config] = {k: z[k] for k in z.files}
            print(f"  {config}: {runs[config]['devices']} device(s) done", flush=True)

    head = (
        "| metric: run ms (compile s) | 1 device, jit | 8 devices, shard_map | 8 devices, jit sharded | max abs diff |"
    )
    print(head)
    print("|" + "---|" * 5)
    totals = dict.fromkeys(runs, 0.0)
    worst = 0.0
    for name in METRICS:
        ref = values["1dev"][name]
        diff = max(float(np.max(np.abs(values[c][name] - ref))) for c in ("shard_map", "jit-sharded"))
        worst = max(worst, diff)
        cells = []
        for config in runs:
            t = runs[config]["times"][name]
            totals[config] += t["run_s"]
            cells.append(f"{1e3 * t['run_s']:.1f} ({t['compile_s']:.2f})")
        print(f"| {name} | " + " | ".join(cells) + f" | {diff:.1e} |")
    base = totals["1dev"]
    ratios = " | ".join(f"{1e3 * v:.0f} ms ({v / base:.2f}x)" for v in totals.values())
    print(f"| **sum of runs** | {ratios} | |")
    print("| load | " + " | ".join(flags[c] or "quiet" for c in runs) + " | |")
    print("\n" + run.finish())
    assert worst <= 1e-6, f"sharded values differ from 1 device by {worst}"


if __name__ == "__main__":
    main()
