"""Losses jaxrank shares with rax, jaxrank beside rax: time by alternating calls, and memory.

    python benchmarks/bench_losses.py [--batch 256] [--n 1000] [--repeats 5]
        [--memory-batch 16] [--memory-n 4096] [--cases NAME ...] [--skip-time] [--skip-memory]

**Time.** For each case, ``jit(mean loss)`` (the value) and ``jit(value_and_grad(mean
loss))`` on float32 ``scores[batch, n]`` (labels 0..4), for jaxrank's own loss
(:mod:`jaxrank.losses`), its rax drop-in (:mod:`jaxrank.compat.rax`) and rax 0.4: all
three compiled first, then ``--repeats`` rounds that call each once in turn, so that a
load that comes and goes on a shared machine falls on all three alike. Reported: the
median warm call and its ratio to rax's (the ratio is what to trust on a loaded machine).

**Memory.** XLA's temporary buffer size (``compiled.memory_analysis().temp_size_in_bytes``,
deterministic) of ``jit(value_and_grad(mean loss))`` at ``[--memory-batch, --memory-n]``:
rax materialises every pair, jaxrank's pairwise losses work in row blocks.

Cases: the pairwise losses (logistic with and without ``where``, ``segments`` and the DCG
lambdaweight; hinge, soft zero-one, squared error, quantile regression), softmax, ListMLE
and approx nDCG (``1 - ndcg(ranker=approx(1.0, units="score"), gain="exp")`` beside
``approx_t12n(ndcg_metric)``; the same values and gradients: tests/test_compat_rax.py).
``where`` keeps ~90% of the items; ``segments`` packs 8 lists per row. The load average
before and after each case is printed beside it ("noisy" where something else ran).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

import jaxrank
from jaxrank import lambdaweights, losses
from jaxrank.compat import rax as jr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402
import _peers  # noqa: E402

#: A loss of (scores, labels, where, segments) to one number.
Loss = Callable[..., jax.Array]


def _native(loss, use_where: bool, use_segments: bool, **options) -> Loss:
    """The mean over lists of a :mod:`jaxrank.losses` loss."""

    def fn(s, y, where, segments):
        kwargs = dict(options, where=where if use_where else None)
        if use_segments:
            kwargs["segments"] = segments
        return jnp.mean(loss(s, y, **kwargs))

    return fn


def _rax_style(loss, use_where: bool, use_segments: bool, **options) -> Loss:
    """A loss of rax's signature (rax's or compat's), reduced as rax reduces."""

    def fn(s, y, where, segments):
        return loss(s, y, where=where if use_where else None, segments=segments if use_segments else None, **options)

    return fn


def _pairwise_case(name: str, native, compat, theirs, use_where=False, use_segments=False, dcg=False):
    flags = (use_where, use_segments)
    native_lw = dict(lambdaweight=lambdaweights.dcg) if dcg else {}
    compat_lw = dict(lambdaweight_fn=jr.dcg_lambdaweight) if dcg else {}
    rax_lw = dict(lambdaweight_fn=_peers.rax().dcg_lambdaweight) if dcg else {}
    return name, (
        _native(native, *flags, **native_lw),
        _rax_style(compat, *flags, **compat_lw),
        _rax_style(theirs, *flags, **rax_lw),
    )


def cases() -> dict[str, tuple[Loss, Loss, Loss]]:
    """name -> (jaxrank.losses, compat.rax, rax)."""
    rax = _peers.rax()
    logistic = (losses.pairwise_logistic, jr.pairwise_logistic_loss, rax.pairwise_logistic_loss)
    approx = jaxrank.approx(1.0, units="score")
    out = dict(
        [
            _pairwise_case("pairwise logistic", *logistic),
            _pairwise_case("pairwise logistic, where", *logistic, use_where=True),
            _pairwise_case("pairwise logistic, where + segments", *logistic, use_where=True, use_segments=True),
            _pairwise_case("pairwise logistic, dcg lambdaweight", *logistic, dcg=True),
            _pairwise_case(
                "pairwise logistic, where + segments + dcg lambdaweight",
                *logistic,
                use_where=True,
                use_segments=True,
                dcg=True,
            ),
            _pairwise_case("pairwise hinge", losses.pairwise_hinge, jr.pairwise_hinge_loss, rax.pairwise_hinge_loss),
            _pairwise_case(
                "pairwise soft zero-one",
                losses.pairwise_soft_zero_one,
                jr.pairwise_soft_zero_one_loss,
                rax.pairwise_soft_zero_one_loss,
            ),
            _pairwise_case("pairwise mse", losses.pairwise_mse, jr.pairwise_mse_loss, rax.pairwise_mse_loss),
            _pairwise_case("pairwise qr", losses.pairwise_qr, jr.pairwise_qr_loss, rax.pairwise_qr_loss),
        ]
    )
    out["softmax"] = (
        _native(losses.softmax_cross_entropy, False, False),
        _rax_style(jr.softmax_loss, False, False),
        _rax_style(rax.softmax_loss, False, False),
    )
    out["ListMLE"] = (
        _native(losses.listmle, False, False),
        _rax_style(jr.listmle_loss, False, False),
        _rax_style(rax.listmle_loss, False, False),
    )
    out["approx nDCG"] = (
        _native(functools.partial(losses.ndcg_loss, ranker=approx, gain="exp"), False, False),
        _rax_style(jr.approx_t12n(jr.ndcg_metric), False, False),
        _rax_style(rax.approx_t12n(rax.ndcg_metric), False, False),
    )
    return out


