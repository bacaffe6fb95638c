#!/usr/bin/env python
"""Learning to rank with Flax: a ``flax.nnx`` scorer, an optax optimiser, a jaxrank loss.

The scorer is a one-hidden-layer MLP (``nnx.Linear`` -> ReLU -> ``nnx.Linear``) that maps
each document's 300 features to a score. It is trained on the 201 training queries of
LightGBM's LambdaRank data (``rank.train``; read and padded to ``[queries, list, features]``
by :func:`train_ltr.load_lambdarank`), full batch, with Adam, on the smooth nDCG loss

.. math:: \\ell(s, y) = 1 - \\mathrm{nDCG}_{\\text{approx}}(s, y),\\quad \\text{gain } 2^y - 1

averaged over the queries: :func:`jaxrank.losses.metric_loss` with its default ranker
(``jaxrank.approx()``, its default temperature), no tuning. The 50 test queries
(``rank.test``) are then scored in chunks and streamed through
:func:`jaxrank.accumulator`: nDCG@1, nDCG@5, nDCG@10 and MAP (trec_eval's: linear gain,
the mean over all queries), with ties scored by their expected value
(``ties="expected"``) so that a model that scores documents equally earns nothing from
their input order.

Usage::

    python examples/flax_ltr.py                 # 300 steps
    python examples/flax_ltr.py --quick         # 40 steps (the test's run)
    python examples/flax_ltr.py --steps 1000 --hidden 256 --seed 1
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_ltr  # noqa: E402  (its data loader and padding)

import jaxrank  # noqa: E402

MEASURES = ("nDCG@1", "nDCG@5", "nDCG@10", "AP")


class Scorer(nnx.Module):
    """``x[..., n, d] -> scores[..., n]``: one hidden ReLU layer."""

    def __init__(self, features: int, hidden: int, *, rngs: nnx.Rngs) -> None:
        self.hidden = nnx.Linear(features, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.out(nnx.relu(self.hidden(x)))[..., 0]


def loss_fn(model: Scorer, x, y, where) -> jax.Array:
    """Mean over queries of ``1 - approx nDCG`` (exp gain), the default smooth ranker."""
    scores = model(x)
    return jaxrank.losses.metric_loss(scores, y, where=where, gain="exp").mean()


@nnx.jit
def train_step(model: Scorer, optimizer: nnx.Optimizer, x, y, where) -> jax.Array:
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y, where)
    optimizer.update(model, grads)
    return loss


ACC = jaxrank.accumulator(MEASURES, ties="expected")


@nnx.jit
def eval_step(model: Scorer, state, x, y, where, query_where):
    """The accumulator's state plus the queries of one chunk (``query_where``: real rows)."""
    return ACC.update(state, model(x), y, where=where, query_where=query_where)


def evaluate(model: Scorer, split: train_ltr.Split, chunk: int = 16) -> dict[str, float]:
    """Streams ``split`` through the accumulator in chunks of ``chunk`` queries.

    The last chunk is padded with empty rows marked ``query_where=False``, so that every
    chunk has one shape and ``eval_step`` compiles once.
    """
    state = ACC.init()
    for start in range(0, split.num_queries, chunk):
        rows = np.arange(start, start + chunk)
        real = rows < split.num_queries
        rows = np.where(real, rows, 0)
        state = eval_step(model, state, split.x[rows], split.y[rows], split.where[rows] & real[:, None], real)
    return {name: float(v) for name, v in ACC.compute(state).items()}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default=str(train_ltr.DEFAULT_DATA), help="directory with rank.train, rank.test")
    p.add_argument("--quick", action="store_true", help="40 steps (for the tests)")
    args = p.parse_args(argv)
    if args.quick:
        args.steps = 40
    if args.steps < 1 or args.hidden < 1:
        p.error("--steps and --hidden must be positive")
    data_dir = Path(args.data)
    if not (data_dir / "rank.train").is_file() or not (data_dir / "rank.test").is_file():
        p.error(f"--data {data_dir}: rank.train / rank.test not found (LightGBM's examples/lambdarank)")

    start = time.perf_counter()
    data = train_ltr.load_lambdarank(data_dir)
    train = data.train
    x, y, where = jnp.asarray(train.x), jnp.asarray(train.y), jnp.asarray(train.where)
    model = Scorer(train.x.shape[-1], args.hidden, rngs=nnx.Rngs(args.seed))
    optimizer = nnx.Optimizer(model, optax.adam(args.lr), wrt=nnx.Param)

    initial = evaluate(model, data.test)
    losses = [float(train_step(model, optimizer, x, y, where)) for _ in range(args.steps)]
    final = evaluate(model, data.test)
    seconds = time.perf_counter() - start

    print(
        f"train {train.num_queries} queries x {train.x.shape[1]} (list), test {data.test.num_queries}; "
        f"{args.steps} full-batch steps, loss {losses[0]:.4f} -> {losses[-1]:.4f}; {seconds:.1f} s"
    )
    # The numbers depend on the library's default ranker: name it beside them.
    print(
        f"loss: 1 - nDCG with metric_loss's default ranker {inspect.signature(jaxrank.losses.metric_loss).parameters['ranker'].default}"
    )
    print("| test | " + " | ".join(MEASURES) + " |")
    print("|---|" + "---:|" * len(MEASURES))
    for name, values in (("initial model", initial), (f"after {args.steps} steps", final)):
        print(f"| {name} | " + " | ".join(f"{values[m]:.4f}" for m in MEASURES) + " |")
    return {"initial": initial, "final": final, "losses": losses, "seconds": seconds, "model": model, "data": data}


if __name__ == "__main__":
    main()
