"""The three laws of a relaxation (monotone, faithful, reach), measured as a new user meets them.

    python benchmarks/bench_laws.py                      # the two defaults, 24 cases (docs/soft.md)
    python benchmarks/bench_laws.py --rankers all        # every smooth ranker through metric_loss
    python benchmarks/bench_laws.py --n 100 1000 --scales 1 20

One list of ``n`` scores ``scale * N(0, 0.125)`` (scale 1: the spread of cosines between unit
vectors in 64 dimensions; 20: those cosines over InfoNCE's temperature 0.05; 1000: an unbounded
scorer's), ONE relevant item placed at hard rank ``r`` (0-based), float64, the loss
``1 - nDCG@10`` and its derivative in that item's score. ``retrieval_loss`` gets the list as
``queries = [[1]]``, ``documents = scores[:, None]``; ``metric_loss`` gets it as it is.

The laws (:func:`laws`):
  monotone  ``d loss / d s_pos <= 0`` at every rank measured;
  faithful  loss(0) + 0.05 <= loss(5) <= loss(50), and by use: a loss that reports its metric's
            value (``metric_loss``) reads loss(0) <= 0.5; a training loss that bounds the hard
            loss from above (``retrieval_loss``, and any ``--loss`` named in ``--bounds``) never
            reads below the hard loss ``1 - 1 / log2(2 + r)`` (nDCG of the whole list) at any
            rank measured;
  reach     ``|d loss / d s_pos|`` at rank 200 (``n // 5`` in a shorter list) at least 1% of it at
            rank 5.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RANKS = (0, 1, 2, 5, 9, 10, 11, 20, 50, 100, 200, 500, 1000, 5000)
SCALES = (0.01, 1.0, 20.0, 1000.0)
SIZES = (100, 1000, 16384)
SPREAD = 0.125  # the std of cosines between random unit vectors in 64 dimensions
K = 10

#: name -> expression of a loss of (scores [n], labels [n]) built from jaxrank, evaluated lazily
DEFAULTS = {
    "retrieval_loss": "lambda s, y: losses.retrieval_loss(jnp.ones((1, 1), s.dtype), s[:, None], "
    "jnp.argmax(y)[None, None])[0]",
    "metric_loss": "lambda s, y: losses.metric_loss(s, y, k=10)",
}
#: the losses that bound the hard loss from above (faithful by use, :func:`laws`)
BOUNDS = ("retrieval_loss",)
RANKERS = {
    "approx()": "jaxrank.approx()",
    "softrank()": "jaxrank.softrank()",
    "neuralsort()": "jaxrank.neuralsort()",
    "softsort()": "jaxrank.softsort()",
    "laplace()": "jaxrank.laplace()",
}


def far_rank(n: int) -> int:
    """Where reach is judged: 200 places down, or a fifth of a shorter list."""
    return min(n // 5, 200)


def ranks_for(n: int) -> list[int]:
    """The ranks measured on a list of ``n``: :data:`RANKS` below ``n``, ``n // 5`` and ``n - 1``."""
    return sorted({r for r in RANKS if r < n} | {n // 5, n - 1})


def scores_for(n: int, scale: float, seed: int = 0) -> np.ndarray:
    return scale * np.random.default_rng(seed).normal(0.0, SPREAD, n)


def measure(loss: Callable, n: int, scale: float, seed: int = 0) -> dict[int, tuple[float, float]]:
    """rank -> (loss, d loss / d s_pos) with the one relevant item at that hard rank."""
    import jax
    import jax.numpy as jnp

    s = jnp.asarray(scores_for(n, scale, seed))
    order = np.argsort(-np.asarray(s), kind="stable")
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    out = {}
    for r in ranks_for(n):
        y = jnp.zeros(n, jnp.int32).at[int(order[r])].set(1)
        v, g = value_and_grad(s, y)
        out[r] = (float(v), float(g[int(order[r])]))
    return out


def laws(values: dict[int, tuple[float, float]], n: int, bound: bool = False) -> dict[str, bool]:
    """Which of the three laws hold for one case's measurements (:func:`measure`); ``bound``:
    the loss is a training loss that bounds the hard loss of nDCG over the whole list from above."""
    loss = {r: v for r, (v, _) in values.items()}
    grad = {r: g for r, (_, g) in values.items()}
    far = far_rank(n)
    ordered = loss[0] + 0.05 <= loss[5] <= loss[min(50, n - 1)]
    if bound:
        by_use = all(v >= 1 - 1 / np.log2(2 + r) - 1e-9 for r, v in loss.items())
    else:
        by_use = loss[0] <= 0.5
    return {
        "monotone": all(g <= 0 for g in grad.values()),
        "faithful": ordered and by_use,
        "reach": abs(grad[far]) >= 0.01 * abs(grad[5]) and grad[far] < 0,
    }


def run(
    losses: dict[str, str], sizes: Sequence[int], scales: Sequence[float], bounds: Sequence[str] = BOUNDS
) -> list[dict]:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp  # noqa: F401  (used by the expressions)

    import jaxrank  # noqa: F401
    from jaxrank import losses as _losses  # noqa: F401

    env = {"jax": jax, "jnp": jnp, "jaxrank": jaxrank, "losses": _losses}
    rows = []
    for name, expr in losses.items():
        fn = eval(expr, env)  # noqa: S307  (the expressions are this file's or the user's own)
        for n in sizes:
            for scale in scales:
                values = measure(fn, n, scale)
                rows.append(dict(loss=name, n=n, scale=scale, values=values, laws=laws(values, n, name in bounds)))
                print(_row(rows[-1]), flush=True)
    return rows


def _fmt(x: float) -> str:
    return f"{x:+.1e}"


def _row(row: dict) -> str:
    v, n = row["values"], row["n"]
    far = far_rank(n)
    held = ", ".join(k for k, ok in row["laws"].items() if not ok) or "all three hold"
    worst = max(g for _, g in v.values())
    return (
        f"| {row['loss']} | {n:,} | {row['scale']:g} | "
        f"{v[0][0]:.3f} / {v[5][0]:.3f} / {v[min(50, n - 1)][0]:.3f} | "
        f"{_fmt(v[0][1])} / {_fmt(v[5][1])} / {_fmt(v[far][1])} | {_fmt(worst)} | {held} |"
    )


HEADER = (
    "| loss | n | scale | loss at rank 0 / 5 / 50 | d loss / d s_pos at rank 0 / 5 / min(200, n//5) | largest d loss / d s_pos "
    "| laws that fail |\n|---|---:|---:|---|---|---:|---|"
)


def main(argv: Optional[Sequence[str]] = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rankers", nargs="*", default=(), help="names of RANKERS (or 'all') through metric_loss(k=10)")
    p.add_argument("--loss", nargs="*", default=None, metavar="NAME=EXPR", help="more losses: name=lambda s, y: ...")
    p.add_argument("--no-defaults", action="store_true", help="only the rankers and --loss given")
    p.add_argument("--bounds", nargs="*", default=(), metavar="NAME", help="--loss names that bound the hard loss")
    p.add_argument("--n", type=int, nargs="+", default=list(SIZES))
    p.add_argument("--scales", type=float, nargs="+", default=list(SCALES))
    p.add_argument("--json", help="write every measurement here")
    args = p.parse_args(argv)
    chosen = {} if args.no_defaults else dict(DEFAULTS)
    names = list(RANKERS) if "all" in args.rankers else args.rankers
    for name in names:
        chosen[f"metric_loss, {name}"] = f"lambda s, y: losses.metric_loss(s, y, k=10, ranker={RANKERS[name]})"
    for item in args.loss or ():
        name, _, expr = item.partition("=")
        chosen[name] = expr
    print(HEADER)
    rows = run(chosen, args.n, args.scales, (*BOUNDS, *args.bounds))
    failing = sum(not all(r["laws"].values()) for r in rows)
    print(f"\n{failing} of {len(rows)} cases fail at least one law")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return rows


if __name__ == "__main__":
    main()
