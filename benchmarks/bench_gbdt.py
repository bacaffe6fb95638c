#!/usr/bin/env python
"""LightGBM's LambdaMART against the same booster with a jaxrank loss as its objective.

Issue 35 part 3: on LETOR 4.0's MQ2008 (its five folds, rebuilt from Fold1 as
``benchmarks/bench_letor.py`` does: train on three blocks, validate on the fourth, judge the
fifth) and on LightGBM's LambdaRank data (5-fold cross-validation of the 251 queries, a quarter
of each fold's training queries held out for validation, ``bench_letor.py``'s split), LightGBM
with the parameters of its LambdaRank example (``examples/train_ltr.py``'s ``LIGHTGBM_PARAMS``:
100 trees, learning rate 0.1, 31 leaves, at least 50 documents and a Hessian sum of 5 per leaf,
bagging 0.9) is trained once with ``objective="lambdarank"`` and once per candidate with
``jaxrank.losses.gbdt_objective(loss, hessian=...)``, everything else equal (``--seeds`` bagging
seeds, one thread).

Choosing on the validation queries only: each candidate's mean validation nDCG@10 over the
folds and seeds of each data set; the candidate with the best mean over the data sets is
*selected*, one objective for both. The tables show every candidate's validation nDCG@10, and the
held-out queries of three rows only: LambdaMART, the default objective
(``gbdt_objective(metric_loss)``, every option at its default) and the selected one, each as the
paired difference of per-query nDCG@10 to LambdaMART with a 95% bootstrap interval (percentile,
10,000 resamples) and a two-sided randomization test's p-value (``jaxrank.stats``). nDCG@k is
trec_eval's (``jaxrank.ndcg``, linear gain, ``hard("expected")`` ties; a query without a relevant
document scores 0 and counts); for MQ2008 also LETOR's own ``Eval-Score-4.0.pl`` nDCG@10
(``bench_letor.letor_ndcg``: gains 0/1/3, 0 for lists of fewer than 10 documents).

The candidates were screened in two rounds of one seed (``--round 1``, ``--round 2``; every
loss with ``hessian="gradient"``, the other Hessians on ApproxNDCG, then cutoffs, gains and
temperatures of the best), and the front-runners (``FINAL``) run with three seeds by default.

    python benchmarks/bench_gbdt.py                      # both data sets, FINAL, 3 seeds
    python benchmarks/bench_gbdt.py --round 1 --seeds 1  # the screening rounds
    python benchmarks/bench_gbdt.py --data mq2008 --candidates approx:gradient softmax:gradient
    python benchmarks/bench_gbdt.py --candidates default   # LambdaMART and gbdt_objective(metric_loss) only
    python benchmarks/bench_gbdt.py --quick              # seconds: the test's path
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import _machine  # noqa: E402
import bench_letor  # noqa: E402  (the LETOR folds, nDCG tables, paired statistics)
import train_ltr  # noqa: E402

import jaxrank  # noqa: E402
from jaxrank import losses  # noqa: E402
from jaxrank.ranking.backend import bucket  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
CUTOFFS = bench_letor.CUTOFFS
LOSSES = {
    "default": losses.metric_loss,  # gbdt_objective gives it the tree default's ranker and k
    "approx": functools.partial(losses.metric_loss, ranker=jaxrank.approx()),  # ApproxNDCG, T = 3
    "approx@10": functools.partial(losses.metric_loss, ranker=jaxrank.approx(), k=10),
    "approx_exp": functools.partial(losses.metric_loss, ranker=jaxrank.approx(), gain="exp"),
    "approx_exp@10": functools.partial(losses.metric_loss, ranker=jaxrank.approx(), gain="exp", k=10),
    "approx_t1": functools.partial(losses.metric_loss, ranker=jaxrank.approx(1.0)),
    "approx_t10": functools.partial(losses.metric_loss, ranker=jaxrank.approx(10.0)),
    "approx@10_t1": functools.partial(losses.metric_loss, ranker=jaxrank.approx(1.0), k=10),
    "softsort": functools.partial(losses.metric_loss, ranker=jaxrank.softsort()),
    "softsort@10": functools.partial(losses.metric_loss, ranker=jaxrank.softsort(), k=10),
    "neuralsort": functools.partial(losses.metric_loss, ranker=jaxrank.neuralsort()),
    "softrank": functools.partial(losses.metric_loss, ranker=jaxrank.softrank()),
    "softmax": losses.softmax_cross_entropy,
    "lambda_loss": losses.lambda_loss,
}
HESSIANS = ("gradient", "exact", "hutchinson", "constant")
#: The library's default objective: ``gbdt_objective(metric_loss)``, every option at its default
#: (the tree default: ``ranker=approx(1.0), k=10``, ``hessian="hutchinson"``, since this
#: benchmark's final round selected them). ``default:<hessian>`` is the same loss with that Hessian.
DEFAULT = "default"
#: Round 1 of the selection (every loss with the default Hessian, the other Hessians on approx).
ROUND1 = [f"{loss}:gradient" for loss in ("approx", "approx@10", "approx_exp", "softsort", "neuralsort", "softrank")]
ROUND1 += ["softmax:gradient", "lambda_loss:gradient", "approx:hutchinson", "approx:exact", "approx:constant"]
ROUND1 += ["softmax:exact"]
#: Round 2: the best of round 1 with the other Hessians, cutoffs, gains and temperatures.
ROUND2 = ["approx@10:exact", "approx@10:hutchinson", "lambda_loss:exact", "approx_exp@10:gradient"]
ROUND2 += ["approx_t1:gradient", "approx_t10:gradient", "approx@10_t1:gradient", "softsort:exact", "softsort@10:exact"]
#: Round 3 (the default, 3 seeds): the front-runners of rounds 1 and 2 (one seed each), with the
#: two cheap Hessians; one of them is selected for both data sets on the validation queries.
FINAL = [f"{loss}:{h}" for loss in ("approx@10_t1", "approx@10", "approx_t1") for h in ("gradient", "hutchinson")]


def lightgbm_params(seed: int, quick: bool) -> tuple[dict, int]:
    """LIGHTGBM_PARAMS (LGBMRanker's names, which lgb.train takes as aliases), one thread."""
    params = dict(train_ltr.LIGHTGBM_PARAMS, random_state=seed, num_threads=1, verbosity=-1)
    trees = params.pop("n_estimators")
    if quick:
        params.update(min_child_samples=5, min_child_weight=1e-3)
    return params, (5 if quick else trees)


def fit(objective, train, seed: int, quick: bool):
    import lightgbm

    params, trees = lightgbm_params(seed, quick)
    params["objective"] = objective
    features, labels, sizes = train
    data = lightgbm.Dataset(features, labels, group=sizes, free_raw_data=False)
    return lightgbm.train(params, data, num_boost_round=trees)


def objective_of(name: str):
    if name == "lambdarank":
        return "lambdarank"
    if name == DEFAULT:
        return losses.gbdt_objective(losses.metric_loss)
    loss, hessian = name.split(":")
    return losses.gbdt_objective(LOSSES[loss], hessian=hessian)


# ------------------------------------------------------------------------------- data
def folds(name: str, quick: bool) -> list[tuple]:
    """Per fold, flat ``(train, valid, test)``, each ``(features, labels, sizes)``."""
    if name == "mq2008":
        pool, blocks = bench_letor.letor_blocks(SHARED / "mq2008")
        out = [tuple(train_ltr._split(pool, i) for i in bench_letor.letor_fold(blocks, f)) for f in range(1, 6)]
    else:
        split = dict(folds=5, fold_seed=0, valid_fraction=0.25, split_seed=0, raw=True)
        out = [train_ltr.load_fold(SHARED / "lambdarank", fold=f, **split) for f in range(5)]
    if quick:
        out = [tuple(bench_letor._first(s, 12 if i == 0 else 4) for i, s in enumerate(f)) for f in out[:2]]
    return out


_ndcg = jax.jit(bench_letor.ndcg_table)


def per_query(predictions: np.ndarray, split, n: int) -> np.ndarray:
    """nDCG@(1, 3, 5, 10) of each query, ``[Q, 4]`` (lists padded to ``bucket(Q) x n``: a few programs)."""
    _, labels, sizes = split
    shape = (bucket(len(sizes)), n)
    y = bench_letor._padded(labels, sizes, shape)
    where = bench_letor._padded(np.ones_like(labels), sizes, shape) > 0
    return np.asarray(_ndcg(bench_letor._padded(predictions, sizes, shape), y, where))[: len(sizes)]


def letor10(predictions: np.ndarray, split) -> np.ndarray:
    _, labels, sizes = split
    starts = np.cumsum(sizes) - sizes
    return np.array([bench_letor.letor_ndcg(predictions[b : b + m], labels[b : b + m]) for b, m in zip(starts, sizes)])


def run(name: str, data: list, seeds, quick: bool, letor: bool) -> dict:
    """One objective (``name``) on every fold: per-query validation nDCG@10 and test nDCG@(1, 3,
    5, 10) (and LETOR's nDCG@10), each the mean over the seeds. Only the validation values
    choose anything; the tables show the test values of LambdaMART, the default and the
    selected objective."""
    n = max(int(max(s[2].max() for s in f)) for f in data)
    start = time.perf_counter()
    valid, test, lt = [], [], []
    for train, va, te in data:
        v, t, l10 = [], [], []
        for seed in seeds:
            model = fit(objective_of(name), train, seed, quick)
            v.append(per_query(model.predict(va[0]), va, n)[:, -1])
            scores = model.predict(te[0])
            t.append(per_query(scores, te, n))
            if letor:
                l10.append(letor10(scores, te))
        valid.append(np.mean(v, 0))
        test.append(np.mean(t, 0))
        if letor:
            lt.append(np.mean(l10, 0))
    return dict(
        valid=np.concatenate(valid),
        test=np.concatenate(test),
        letor=np.concatenate(lt) if letor else None,
        seconds=time.perf_counter() - start,
    )


def difference(values, reference) -> tuple[float, float, float, float]:
    """``values - reference`` per query: mean, 95% bootstrap interval, randomization p-value."""
    diff = jnp.asarray(values - reference)
    low, high = jaxrank.stats.bootstrap_ci(diff, key=jax.random.key(0))
    _, p = jaxrank.stats.randomization_test(jnp.asarray(values), jnp.asarray(reference), key=jax.random.key(1))
    return float(jnp.mean(diff)), float(low), float(high), float(p)


def tables(name: str, results: dict, selected: Optional[str], letor: bool) -> str:
    lines = [f"validation nDCG@10 (mean over {len(results['lambdarank']['valid'])} validation queries):", ""]
    lines += ["| objective | valid nDCG@10 | s |", "|---|---|---|"]
    for key, r in sorted(results.items(), key=lambda kv: -kv[1]["valid"].mean()):
        mark = " (selected)" if key == selected else ""
        lines.append(f"| `{key}`{mark} | {r['valid'].mean():.4f} | {r['seconds']:.0f} |")
    judged = list(dict.fromkeys(["lambdarank", DEFAULT] + ([selected] if selected else [])))
    base = results["lambdarank"]["test"]
    lines += ["", f"held-out queries ({len(base)}, each judged once):", ""]
    head = "| objective | " + " | ".join(f"nDCG@{k}" for k in CUTOFFS)
    head += " | LETOR nDCG@10 |" if letor else " |"
    head += " - LambdaMART, nDCG@10 [95% CI] | p |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for key in judged:
        r = results[key]
        cells = [f"`{key}`" + (" (selected)" if key == selected else "")]
        cells += [f"{v:.4f}" for v in r["test"].mean(0)]
        if letor:
            cells.append(f"{r['letor'].mean():.4f}")
        if key == "lambdarank":
            cells += ["", ""]
        else:
            mean, low, high, p = difference(r["test"][:, -1], base[:, -1])
            cells += [f"{mean:+.4f} [{low:+.4f}, {high:+.4f}]", f"{p:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", choices=("mq2008", "lambdarank", "both"), default="both")
    p.add_argument(
        "--candidates",
        nargs="+",
        default=FINAL,
        help=f"loss:hessian, loss from {' '.join(LOSSES)}; or {DEFAULT} alone: LambdaMART and the default only",
    )
    p.add_argument("--round", type=int, choices=(1, 2), help="the candidates of screening round 1 or 2 instead")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="two folds of a few queries, 5 trees, one seed")
    p.add_argument("--json", type=Path, help="write per-query results here")
    args = p.parse_args(argv)
    if args.round:
        args.candidates = ROUND1 if args.round == 1 else ROUND2
    for c in args.candidates:
        if c == DEFAULT:  # ``--candidates default``: LambdaMART and the default only
            continue
        loss, _, hessian = c.partition(":")
        if loss not in LOSSES or hessian not in HESSIANS:
            p.error(f"candidate {c!r}: loss:hessian with loss in {list(LOSSES)}, hessian in {list(HESSIANS)}")
    seeds = [0] if args.quick else list(range(args.seeds))
    run_info = _machine.start(peers=("lightgbm",), extra={"seeds": seeds, "candidates": args.candidates})
    print(run_info.header())
    out: dict = {"command": run_info.command, "data": {}}
    names = ["mq2008", "lambdarank"] if args.data == "both" else [args.data]
    data = {name: folds(name, args.quick) for name in names}
    results: dict = {name: {} for name in names}
    for name in names:  # every candidate
        for key in dict.fromkeys(["lambdarank", DEFAULT, *args.candidates]):
            results[name][key] = run(key, data[name], seeds, args.quick, name == "mq2008")
            print(f"{name} {key}: valid nDCG@10 {results[name][key]['valid'].mean():.4f}", file=sys.stderr, flush=True)
    # one objective for every data set: the best mean over them of the validation nDCG@10
    candidates = [c for c in args.candidates if c != DEFAULT]  # the default is no candidate
    selected = (
        max(candidates, key=lambda k: np.mean([results[n][k]["valid"].mean() for n in names])) if candidates else None
    )
    for name in names:
        print(f"\n## {name}: {sum(len(f[2][2]) for f in data[name])} judged queries, seeds {seeds}\n")
        print(tables(name, results[name], selected, name == "mq2008"))
        out["data"][name] = {
            k: {f: (v.tolist() if isinstance(v, np.ndarray) else v) for f, v in r.items()}
            for k, r in results[name].items()
        }
    out["selected"] = selected
    if selected:
        print(f"\nselected on the validation queries (best mean over {', '.join(names)}): {selected}")
    print(run_info.finish())
    if args.json:
        args.json.write_text(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
