"""autointent's retrieval metrics (0.4), value for value, over jaxrank's core.

Each function takes ``query_labels`` (``[Q]`` class ids, or ``[Q, C]`` binary vectors for
the ``_intersecting`` and ``_macro`` forms; ``None`` queries are left out) and
``candidates_labels`` (``[Q, n]`` or ``[Q, n, C]``: the labels of the retrieved items, best
first), and returns the mean over queries. The candidates' order is the ranking.
autointent's conventions, kept here (``docs/compat/autointent.md``):

* Relevance: plain, a candidate with the query's class; ``_intersecting``, a candidate
  sharing a label with the query; ``retrieval_ndcg_intersecting``, a candidate that agrees
  with the query on any class, present or absent (autointent compares the binary vectors
  with ``==``); ``_macro``, per class, a candidate whose membership of the class equals the
  query's (absence matches absence), then the mean over classes.
* Average precision divides by the relevant items within the top ``k``.
* Precision divides by ``min(k, n)``, the number of candidates kept.

Example:
  >>> from jaxrank.compat.autointent import retrieval_map
  >>> round(float(retrieval_map([1, 0], [[0, 1, 1], [0, 0, 1]], k=2)), 4)  # (1/2) and (1 + 1) / 2
  0.75
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp

from jaxrank import metrics
from jaxrank.compat._common import STABLE, as_array, average_precision_over_retrieved, cutoff

Array = jax.Array


def _inputs(query_labels, candidates_labels) -> tuple[Array, Array]:
    if isinstance(query_labels, (list, tuple)) and any(q is None for q in query_labels):
        if len(query_labels) != len(candidates_labels):
            raise ValueError("query_labels and candidates_labels must have one entry per query")
        kept = [(q, c) for q, c in zip(query_labels, candidates_labels) if q is not None]
        if not kept:
            raise ValueError("every query label is None")
        query_labels, candidates_labels = (list(x) for x in zip(*kept))
    q, c = as_array(query_labels), as_array(candidates_labels)
    if c.ndim < 2 or c.shape[0] != q.shape[0] or c.shape[2:] != q.shape[1:]:
        raise ValueError(
            f"candidates_labels must have shape [Q, n] + query_labels' label shape; got {c.shape} and {q.shape}"
        )
    return q, c


@partial(jax.jit, static_argnames=("score", "relevance", "k"))
def _run(score, relevance, q, c, k):
    return score(relevance(q, c), k)


def _positions(relevant: Array) -> Array:
    """Scores that rank the candidates in the given order."""
    return jnp.broadcast_to(-jnp.arange(relevant.shape[-1], dtype=jnp.result_type(float)), relevant.shape)


# Relevance of each candidate [..., Q, n] from the query labels and the candidates' labels.
def _plain(q, c):
    return (c == q[:, None]).astype(jnp.result_type(float))


def _intersecting(q, c):
    return (jnp.sum(c * q[:, None, :], axis=-1) > 0).astype(jnp.result_type(float))


def _agreeing(q, c):
    return jnp.any(c == q[:, None, :], axis=-1).astype(jnp.result_type(float))


def _macro(q, c):
    """Per class (leading axis), the plain relevance of the binarised labels."""
    return jnp.moveaxis((c == q[:, None, :]).astype(jnp.result_type(float)), -1, 0)


# Per-list metrics over the relevance [..., Q, n], mean over queries (and classes).
def _map(rel, k):
    return jnp.mean(average_precision_over_retrieved(_positions(rel), rel, k=k, where=None, ranker=STABLE))


def _hit_rate(rel, k):
    return jnp.mean(metrics.success(_positions(rel), rel, k=k, ranker=STABLE))


def _precision(rel, k):
    return jnp.mean(metrics.precision(_positions(rel), rel, k=k, adaptive=True, ranker=STABLE))


def _ndcg(rel, k):
    return jnp.mean(metrics.ndcg(_positions(rel), rel, k=k, ranker=STABLE))


def _mrr(rel, k):
    return jnp.mean(metrics.reciprocal_rank(_positions(rel), rel, k=k, ranker=STABLE))


# The public functions are every metric under every relevance: their docstrings are made
# of the metric's part (summary, formula) and the relevance's part (rule, shapes, example).
_METRICS = {
    _map: (
        "Mean average precision at ``k``, each AP over the relevant candidates within the top ``k``.",
        "\\frac{1}{Q} \\sum_q \\frac{1}{|rel_q \\cap top_k|} \\sum_{i \\in rel_q, i \\le k} P@i",
    ),
    _hit_rate: (
        "Hit rate at ``k``: the share of queries with a relevant candidate in the top ``k``.",
        "\\frac{1}{Q} \\sum_q [\\exists i \\le k: i \\in rel_q]",
    ),
    _precision: (
        "Precision at ``k``: relevant candidates in the top ``k`` over ``min(k, n)``.",
        "\\frac{1}{Q} \\sum_q \\frac{|rel_q \\cap top_k|}{\\min(k, n)}",
    ),
    _ndcg: (
        "nDCG at ``k``, binary relevance, the ideal ordering of the same list.",
        "\\frac{1}{Q} \\sum_q \\frac{DCG_q@k}{IDCG_q@k}",
    ),
    _mrr: (
        "Mean reciprocal rank of the first relevant candidate within the top ``k``.",
        "\\frac{1}{Q} \\sum_q \\max_{i \\in rel_q, i \\le k} 1 / i",
    ),
}
_MULTICLASS = ("``query_labels [Q]``, ``candidates_labels [Q, n]``", "[1, 0], [[0, 1, 1], [0, 0, 1]]")
_MULTILABEL = (
    "``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``",
    "[[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]]",
)
_RELEVANCE = {
    _plain: ("Multiclass: a candidate is relevant when its class is the query's.", *_MULTICLASS),
    _intersecting: ("Multilabel: a candidate is relevant when it shares a label with the query.", *_MULTILABEL),
    _agreeing: (
        "Multilabel: a candidate is relevant when it agrees with the query on any class,\n"
        "present or absent (autointent compares the binary vectors with ``==``).",
        *_MULTILABEL,
    ),
    _macro: (
        "Multilabel, macro: per class, the plain metric of the binarised labels (absence\n"
        "matches absence), then the mean over classes.",
        *_MULTILABEL,
    ),
}


def _public(name: str, score: Callable, relevance: Callable, example: float) -> Callable[..., Array]:
    """The public function ``name``: ``score`` of the ``relevance`` of the candidates."""

    def metric(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
        k = cutoff(k)
        return _run(score, relevance, *_inputs(query_labels, candidates_labels), k=k)

    summary, formula = _METRICS[score]
    rule, shapes, args = _RELEVANCE[relevance]
    metric.__name__ = metric.__qualname__ = name
    metric.__doc__ = (
        f"{summary}\n\n.. math:: {formula}\n\n{rule}\nShapes: {shapes}. ``None`` queries are left out.\n\n"
        f"Example:\n  >>> from jaxrank.compat.autointent import {name}\n"
        f"  >>> round(float({name}({args}, k=2)), 4)\n  {example}\n"
    )
    return metric


retrieval_map = _public("retrieval_map", _map, _plain, 0.75)
retrieval_map_intersecting = _public("retrieval_map_intersecting", _map, _intersecting, 0.75)
retrieval_map_macro = _public("retrieval_map_macro", _map, _macro, 0.375)
retrieval_hit_rate = _public("retrieval_hit_rate", _hit_rate, _plain, 1.0)
retrieval_hit_rate_intersecting = _public("retrieval_hit_rate_intersecting", _hit_rate, _intersecting, 1.0)
retrieval_hit_rate_macro = _public("retrieval_hit_rate_macro", _hit_rate, _macro, 0.5)
retrieval_precision = _public("retrieval_precision", _precision, _plain, 0.75)
retrieval_precision_intersecting = _public("retrieval_precision_intersecting", _precision, _intersecting, 0.5)
retrieval_precision_macro = _public("retrieval_precision_macro", _precision, _macro, 0.25)
retrieval_ndcg = _public("retrieval_ndcg", _ndcg, _plain, 0.6934)
retrieval_ndcg_intersecting = _public("retrieval_ndcg_intersecting", _ndcg, _agreeing, 0.8155)
retrieval_ndcg_macro = _public("retrieval_ndcg_macro", _ndcg, _macro, 0.4077)
retrieval_mrr = _public("retrieval_mrr", _mrr, _plain, 0.75)
retrieval_mrr_intersecting = _public("retrieval_mrr_intersecting", _mrr, _intersecting, 0.75)
retrieval_mrr_macro = _public("retrieval_mrr_macro", _mrr, _macro, 0.375)
