"""Core metrics benchmark: jaxrank beside its floors and its peers, in one process.

Times, on a [batch, n] batch of float32 scores and integer labels 0..4:
  * ``ndcg(k=10)`` alone, default tie policy and ``"stable"``;
  * every hard metric together with ``k=(5, 10, 20, 100, 1000)``, three ways:
    each metric called on the scores inside one ``jit`` (no shared ranker), one
    ranking pass shared through a precomputed ``Ranks``, and
    ``jaxrank.compute(scores, labels, [measure strings])`` (ranks once);
  * the floors ``lax.top_k(scores, 10)`` and ``numpy.argsort(scores)``;
  * the peers that are installed: pytrec_eval (ndcg_cut.10), ranx (ndcg@10),
    scikit-learn (ndcg_score, k=10), torchmetrics (RetrievalNormalizedDCG, top_k=10).

Compile time (first call minus the median run) is reported apart from run
time; run times are medians over ``--repeats`` runs. Ratios are to the floors.
Each peer runs in its own interpreter with its default threads (``_machine``);
the header records machine, versions and load, and "noisy" marks a row taken
while the machine was busy (docs/reports/index.md).

    python benchmarks/bench_core.py [--batch 2000] [--n 1000] [--repeats 7] [--paired ROUNDS]

``--paired ROUNDS`` adds the two target ratios (nDCG@10 over ``lax.top_k``, all metrics
over ``numpy.argsort``) timed in alternation, round by round, after the table's rows.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import tempfile
import time

import _machine
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jaxrank

CUTS = (5, 10, 20, 100, 1000)


def _paired(fn, floor, rounds):
    """Median over ``rounds`` of ``fn``'s time over ``floor``'s, the two timed one after
    the other in each round (both warmed up first): a ratio that a slower or faster
    phase of a shared host moves less than medians taken one row after another."""
    jax.block_until_ready(fn())
    jax.block_until_ready(floor())
    ratios = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        jax.block_until_ready(floor())
        t1 = time.perf_counter()
        jax.block_until_ready(fn())
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
    return statistics.median(ratios), min(ratios), max(ratios)


def _time(fn, repeats):
    """(median run, compile = first call minus median, "noisy" or "") of ``fn``."""
    watch = _machine.Watch()
    return (*_machine.time_compiled(fn, repeats), watch.stop().flag)


# The measures of all_metrics that jaxrank.compute names (ir_measures' strings; DCG and
# fall-out have none, NumRet and NumRelRet no cutoff).
MEASURES = [f"{m}@{k}" for m in ("P", "R", "AP", "RR", "nDCG", "Success", "ERR", "RBP") for k in CUTS]
MEASURES += ["Rprec", "NumRet", "NumRel", "NumRelRet"]


def all_metrics(scores, labels, ranker, shared=True):
    """Every metric at every cutoff; ``shared``: from one precomputed ``Ranks``, else
    each metric called with the ranker itself (as users first write it)."""
    ranks = ranker(scores, depth=None) if shared else ranker
    cut = dict(k=CUTS, ranker=ranks)
    return [
        jaxrank.precision(scores, labels, **cut),
        jaxrank.recall(scores, labels, **cut),
        jaxrank.average_precision(scores, labels, **cut),
        jaxrank.reciprocal_rank(scores, labels, **cut),
        jaxrank.dcg(scores, labels, **cut),
        jaxrank.ndcg(scores, labels, **cut),
        jaxrank.success(scores, labels, **cut),
        jaxrank.err(scores, labels, **cut),
        jaxrank.rbp(scores, labels, **cut),
        jaxrank.fallout(scores, labels, **cut),
        jaxrank.num_ret(scores, labels, **cut),
        jaxrank.num_rel_ret(scores, labels, **cut),
        jaxrank.r_precision(scores, labels, ranker=ranks),
        jaxrank.num_rel(scores, labels),
    ]


# Each peer as its users run it: its own interpreter, default threads, only numpy and the peer
# imported. Setup (reading the arrays, building the peer's inputs) is not timed.
_LOAD = "import numpy as np\nscores, labels = np.load({s!r}), np.load({y!r})\nbatch, n = scores.shape\n"
PEERS = [
    (
        "pytrec_eval ndcg_cut.10 (evaluate only)",
        "pytrec_eval",
        """import pytrec_eval
