"""Dense retrieval evaluation without the query x corpus matrix.

:func:`search` finds the ``k`` documents of highest inner product for every
query, one block of the corpus at a time, keeping only a running top-``k``;
:func:`join` reads the labels of the retrieved ids from the qrels. Every metric
then applies to the result, with ``judgments=`` for trec_eval semantics::

    scores, ids = jaxrank.retrieval.search(queries, corpus, k=100)
    labels, judged = jaxrank.retrieval.join(ids, judged_ids, judged_labels)
    jaxrank.ndcg(scores, labels, k=10, where=ids >= 0,
                 judgments=judged_labels, judgments_where=judged_ids >= 0)

The top-``k`` of :func:`search` is *retrieval*: it chooses which documents
enter the list. Ranking that list for a metric is the metric's business, through
the ranking primitive (:func:`jaxrank.hard` or a soft ranker); the order that
:func:`search` returns (score descending, lower id first) is the order the
stable hard ranker gives the same scores, so the two agree.

Memory and sharding are described in ``docs/scale.md``.
"""

from __future__ import annotations

from functools import partial
from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from jaxrank import _checks

Array = jax.Array
AxisName = Union[str, tuple[str, ...]]

# Scores held per block: Q x block elements. 2**24 float32 (64 MiB) keeps the
# block's matrix product large enough to run at full speed and its top-k cheap
# to merge; docs/scale.md times it beside smaller and larger blocks.
_BLOCK_ELEMENTS = 1 << 24
_MIN_BLOCK, _MAX_BLOCK = 1024, 65536
_ID_DTYPE = jnp.int32


def _default_block(num_queries: int, k: int) -> int:
    block = _BLOCK_ELEMENTS // max(num_queries, 1)
    block = min(max(block, _MIN_BLOCK), _MAX_BLOCK)
    return max(block, k)


def _check_search_args(queries, corpus, k, block_size, recall_target):
    for name, x, shape in (("queries", queries, "[Q, d]"), ("corpus", corpus, "[N, d]")):
        if x.ndim != 2:
            raise ValueError(f"{name} must have shape {shape}, got {x.shape}")
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise ValueError(f"{name} must be floating point, got {x.dtype}")
    if queries.shape[1] != corpus.shape[1]:
        raise ValueError(
            f"queries and corpus must share the embedding size d, got {queries.shape[1]} and {corpus.shape[1]}"
        )
    _checks.positive_int(k, "k")
    if block_size is not None:
        _checks.positive_int(block_size, "block_size")
    if recall_target is not None:
        _checks.in_range(recall_target, "recall_target", 0, 1, closed_high=True)
    if corpus.shape[0] >= np.iinfo(np.int32).max:
        raise ValueError(f"corpus has {corpus.shape[0]} rows; ids are int32")


def _scores(queries: Array, docs: Array, precision) -> Array:
    # Half-precision embeddings accumulate in float32 (the scores come back float32).
    out = jnp.promote_types(jnp.result_type(queries, docs), jnp.float32)
    return lax.dot_general(queries, docs, (((1,), (1,)), ((), ())), precision=precision, preferred_element_type=out)


def _block_top(scores: Array, k: int, recall_target: Optional[float], total: int):
    """Top-``k`` of one block of scores (positions within the block)."""
    k = min(k, scores.shape[-1])
    if recall_target is None:
        return lax.top_k(scores, k)
    return lax.approx_max_k(scores, k, recall_target=recall_target, reduction_input_size_override=total)


def _merge(best: Array, best_ids: Array, scores: Array, offset, k: int, recall_target: Optional[float], total: int):
    """Top-``k`` of the running ``best`` followed by a block's ``scores`` (block ids from ``offset``).

    ``lax.top_k`` puts the lower position first among equal values; every id in
    ``best`` is lower than every id of the block and ``best`` is already in
    (score descending, id ascending) order, so the result is in that order too.
    """
    if recall_target is not None:
        scores, pos = _block_top(scores, k, recall_target, total)
        candidates = jnp.concatenate([best_ids, pos.astype(_ID_DTYPE) + offset], axis=-1)
        values, at = lax.top_k(jnp.concatenate([best, scores], axis=-1), k)
        return values, jnp.take_along_axis(candidates, at, axis=-1)
    # Exact: one top-k over the running list and the whole block (faster on CPU than a
    # top-k of the block followed by a merge of two short lists; docs/scale.md).
    values, at = lax.top_k(jnp.concatenate([best, scores], axis=-1), k)
    from_best = jnp.take_along_axis(best_ids, jnp.minimum(at, k - 1), axis=-1)
    return values, jnp.where(at < k, from_best, at.astype(_ID_DTYPE) - k + offset)


