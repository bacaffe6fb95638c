"""Blockwise exact top-k search over a corpus (sharded or not), never the query x corpus matrix;
the package docstring (:mod:`jaxrank.retrieval`) has the recipe."""

from __future__ import annotations

import math
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

# Scores held per block (query tile x block elements) and query rows per tile, by the
# platform that holds the corpus. On CPU, 2**22 float32 (16 MiB) stay in the
# last-level cache between the matrix product that writes them and the screening that
# reads them, which runs both faster than larger blocks do; on GPU each block costs a
# few kernel launches, so blocks and tiles are larger (docs/scale.md and
# docs/reports/accelerators.md times the alternatives). One full search per tile.
_BLOCK_ELEMENTS = {"cpu": 1 << 22, "gpu": 1 << 25}
_QUERY_TILE = {"cpu": 512, "gpu": 1024}
_MIN_BLOCK, _MAX_BLOCK = 1024, 65536
_ID_DTYPE = jnp.int32
# Columns per group whose maximum screens a block against the running k-th best: wide
# groups for a short top-k (fewer maxima to select from), narrow ones for a long top-k
# (a smaller pool of candidates; docs/scale.md has the measurement).
_GROUP = 32
_GROUP_LONG_K = 8
_LONG_K = 16


def _group_size(k: int) -> int:
    return _GROUP if k <= _LONG_K else _GROUP_LONG_K


def _dead(live: Array, scores: Array, ids: Array) -> tuple[Array, Array]:
    """Pool slots no longer in use: score ``-inf``, id -1, the filler of ``k > N``.

    Not a NaN below every number: XLA:GPU's top_k of a short depth over a long row
    ranks every NaN first (seen on an H200), whatever its sign.
    """
    return jnp.where(live, scores, -jnp.inf), jnp.where(live, ids, -1)


def _platform(corpus) -> str:
    """``"gpu"`` when the corpus lies on a GPU (or, traced, GPU is JAX's default), else ``"cpu"``."""
    devices = corpus.devices() if isinstance(corpus, jax.Array) and not isinstance(corpus, jax.core.Tracer) else None
    platform = next(iter(devices)).platform if devices else jax.default_backend()
    return "gpu" if platform in ("gpu", "cuda", "rocm") else "cpu"


