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
from jaxrank.metrics import _segments
from jaxrank.metrics._segments import SegmentSlots
from jaxrank.ranking import hard
from jaxrank.ranking._backend import inverse_permutation
from jaxrank.ranking._ties import take


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
    _segments._too_many(found.count, num_segments)
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
    in_slot = lists.slots.slot[..., :, None] == jnp.arange(num_segments)
    out = jnp.sum(jnp.where(in_slot, values[..., :, None], 0), axis=-2)
    return jnp.where(lists.slots.count[..., None] > num_segments, jnp.nan, out)


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


def positions(scores: jax.Array, valid: jax.Array, same: Optional[jax.Array] = None, key=None) -> jax.Array:
    """Exact 1-based positions by score (:func:`order`); within each segment with ``same``."""
    pos = (inverse_permutation(order(scores, valid, key)) + 1).astype(scores.dtype)
    if same is None:
        return pos
    # A row's order restricted to one segment is that segment's order.
    return jnp.sum(same & (pos[..., None, :] <= pos[..., :, None]), axis=-1).astype(scores.dtype)
