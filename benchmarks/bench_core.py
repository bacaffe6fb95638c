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

    python benchmarks/bench_core.py [--batch 2000] [--n 1000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import jaxrank

CUTS = (5, 10, 20, 100, 1000)


def _time(fn, repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        runs.append(time.perf_counter() - t0)
    median = statistics.median(runs)
    return median, max(first - median, 0.0)


# The measures of all_metrics that jaxrank.compute names (ir_measures' strings; DCG and
# fall-out have none, NumRet and NumRelRet no cutoff).
MEASURES = [f"{m}@{k}" for m in ("P", "R", "AP", "RR", "nDCG", "Success", "ERR", "RBP") for k in CUTS]
MEASURES += ["Rprec", "NumRet", "NumRel", "NumRelRet"]


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()}"


def _load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"


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


def peers(scores, labels, repeats):
    rows = []
    batch, n = scores.shape
    if importlib.util.find_spec("pytrec_eval"):
        import pytrec_eval

        qrels = {f"q{b}": {f"d{i}": int(labels[b, i]) for i in range(n)} for b in range(batch)}
        run = {f"q{b}": {f"d{i}": float(scores[b, i]) for i in range(n)} for b in range(batch)}
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"})
        rows.append(("pytrec_eval ndcg_cut.10 (evaluate only)", *_time(lambda: evaluator.evaluate(run), repeats)))
    if importlib.util.find_spec("ranx"):
        from ranx import Qrels, Run, evaluate

        qrels_r = Qrels.from_dict(
            {f"q{b}": {f"d{i}": int(labels[b, i]) for i in range(n) if labels[b, i] > 0} for b in range(batch)}
        )
        run_r = Run.from_dict({f"q{b}": {f"d{i}": float(scores[b, i]) for i in range(n)} for b in range(batch)})

        def ranx_ndcg():
            run_r.mean_scores = {}  # ranx caches results on the run; time a fresh evaluation
            return evaluate(qrels_r, run_r, "ndcg@10", make_comparable=False)

        rows.append(("ranx evaluate ndcg@10 (numba)", *_time(ranx_ndcg, repeats)))
    if importlib.util.find_spec("sklearn"):
        from sklearn.metrics import ndcg_score

        rows.append(("scikit-learn ndcg_score(k=10)", *_time(lambda: ndcg_score(labels, scores, k=10), repeats)))
    if importlib.util.find_spec("torchmetrics"):
        import torch
        from torchmetrics.functional.retrieval import retrieval_normalized_dcg

        ts, tl = torch.from_numpy(scores), torch.from_numpy(labels)

        def tm():
            return [retrieval_normalized_dcg(ts[b], tl[b], top_k=10) for b in range(batch)]

        rows.append(("torchmetrics retrieval_normalized_dcg(top_k=10), loop", *_time(tm, max(1, repeats // 3))))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--no-peers", action="store_true")
    args = parser.parse_args(argv)

    load_before = _load()
    rng = np.random.default_rng(0)
    scores_np = rng.standard_normal((args.batch, args.n)).astype(np.float32)
    labels_np = rng.integers(0, 5, (args.batch, args.n)).astype(np.int32)
    scores, labels = jnp.asarray(scores_np), jnp.asarray(labels_np)

    top_k = jax.jit(lambda s: lax.top_k(s, 10))
    floor_topk, c_topk = _time(lambda: top_k(scores), args.repeats)
    floor_sort, _ = _time(lambda: np.argsort(scores_np, axis=-1), args.repeats)
    rows = [("lax.top_k(scores, 10)", floor_topk, c_topk), ("numpy.argsort(scores)", floor_sort, 0.0)]
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
        f"# [{args.batch}, {args.n}] float32 scores, labels 0..4, backend={jax.default_backend()}, "
        f"median of {args.repeats} runs"
    )
    print(
        f"# jax {jax.__version__}, numpy {np.__version__}, python {platform.python_version()}; "
        f"{_machine()}; load average before / after: {load_before} / {_load()}\n"
    )
    print("| what | run (ms) | compile (ms) | / top_k | / argsort |")
    print("|---|---:|---:|---:|---:|")
    for name, run, compile_s in rows:
        print(f"| {name} | {run * 1e3:.1f} | {compile_s * 1e3:.0f} | {run / floor_topk:.2f} | {run / floor_sort:.2f} |")
    for name in missing:
        print(f"| {name} | missing | | | |")


if __name__ == "__main__":
    main()