def _local_search(queries, corpus, k: int, block: int, recall_target, precision, total: int):
    """Top-``min(k, N)`` over ``corpus`` [N, d], ids local to it, in blocks of ``block`` rows."""
    n = corpus.shape[0]
    kk = min(k, n)
    # The first block holds at least k rows, so the running top-k starts full of
    # real documents and no filler value ever competes with a real score.
    first = min(n, max(block, kk))
    values, ids = _block_top(_scores(queries, corpus[:first], precision), kk, recall_target, total)
    ids = ids.astype(_ID_DTYPE)
    full = (n - first) // block

    def step(offset, best, best_ids, rows):
        docs = lax.dynamic_slice_in_dim(corpus, offset, rows)
        return _merge(best, best_ids, _scores(queries, docs, precision), offset, kk, recall_target, total)

    if full:

        def body(i, carry):
            return step(first + i * block, *carry, block)

        values, ids = lax.fori_loop(0, full, body, (values, ids))
    rest = n - first - full * block
    if rest:  # the ragged last block: its own static shape, no padding rows
        values, ids = step(first + full * block, values, ids, rest)
    return values, ids


def _pad_to_k(values: Array, ids: Array, k: int):
    missing = k - values.shape[-1]
    if missing <= 0:
        return values, ids
    q = values.shape[0]
    return (
        jnp.concatenate([values, jnp.full((q, missing), -jnp.inf, values.dtype)], axis=-1),
        jnp.concatenate([ids, jnp.full((q, missing), -1, ids.dtype)], axis=-1),
    )


def _shard_search(queries, corpus, k: int, block: int, recall_target, precision, axis_name, total: int):
    """Inside ``shard_map``: search the local rows, then merge the shards' top-k."""
    local_n = corpus.shape[0]
    values, ids = _local_search(queries, corpus, k, block, recall_target, precision, total)
    ids = ids + lax.axis_index(axis_name).astype(_ID_DTYPE) * local_n
    # [S, Q, k'] in shard order: shard s holds lower ids than shard s + 1.
    values = lax.all_gather(values, axis_name)
    ids = lax.all_gather(ids, axis_name)
    shards, q, kk = values.shape
    values = jnp.moveaxis(values, 0, 1).reshape(q, shards * kk)
    ids = jnp.moveaxis(ids, 0, 1).reshape(q, shards * kk)
    # Every candidate is a real document, in (shard, position) order, so the
    # stable top-k keeps the (score descending, id ascending) order.
    values, pos = lax.top_k(values, min(k, shards * kk))
    return _pad_to_k(values, jnp.take_along_axis(ids, pos, axis=-1), k)


@partial(jax.jit, static_argnames=("k", "block", "recall_target", "precision"))
def _search_jit(queries, corpus, k, block, recall_target, precision):
    values, ids = _local_search(queries, corpus, k, block, recall_target, precision, corpus.shape[0])
    return _pad_to_k(values, ids, k)


def _corpus_mesh_axes(corpus):
    """(mesh, axes) when ``corpus`` is a concrete array whose rows are split by a NamedSharding."""
    sharding = getattr(corpus, "sharding", None)
    if isinstance(corpus, jax.core.Tracer) or not isinstance(sharding, NamedSharding):
        return None
    spec = tuple(sharding.spec) + (None, None)
    if spec[1] is not None:
        raise ValueError(f"corpus may be sharded over its rows only, got PartitionSpec {sharding.spec}")
    if spec[0] is None:
        return None
    axes = spec[0] if isinstance(spec[0], tuple) else (spec[0],)
    shards = int(np.prod([sharding.mesh.shape[a] for a in axes]))
    if shards == 1:
        return None
    if corpus.shape[0] % shards:
        raise ValueError(f"corpus rows ({corpus.shape[0]}) must divide evenly over its {shards} shards")
    return sharding.mesh, axes


@partial(jax.jit, static_argnames=("k", "block", "recall_target", "precision", "mesh", "axes"))
def _sharded_jit(queries, corpus, k, block, recall_target, precision, mesh, axes):
    axis = axes if len(axes) > 1 else axes[0]
    f = partial(
        _shard_search,
        k=k,
        block=block,
        recall_target=recall_target,
        precision=precision,
        axis_name=axis,
        total=corpus.shape[0],
    )
    return jax.shard_map(
        f,
        mesh=mesh,
        in_specs=(PartitionSpec(), PartitionSpec(axis, None)),
        out_specs=(PartitionSpec(), PartitionSpec()),
        check_vma=False,
    )(queries, corpus)


