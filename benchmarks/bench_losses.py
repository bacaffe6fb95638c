"""Value and gradient of the losses jaxrank shares with rax, jaxrank beside rax.

    python benchmarks/bench_losses.py [--batch 256] [--n 1000] [--repeats 7]

For each loss, ``jit(value_and_grad(mean loss))`` on float32 ``scores[batch, n]`` (labels
0..4, every item valid): the compile time (first call minus a warm call) and the median
of ``--repeats`` warm calls, for jaxrank's own loss (:mod:`jaxrank.losses`), its rax
drop-in (:mod:`jaxrank.compat.rax`) and rax 0.4. Approx nDCG is
``1 - ndcg(ranker=approx(1.0, units="score"), gain="exp")`` beside
``compat.rax.approx_t12n(compat.rax.ndcg_metric)`` and ``rax.approx_t12n(rax.ndcg_metric)`` (the same values and gradients:
tests/test_compat_rax.py). Prints a markdown table, with the load
average before and after (results are "noisy" when it exceeded 0.5).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
import types

import jax
import jax.numpy as jnp
import numpy as np

import jaxrank
from jaxrank import losses
from jaxrank.compat import rax as jr

NOISY_LOAD = 0.5


def _rax():
    # rax's transformations decorate with jax.util.wraps, which current jax lacks.
    if not hasattr(jax, "util") or not hasattr(jax.util, "wraps"):
        jax.util = types.SimpleNamespace(wraps=lambda f, **_: functools.wraps(f))
    import rax

    return rax


def cases():
    rax = _rax()
    approx = jaxrank.approx(1.0, units="score")
    return {
        "softmax": (
            losses.softmax_cross_entropy,
            jr.softmax_loss,
            rax.softmax_loss,
        ),
        "pairwise logistic": (
            losses.pairwise_logistic,
            jr.pairwise_logistic_loss,
            rax.pairwise_logistic_loss,
        ),
        "ListMLE": (losses.listmle, jr.listmle_loss, rax.listmle_loss),
        "approx nDCG": (
            functools.partial(losses.ndcg_loss, ranker=approx, gain="exp"),
            jr.approx_t12n(jr.ndcg_metric),
            rax.approx_t12n(rax.ndcg_metric),
        ),
    }


def time_value_and_grad(loss, scores, labels, repeats: int) -> tuple[float, float]:
    """(compile seconds, median warm seconds) of ``jit(value_and_grad(mean loss))``."""
    # labels as an argument: closed over, XLA would constant-fold their sort
    fn = jax.jit(jax.value_and_grad(lambda s, y: jnp.mean(loss(s, y))))
    start = time.perf_counter()
    jax.block_until_ready(fn(scores, labels))
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(scores, labels))
        times.append(time.perf_counter() - start)
    warm = statistics.median(times)
    return max(first - warm, 0.0), warm


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    scores = jnp.asarray(rng.normal(size=(args.batch, args.n)), jnp.float32)
    labels = jnp.asarray(rng.integers(0, 5, (args.batch, args.n)), jnp.float32)
    load_before = os.getloadavg()
    print(f"# bench_losses: [{args.batch}, {args.n}] float32, jax {jax.__version__}, {jax.devices()[0].platform}")
    print(f"# command: python benchmarks/bench_losses.py --batch {args.batch} --n {args.n} --repeats {args.repeats}")
    print(f"# load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    print(
        "| loss | jaxrank.losses run (ms) | compat.rax run (ms) | rax run (ms) | compile s (jaxrank / compat / rax) |"
    )
    print("|---|---|---|---|---|")
    for name, fns in cases().items():
        runs, compiles = [], []
        for fn in fns:
            if fn is None:
                runs.append("—")
                compiles.append("—")
                continue
            compile_s, warm = time_value_and_grad(fn, scores, labels, args.repeats)
            runs.append(f"{warm * 1e3:.1f}")
            compiles.append(f"{compile_s:.2f}")
        print(f"| {name} | {' | '.join(runs)} | {' / '.join(compiles)} |")
        sys.stdout.flush()
    load_after = os.getloadavg()
    noisy = max(load_before[0], load_after[0]) > NOISY_LOAD
    print(f"# load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}" + (" (noisy)" * noisy))


if __name__ == "__main__":
    main()