qrels = {f"q{b}": {f"d{i}": int(labels[b, i]) for i in range(n)} for b in range(batch)}
run = {f"q{b}": {f"d{i}": float(scores[b, i]) for i in range(n)} for b in range(batch)}
evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})""",
        "evaluator.evaluate(run)",
    ),
    (
        "ranx evaluate ndcg@10 (numba)",
        "ranx",
        """from ranx import Qrels, Run, evaluate
qrels = Qrels.from_dict({f"q{b}": {f"d{i}": int(labels[b, i]) for i in range(n) if labels[b, i] > 0} for b in range(batch)})
run = Run.from_dict({f"q{b}": {f"d{i}": float(scores[b, i]) for i in range(n)} for b in range(batch)})""",
        # ranx caches results on the run; time a fresh evaluation
        "run.mean_scores = {}\nevaluate(qrels, run, 'ndcg@10', make_comparable=False)",
    ),
    (
        "scikit-learn ndcg_score(k=10)",
        "sklearn",
        "from sklearn.metrics import ndcg_score",
        "ndcg_score(labels, scores, k=10)",
    ),
    (
        "torchmetrics retrieval_normalized_dcg(top_k=10), loop",
        "torchmetrics",
        """import torch
from torchmetrics.functional.retrieval import retrieval_normalized_dcg
ts, tl = torch.from_numpy(scores), torch.from_numpy(labels)""",
        "[retrieval_normalized_dcg(ts[b], tl[b], top_k=10) for b in range(batch)]",
    ),
]
PEER_DISTRIBUTIONS = ("pytrec-eval-terrier", "ranx", "scikit-learn", "torch", "torchmetrics")


def peers(scores, labels, repeats):
    """Rows for the installed peers, each timed in its own subprocess (``_machine.time_in_subprocess``)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"s": os.path.join(tmp, "scores.npy"), "y": os.path.join(tmp, "labels.npy")}
        np.save(paths["s"], scores)
        np.save(paths["y"], labels)
        for name, module, setup, stmt in PEERS:
            if not importlib.util.find_spec(module):
                continue
            # torchmetrics loops over queries in Python: fewer repeats
            n_runs = max(1, repeats // 3) if module == "torchmetrics" else repeats
            r = _machine.time_in_subprocess(_LOAD.format(**paths) + setup, stmt, repeats=n_runs + 1)
            median = statistics.median(r["runs_s"][1:])  # the first call warms up (numba compiles)
            rows.append((name, median, max(r["runs_s"][0] - median, 0.0), "noisy" if r["noisy"] else ""))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument(
        "--paired",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also time nDCG@10 beside top_k and all metrics beside argsort in alternation, ROUNDS rounds",
    )
    args = parser.parse_args(argv)

    run = _machine.start(
        peers=() if args.no_peers else PEER_DISTRIBUTIONS,
        extra={"backend": jax.default_backend(), "shape": f"[{args.batch}, {args.n}]", "repeats": args.repeats},
    )
    print(run.header(), flush=True)
    rng = np.random.default_rng(0)
    scores_np = rng.standard_normal((args.batch, args.n)).astype(np.float32)
    labels_np = rng.integers(0, 5, (args.batch, args.n)).astype(np.int32)
    scores, labels = jnp.asarray(scores_np), jnp.asarray(labels_np)

    top_k = jax.jit(lambda s: lax.top_k(s, 10))
    floor_topk, c_topk, f_topk = _time(lambda: top_k(scores), args.repeats)
    floor_sort, _, f_sort = _time(lambda: np.argsort(scores_np, axis=-1), args.repeats)
    rows = [("lax.top_k(scores, 10)", floor_topk, c_topk, f_topk), ("numpy.argsort(scores)", floor_sort, 0.0, f_sort)]
    # the paired ratios first, while the load is the one the run started at
    paired = []
    if args.paired:
        ranker = jaxrank.hard()
        ndcg10 = jax.jit(lambda s, y: jaxrank.ndcg(s, y, k=10, ranker=ranker))
        every = jax.jit(lambda s, y: all_metrics(s, y, ranker))
        watch = _machine.Watch()
        paired.append(
            (
                "ndcg(k=10) / lax.top_k(scores, 10)",
                *_paired(lambda: ndcg10(scores, labels), lambda: top_k(scores), args.paired),
            )
        )
        paired.append(
            (
                f"all metrics, k={CUTS}, shared ranks / numpy.argsort(scores)",
                *_paired(lambda: every(scores, labels), lambda: np.argsort(scores_np, axis=-1), args.paired),
            )
        )
        paired_flag = watch.stop().flag
    missing = []
    for ties in ("stable", "expected"):
        ranker = jaxrank.hard(ties)
        label = " (default)" if ties == "stable" else ""
        # the non-default policy gets fewer repeats: it is slower and only reported
        repeats = args.repeats if ties == "stable" else max(1, args.repeats // 3)
        ndcg10 = jax.jit(lambda s, y, r=ranker: jaxrank.ndcg(s, y, k=10, ranker=r))
        rows.append((f"jaxrank ndcg(k=10), ties={ties}{label}", *_time(lambda: ndcg10(scores, labels), repeats)))
        every = jax.jit(lambda s, y, r=ranker: all_metrics(s, y, r))
        rows.append(
            (
                f"jaxrank all metrics, k={CUTS}, shared ranks, ties={ties}{label}",
                *_time(lambda: every(scores, labels), repeats),
            )
        )
        if ties == "stable":
            plain = jax.jit(lambda s, y, r=ranker: all_metrics(s, y, r, shared=False))
            rows.append(
                (
                    f"jaxrank all metrics, k={CUTS}, each called on the scores, one jit",
                    *_time(lambda: plain(scores, labels), repeats),
                )
            )
            if hasattr(jaxrank, "compute"):
                together = jax.jit(lambda s, y: jaxrank.compute(s, y, MEASURES))
                rows.append(
                    (
                        f"jaxrank.compute(scores, labels, {len(MEASURES)} measure strings)",
                        *_time(lambda: together(scores, labels), repeats),
                    )
                )
            else:
                missing.append("jaxrank.compute (not in this version of jaxrank)")
    if not args.no_peers:
        rows += peers(scores_np, labels_np, args.repeats)

    print(
        f"\n# [{args.batch}, {args.n}] float32 scores, labels 0..4, backend={jax.default_backend()}, "
        f"median of {args.repeats} runs; peers each in its own process\n"
    )
    print("| what | run (ms) | compile (ms) | / top_k | / argsort | load |")
    print("|---|---:|---:|---:|---:|---|")
    for name, seconds, compile_s, flag in rows:
        print(
            f"| {name} | {seconds * 1e3:.1f} | {compile_s * 1e3:.0f} | {seconds / floor_topk:.2f} "
            f"| {seconds / floor_sort:.2f} | {flag} |"
        )
    for name in missing:
        print(f"| {name} | missing | | | | |")
    if paired:
        print(f"\n# timed in alternation, {args.paired} rounds: median (min-max) of the per-round ratio\n")
        print("| ratio | median | min | max | load |")
        print("|---|---:|---:|---:|---|")
        for name, med, lo, hi in paired:
            print(f"| {name} | {med:.2f} | {lo:.2f} | {hi:.2f} | {paired_flag} |")
    print("\n" + run.finish())


if __name__ == "__main__":
    main()
