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

from functools import partial
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import metrics
from jaxrank.compat._common import average_precision_over_retrieved
from jaxrank.ranking import hard

Array = jax.Array

_STABLE = hard("stable")


def _inputs(query_labels, candidates_labels, k: Optional[int]) -> tuple[Array, Array]:
    if k is not None and (isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k <= 0):
        raise ValueError(f"k must be a positive integer or None, got {k!r}")
    if isinstance(query_labels, (list, tuple)) and any(q is None for q in query_labels):
        if len(query_labels) != len(candidates_labels):
            raise ValueError("query_labels and candidates_labels must have one entry per query")
        kept = [(q, c) for q, c in zip(query_labels, candidates_labels) if q is not None]
        if not kept:
            raise ValueError("every query label is None")
        query_labels, candidates_labels = (list(x) for x in zip(*kept))
    q, c = (x if isinstance(x, jax.Array) else jnp.asarray(np.asarray(x)) for x in (query_labels, candidates_labels))
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
    return jnp.mean(average_precision_over_retrieved(_positions(rel), rel, k=k, where=None, ranker=_STABLE))


def _hit_rate(rel, k):
    return jnp.mean(metrics.success(_positions(rel), rel, k=k, ranker=_STABLE))


def _precision(rel, k):
    return jnp.mean(metrics.precision(_positions(rel), rel, k=k, adaptive=True, ranker=_STABLE))


def _ndcg(rel, k):
    return jnp.mean(metrics.ndcg(_positions(rel), rel, k=k, ranker=_STABLE))


def _mrr(rel, k):
    return jnp.mean(metrics.reciprocal_rank(_positions(rel), rel, k=k, ranker=_STABLE))


def retrieval_map(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Mean average precision at ``k``, each AP over the relevant candidates within the top ``k``.

    .. math:: \\frac{1}{Q} \\sum_q \\frac{1}{|rel_q \\cap top_k|} \\sum_{i \\in rel_q, i \\le k} P@i

    Multiclass: a candidate is relevant when its class is the query's.
    Shapes: ``query_labels [Q]``, ``candidates_labels [Q, n]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_map
      >>> round(float(retrieval_map([1, 0], [[0, 1, 1], [0, 0, 1]], k=2)), 4)
      0.75
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_map, _plain, q, c, k=k)