def search(
    queries,
    corpus,
    k: int,
    *,
    block_size: Optional[int] = None,
    recall_target: Optional[float] = None,
    axis_name: Optional[AxisName] = None,
    precision=None,
) -> tuple[Array, Array]:
    """Top-``k`` documents by inner product, one corpus block at a time.

    .. math:: \\mathrm{ids}_q = \\operatorname{top\\text{-}k}_{j}\\; \\langle q, c_j \\rangle

    The corpus is read in blocks of ``block_size`` rows; each block's scores
    ``[Q, block]`` are reduced to their top-``k`` and merged into a running
    top-``k``, so memory is :math:`O(Q (k + block))` and the ``[Q, N]`` matrix
    never exists.

    Args:
      queries: ``[Q, d]`` embeddings (float; half precision accumulates in float32).
      corpus: ``[N, d]`` embeddings. A concrete ``jax.Array`` whose rows are split
        over devices by a ``NamedSharding`` (``PartitionSpec("x")`` or
        ``PartitionSpec(("x", "y"))``) is searched where it lies: each device
        searches its shard, then the shards' top-``k`` lists are gathered
        (``Q x k`` per device) and merged. The rows must divide evenly.
      k: number of documents per query.
      block_size: corpus rows per block (default: about ``2**24 / Q``, at least
        ``k``, between 1024 and 65536). The last block may be shorter; no padding
        rows are added.
      recall_target: ``None`` for the exact top-``k``; else each block's top-``k``
        comes from ``lax.approx_max_k`` with this recall target (TPU runs its
        approximate algorithm; the CPU and GPU backends run an exact top-``k``, so
        the result is exact there). The merges stay exact.
      axis_name: when called inside ``jax.shard_map`` with the corpus rows split
        over this mesh axis (or tuple of axes), each device passes its own rows
        and gets the merged global result, ids counted over the whole corpus.
      precision: ``lax.dot_general`` precision of the scores (``None``: JAX's
        default, which is reduced precision for float32 on TPU and on some GPUs;
        pass ``"highest"`` there for float32 products).

    Returns:
      ``(scores [Q, k], ids [Q, k])``, scores descending, equal scores in
      ascending id order (the order :func:`jaxrank.hard`'s stable ties give).
      Ids are int32 rows of ``corpus``. When ``k > N`` the last ``k - N``
      columns are filler: id ``-1``, score ``-inf``; pass ``where=ids >= 0`` to
      a metric. A NaN score ranks above ``+inf``, as in ``lax.top_k``.

    This top-``k`` selects which documents are retrieved; it is not the ranking
    of a list for a metric, which goes through the ranking primitive.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.retrieval import search
      >>> scores, ids = search(jnp.array([[1.0, 0.0]]), jnp.array([[0.5, 0.0], [2.0, 1.0], [0.5, 9.0]]), 2)
      >>> ids.tolist(), scores.tolist()
      ([[1, 0]], [[2.0, 0.5]])
    """
    queries = jnp.asarray(queries)
    corpus = corpus if isinstance(corpus, jax.Array) else jnp.asarray(corpus)
    _check_search_args(queries, corpus, k, block_size, recall_target)
    k = int(k)
    recall_target = None if recall_target is None else float(recall_target)
    block = int(block_size) if block_size is not None else _default_block(queries.shape[0], k)
    if axis_name is not None:
        total = corpus.shape[0] * lax.axis_size(axis_name)
        return _shard_search(queries, corpus, k, block, recall_target, precision, axis_name, total)
    placed = _corpus_mesh_axes(corpus)
    if placed is not None:
        mesh, axes = placed
        return _sharded_jit(queries, corpus, k, block, recall_target, precision, mesh, axes)
    return _search_jit(queries, corpus, k, block, recall_target, precision)


# Above this many comparisons per query (k x m), join sorts the judged ids and
# binary-searches them; below it, it compares every pair (docs/scale.md).
_COMPARE_MAX = 1 << 15