def inputs(batch: int, n: int, seed: int = 0) -> tuple[jax.Array, ...]:
    """float32 scores, labels 0..4, ~90% of the items valid (the first of each row always),
    8 segments per row (sorted ids)."""
    rng = np.random.default_rng(seed)
    scores = jnp.asarray(rng.normal(size=(batch, n)), jnp.float32)
    labels = jnp.asarray(rng.integers(0, 5, (batch, n)), jnp.float32)
    where = rng.random((batch, n)) < 0.9
    where[:, 0] = True
    segments = jnp.asarray(np.arange(n)[None, :].repeat(batch, 0) * 8 // n, jnp.int32)
    return scores, labels, jnp.asarray(where), segments


def _programs(fns: tuple[Loss, ...], grad: bool):
    make = (lambda f: jax.jit(jax.value_and_grad(f))) if grad else jax.jit
    return [make(f) for f in fns]


def alternate(fns: tuple[Loss, ...], args, repeats: int, grad: bool) -> list[float]:
    """Median seconds of a warm call of each of ``fns``, the calls alternating: round r
    calls every function once (in the arguments: closed over, XLA would constant-fold them)."""
    programs = _programs(fns, grad)
    for p in programs:
        jax.block_until_ready(p(*args))
    times: list[list[float]] = [[] for _ in programs]
    for _ in range(repeats):
        for p, t in zip(programs, times):
            start = time.perf_counter()
            jax.block_until_ready(p(*args))
            t.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def temp_mib(fn: Loss, args) -> float:
    """XLA's temporary buffers of ``jit(value_and_grad(fn))``, MiB."""
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    compiled = jax.jit(jax.value_and_grad(fn)).lower(*specs).compile()
    return compiled.memory_analysis().temp_size_in_bytes / 2**20


def _ratio(x: float, base: float) -> str:
    return f"{x / base:.2f}x"


def time_table(chosen, args, repeats: int) -> None:
    print(
        "| loss | value or grad | jaxrank.losses (ms) | compat.rax (ms) | rax (ms) | jaxrank / rax | compat / rax | load |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, fns in chosen.items():
        for grad in (False, True):
            with _machine.Watch() as w:
                ours, compat, theirs = alternate(fns, args, repeats, grad)
            what = "value + grad" if grad else "value"
            load = f"{w.load_before[0]:.2f} → {w.load_after[0]:.2f} {w.flag}".rstrip()
            ms = " | ".join(f"{t * 1e3:.1f}" for t in (ours, compat, theirs))
            print(f"| {name} | {what} | {ms} | {_ratio(ours, theirs)} | {_ratio(compat, theirs)} | {load} |")
            sys.stdout.flush()


def memory_table(chosen, args) -> None:
    print("| loss | jaxrank.losses (MiB) | compat.rax (MiB) | rax (MiB) |")
    print("|---|---|---|---|")
    for name, fns in chosen.items():
        if not name.startswith("pairwise"):
            continue
        print(f"| {name} | " + " | ".join(f"{temp_mib(f, args):.0f}" for f in fns) + " |")
        sys.stdout.flush()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory-batch", type=int, default=16)
    parser.add_argument("--memory-n", type=int, default=4096)
    parser.add_argument("--cases", nargs="*", help="names (or prefixes) of the cases to run; default all")
    parser.add_argument("--skip-time", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    args = parser.parse_args(argv)
    every = cases()
    chosen = {k: v for k, v in every.items() if not args.cases or any(k.startswith(c) for c in args.cases)}
    run = _machine.start(peers=("rax",), extra={"backend": jax.devices()[0].platform})
    print(run.header())
    if not args.skip_time:
        print(f"\n## Time, float32 [{args.batch}, {args.n}], median of {args.repeats} alternating rounds\n")
        time_table(chosen, inputs(args.batch, args.n), args.repeats)
    if not args.skip_memory:
        print(f"\n## XLA temporary memory of value_and_grad, float32 [{args.memory_batch}, {args.memory_n}]\n")
        memory_table(chosen, inputs(args.memory_batch, args.memory_n))
    print(run.finish())


if __name__ == "__main__":
    main()
