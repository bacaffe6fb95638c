#!/usr/bin/env python
"""Do the smooth rankers' defaults train? The plain recipe, each ranker as a user first calls it.

The recipe (no annealing, no layer norm, no dropout, no tuning): a one-hidden-layer MLP
(``--hidden`` ReLU units, He initialisation) scores the documents of the LambdaRank data
(``examples/train_ltr.py``'s ``load_lambdarank``: quantile-transformed, standardised
features); Adam at a constant ``--lr``; ``--steps`` full-batch steps over the 201 training
queries; the loss is the mean over queries of ``1 - soft nDCG`` with exp gain over the whole
list, ``jaxrank.losses.metric_loss(scores, labels, where=where, gain="exp", ranker=R)``;
the score is the exact test nDCG@10 (``hard("expected")``, linear gain, trec_eval's
conventions, as in ``examples/train_ltr.py``), mean over ``--seeds`` seeds (one model per
seed, all trained at once under ``vmap``). LightGBM's LambdaRank with the parameters of
LightGBM's own example is the baseline (``train_ltr.run_lightgbm``, seeds 0, 1, ...).

Rankers are Python expressions over ``jaxrank`` (``approx(0.1, units="score")``); ``default``
is ``metric_loss`` with no ranker at all. ``--valid-fraction 0.25`` holds out a quarter of the
training queries and scores on them instead of on test (how defaults are chosen: the test
queries choose nothing)::

    python benchmarks/bench_defaults.py                                   # the tables of docs/reports/soft.md
    python benchmarks/bench_defaults.py --valid-fraction 0.25 --rankers 'approx(0.1)' 'approx(0.3)'
    python benchmarks/bench_defaults.py --no-lightgbm --paired --rankers 'approx()' 'softrank()'
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train_ltr  # noqa: E402

import jaxrank  # noqa: E402
from jaxrank import losses  # noqa: E402
from jaxrank.ranking import smooth  # noqa: E402

DEFAULT_RANKERS = (
    "default",
    "approx()",
    "softrank()",
    "neuralsort()",
    "softsort()",
    'approx(1.0, units="score")',
    'softrank(1.0, units="score")',
    'neuralsort(1.0, units="score")',
    'softsort(1.0, units="score")',
    'approx(1.0, units="std")',
)
CV_RANKERS = ("default", "approx()", "softrank()", "neuralsort()", "softsort()")


def make_objective(expression: str):
    """The per-list training loss an expression names, ``(scores, labels, where) -> [Q]``.

    ``"default"``: ``metric_loss`` with no ranker (its own default). An expression that gives
    a ranker (``"approx(0.1)"``): ``metric_loss`` with that ranker. One that gives another
    callable is the loss itself, over the names of ``jaxrank.losses`` and the rankers
    (``"lambda s, y, w: softmax_cross_entropy(s, y, where=w)"``). ``metric_loss`` always
    gets the recipe's ``gain="exp"``.
    """
    rankers = ("approx", "softrank", "neuralsort", "softsort", "laplace", "gumbel", "hard")
    names = {n: getattr(jaxrank, n) for n in rankers}
    names.update({n: getattr(losses, n) for n in losses.__all__})
    if expression == "default":
        return functools.partial(_ranker_objective, ranker=losses.metric_loss.__kwdefaults__["ranker"])
    try:
        built = eval(expression, {"__builtins__": {}, **names})  # globals: a lambda reads its names there
    except Exception as error:
        raise SystemExit(f"--rankers: cannot build {expression!r}: {error}") from None
    if isinstance(built, jaxrank.ranking.Ranker):
        return functools.partial(_ranker_objective, ranker=built)
    return built


def _ranker_objective(scores, labels, where, *, ranker):
    return losses.metric_loss(scores, labels, where=where, gain="exp", ranker=ranker)


def training_key(expression: str) -> str:
    """What an expression trains, for reuse: ``default`` and the ranker it equals
    (``laplace()`` while that is ``metric_loss``'s default) train the same model."""
    if expression == "default":
        return repr(losses.metric_loss.__kwdefaults__["ranker"])
    built = make_objective(expression)
    ranker = getattr(built, "keywords", {}).get("ranker")
    return repr(ranker) if ranker is not None else expression


def plain_train(
    objective_fn, data, seeds, *, hidden: int, lr: float, steps: int, eval_split, init_std: Optional[float] = None
) -> tuple[np.ndarray, float, np.ndarray]:
    """Test (or validation) nDCG@10 of one plain model per seed, ``[seeds]``, the mean
    standard deviation of the trained models' scores over the training lists, and each
    evaluated query's nDCG@10 (mean over the seeds). ``init_std``: weights drawn from
    N(0, init_std^2) instead of He's initialisation."""
    # the MLP sees the valid documents only (45% of the padded [Q, n] slots on this data)
    slots = np.nonzero(data.train.where)
    x = jnp.asarray(data.train.x[slots])
    y = jnp.asarray(data.train.y, jnp.float32)
    where = jnp.asarray(data.train.where)
    sizes = (x.shape[-1], hidden, 1)
    optimizer = optax.adam(lr)

    def objective(params):
        scores = jnp.zeros(where.shape, jnp.float32).at[slots].set(train_ltr.mlp(params, x))
        return jnp.mean(objective_fn(scores, y, where))

    def one(seed):
        params = train_ltr.init_mlp(jax.random.PRNGKey(seed), sizes)
        if init_std is not None:
            params = [(w * (init_std / math.sqrt(2.0 / w.shape[0])), b) for w, b in params]  # He's N(0, 2/d) rescaled

        def step(carry, _):
            params, state = carry
            grads = jax.grad(objective)(params)
            updates, state = optimizer.update(grads, state, params)
            return (optax.apply_updates(params, updates), state), None

        (params, _), _ = jax.lax.scan(step, (params, optimizer.init(params)), None, length=steps)
        return params

    params = jax.jit(jax.vmap(one))(jnp.asarray(seeds))
    scores = jax.vmap(lambda p: jnp.zeros(where.shape, jnp.float32).at[slots].set(train_ltr.mlp(p, x)))(params)
    spread = float(jnp.mean(jaxrank.score_spread(scores, where)))
    return train_ltr.evaluate(params, eval_split)[:, -1], spread, per_query(params, eval_split)


def per_query(params, split) -> np.ndarray:
    """nDCG@10 of each query of ``split`` (as ``train_ltr.evaluate``), mean over the seeds, ``[Q]``."""
    return np.asarray(_per_query(params, split.x, split.y, split.where))


@jax.jit
def _per_query(params, x, y, where):
    def one(p):
        return train_ltr._exact_ndcg(train_ltr.score(p, x, where), y, where)[..., train_ltr.CUTOFFS.index(10)]

    return jnp.mean(jax.vmap(one)(params), axis=0)


RECIPES = {
    # bench_defaults' plain recipe: quantile-transformed features, 256 hidden units, He init
    "quantile": dict(transform="quantile", hidden=256, init_std=None),
    # the second plain recipe of issue 26: standardised features, 64 hidden units, N(0, 0.05^2)
    "standard": dict(transform="standard", hidden=64, init_std=0.05),
}


def difference(values, reference) -> str:
    """``values - reference`` over the same queries: the mean, its 95% bootstrap interval
    (percentile, 10,000 resamples) and the two-sided randomization test's p-value."""
    diff = jnp.asarray(values - reference)
    low, high = jaxrank.stats.bootstrap_ci(diff, key=jax.random.key(0))
    _, pvalue = jaxrank.stats.randomization_test(values, reference, key=jax.random.key(1))
    return f"{float(jnp.mean(diff)):+.4f} [{float(low):+.4f}, {float(high):+.4f}] p {float(pvalue):.3f}"


def cross_validate(args, seeds) -> None:
    """``--cv F``: every query judges. The 251 queries of rank.train + rank.test are cut into
    ``F`` folds (``--fold-seed``); each ranker (and LightGBM) is trained on ``F - 1`` folds and
    scores each query of the held-out one (nDCG@10, mean over the model seeds); per ranker the
    mean over every query and its paired difference to LightGBM and to ``approx()``. With
    ``--valid-fraction`` the held-out fold judges nothing: each fold's training queries lose
    that fraction to a validation split, and the validation queries of every fold are scored
    instead (how settings are chosen)."""
    nested = args.valid_fraction > 0
    recipes = list(RECIPES) if args.recipe == "both" else [args.recipe]
    split = dict(
        folds=args.cv, fold_seed=args.fold_seed, valid_fraction=args.valid_fraction, split_seed=args.split_seed
    )
    results: dict = {r: {e: [] for e in args.rankers} for r in recipes}
    lightgbm = []
    for fold in range(args.cv):
        for recipe in recipes:
            cfg = RECIPES[recipe]
            data = train_ltr.load_fold(args.data, fold=fold, transform=cfg["transform"], **split)
            judged = data.valid if nested else data.test
            trained: dict = {}
            for expression in args.rankers:
                key = training_key(expression)
                if key in trained:  # the same objective: the same model, not trained twice
                    results[recipe][expression].append(trained[key])
                    continue
                _, _, queries = plain_train(
                    make_objective(expression),
                    data,
                    seeds,
                    hidden=cfg["hidden"],
                    lr=args.lr,
                    steps=args.steps,
                    eval_split=judged,
                    init_std=cfg["init_std"],
                )
                results[recipe][expression].append(queries)
                trained[key] = queries
                print(f"fold {fold} {recipe} {expression}: {np.mean(queries):.4f}", file=sys.stderr)
        if not args.no_lightgbm:
            tr, va, te = train_ltr.load_fold(args.data, fold=fold, raw=True, **split)
            target = va if nested else te
            lightgbm.append(np.mean([train_ltr.lightgbm_per_query(tr, target, s)[:, -1] for s in seeds], axis=0))
    gbm = np.concatenate(lightgbm) if lightgbm else None
    judged = "validation queries of every fold" if nested else "every query, held out"
    for recipe in recipes:
        per_ranker = {e: np.concatenate(v) for e, v in results[recipe].items()}
        reference = per_ranker.get("approx()")
        print(f"\nrecipe `{recipe}` ({RECIPES[recipe]}), {args.cv}-fold, {judged}:")
        print("| ranker | nDCG@10 | - LightGBM [95% CI] randomization p | - `approx()` [95% CI] p |")
        print("|---|---|---|---|")
        for e, v in per_ranker.items():
            vs_gbm = "" if gbm is None else difference(v, gbm)
            vs_approx = "" if reference is None or e == "approx()" else difference(v, reference)
            name = f"metric_loss default ({losses.metric_loss.__kwdefaults__['ranker']!r})" if e == "default" else e
            print(f"| `{name}` | {np.mean(v):.4f} | {vs_gbm} | {vs_approx} |")
        if gbm is not None:
            print(f"| LightGBM LambdaRank (train_ltr.LIGHTGBM_PARAMS) | {np.mean(gbm):.4f} | | |")
        print(f"({len(next(iter(per_ranker.values())))} judged queries)")


def paired(rows) -> None:
    """Each ranker against the first, over the same queries: the mean difference of per-query
    nDCG@10, its 95% bootstrap interval (percentile, 10,000 resamples) and the two-sided
    randomization test's p-value (``jaxrank.stats``)."""
    name0, values0 = rows[0][0], rows[0][3]
    print(f"\n| ranker - `{name0}` | mean difference | 95% bootstrap interval | randomization p |")
    print("|---|---|---|---|")
    for name, _, _, values in rows[1:]:
        if values is None:
            continue
        diff = jnp.asarray(values - values0)
        low, high = jaxrank.stats.bootstrap_ci(diff, key=jax.random.key(0))
        _, pvalue = jaxrank.stats.randomization_test(values, values0, key=jax.random.key(1))
        print(
            f"| `{name}` | {float(jnp.mean(diff)):+.4f} | [{float(low):+.4f}, {float(high):+.4f}] | {float(pvalue):.3f} |"
        )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rankers", nargs="+", default=list(DEFAULT_RANKERS))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--valid-fraction", type=float, default=0.0)
    p.add_argument("--split-seed", type=int, default=0, help="which training queries --valid-fraction holds out")
    p.add_argument(
        "--band",
        type=lambda t: tuple(float(v) for v in t.split(",")),
        help="LOW,HIGH: units='bounded' keeps the temperature within LOW..HIGH times each list's spread "
        "(default jaxrank.ranking.smooth.BAND)",
    )
    p.add_argument("--no-lightgbm", action="store_true")
    p.add_argument("--paired", action="store_true", help="compare each ranker with the first, query by query")
    p.add_argument("--data", default=str(train_ltr.DEFAULT_DATA))
    p.add_argument("--cv", type=int, default=0, help="F: F-fold cross-validation over every query (both splits pooled)")
    p.add_argument("--fold-seed", type=int, default=0, help="how --cv shuffles the queries into folds")
    p.add_argument("--recipe", choices=[*RECIPES, "both"], default="both", help="--cv: which plain recipe(s)")
    args = p.parse_args(argv)

    if args.band is not None:
        smooth.BAND = args.band  # read when a ranker is traced
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    seeds = list(range(args.seeds))
    if args.cv:
        if args.rankers == list(DEFAULT_RANKERS):
            args.rankers = list(CV_RANKERS)
        cross_validate(args, seeds)
        print(
            f"\n{args.steps} full-batch Adam steps, lr {args.lr}, seeds {seeds}, fold seed {args.fold_seed}; "
            f"jax {jax.__version__}, {jax.default_backend()}, {os.cpu_count()} CPUs, {platform.machine()}; "
            f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; "
            f"{math.ceil(time.perf_counter() - start)} s"
        )
        return
    data = train_ltr.load_lambdarank(args.data, valid_fraction=args.valid_fraction, split_seed=args.split_seed)
    eval_split = data.valid if args.valid_fraction > 0 else data.test
    rows = []
    for expression in args.rankers:
        got, spread, queries = plain_train(
            make_objective(expression),
            data,
            seeds,
            hidden=args.hidden,
            lr=args.lr,
            steps=args.steps,
            eval_split=eval_split,
        )
        shown = (
            f"metric_loss default ({losses.metric_loss.__kwdefaults__['ranker']!r})"
            if expression == "default"
            else None
        )
        rows.append((shown or expression, got, spread, queries))
        print(f"{rows[-1][0]}: {np.mean(got):.4f} {np.round(got, 4).tolist()} score std {spread:.3g}", file=sys.stderr)
    if not args.no_lightgbm:
        split = dict(valid_fraction=args.valid_fraction, split_seed=args.split_seed)
        got = np.asarray([train_ltr.run_lightgbm(args.data, s, **split)[-1] for s in seeds])
        rows.append(("LightGBM LambdaRank (train_ltr.LIGHTGBM_PARAMS)", got, None, None))
    load_after = os.getloadavg()[0]

    where = f"validation (split seed {args.split_seed})" if args.valid_fraction > 0 else "test"
    print(f"| ranker | {where} nDCG@10, mean of {len(seeds)} seeds | min | max | score std at the end |")
    print("|---|---|---|---|---|")
    for name, got, spread, _ in rows:
        std = "" if spread is None else f"{spread:.3g}"
        print(f"| `{name}` | {np.mean(got):.4f} | {np.min(got):.4f} | {np.max(got):.4f} | {std} |")
    print()
    print(
        f"{args.steps} full-batch Adam steps, lr {args.lr}, hidden {args.hidden}, seeds {seeds}, "
        f"units='bounded' band {smooth.BAND}; "
        f"jax {jax.__version__}, {jax.default_backend()}, {os.cpu_count()} CPUs, {platform.machine()}; "
        f"load average {load_before:.2f} before, {load_after:.2f} after"
        f"{' (noisy)' if max(load_before, load_after) > 0.5 else ''}; "
        f"{math.ceil(time.perf_counter() - start)} s"
    )
    if args.paired:
        paired(rows)


if __name__ == "__main__":
    main()