def _tile_rows(num_queries: int, tile: int) -> int:
    """Rows per query tile: at most ``tile``, the tiles as even as possible."""
    tiles = -(-max(num_queries, 1) // tile)
    return -(-max(num_queries, 1) // tiles)


def _default_block(num_queries: int, k: int, platform: str = "cpu") -> int:
    block = _BLOCK_ELEMENTS[platform] // _tile_rows(num_queries, _QUERY_TILE[platform])
    block = min(max(block, _MIN_BLOCK), _MAX_BLOCK) // _GROUP * _GROUP  # whole groups
    return max(block, k)


def _check_search_args(queries, corpus, k, block_size, recall_target):
    _checks.embeddings(queries, corpus, "corpus")
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


def _screen_capacity(k: int, block: int, seen: int) -> int:
    """Groups a block may send to the pool per query when ``seen`` documents set the threshold.

    For documents in random order a block of ``block`` rows holds about
    ``lam = k * block / seen`` documents above the k-th best of ``seen``; the
    capacity covers the Poisson tail of every query of a large batch
    (``lam + 4 sqrt(lam) + 4``). A block that needs more takes the exact
    fallback, so the capacity sets the speed, never the result.
    """
    lam = k * block / seen
    return int(math.ceil(lam + 4.0 * math.sqrt(lam) + 4.0))


def _epochs(first: int, full: int, block: int, k: int) -> list[tuple[int, int, Optional[int]]]:
    """``(start, stop, capacity)`` over the ``full`` blocks after the first: runs of blocks
    that share one threshold (merged at their end), ``capacity=None`` for merged blocks.

    An epoch lasts about as many rows as were seen before it, so the threshold is
    refreshed a logarithmic number of times; its pool is about ``block`` columns at most.
    """
    out: list[tuple[int, int, Optional[int]]] = []
    group = _group_size(k)
    j = 0
    while j < full:
        seen = first + j * block
        cap = _screen_capacity(k, block, seen)
        per = cap * group
        if block % group or 2 * per > block or full - j < 2:
            stop, cap = j + 1, None
        else:
            stop = min(full, j + max(2, seen // block), j + max(2, block // per))
            # No epoch of one block: XLA inlines a loop of one trip, and the inlined
            # screening ran 4x slower than the same block inside a loop (measured).
            stop = full if full - stop == 1 else stop
        if cap is None and out and out[-1][2] is None:
            out[-1] = (out[-1][0], stop, None)
        else:
            out.append((j, stop, cap))
        j = stop
    return out


def _screened_epoch(
    values, ids, pool_s, pool_i, queries, corpus, start_row: int, blocks: int, block: int, cap: int, precision
):
    """Merge ``blocks`` blocks of ``block`` rows from ``start_row`` into the running top-k,
    writing candidates to the first ``blocks x cap x group`` columns of the pool
    ``pool_s, pool_i`` [q, P] (the tile's one pool, shared by its epochs; returned).

    Exact by a bound: a document can enter the top-``k`` only if its score is at
    least the running k-th best ``t``, so only groups of :func:`_group_size` columns whose
    maximum is not below ``t`` are kept (at most ``cap`` per query and block,
    written to a pool); the pool is merged with one ``top_k`` at the end. A block
    where some query has more groups above ``t`` is merged whole at once
    (``lax.cond``), and the pool written before it is then ignored.
    """
    q, kk = values.shape
    group = _group_size(kk)
    per = cap * group
    groups = block // group
    width = pool_s.shape[1]
    member = lax.broadcasted_iota(_ID_DTYPE, (1, 1, group), 2)

    def body(j, carry):
        values, ids, pool_s, pool_i, valid_from = carry
        offset = start_row + j * block
        s = _scores(queries, lax.dynamic_slice_in_dim(corpus, offset, block), precision)
        top = s.reshape(q, groups, group).max(axis=-1)
        # not (max < t): also true for NaN maxima, and for every group when t is NaN
        wanted = ~(top < values[:, -1:])
        # Wanted groups first, in ascending order (top_k's ties go to the lower index);
        # the groups that fill the remaining slots lie below t and never enter the top-k.
        _, grp = lax.top_k(wanted.astype(jnp.float32), cap)
        grp = grp.astype(_ID_DTYPE)
        cand = jnp.take_along_axis(s.reshape(q, groups, group), grp[:, :, None], axis=1).reshape(q, per)
        cand_ids = (grp[:, :, None] * group + member + offset).reshape(q, per)
        pool_s = lax.dynamic_update_slice_in_dim(pool_s, cand, j * per, axis=1)
        pool_i = lax.dynamic_update_slice_in_dim(pool_i, cand_ids, j * per, axis=1)
        over = jnp.max(jnp.sum(wanted, axis=-1, dtype=jnp.int32)) > cap

        def whole(_):
            # The pool of the blocks before this one (since the last such merge), then this
            # whole block: ids stay ascending, and no document comes twice.
            slot = lax.broadcasted_iota(jnp.int32, (1, width), 1)
            live = (slot >= valid_from * per) & (slot < j * per)
            pool_live, ids_live = _dead(live, pool_s, pool_i)
            cat = jnp.concatenate([values, pool_live, s], axis=-1)
            cat_ids = jnp.concatenate([ids, ids_live, lax.broadcasted_iota(_ID_DTYPE, s.shape, 1) + offset], axis=-1)
            v, at = lax.top_k(cat, kk)
            return v, jnp.take_along_axis(cat_ids, at, axis=-1), (j + 1).astype(jnp.int32)

        values, ids, valid_from = lax.cond(over, whole, lambda _: (values, ids, valid_from), None)
        return values, ids, pool_s, pool_i, valid_from

    carry = (values, ids, pool_s, pool_i, jnp.zeros((), jnp.int32))
    values, ids, pool_s, pool_i, valid_from = lax.fori_loop(0, blocks, body, carry)
    slot = lax.broadcasted_iota(jnp.int32, (1, width), 1)
    # Columns past this epoch's blocks hold an earlier epoch's candidates: dead too.
    dead_s, dead_i = _dead((slot >= valid_from * per) & (slot < blocks * per), pool_s, pool_i)
    v, at = lax.top_k(jnp.concatenate([values, dead_s], axis=-1), kk)
    return v, jnp.take_along_axis(jnp.concatenate([ids, dead_i], axis=-1), at, axis=-1), pool_s, pool_i


def _tile_search(queries, corpus, k: int, block: int, recall_target, precision, total: int):
    """Top-``min(k, N)`` of one query tile over ``corpus`` [N, d], ids local to it, in blocks of ``block`` rows."""
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

    plan = _epochs(first, full, block, kk) if recall_target is None else [(0, full, None)] * (full > 0)
    # One pool for every epoch, as wide as the widest needs: epochs unrolled in Python
    # with pools of their own made XLA's temporaries grow with the corpus.
    width = max([(stop - start) * cap * _group_size(kk) for start, stop, cap in plan if cap is not None], default=0)
    pool_s, pool_i = jnp.zeros((queries.shape[0], width), values.dtype), jnp.zeros((queries.shape[0], width), _ID_DTYPE)
    for start, stop, cap in plan:
        if cap is not None:
            values, ids, pool_s, pool_i = _screened_epoch(
                values, ids, pool_s, pool_i, queries, corpus, first + start * block, stop - start, block, cap, precision
            )
        else:

            def body(i, carry, start=start):
                return step(first + (start + i) * block, *carry, block)

            values, ids = lax.fori_loop(0, stop - start, body, (values, ids))
    rest = n - first - full * block
    if rest:  # the ragged last block: its own static shape, no padding rows
        values, ids = step(first + full * block, values, ids, rest)
    return values, ids


def _local_search(queries, corpus, k: int, block: int, tile: int, recall_target, precision, total: int):
    """Top-``min(k, N)`` over ``corpus`` [N, d], ids local to it, in query tiles of at most ``tile`` rows."""
    q = queries.shape[0]
    rows = _tile_rows(q, tile)
    search_tile = partial(
        _tile_search, corpus=corpus, k=k, block=block, recall_target=recall_target, precision=precision, total=total
    )
    if rows == q:
        return search_tile(queries)
    tiles = -(-q // rows)
    # Zero rows pad the last tile; their results are dropped.
    padded = jnp.concatenate([queries, jnp.zeros((tiles * rows - q, queries.shape[1]), queries.dtype)])
    values, ids = lax.map(search_tile, padded.reshape(tiles, rows, -1))
    return values.reshape(tiles * rows, -1)[:q], ids.reshape(tiles * rows, -1)[:q]


def _pad_to_k(values: Array, ids: Array, k: int):
    missing = k - values.shape[-1]
    if missing <= 0:
        return values, ids
    q = values.shape[0]
    return (
        jnp.concatenate([values, jnp.full((q, missing), -jnp.inf, values.dtype)], axis=-1),
        jnp.concatenate([ids, jnp.full((q, missing), -1, ids.dtype)], axis=-1),
    )


def _shard_search(queries, corpus, k: int, block: int, tile: int, recall_target, precision, axis_name, total: int):
    """Inside ``shard_map``: search the local rows, then merge the shards' top-k."""
    local_n = corpus.shape[0]
    values, ids = _local_search(queries, corpus, k, block, tile, recall_target, precision, total)
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


@partial(jax.jit, static_argnames=("k", "block", "tile", "recall_target", "precision"))
def _search_jit(queries, corpus, k, block, tile, recall_target, precision):
    values, ids = _local_search(queries, corpus, k, block, tile, recall_target, precision, corpus.shape[0])
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


@partial(jax.jit, static_argnames=("k", "block", "tile", "recall_target", "precision", "mesh", "axes"))
def _sharded_jit(queries, corpus, k, block, tile, recall_target, precision, mesh, axes):
    axis = axes if len(axes) > 1 else axes[0]
    f = partial(
        _shard_search,
        k=k,
        block=block,
        tile=tile,
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

    The queries go in tiles of at most 512 rows (1024 on GPU) and the corpus in blocks of
    ``block_size`` rows; each block's scores ``[tile, block]`` are merged into a
    running top-``k``, so memory is :math:`O(\\mathrm{tile} (k + block))` and the
    ``[Q, N]`` matrix never exists. After the first block, a block is screened
    against the running k-th best ``t``: the maximum of each group of 32 columns
    is compared with ``t`` (8 columns when ``k > 16``), and only groups whose maximum is not below ``t`` (the
    only ones that can hold a document of the top-``k``) go to a pool, merged by
    one ``top_k`` at the end of an epoch (epochs double in length, so ``t`` is
    refreshed a logarithmic number of times). A block with more such groups
    than the pool has room for is merged whole. Every path is exact and the same
    on every platform (``docs/scale.md``).

    Args:
      queries: ``[Q, d]`` embeddings (float; half precision accumulates in float32).
      corpus: ``[N, d]`` embeddings. A concrete ``jax.Array`` whose rows are split
        over devices by a ``NamedSharding`` (``PartitionSpec("x")`` or
        ``PartitionSpec(("x", "y"))``) is searched where it lies: each device
        searches its shard, then the shards' top-``k`` lists are gathered
        (``Q x k`` per device) and merged. The rows must divide evenly.
      k: number of documents per query.
      block_size: corpus rows per block (default: about ``2**22 / tile`` on
        CPU and ``2**25 / tile`` on GPU, at least ``k``, between 1024 and
        65536). The last block may be shorter; no padding rows are added.
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
    platform = _platform(corpus)
    tile = _QUERY_TILE[platform]
    block = int(block_size) if block_size is not None else _default_block(queries.shape[0], k, platform)
    if axis_name is not None:
        total = corpus.shape[0] * lax.axis_size(axis_name)
        return _shard_search(queries, corpus, k, block, tile, recall_target, precision, axis_name, total)
    placed = _corpus_mesh_axes(corpus)
    if placed is not None:
        mesh, axes = placed
        return _sharded_jit(queries, corpus, k, block, tile, recall_target, precision, mesh, axes)
    return _search_jit(queries, corpus, k, block, tile, recall_target, precision)


# Above this many comparisons per query (k x m), join sorts the judged ids and
# binary-searches them; below it, it compares every pair (docs/scale.md).