def join(ids, judged_ids, judged_labels, judged_where=None) -> tuple[Array, Array]:
    """Labels of retrieved ids, read from the qrels as padded id arrays.

    .. math:: \\mathrm{labels}_{qi} = y_{qj} \\text{ where } \\mathrm{judged\\_ids}_{qj} = \\mathrm{ids}_{qi},
        \\text{ else } 0

    Args:
      ids: ``[Q, k]`` retrieved ids (from :func:`search`); negative = padding.
      judged_ids: ``[Q, m]`` ids of each query's judged documents; ``-1``
        (any negative) = padding. Ids should be unique within a query; if one
        repeats, its first occurrence counts.
      judged_labels: ``[Q, m]`` their labels (any dtype; kept).
      judged_where: optional ``[Q, m]`` bool mask of the valid judgments
        (combined with ``judged_ids >= 0``).

    Returns:
      ``(labels [Q, k], judged [Q, k])``: the label of each retrieved document
      (0 when unjudged or padding) and whether it is judged (bpref, infAP and
      Judged@k need that). Jittable. Small ``k x m`` compares every pair; larger
      ones sort each query's judged ids and binary-search them (a lookup
      structure, not a ranking).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.retrieval import join
      >>> labels, judged = join(jnp.array([[7, 3, 5]]), jnp.array([[3, 7, -1]]), jnp.array([[2, 0, 0]]))
      >>> labels.tolist(), judged.tolist()
      ([[0, 2, 0]], [[True, True, False]])
    """
    ids = jnp.asarray(ids)
    judged_ids = jnp.asarray(judged_ids)
    judged_labels = jnp.asarray(judged_labels)
    if ids.ndim != 2:
        raise ValueError(f"ids must have shape [Q, k], got {ids.shape}")
    if judged_ids.ndim != 2 or judged_ids.shape[0] != ids.shape[0]:
        raise ValueError(f"judged_ids must have shape [{ids.shape[0]}, m], got {judged_ids.shape}")
    _checks.same_shape(judged_labels, judged_ids.shape, "judged_labels", "judged_ids")
    for name, x in (("ids", ids), ("judged_ids", judged_ids)):
        if not jnp.issubdtype(x.dtype, jnp.integer):
            raise ValueError(f"{name} must be integers, got {x.dtype}")
    if judged_where is not None:
        judged_where = _checks.same_shape(judged_where, judged_ids.shape, "judged_where", "judged_ids").astype(bool)
    by_sort = ids.shape[1] * judged_ids.shape[1] > _COMPARE_MAX
    return _join_jit(ids, judged_ids, judged_labels, judged_where, by_sort)


@partial(jax.jit, static_argnames=("by_sort",))
def _join_jit(ids, judged_ids, judged_labels, judged_where, by_sort: bool):
    valid = judged_ids >= 0
    if judged_where is not None:
        valid = valid & judged_where
    dtype = jnp.promote_types(ids.dtype, judged_ids.dtype)
    ids, judged_ids = ids.astype(dtype), judged_ids.astype(dtype)
    if judged_ids.shape[1] == 0:
        return jnp.zeros(ids.shape, judged_labels.dtype), jnp.zeros(ids.shape, bool)
    if by_sort:
        pos, found = _lookup_sorted(ids, judged_ids, valid)
    else:
        pos, found = _lookup_compare(ids, judged_ids, valid)
    found = found & (ids >= 0)
    labels = jnp.take_along_axis(judged_labels, pos, axis=-1)
    return jnp.where(found, labels, jnp.zeros((), judged_labels.dtype)), found


def _lookup_compare(ids, judged_ids, valid):
    match = (ids[:, :, None] == judged_ids[:, None, :]) & valid[:, None, :]
    return jnp.argmax(match, axis=-1), jnp.any(match, axis=-1)


def _lookup_sorted(ids, judged_ids, valid):
    m = judged_ids.shape[1]
    # Invalid judgments move past every real id; a stable sort keeps the first
    # of repeated ids first, which searchsorted(side="left") then finds.
    keys = jnp.where(valid, judged_ids, jnp.iinfo(judged_ids.dtype).max)
    order = jnp.argsort(keys, axis=-1, stable=True)
    sorted_keys = jnp.take_along_axis(keys, order, axis=-1)
    at = jax.vmap(partial(jnp.searchsorted, side="left"))(sorted_keys, ids)
    at = jnp.minimum(at, m - 1)
    hit = jnp.take_along_axis(sorted_keys, at, axis=-1) == ids
    found = hit & jnp.take_along_axis(jnp.take_along_axis(valid, order, axis=-1), at, axis=-1)
    return jnp.take_along_axis(order, at, axis=-1), found
