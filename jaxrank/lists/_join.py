"""Labels of retrieved ids from the qrels, as arrays: the join of a top-k search's ids with
the judged ids of each query (:func:`jaxrank.retrieval.join`)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jaxrank import _checks

Array = jax.Array

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
