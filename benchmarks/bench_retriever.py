#!/usr/bin/env python
"""Does the retrieval loss train a dense retriever better than InfoNCE? Cranfield, one encoder.

The encoder, data and training loop are ``examples/train_retriever.py``'s: a Siamese dual
encoder of hashed word and bigram embeddings (``2^16`` buckets, 64 dimensions), mean-pooled,
projected, L2-normalised, trained from scratch with Adam (lr 1e-2), 16 training queries a
step, each step's documents the union of those queries' positives and 8 hard negatives per
query (the current model's top documents that are not relevant to it, from
``jaxrank.retrieval.search`` over the corpus, refreshed every 25 steps), 300 steps. Every
25 steps the validation queries are searched and the model of the best validation nDCG@10
is kept: the step is chosen on validation queries, per run. Only the loss changes between
rows (the same batches, negatives schedule, initialisation and budget):

* ``infonce-T``, T in 0.05, 0.1, 0.2, 0.5: InfoNCE as its users write it: every (query,
  relevant document) pair is an example, ``optax.softmax_cross_entropy_with_integer_labels``
  of the scores over the temperature ``T``, the query's other relevant documents masked out
  of its denominator (``where[Q, M]``), grades ignored; the mean over the pairs.
* ``softsort-T``, T in 0.05, 0.1, 0.2, 0.5, 1.0: ``losses.retrieval_loss(q, D,
  jaxrank.positives(idx, gains), ranker=jaxrank.softsort(T))`` (1 - soft nDCG@10, gains 4..1
  from Cranfield's codes), the mean over the queries; the candidates for the default ranker
  (the table marks the library's current one).
* ``approx``, ``approx-0.1``: the same with ``ranker=jaxrank.approx()`` (its default
  temperature) or ``approx(0.1)``, and ``k=None`` (nDCG over the whole list).
* ``default-binary``: ``retrieval_loss`` with its default ranker and every positive's gain 1
  (what the grades add).

Splits: the 225 queries are cut into ``--folds`` folds (fixed permutation, seed 0); run
``f`` tests on fold ``f``, chooses its step on 40 other queries, trains on the rest, and its
encoder starts from seed ``f`` (the same start for every row: the rows are paired on it).
Every query is a test query exactly once, so each row has 225 test values. Choices made on
validation queries only (the mean over the folds of the chosen step's validation nDCG@10):
InfoNCE's temperature (the ``infonce`` baseline), the retrieval default among the softsort
temperatures, and the best metric loss.

Test scores: each test query's top 100 documents from ``jaxrank.retrieval.search``, written
as a run and judged by ``jaxrank.evaluate`` with trec_eval's semantics (``ndcg_cut.10``,
``recall.100``). Each row against the InfoNCE baseline chosen on validation: the mean paired
difference with a 95% bootstrap interval (``jaxrank.stats.bootstrap_ci``, percentile, 10,000
resamples) and a two-sided paired randomization test (``jaxrank.stats.randomization_test``,
10,000 assignments); Holm's correction over the metric-loss rows (``multipletests``).

    python benchmarks/bench_retriever.py                 # every row, 5 folds (about 11 min on 2 cores)
    python benchmarks/bench_retriever.py --quick         # two rows, 2 folds, 40 steps: the path
    python benchmarks/bench_retriever.py --rows infonce-0.05,softsort-0.05 --json out.json

Results: docs/retrieval_loss.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import _machine  # noqa: E402
import train_retriever as tr  # noqa: E402

import jaxrank  # noqa: E402
from jaxrank import losses  # noqa: E402

VALID = 40  # validation queries per fold
INFONCE_T = (0.05, 0.1, 0.2, 0.5)
SOFTSORT_T = (0.05, 0.1, 0.2, 0.5, 1.0)  # the candidates for the retrieval default
MEASURES = ("ndcg_cut.10", "recall.100")
KEYS = {"ndcg_cut.10": "ndcg_cut_10", "recall.100": "recall_100"}  # evaluate's names (pytrec_eval's)


# --- losses -----------------------------------------------------------------------------
def infonce(q, d, positives, gains, doc_where, *, temperature: float) -> jax.Array:
    """Multi-positive InfoNCE: each (query, relevant document) pair is a softmax cross-entropy
    over the query's list, the query's other relevant documents left out (``where``)."""
    del gains  # InfoNCE has no grades
    n_docs = d.shape[0]
    valid = positives >= 0
    rows = jnp.arange(q.shape[0])[:, None]
    relevant = (
        jnp.zeros((q.shape[0], n_docs), bool).at[rows, jnp.where(valid, positives, n_docs)].set(True, mode="drop")
    )
    where = doc_where[None, :] & ~relevant  # [Q, M]: the negatives of each query
    this = jnp.arange(n_docs)[None, None, :] == positives[:, :, None]  # [Q, r, M]: the pair's positive
    logits = jnp.where(where[:, None, :] | this, (q @ d.T)[:, None, :] / temperature, -1e9)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.maximum(positives, 0))
    return jnp.sum(jnp.where(valid, ce, 0.0)) / jnp.maximum(jnp.sum(valid), 1)


def metric(q, d, positives, gains, doc_where, *, ranker=None, k: Optional[int] = 10, binary: bool = False):
    """Mean over the queries of ``losses.retrieval_loss`` (1 - soft nDCG, ``k``)."""
    gains = jnp.where(positives >= 0, 1, 0) if binary else gains
    pos = jaxrank.positives(positives, gains)
    return losses.retrieval_loss(q, d, pos, ranker=ranker, k=k, where=doc_where).mean()


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    family: str  # "infonce", "softsort" (a candidate for the default), "metric"
    loss: tr.LossFn
    describe: str


def rows() -> dict[str, Row]:
    """Every row by name; each loss function is built once, so the compiled step is reused."""
    out = [
        Row(f"infonce-{t}", "infonce", functools.partial(infonce, temperature=t), f"InfoNCE, T={t}") for t in INFONCE_T
    ]
    default = losses.retrieval._DEFAULT_RANKER
    for t in SOFTSORT_T:
        ranker = jaxrank.softsort(t)
        what = f"retrieval_loss, softsort({t}), nDCG@10" + (" (the default)" if ranker == default else "")
        out.append(Row(f"softsort-{t}", "softsort", functools.partial(metric, ranker=ranker), what))
    for t in (None, 0.1):
        ranker = jaxrank.approx() if t is None else jaxrank.approx(t)
        name = "approx" if t is None else f"approx-{t}"
        what = f"retrieval_loss, approx({'' if t is None else t}), nDCG (k=None)"
        out.append(Row(name, "metric", functools.partial(metric, ranker=ranker, k=None), what))
    out.append(
        Row(
            "default-binary",
            "metric",
            functools.partial(metric, binary=True),
            f"retrieval_loss default ({default}), gains all 1",
        )
    )
    return {r.name: r for r in out}


# --- splits and runs --------------------------------------------------------------------
def folds(n: int, k: int, valid: int = VALID, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``k`` (train, validation, test) splits of ``n`` queries: the tests partition the
    queries; each fold's validation queries are ``valid`` of the others (a fixed shuffle)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    out = []
    for test in np.array_split(order, k):
        rest = rng.permutation(np.setdiff1d(order, test))
        out.append((np.sort(rest[valid:]), np.sort(rest[:valid]), np.sort(test)))
    return out


def test_values(model: tr.Encoder, data: tr.Cranfield, tokens, test: np.ndarray) -> dict[str, dict[str, float]]:
    """``{measure: {qid: value}}`` of the test queries: top 100 by ``retrieval.search``,
    judged by ``jaxrank.evaluate`` (trec_eval's semantics)."""
    corpus = tr.encode(model, tokens[1])
    scores, ids = jaxrank.retrieval.search(tr.encode(model, tokens[0][test]), corpus, k=tr.DEPTH)
    run = {
        str(q + 1): {str(int(i) + 1): float(s) for s, i in zip(srow, irow) if i >= 0}
        for q, srow, irow in zip(test, np.asarray(scores), np.asarray(ids))
    }
    qrels = {str(q + 1): data.qrels[str(q + 1)] for q in test}
    per_query = jaxrank.evaluate(qrels, run, list(MEASURES), per_query=True)["per_query"]
    if sorted(per_query, key=int) != sorted(qrels, key=int):
        raise RuntimeError("evaluate left out a test query")
    return {m: {qid: float(v[KEYS[m]]) for qid, v in per_query.items()} for m in MEASURES}


def run_row(row: Row, data, tokens, splits, args) -> dict:
    """One row: a model per fold; each fold's chosen step, validation value and test values."""
    n = len(data.queries)
    values = {m: np.full(n, np.nan) for m in MEASURES}
    steps, valid, seconds = [], [], []
    for f, split in enumerate(splits):
        result = tr.train(
            data,
            split,
            loss_fn=row.loss,
            steps=args.steps,
            refresh=args.refresh,
            seed=f,
            tokens=tokens,
            **args.model,
        )
        got = test_values(result.best, data, tokens, split[2])
        for m in MEASURES:
            for q in split[2]:
                values[m][q] = got[m][str(q + 1)]
        steps.append(result.best_step)
        valid.append(max(v for _, v in result.history))
        seconds.append(result.seconds)
        print(
            f"  {row.name} fold {f}: step {result.best_step}, validation nDCG@10 {valid[-1]:.4f}, "
            f"test nDCG@10 {np.mean(list(got['ndcg_cut.10'].values())):.4f}, {result.seconds:.1f} s",
            flush=True,
        )
    return {"values": values, "steps": steps, "valid": valid, "seconds": seconds}


def compare(x: np.ndarray, base: np.ndarray, key: jax.Array) -> tuple[float, float, float, float]:
    """Mean paired difference, its 95% bootstrap interval, and the randomization p-value."""
    d = x - base
    k1, k2 = jax.random.split(key)
    low, high = jaxrank.stats.bootstrap_ci(d, key=k1, n_resamples=10_000)
    _, p = jaxrank.stats.randomization_test(x, base, key=k2, n_resamples=10_000)
    return float(d.mean()), float(low), float(high), float(p)


def table(results: dict[str, dict], chosen: dict[str, str], described: dict[str, Row], n_queries: int) -> str:
    """The Markdown table: every row, its validation mean, test means and its comparison
    with the InfoNCE baseline chosen on validation."""
    base = chosen["infonce"]
    key = jax.random.key(0)
    stats = {}
    for name, res in results.items():
        if name == base:
            continue
        for m in MEASURES:
            key, sub = jax.random.split(key)
            stats[name, m] = compare(res["values"][m], results[base]["values"][m], sub)
    metric_rows = [n for n in results if described[n].family != "infonce"]
    holm = {}
    for m in MEASURES:
        if metric_rows:
            adjusted = jaxrank.stats.multipletests(jnp.asarray([stats[n, m][3] for n in metric_rows]), "holm")
            holm.update({(n, m): float(p) for n, p in zip(metric_rows, adjusted)})
    marks: dict[str, list[str]] = {}
    for what, name in chosen.items():
        marks.setdefault(name, []).append(what)
    lines = [
        f"| row | loss | validation nDCG@10 | steps chosen | test nDCG@10 | Δ vs {base} [95% CI] | p (Holm) "
        f"| test R@100 | Δ vs {base} [95% CI] | p (Holm) |",
        "|---|---|---:|---|---:|---|---|---:|---|---|",
    ]
    for name, res in results.items():
        label = name + (f" (chosen: {', '.join(marks[name])})" if name in marks else "")
        cells = [label, described[name].describe, f"{np.mean(res['valid']):.4f}", "/".join(map(str, res["steps"]))]
        for m in MEASURES:
            cells.append(f"{np.mean(res['values'][m]):.4f}")
            if name == base:
                cells += ["baseline", ""]
            else:
                d, low, high, p = stats[name, m]
                adj = f" ({holm[name, m]:.3g})" if (name, m) in holm else ""
                cells += [f"{d:+.4f} [{low:+.4f}, {high:+.4f}]", f"{p:.3g}{adj}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(
        f"\n{n_queries} test queries (every query once, over the folds); Δ: mean paired difference of the "
        "per-query values; p: two-sided paired randomization test, in brackets Holm-adjusted over the "
        "metric-loss rows."
    )
    return "\n".join(lines)


def choose(results: dict[str, dict], described: dict[str, Row]) -> dict[str, str]:
    """The choices made on validation queries: the best InfoNCE temperature, the best
    softsort temperature (the retrieval default), the best metric loss."""

    def best(family: Sequence[str]) -> Optional[str]:
        names = [n for n in results if described[n].family in family]
        return max(names, key=lambda n: np.mean(results[n]["valid"])) if names else None

    out = {
        "infonce": best(["infonce"]),
        "default": best(["softsort"]),
        "best metric loss": best(["softsort", "metric"]),
    }
    return {k: v for k, v in out.items() if v is not None}


def main(argv: Optional[Sequence[str]] = None) -> dict:
    every = rows()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", default=",".join(every), help=f"comma-separated, of: {', '.join(every)}")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--refresh", type=int, default=25, help="steps between mining and validation")
    p.add_argument("--data", default=str(tr.DEFAULT_DATA))
    p.add_argument("--json", help="write every per-query value and the table here")
    p.add_argument("--quick", action="store_true", help="infonce-0.05 and the default, 2 folds, 40 steps")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.folds, args.steps, args.refresh = "infonce-0.05,softsort-0.05", 2, 40, 20
    names = [n.strip() for n in args.rows.split(",") if n.strip()]
    unknown = [n for n in names if n not in every]
    if unknown or not any(every[n].family == "infonce" for n in names):
        p.error(f"--rows: unknown {unknown}; at least one infonce row is needed (the baseline)")
    if args.folds < 2 or args.steps < 1 or args.refresh < 1:
        p.error("--folds must be at least 2, --steps and --refresh positive")
    args.model = dict(batch=16, negatives=8, lr=1e-2, bits=16, dim=64, doc_length=256)

    run = _machine.start(peers=("flax", "optax"), extra={"backend": jax.default_backend(), **args.model})
    print(run.header(), flush=True)
    data = tr.load_cranfield(Path(args.data))
    tokens = tr.featurize_all(data, args.model["bits"], args.model["doc_length"])
    splits = folds(len(data.queries), args.folds)
    results = {}
    for name in names:
        results[name] = run_row(every[name], data, tokens, splits, args)
    chosen = choose(results, every)
    text = table(results, chosen, every, len(data.queries))
    print()
    print(
        f"Cranfield, {args.folds} folds ({len(splits[0][0])}-{len(splits[-1][0])} training, {VALID} validation, "
        f"{min(len(s[2]) for s in splits)}-{max(len(s[2]) for s in splits)} test queries each), {args.steps} steps, "
        f"step chosen on validation every {args.refresh}; {sum(sum(r['seconds']) for r in results.values()):.0f} s "
        "of training in all"
    )
    print("chosen on validation queries: " + ", ".join(f"{k}: {v}" for k, v in chosen.items()))
    print(text)
    print(run.finish())
    out = {
        "machine": run.as_dict(),
        "chosen": chosen,
        "table": text,
        "rows": {
            n: {
                "steps": r["steps"],
                "valid": r["valid"],
                "seconds": r["seconds"],
                "values": {m: r["values"][m].tolist() for m in MEASURES},
            }
            for n, r in results.items()
        },
    }
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
