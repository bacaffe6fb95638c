"""What the losses and lambdaweights share: checked inputs, segments, exact positions.

A *segment* is one list among several packed in a row (``segments[..., n]``, any
integer ids, rax's convention): items interact only with valid items of their own
segment. Segment operations go through the ``[..., n, n]`` same-segment mask, so
they cost O(n^2) per row and are used only when ``segments`` is given. Per-list
values come out per slot, ``[..., S]``, as the metrics' (docs/segments.rst).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks
from jaxrank.metrics import segments as _segments
from jaxrank.metrics.segments import SegmentSlots
from jaxrank.ranking import hard
from jaxrank.ranking.backend import argsort_descending, inverse_permutation, take


class Lists(NamedTuple):
    """Checked inputs: masked ``scores``, ``labels`` and ``weights`` (0 where invalid,
    ``weights`` None when not given), the mask ``valid`` and, with segments, ``same``
    (``[..., n, n]``, true for valid pairs of one segment, the diagonal included) and
    ``slots`` (:class:`jaxrank.metrics.SegmentSlots`: each list's slot)."""

    scores: jax.Array
    labels: jax.Array
    valid: jax.Array
    weights: Optional[jax.Array]
    same: Optional[jax.Array]
    slots: Optional[SegmentSlots] = None


def prepare(scores, labels, where, segments=None, weights=None, num_segments: Optional[int] = None) -> Lists:
    given = {"where": where, "segments": segments, "weights": weights}
    scores, labels, given = _segments.runtime_inputs(scores, labels, given)
    where, segments, weights = given["where"], given["segments"], given["weights"]
    scores = _checks.scores(scores)
    labels = _checks.same_shape(labels, scores.shape, "labels")
    valid = _checks.mask(where, scores.shape, broadcast=True)
    dtype = jnp.promote_types(jnp.promote_types(scores.dtype, jnp.float32), jnp.result_type(float))
    zero = jnp.zeros((), dtype)
    s = jnp.where(valid, scores.astype(dtype), zero)
    y = jnp.where(valid, labels.astype(dtype), zero)
    w = None
    if weights is not None:
        w = jnp.where(valid, _checks.same_shape(weights, scores.shape, "weights").astype(dtype), zero)
    if segments is None:
        if num_segments is not None:
            raise ValueError("num_segments was given without segments")
        return Lists(s, y, valid, w, None)
    segments = _checks.segment_ids(segments, scores.shape)
    n = scores.shape[-1]
    num_segments = n if num_segments is None else _checks.positive_int(num_segments, "num_segments")
    found = _segments.slots(segments, valid, num_segments)
    _segments.too_many(found.count, num_segments)
    same = pair_mask(valid) & (segments[..., :, None] == segments[..., None, :])
    return Lists(s, y, valid, w, same, found)


def pair_mask(valid: jax.Array) -> jax.Array:
    """``[..., n, n]``: both items valid."""
    return valid[..., :, None] & valid[..., None, :]


def segment_sum(x: jax.Array, same: jax.Array) -> jax.Array:
    """Per item, the sum of ``x`` over the valid items of its segment, ``[..., n]``."""
    return jnp.sum(jnp.where(same, x[..., None, :], 0), axis=-1)


def first_of_segment(same: jax.Array) -> jax.Array:
    """``[..., n]``: the first valid item of each segment."""
    n = same.shape[-1]
    earlier = jnp.tril(jnp.ones((n, n), bool), -1)
    diagonal = jnp.diagonal(same, axis1=-2, axis2=-1)
    return diagonal & ~jnp.any(same & earlier, axis=-1)


def per_list(values: jax.Array, lists: Lists) -> jax.Array:
    """Per-item ``values`` summed over each list: ``[...]`` without segments; with
    segments, ``[..., S]``, slot by slot (0 in empty slots; NaN in a row with more
    lists than slots)."""
    values = jnp.where(lists.valid, values, 0)
    if lists.slots is None:
        return jnp.sum(values, axis=-1)
    num_segments = lists.slots.present.shape[-1]
    out = _slot_sum(values, lists.slots.slot, num_segments)
    return jnp.where(lists.slots.count[..., None] > num_segments, jnp.nan, out)


def _slot_sum(values: jax.Array, slot: jax.Array, num_segments: int) -> jax.Array:
    """``[..., S]``: the sum of ``values[..., n]`` over the items of each slot (items of
    slot -1 or past ``S`` dropped), by one scatter-add: O(n), where comparing every
    item with every slot would hold ``[..., n, S]``."""
    n = values.shape[-1]
    flat, ids = values.reshape(-1, n), slot.reshape(-1, n)
    rows = flat.shape[0]
    inside = (ids >= 0) & (ids < num_segments)
    # one id range per row; ids outside every range are dropped by segment_sum
    ids = jnp.where(inside, ids + num_segments * jnp.arange(rows, dtype=ids.dtype)[:, None], rows * num_segments)
    out = jax.ops.segment_sum(flat.ravel(), ids.ravel(), num_segments=rows * num_segments)
    return out.reshape(values.shape[:-1] + (num_segments,))


def holds_list(lists: Lists) -> jax.Array:
    """Where :func:`per_list` holds a list: ``[...]`` rows with a valid item, or ``[..., S]``
    present slots."""
    return jnp.any(lists.valid, axis=-1) if lists.slots is None else lists.slots.present


def order(values: jax.Array, valid: jax.Array, key=None) -> jax.Array:
    """The items by ``values``, descending, valid items first, from :func:`jaxrank.hard`;
    ties in input order, or, with a PRNG ``key``, in the order of a uniform draw
    (``jax.random.uniform(key, shape)``, ascending: rax's tie-breaking). No gradient."""
    ranker = hard()
    values = lax.stop_gradient(values)
    if key is None:
        return ranker(values, valid).order
    # Sort by the draw first, then stably by value.
    by_draw = ranker(-jax.random.uniform(key, values.shape), valid).order
    return take(by_draw, ranker(take(values, by_draw), take(valid, by_draw)).order)


def positions(scores: jax.Array, valid: jax.Array, slot: Optional[jax.Array] = None, key=None) -> jax.Array:
    """Exact 1-based positions by score, descending (:func:`order`); with ``slot`` (each
    valid item's segment slot, :class:`jaxrank.metrics.SegmentSlots`), within each segment.
    Invalid items come after the valid ones (0 with ``slot``). O(n log n): no item is
    compared with every other.

    Example:
      >>> import jax.numpy as jnp
      >>> s, valid = jnp.array([1.0, 4.0, 3.0, 2.0]), jnp.array([True, True, True, True])
      >>> positions(s, valid).tolist(), positions(s, valid, jnp.array([0, 1, 0, 1])).tolist()
      ([4.0, 1.0, 2.0, 3.0], [2.0, 1.0, 1.0, 2.0])
    """
    by_score = order(scores, valid, key)
    if slot is None:
        return (inverse_permutation(by_score) + 1).astype(scores.dtype)
    # The items in score order, stably by slot: each segment's items together, in score order.
    slot = jnp.where(valid, slot, -1).astype(jnp.int32)
    low = jnp.iinfo(jnp.int32).min
    by_slot = take(by_score, argsort_descending(take(jnp.where(valid, -slot, low), by_score)))
    sizes = _slot_sum(valid.astype(jnp.int32), slot, slot.shape[-1])
    starts = jnp.cumsum(sizes, axis=-1) - sizes  # the place of each segment's first item
    first = jnp.take_along_axis(starts, jnp.maximum(slot, 0), axis=-1)
    pos = inverse_permutation(by_slot) + 1 - first
    return jnp.where(valid, pos, 0).astype(scores.dtype)
