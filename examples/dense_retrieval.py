"""Dense retrieval evaluation end to end, without the query x corpus matrix.

The shape of a real embedding model's evaluation: 2000 queries against 200,000
documents in 128 dimensions, graded qrels with a few relevant documents per
query and some judged non-relevant ones. The embeddings are synthetic (unit
vectors; a relevant document is its query plus noise, less noise for a higher
grade), so the script runs anywhere in seconds; with a real model, put its
embeddings in ``Collection`` and keep the rest.

    python examples/dense_retrieval.py                     # 2000 x 200,000 x 128
    python examples/dense_retrieval.py --docs 1000000      # a bigger corpus

Steps: ``search`` (blockwise exact top-100) -> ``join`` (labels of the retrieved
ids from the qrels) -> nDCG@10 and R@100 with ``judgments=`` (trec_eval
semantics: the ideal ranking and the number of relevant documents come from the
qrels, retrieved or not).
"""

from __future__ import annotations

import argparse
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import jaxrank
from jaxrank.retrieval import join, search


class Collection(NamedTuple):
    queries: np.ndarray  # [Q, d] float32
    corpus: np.ndarray  # [N, d] float32
    judged_ids: np.ndarray  # [Q, m] int32, -1 = padding
    judged_labels: np.ndarray  # [Q, m] int32


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)


def synthetic_collection(num_queries: int, num_docs: int, dim: int, seed: int = 0, judged: int = 8) -> Collection:
    """Unit-vector queries and documents; 1-4 relevant documents per query (grades 1-3,
    noise shrinking with the grade) and up to ``judged`` judgments in all, padded with -1."""
    rng = np.random.default_rng(seed)
    queries = _unit(rng.standard_normal((num_queries, dim), dtype=np.float32))
    corpus = _unit(rng.standard_normal((num_docs, dim), dtype=np.float32))
    judged_ids = np.full((num_queries, judged), -1, np.int32)
    judged_labels = np.zeros((num_queries, judged), np.int32)
    counts = rng.integers(1, judged + 1, num_queries)
    # Distinct documents across queries, so that no document is rewritten twice.
    picks = rng.choice(num_docs, int(counts.sum()), replace=False).astype(np.int32)
    noise_by_grade = np.array([0.0, 3.5, 2.5, 1.5])  # grade 0: an unrelated judged document
    start = 0
    for q, count in enumerate(counts):
        ids = picks[start : start + count]
        start += count
        grades = rng.integers(0, 4, count)
        grades[0] = max(grades[0], 1)  # every query has a relevant document
        judged_ids[q, :count], judged_labels[q, :count] = ids, grades
        related = grades > 0
        noise = rng.standard_normal((int(related.sum()), dim)) / np.sqrt(dim)
        corpus[ids[related]] = _unit(queries[q] + noise_by_grade[grades[related], None] * noise)
    return Collection(queries, corpus, judged_ids, judged_labels)


def evaluate(data: Collection, k: int = 100, block_size: int | None = None) -> dict[str, float]:
    """Mean nDCG@10 and R@100 of exact inner-product retrieval, trec_eval style."""
    scores, ids = search(data.queries, data.corpus, k, block_size=block_size)
    labels, _ = join(ids, data.judged_ids, data.judged_labels)
    trec = dict(where=ids >= 0, judgments=data.judged_labels, judgments_where=data.judged_ids >= 0)
    return {
        "nDCG@10": float(jnp.mean(jaxrank.ndcg(scores, labels, k=10, **trec))),
        "R@100": float(jnp.mean(jaxrank.recall(scores, labels, k=100, **trec))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--block-size", type=int, default=None)
    args = parser.parse_args()

    data = synthetic_collection(args.queries, args.docs, args.dim)
    data = data._replace(queries=jnp.asarray(data.queries), corpus=jnp.asarray(data.corpus))
    for run in ("first run (compiles)", "second run"):
        start = time.perf_counter()
        result = evaluate(data, k=args.k, block_size=args.block_size)
        print(f"{run}: {time.perf_counter() - start:.2f} s", {m: round(v, 4) for m, v in result.items()})
    print(f"{args.queries} queries x {args.docs} documents x {args.dim} dims, k={args.k}, {jax.devices()[0].platform}")


if __name__ == "__main__":
    main()