def retrieval_map_intersecting(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Mean average precision at ``k``, each AP over the relevant candidates within the top ``k``.

    .. math:: \\frac{1}{Q} \\sum_q \\frac{1}{|rel_q \\cap top_k|} \\sum_{i \\in rel_q, i \\le k} P@i

    Multilabel: a candidate is relevant when it shares a label with the query.
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_map_intersecting
      >>> round(float(retrieval_map_intersecting([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      0.75
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_map, _intersecting, q, c, k=k)


def retrieval_map_macro(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Mean average precision at ``k``, each AP over the relevant candidates within the top ``k``.

    .. math:: \\frac{1}{Q} \\sum_q \\frac{1}{|rel_q \\cap top_k|} \\sum_{i \\in rel_q, i \\le k} P@i

    Multilabel, macro: per class, the plain metric of the binarised labels (absence
    matches absence), then the mean over classes.
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_map_macro
      >>> round(float(retrieval_map_macro([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      0.375
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_map, _macro, q, c, k=k)


def retrieval_hit_rate(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Hit rate at ``k``: the share of queries with a relevant candidate in the top ``k``.

    .. math:: \\frac{1}{Q} \\sum_q [\\exists i \\le k: i \\in rel_q]

    Multiclass: a candidate is relevant when its class is the query's.
    Shapes: ``query_labels [Q]``, ``candidates_labels [Q, n]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_hit_rate
      >>> round(float(retrieval_hit_rate([1, 0], [[0, 1, 1], [0, 0, 1]], k=2)), 4)
      1.0
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_hit_rate, _plain, q, c, k=k)


def retrieval_hit_rate_intersecting(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Hit rate at ``k``: the share of queries with a relevant candidate in the top ``k``.

    .. math:: \\frac{1}{Q} \\sum_q [\\exists i \\le k: i \\in rel_q]

    Multilabel: a candidate is relevant when it shares a label with the query.
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_hit_rate_intersecting
      >>> round(float(retrieval_hit_rate_intersecting([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      1.0
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_hit_rate, _intersecting, q, c, k=k)


def retrieval_hit_rate_macro(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Hit rate at ``k``: the share of queries with a relevant candidate in the top ``k``.

    .. math:: \\frac{1}{Q} \\sum_q [\\exists i \\le k: i \\in rel_q]

    Multilabel, macro: per class, the plain metric of the binarised labels (absence
    matches absence), then the mean over classes.
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_hit_rate_macro
      >>> round(float(retrieval_hit_rate_macro([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      0.5
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_hit_rate, _macro, q, c, k=k)


def retrieval_precision(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Precision at ``k``: relevant candidates in the top ``k`` over ``min(k, n)``.

    .. math:: \\frac{1}{Q} \\sum_q \\frac{|rel_q \\cap top_k|}{\\min(k, n)}

    Multiclass: a candidate is relevant when its class is the query's.
    Shapes: ``query_labels [Q]``, ``candidates_labels [Q, n]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_precision
      >>> round(float(retrieval_precision([1, 0], [[0, 1, 1], [0, 0, 1]], k=2)), 4)
      0.75
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_precision, _plain, q, c, k=k)


def retrieval_precision_intersecting(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Precision at ``k``: relevant candidates in the top ``k`` over ``min(k, n)``.

    .. math:: \\frac{1}{Q} \\sum_q \\frac{|rel_q \\cap top_k|}{\\min(k, n)}

    Multilabel: a candidate is relevant when it shares a label with the query.
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_precision_intersecting
      >>> round(float(retrieval_precision_intersecting([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      0.5
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_precision, _intersecting, q, c, k=k)


def retrieval_precision_macro(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Precision at ``k``: relevant candidates in the top ``k`` over ``min(k, n)``.

    .. math:: \\frac{1}{Q} \\sum_q \\frac{|rel_q \\cap top_k|}{\\min(k, n)}

    Multilabel, macro: per class, the plain metric of the binarised labels (absence
    matches absence), then the mean over classes.
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_precision_macro
      >>> round(float(retrieval_precision_macro([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      0.25
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_precision, _macro, q, c, k=k)


def retrieval_ndcg(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """nDCG at ``k``, binary relevance, the ideal ordering of the same list.

    .. math:: \\frac{1}{Q} \\sum_q \\frac{DCG_q@k}{IDCG_q@k}

    Multiclass: a candidate is relevant when its class is the query's.
    Shapes: ``query_labels [Q]``, ``candidates_labels [Q, n]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_ndcg
      >>> round(float(retrieval_ndcg([1, 0], [[0, 1, 1], [0, 0, 1]], k=2)), 4)
      0.6934
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_ndcg, _plain, q, c, k=k)


def retrieval_ndcg_intersecting(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """nDCG at ``k``, binary relevance, the ideal ordering of the same list.

    .. math:: \\frac{1}{Q} \\sum_q \\frac{DCG_q@k}{IDCG_q@k}

    Multilabel: a candidate is relevant when it agrees with the query on any class,
    present or absent (autointent compares the binary vectors with ``==``).
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_ndcg_intersecting
      >>> round(float(retrieval_ndcg_intersecting([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      0.8155
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_ndcg, _agreeing, q, c, k=k)


def retrieval_ndcg_macro(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """nDCG at ``k``, binary relevance, the ideal ordering of the same list.

    .. math:: \\frac{1}{Q} \\sum_q \\frac{DCG_q@k}{IDCG_q@k}

    Multilabel, macro: per class, the plain metric of the binarised labels (absence
    matches absence), then the mean over classes.
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_ndcg_macro
      >>> round(float(retrieval_ndcg_macro([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      0.4077
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_ndcg, _macro, q, c, k=k)


def retrieval_mrr(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Mean reciprocal rank of the first relevant candidate within the top ``k``.

    .. math:: \\frac{1}{Q} \\sum_q \\max_{i \\in rel_q, i \\le k} 1 / i

    Multiclass: a candidate is relevant when its class is the query's.
    Shapes: ``query_labels [Q]``, ``candidates_labels [Q, n]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_mrr
      >>> round(float(retrieval_mrr([1, 0], [[0, 1, 1], [0, 0, 1]], k=2)), 4)
      0.75
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_mrr, _plain, q, c, k=k)


def retrieval_mrr_intersecting(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Mean reciprocal rank of the first relevant candidate within the top ``k``.

    .. math:: \\frac{1}{Q} \\sum_q \\max_{i \\in rel_q, i \\le k} 1 / i

    Multilabel: a candidate is relevant when it shares a label with the query.
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_mrr_intersecting
      >>> round(float(retrieval_mrr_intersecting([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      0.75
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_mrr, _intersecting, q, c, k=k)


def retrieval_mrr_macro(query_labels, candidates_labels, k: Optional[int] = None) -> Array:
    """Mean reciprocal rank of the first relevant candidate within the top ``k``.

    .. math:: \\frac{1}{Q} \\sum_q \\max_{i \\in rel_q, i \\le k} 1 / i

    Multilabel, macro: per class, the plain metric of the binarised labels (absence
    matches absence), then the mean over classes.
    Shapes: ``query_labels [Q, C]``, ``candidates_labels [Q, n, C]``. ``None`` queries are left out.

    Example:
      >>> from jaxrank.compat.autointent import retrieval_mrr_macro
      >>> round(float(retrieval_mrr_macro([[1, 0], [1, 1]], [[[0, 1], [1, 1]], [[1, 0], [0, 0]]], k=2)), 4)
      0.375
    """
    q, c = _inputs(query_labels, candidates_labels, k)
    return _run(_mrr, _macro, q, c, k=k)
