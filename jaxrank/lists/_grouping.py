"""Flat ``preds, target, indexes`` (torchmetrics' retrieval inputs) to padded query lists.

jaxrank's metrics take one list per row, ``[Q, n]`` with a ``where`` mask. Peers such as
torchmetrics take flat arrays and a query id per item instead. :func:`group_by_query` turns the
second form into the first: on the host with numpy (one stable sort, no Python loop over
queries), or with JAX under ``jit`` when the caller fixes the output sizes.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _checks, _npsort


class Grouped(NamedTuple):
    """Padded lists, one row per query (in increasing query id).

    ``preds``, ``target``, ``where``: ``[Q, n]``; ``query_ids``: ``[Q]``; ``overflow``: the
    number of items that did not fit in the requested sizes (always 0 without them).
    Padding slots hold 0 and ``where=False``; rows past the last query (with
    ``num_queries``) hold ``query_ids == -1`` and no valid item.
    """

    preds: jax.Array
    target: jax.Array
    where: jax.Array
    query_ids: jax.Array
    overflow: jax.Array


def _flat(preds, target, indexes):
    shapes = {name: np.shape(x) for name, x in (("preds", preds), ("target", target), ("indexes", indexes))}
    if len(set(shapes.values())) != 1:
        raise ValueError(f"preds, target and indexes must have the same shape, got {shapes}")
    shape = shapes["preds"]
    if not shape or 0 in shape:
        raise ValueError("preds, target and indexes must be non-empty and non-scalar")
    return preds, target, indexes


def group_by_query(
    preds,
    target,
    indexes,
    *,
    ignore_index: Optional[int] = None,
    num_queries: Optional[int] = None,
    max_size: Optional[int] = None,
) -> Grouped:
    """Group flat items by query id into padded lists ``[Q, n]`` and their mask.

    Item :math:`i` (``preds[i]``, ``target[i]``) belongs to query ``indexes[i]``; items
    whose target equals ``ignore_index`` are dropped first. Queries come out in increasing
    id, items of a query in their input order (so that a stable tie policy sees the order
    the caller gave). Inputs of any shape are flattened.

    Without ``num_queries`` and ``max_size`` the grouping runs on the host with numpy
    (inputs must be concrete), ``Q`` is the number of distinct ids and ``n`` the largest
    query. With both, the grouping is written in JAX with those static sizes, and can run
    under ``jit``: extra queries or items are not placed and counted in ``overflow``
    (outside ``jit`` a positive overflow raises ``ValueError``).

    Args:
      preds: scores, any shape ``S``.
      target: labels, shape ``S``.
      indexes: integer query ids, shape ``S`` (any values, in any order).
      ignore_index: drop the items whose target equals it.
      num_queries, max_size: static output sizes ``Q`` and ``n`` (both or neither).

    Returns:
      :class:`Grouped` ``(preds[Q, n], target[Q, n], where[Q, n], query_ids[Q], overflow)``.

    Example:
      >>> import jaxrank
      >>> g = jaxrank.group_by_query([0.5, 0.2, 0.9, 0.1], [1, 0, 0, 1], [7, 3, 7, 7])
      >>> g.query_ids.tolist(), g.where.tolist()
      ([3, 7], [[True, False, False], [True, True, True]])
      >>> g.preds.tolist()
      [[0.2, 0.0, 0.0], [0.5, 0.9, 0.1]]
    """
    preds, target, indexes = _flat(preds, target, indexes)
    if ignore_index is not None and not _checks.is_int(ignore_index):
        raise ValueError(f"ignore_index must be an integer or None, got {ignore_index!r}")
    if (num_queries is None) != (max_size is None):
        raise ValueError("num_queries and max_size must be given together (static sizes) or not at all")
    index_dtype = indexes.dtype if hasattr(indexes, "dtype") else np.asarray(indexes).dtype
    if not jnp.issubdtype(index_dtype, jnp.integer):
        raise ValueError(f"indexes must hold integers, got {index_dtype}")
    if num_queries is None:
        return _group_host(preds, target, indexes, ignore_index)
    num_queries = _checks.positive_int(num_queries, "num_queries")
    max_size = _checks.positive_int(max_size, "max_size")
    grouped = _group_static(preds, target, indexes, ignore_index, num_queries, max_size)
    if not isinstance(grouped.overflow, jax.core.Tracer) and int(grouped.overflow) > 0:
        raise ValueError(f"{int(grouped.overflow)} items do not fit num_queries={num_queries}, max_size={max_size}")
    return grouped


def _stable_order(indexes: np.ndarray) -> np.ndarray:
    """Stable argsort of the query ids: by a value sort of (id, position) packed in one
    uint64 (jaxrank._npsort, several times faster) when the id range leaves room for it."""
    low, high = int(indexes.min()), int(indexes.max())
    bits = _npsort.index_bits(indexes.size)
    if (high - low) >= 1 << (64 - bits):
        return np.argsort(indexes, kind="stable")
    key = (indexes - low).astype(np.uint64) << np.uint64(bits)
    return _npsort.argsort_high_bits(key).astype(np.intp)


def _group_host(preds, target, indexes, ignore_index) -> Grouped:
    try:
        preds, target, indexes = (np.asarray(x).reshape(-1) for x in (preds, target, indexes))
    except jax.errors.TracerArrayConversionError as e:
        raise ValueError("under jit, give num_queries and max_size (static sizes)") from e
    if ignore_index is not None:
        keep = target != ignore_index
        preds, target, indexes = preds[keep], target[keep], indexes[keep]
    if indexes.size == 0:
        raise ValueError("no item is left after dropping ignore_index")
    order = _stable_order(indexes)
    ids = indexes[order]
    first = np.empty(ids.size, bool)
    first[0] = True
    np.not_equal(ids[1:], ids[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    row = np.cumsum(first) - 1
    col = np.arange(ids.size) - starts[row]
    sizes = np.diff(np.append(starts, ids.size))
    shape = (starts.size, int(sizes.max()))
    out_preds = np.zeros(shape, preds.dtype)
    out_target = np.zeros(shape, target.dtype)
    where = np.zeros(shape, bool)
    out_preds[row, col] = preds[order]
    out_target[row, col] = target[order]
    where[row, col] = True
    return Grouped(
        jnp.asarray(out_preds), jnp.asarray(out_target), jnp.asarray(where), jnp.asarray(ids[starts]), jnp.asarray(0)
    )


def _group_static(preds, target, indexes, ignore_index, num_queries: int, max_size: int) -> Grouped:
    preds, target, indexes = (jnp.ravel(jnp.asarray(x)) for x in (preds, target, indexes))
    size = indexes.shape[0]
    keep = jnp.ones(size, bool) if ignore_index is None else target != ignore_index
    # Kept items first, in id order; a stable sort keeps each query's input order.
    order = jnp.lexsort((indexes, ~keep))
    ids, kept = indexes[order], keep[order]
    first = jnp.concatenate([jnp.ones(1, bool), ids[1:] != ids[:-1]]) & kept
    row = jnp.cumsum(first) - 1
    position = jnp.arange(size)
    col = position - jax.lax.cummax(jnp.where(first, position, 0))
    fits = kept & (row < num_queries) & (col < max_size)
    # Items that do not fit go to an out-of-range row, which mode="drop" discards.
    row = jnp.where(fits, row, num_queries)

    def place(values, fill):
        out = jnp.full((num_queries, max_size), fill, values.dtype)
        return out.at[row, col].set(values, mode="drop")

    query_ids = jnp.full((num_queries,), -1, ids.dtype).at[jnp.where(first, row, num_queries)].set(ids, mode="drop")
    return Grouped(
        place(preds[order], 0),
        place(target[order], 0),
        place(jnp.ones(size, bool), False),
        query_ids,
        jnp.sum(kept & ~fits),
    )
