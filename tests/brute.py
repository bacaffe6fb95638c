"""Brute-force references, in plain numpy and independent of jaxrank.

``reference(name, labels_in_rank_order, ...)`` evaluates a metric for one fixed
order; ``over_tie_orders`` evaluates it for every order of each tie group.
"""

import itertools
import math

import numpy as np


def _dcg(gains, k):
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))


def reference(name, ranked, *, k=None, rel=1, num_rel=None, judged=None, p=0.8, max_label=4, gain="linear"):
    """One metric of labels listed in rank order. ``judged``: all judged labels."""
    ranked = [float(y) for y in ranked]
    n = len(ranked)
    kk = n if k is None else k
    is_rel = [y >= rel for y in ranked]
    pool = ranked if judged is None else [float(y) for y in judged]
    big_r = sum(y >= rel for y in pool) if num_rel is None else num_rel
    if name == "precision":
        return sum(is_rel[:kk]) / (kk if k is not None else max(n, 1))
    if name == "recall":
        return sum(is_rel[:kk]) / big_r if big_r else 0.0
    if name == "average_precision":
        hits, total = 0, 0.0
        for i, r in enumerate(is_rel[:kk]):
            if r:
                hits += 1
                total += hits / (i + 1)
        return total / big_r if big_r else 0.0
    if name == "reciprocal_rank":
        return next((1 / (i + 1) for i, r in enumerate(is_rel[:kk]) if r), 0.0)
    if name == "success":
        return float(any(is_rel[:kk]))
    g = (lambda y: max(y, 0.0)) if gain == "linear" else (lambda y: 2 ** max(y, 0.0) - 1)
    if name == "dcg":
        return _dcg([g(y) for y in ranked], kk)
    if name == "ndcg":
        ideal = _dcg(sorted((g(y) for y in pool), reverse=True), kk)
        return _dcg([g(y) for y in ranked], kk) / ideal if ideal else 0.0
    if name == "err":
        total, keep = 0.0, 1.0
        for i, y in enumerate(ranked[:kk]):
            stop = (2 ** max(y, 0) - 1) / 2**max_label
            total += keep * stop / (i + 1)
            keep *= 1 - stop
        return total
    if name == "rbp":
        return (1 - p) * sum(p**i for i, r in enumerate(is_rel[:kk]) if r)
    if name == "r_precision":
        return sum(is_rel[:big_r]) / big_r if big_r else 0.0
    if name == "fallout":
        nonrel = sum(0 <= y < rel for y in pool)
        return sum(0 <= y < rel for y in ranked[:kk]) / nonrel if nonrel else 0.0
    if name == "num_rel_ret":
        return float(sum(is_rel[:kk]))
    if name == "num_ret":
        return float(min(n, kk))
    raise KeyError(name)


def tie_orders(scores):
    """Every order of the indices consistent with ``scores`` (descending)."""
    values = sorted(set(scores), reverse=True)
    groups = [[i for i, s in enumerate(scores) if s == v] for v in values]
    for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
        yield [i for part in parts for i in part]


def over_tie_orders(name, scores, labels, **kwargs):
    """``reference`` for every tie order of the valid items."""
    scores = [float(s) for s in scores]
    labels = [float(y) for y in labels]
    return np.array([reference(name, [labels[i] for i in order], **kwargs) for order in tie_orders(scores)])


# The public metrics that take k (r_precision and num_rel do not).
CUTOFF_METRICS = [
    "precision",
    "recall",
    "average_precision",
    "reciprocal_rank",
    "success",
    "dcg",
    "ndcg",
    "err",
    "rbp",
    "fallout",
    "num_rel_ret",
    "num_ret",
]
