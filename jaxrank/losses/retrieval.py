"""A metric loss for retrieval models: queries against the batch's documents, or a corpus.

A dual encoder scores every query against every candidate document (the batch's own
positives, mined hard negatives, or a whole corpus) and knows each query's relevant
candidates by index. :func:`retrieval_loss` is ``1 - metric`` of those lists with a smooth
ranker, computed a block of queries at a time with the block's scores recomputed in the
backward pass, so the ``[Q, M]`` score matrix is never held: the relaxation is needed at
the relevant candidates only (:mod:`jaxrank.ranking.positives`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks, metrics
from jaxrank.losses._metric import _smooth_ranker
from jaxrank.metrics.positives import evaluate
from jaxrank.ranking.backend import LIST_STATISTICS, scores_per_block
from jaxrank.ranking.pairwise import bound, pooled_temperature
from jaxrank.ranking.positives import Positives
from jaxrank.ranking.positives import positives as _positives

# the three laws at every score scale and list length (docs/soft.md): the temperature
# follows each list's top gaps, so cosines and cosines over a temperature give one loss;
# four gaps: chosen on validation queries (docs/reports/defaults.md)
_DEFAULT_RANKER = bound(4.0, top=10)
_IN_SCORE_UNITS = bound(1.0)


def retrieval_loss(
    queries,
    documents,
    positives,
    *,
    grades=None,
    metric: Callable = metrics.ndcg,
    temperature: Optional[float] = None,
    ranker=None,
    k=None,
    where=None,
    block: Optional[int] = None,
    axis_name: Optional[str] = None,
    per_positive: bool = True,
    log: bool = False,
    **metric_kwargs,
) -> jax.Array:
    """``1 - metric`` of each query's list of documents, ranked by ``queries @ documents.T``.

    .. math:: \\ell_q = \\frac{1}{\\sum_i g_i} \\sum_{i \\in \\text{positives}_q} g_i
        \\Big(1 - M\\big(r_i = 1 + \\textstyle\\sum_{j \\notin \\text{positives}_q}
        \\log_2(1 + e^{(s_{qj} - s_{qi})/T})\\big)\\Big),
        \\qquad s_{qj} = \\langle e_q, d_j\\rangle

    At its defaults: each (query, relevant candidate) pair is a list, as in InfoNCE (the
    relevant candidate against the query's candidates that are not relevant), its rank
    bounded above by the pairwise logistic loss (:func:`jaxrank.bound`: every negative above
    it keeps a gradient, as InfoNCE's softmax gives), the metric (nDCG) over the whole list,
    and a query's loss its pairs' mean weighted by the grades ``g``. ``T``: ``temperature``
    in score units, as InfoNCE's (cosines over ``T``); by default four times the mean gap
    among the top 11 scores of each query's list, so that cosines and cosines over any
    temperature give the same loss, which keeps the three laws of a relaxation
    (docs/soft.md). docs/retrieval_loss.md: how it trains against InfoNCE.

    Args:
      queries: ``[Q, d]`` query embeddings.
      documents: ``[M, d]`` candidate embeddings, the same list for every query (the
        batch's documents and any hard negatives, or a corpus); under ``shard_map`` with
        ``axis_name``, this device's block of them (device ``i`` holds candidates
        ``i * M .. (i + 1) * M - 1``).
      positives: ``int[Q, r]``, the indices of each query's relevant candidates in the
        whole list (``-1`` pads), or :func:`jaxrank.positives` (then no ``grades``). A
        candidate relevant to several queries is named by each; it is a negative for the
        others, as in InfoNCE. A repeated index within a query counts once.
      grades: ``[Q, r]`` their labels (default 1).
      metric: a metric of :mod:`jaxrank.metrics` (default nDCG).
      temperature: InfoNCE's temperature, in score units (a number, or a traced scalar: a
        learned temperature): the ranks are ``bound(temperature)``'s. None (default):
        ``bound(4.0, top=10)``'s, whose temperature follows each list's top scores. Not with
        ``ranker``.
      ranker: a smooth ranker (default :func:`~jaxrank.bound`, above). ``bound``,
        ``laplace`` (O(Q M r)), ``softsort`` with a cutoff and ``approx`` without one rank
        the relevant candidates alone (O(Q M depth) / O(Q M r)); any other ranker gets each
        block's dense lists.
      k: the metric's cutoff (default None: the whole list, so that a relevant candidate
        anywhere in it is pushed up; a cutoff takes the gradient of bounds past it away).
      where: ``bool[M]`` or ``bool[Q, M]``, the candidates of each list (a corpus's
        padding, or a query's known false negatives).
      block: queries scored at once (default: as many as keep a block's scores near
        :func:`jaxrank.ranking.backend.scores_per_block`, 2^20 on CPU, 2^27 elsewhere, and at
        least 32, since each block reads every document); must divide ``Q``.
      axis_name: the ``shard_map`` axis the documents are sharded over; each device scores
        its own block and only per-query sums and the top ``k`` cross devices. The result
        equals one device's.
      per_positive: each (query, relevant candidate) pair is its own list (default), the
        query's other relevant candidates left out of it, and a query's loss is its pairs'
        losses weighted by their grades: with ``bound``, whose ranks count a relevant
        candidate far above another as many places, this keeps the relevant candidates
        from being pulled together. False: one list per query, every relevant candidate in
        it (the metric's own treatment of several relevant items). A ranker whose
        temperature follows the list takes it from the query's whole list.
      log: each list's loss is ``-log(metric)`` (the metric's log-loss, an upper bound of
        ``1 - metric``) instead of ``1 - metric``: it grows without bound as a relevant
        candidate falls, so one far down keeps its gradient (with ``reciprocal_rank``, the
        log of the bound rank, as InfoNCE's ``-log p`` is the log of a soft rank). A query without a
        relevant candidate: 0.
      **metric_kwargs: passed to the metric (``gain``, ``rel``, ...).

    Returns:
      ``[Q]``, each query's loss.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank import losses
      >>> q = 3 * jnp.eye(4, 8)
      >>> d = jnp.concatenate([q, -q])  # query i scores 9 with document i, 0 or -9 with the others
      >>> [round(float(v), 4) for v in losses.retrieval_loss(q, d, jnp.arange(4)[:, None])]  # first
      [0.5819, 0.5819, 0.5819, 0.5819]
      >>> [round(float(v), 4) for v in losses.retrieval_loss(q, d, [[1], [0], [3], [2]])]  # tied with five others, 9 below one
      [0.6887, 0.6887, 0.6887, 0.6887]
      >>> [round(float(v), 4) for v in losses.retrieval_loss(10 * q, d, [[1], [0], [3], [2]])]  # any scale: the same
      [0.6887, 0.6887, 0.6887, 0.6887]
      >>> [round(float(v), 4) for v in losses.retrieval_loss(q, d, [[1], [0], [3], [2]], temperature=0.1)]  # 90 T below one
      [0.8591, 0.8591, 0.8591, 0.8591]
      >>> [round(float(v), 4) for v in losses.retrieval_loss(q, d, [[1], [0], [3], [2]], log=True)]  # -log(1 - 0.6887)
      [1.167, 1.167, 1.167, 1.167]
    """
    queries, documents = _checks.embeddings(queries, documents, "documents", "M")
    n_queries, local = queries.shape[0], documents.shape[0]
    pos = _as_positives(positives, grades, n_queries)
    if temperature is not None:
        if ranker is not None:
            raise ValueError("temperature sets the default ranker's; give it to the ranker passed instead")
        if isinstance(temperature, (int, float)):
            _checks.positive(temperature, "temperature")
        # the scores over T (a traced T too: a tuned or learned one) and bounds in their units
        queries = queries / jnp.asarray(temperature, queries.dtype)
        ranker = _IN_SCORE_UNITS
    ranker = _DEFAULT_RANKER if ranker is None else ranker
    _smooth_ranker(ranker)
    if where is not None:
        where = jnp.asarray(where)
        if where.shape not in ((local,), (n_queries, local)):
            raise ValueError(
                f"where must have shape [M] = ({local},) or [Q, M] = ({n_queries}, {local}), got {where.shape}"
            )
        where = where.astype(bool)
    # a mask shared by every query stays [M] (broadcast in each block, not [Q, M] up front)
    shared = where if where is not None and where.ndim == 1 else None
    per_query = where if where is not None and where.ndim == 2 else None
    if axis_name is None:
        _checks.indices_within(pos.indices, local, "positives")
    # one positive a query: its pair's list is the query's (the same values, fewer passes)
    per_positive = per_positive and pos.indices.shape[1] > 1
    # a block of queries holds one list per pair with per_positive
    block = _block(block, n_queries, local * (pos.indices.shape[1] if per_positive else 1))
    if not getattr(ranker, "per_list", True):  # one temperature for every query's list
        blocks = functools.partial(_blocks, n_queries // block, block)
        queries = queries / _pooled_temperature(ranker, queries, documents, blocks, shared, per_query, axis_name)
        ranker = ranker.at_unit_temperature()
    kwargs = dict(metric_kwargs, k=k, ranker=ranker)

    # the block's scores are recomputed in the backward pass; its lists' statistics are kept
    @functools.partial(jax.checkpoint, policy=jax.checkpoint_policies.save_only_these_names(LIST_STATISTICS))
    def per_block(inputs):
        q, idx, g, w = inputs
        scores = jnp.matmul(q, documents.T, preferred_element_type=jnp.float32)
        w = shared if w is None else w
        if per_positive:
            return _per_positive(metric, scores, Positives(idx, g), w, kwargs, axis_name, log)
        given = dict(kwargs) if w is None else dict(kwargs, where=w)
        values = _list_loss(evaluate(metric, scores, Positives(idx, g), given, axis_name), log)
        return jnp.where(jnp.any((idx >= 0) & (g > 0), axis=-1), values, 0.0) if log else values

    blocks = functools.partial(_blocks, n_queries // block, block)
    out = lax.map(per_block, (blocks(queries), blocks(pos.indices), blocks(pos.grades), blocks(per_query)))
    return out.reshape(n_queries)


def _blocks(n_blocks: int, block: int, x):
    return None if x is None else x.reshape((n_blocks, block) + x.shape[1:])


def _pooled_temperature(ranker, queries, documents, blocks, shared, per_query, axis_name) -> jax.Array:
    """``ranker``'s one temperature for the whole batch (:func:`jaxrank.bound` with
    ``per_list=False``): its lists' temperatures pooled over every query, a block of queries
    scored at a time, held constant in the gradient."""
    queries, documents = lax.stop_gradient(queries), lax.stop_gradient(documents)

    def per_block(inputs):
        q, w = inputs
        scores = jnp.matmul(q, documents.T, preferred_element_type=jnp.float32)
        w = shared if w is None else w
        return ranker.list_temperatures(scores, None if w is None else jnp.broadcast_to(w, scores.shape), axis_name)

    scale, m = lax.map(per_block, (blocks(queries), blocks(per_query)))
    return pooled_temperature(scale.reshape(-1, 1), m.reshape(-1, 1))[0, 0]


def _list_loss(metric: jax.Array, log: bool) -> jax.Array:
    """``1 - metric``, or ``-log(metric)`` (``metric`` kept above the dtype's smallest normal
    number: a metric of 0 gives a large finite loss without a gradient)."""
    if not log:
        return 1 - metric
    return -jnp.log(jnp.maximum(metric, jnp.finfo(metric.dtype).tiny))


def _per_positive(
    metric, scores, pos: Positives, where, kwargs: dict, axis_name: Optional[str], log: bool = False
) -> jax.Array:
    """``[B]``: the grade-weighted mean over each query's pairs of ``1 - metric`` (or
    ``-log(metric)``) of the pair's list, ``scores[B, M]`` with the query's other relevant
    candidates masked out."""
    b, r = pos.indices.shape
    local = scores.shape[-1]
    over_temperature = getattr(kwargs["ranker"], "over_temperature", None)
    if over_temperature is not None:  # the temperature of the query's whole list, shared by its pairs
        scores, ranker = over_temperature(
            scores, None if where is None else jnp.broadcast_to(where, scores.shape), axis_name
        )
        kwargs = dict(kwargs, ranker=ranker)
    first = 0 if axis_name is None else lax.axis_index(axis_name) * local  # global index of this block
    own = pos.valid[..., None] & (pos.indices[..., None] == first + jnp.arange(local))  # [B, r, M]
    relevant = jnp.any(own & (pos.grades > 0)[..., None], axis=1, keepdims=True)  # grade 0: a negative
    keep = ~relevant | own
    if where is not None:
        keep &= jnp.broadcast_to(where, (b, local))[:, None, :]
    pairs = Positives(pos.indices.reshape(b * r, 1), pos.grades.reshape(b * r, 1))
    lists = jnp.broadcast_to(scores[:, None, :], (b, r, local)).reshape(b * r, local)
    values = evaluate(metric, lists, pairs, dict(kwargs, where=keep.reshape(b * r, local)), axis_name)
    losses = _list_loss(values, log)
    weights = jnp.where(pos.valid, pos.grades, 0).astype(losses.dtype)
    total = jnp.sum(weights, axis=-1)
    weighted = jnp.sum(weights * losses.reshape(b, r), axis=-1) / jnp.where(total > 0, total, 1)
    return jnp.where(total > 0, weighted, 0.0 if log else 1.0)  # no relevant candidate: the metric's 0


def _as_positives(positives, grades, n_queries: int) -> Positives:
    if isinstance(positives, Positives):
        if grades is not None:
            raise ValueError("grades: give them inside jaxrank.positives(indices, grades), not beside it")
        pos = positives
    else:
        positives = jnp.asarray(positives)
        if positives.ndim != 2:
            raise ValueError(f"positives must be int[Q, r] (-1 pads), got shape {positives.shape}")
        pos = _positives(positives, grades)
    if pos.indices.ndim != 2 or pos.indices.shape[0] != n_queries:
        raise ValueError(f"positives must be [Q, r] with Q = {n_queries} (the queries), got {pos.indices.shape}")
    return pos


def _block(block: Optional[int], n_queries: int, local: int) -> int:
    if block is None:
        # at least 32 queries: each block reads every document once
        target = max(32, scores_per_block() // max(local, 1))
        return max(b for b in range(1, min(target, n_queries) + 1) if n_queries % b == 0)
    block = _checks.positive_int(block, "block")
    if n_queries % block:
        raise ValueError(f"block must divide the number of queries {n_queries}, got {block}")
    return block
