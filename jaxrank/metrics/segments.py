"""Several lists packed in one row: ``segments=`` on every metric (rax's convention).

``segments[..., n]`` holds an integer id per item; the valid items with one id form
one list. Ids need not be sorted, contiguous or small. Each row is expanded into
``S`` masked copies, ``[..., S, n]``, copy ``s`` keeping the items of the ``s``-th
smallest id present (its *slot*); the metric then runs unchanged on that batch,
with the ranker it was given. Since padding never changes a value, each copy's
value is the value of its list padded apart, and the result has a segment axis
``[..., S]`` before any cutoff axis. Slots with no list hold the value of an empty
list (0) and are marked absent by :func:`segment_slots`. See ``docs/segments.rst``.
"""

from __future__ import annotations

import functools
import inspect
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp

from jaxrank import _checks
from jaxrank.metrics import positives as _positives
from jaxrank.ranking import Ranks
from jaxrank.ranking.backend import argsort_descending, cumsum, inverse_permutation, runtime
from jaxrank.ranking.positives import Positives


class SegmentSlots(NamedTuple):
    """Where each list of a packed row goes.

    Attributes:
      slot: ``int32[..., n]``, the slot of each valid item's segment (0 for the
        smallest id present in the row), -1 for invalid items.
      present: ``bool[..., S]``, the slots that hold a list (the first ``count``).
      count: ``int32[...]``, the number of lists in each row (may exceed ``S``,
        in which case the lists past slot ``S - 1`` are dropped and the metrics
        return NaN for that row).
    """

    slot: jax.Array
    present: jax.Array
    count: jax.Array


def _ids(segments: jax.Array) -> jax.Array:
    """Segment ids as signed integers of at least 32 bits, equal where they were equal."""
    if segments.dtype == jnp.bool_ or jnp.dtype(segments.dtype).itemsize < 4:
        return segments.astype(jnp.int32)
    if segments.dtype == jnp.uint32:
        return (
            segments.astype(jnp.int64)
            if jax.config.jax_enable_x64
            else jax.lax.bitcast_convert_type(segments, jnp.int32)
        )
    if segments.dtype == jnp.uint64:
        return jax.lax.bitcast_convert_type(segments, jnp.int64)
    return segments


def slots(segments: jax.Array, valid: jax.Array, num_segments: int) -> SegmentSlots:
    """:class:`SegmentSlots` of checked ``segments`` and mask ``valid`` (both ``[..., n]``)."""
    ids = _ids(segments)
    low = jnp.iinfo(ids.dtype).min
    # The descending sort of ~id lists ids ascending; invalid items go last. The one id
    # whose ~id is that lowest key (the largest id) may share a tie group with invalid
    # items: a segment starts at the first *valid* position of a group.
    key = jnp.where(valid, ~ids, jnp.array(low, ids.dtype))
    order, start, _ = argsort_descending(key, bounds=True)
    valid_sorted = jnp.take_along_axis(valid, order, axis=-1)
    before = cumsum(valid_sorted.astype(jnp.float32)) - valid_sorted  # valid items before each position
    group_before = before - jnp.take_along_axis(before, start, axis=-1)
    first = valid_sorted & (group_before == 0)
    slot_sorted = jnp.round(cumsum(first.astype(jnp.float32))).astype(jnp.int32) - 1
    slot_sorted = jnp.where(valid_sorted, slot_sorted, -1)
    slot = jnp.take_along_axis(slot_sorted, inverse_permutation(order), axis=-1)
    count = jnp.max(slot_sorted, axis=-1, initial=-1) + 1
    present = jnp.arange(num_segments, dtype=jnp.int32) < count[..., None]
    return SegmentSlots(slot, present, count)


def segment_slots(segments, where=None, *, num_segments: Optional[int] = None) -> SegmentSlots:
    """The slot of each item's list and which slots hold a list, for the metrics'
    ``segments=`` (their values ``[..., S]`` are per slot).

    Slot ``s`` holds the list of the ``s``-th smallest segment id among the valid items
    of the row; ``S = num_segments`` (default ``n``, enough for any row). Invalid items
    belong to no list (slot -1).

    Args:
      segments: ``int[..., n]`` segment ids (any integers; bool is taken as 0/1).
      where: ``bool[..., n]`` valid items (default all).
      num_segments: ``S``, the static number of slots.

    Returns:
      :class:`SegmentSlots` ``(slot[..., n], present[..., S], count[...])``.

    Example:
      >>> from jaxrank.metrics import segment_slots
      >>> s = segment_slots([7, 3, 7, 9], where=[True, True, True, False], num_segments=3)
      >>> s.slot.tolist(), s.present.tolist(), int(s.count)
      ([1, 0, 1, -1], [True, True, False], 2)
    """
    segments = _checks.segment_ids(segments)
    valid = _checks.mask(where, segments.shape, like="segments")
    n = segments.shape[-1]
    num_segments = n if num_segments is None else _checks.positive_int(num_segments, "num_segments")
    return slots(segments, valid, num_segments)


def too_many(count: jax.Array, num_segments: int) -> None:
    """Refuse rows with more lists than slots when the ids are known (outside ``jit``)."""
    if isinstance(count, jax.core.Tracer):
        return
    most = int(jnp.max(count, initial=0))
    if most > num_segments:
        raise ValueError(f"segments: a row holds {most} lists, more than num_segments={num_segments}")


def segmented(per_item: tuple[str, ...] = (), label_axes: int = 0):
    """Give a metric ``segments=`` and ``num_segments=`` (module docstring).

    ``per_item`` names the metric's keywords that hold per-item arrays
    (``[..., n]``, e.g. ``weights``): they are copied along the segment axis too.
    ``label_axes``: trailing axes of ``labels`` after the item axis (1 for the
    diversity metrics' ``[..., n, t]``).
    """

    def wrap(metric):
        @functools.wraps(metric)
        def with_segments(scores, labels, *, segments=None, num_segments: Optional[int] = None, **kwargs):
            scores, labels, kwargs = runtime_inputs(scores, labels, kwargs, per_item)
            if isinstance(labels, Positives):
                if segments is not None or num_segments is not None:
                    raise ValueError("segments cannot be combined with labels given as positives")
                return _positives.evaluate(metric, scores, labels, kwargs)
            if segments is None:
                if num_segments is not None:
                    raise ValueError("num_segments was given without segments")
                return metric(scores, labels, **kwargs)
            return _per_segment(metric, per_item, label_axes, scores, labels, segments, num_segments, kwargs)

        signature = inspect.signature(metric)
        extra = [
            inspect.Parameter("segments", inspect.Parameter.KEYWORD_ONLY, default=None),
            inspect.Parameter("num_segments", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Optional[int]),
        ]
        params = list(signature.parameters.values())
        with_segments.__signature__ = signature.replace(parameters=params + extra)
        with_segments.__doc__ = (metric.__doc__ or "") + _DOC
        return with_segments

    return wrap


#: The keywords of every metric that hold arrays of the data (beside a metric's ``per_item``).
_ARRAY_KEYWORDS = ("where", "judgments", "judgments_where", "weights", "segments")


def runtime_inputs(scores, labels, kwargs: dict, per_item: tuple[str, ...] = ()):
    """``scores``, ``labels`` and the array keywords as run-time values of the program
    whenever any of them is traced (:func:`jaxrank.ranking.backend.runtime`): labels
    closed over by a jitted loss are never folded into constants by XLA."""
    names = [n for n in (*_ARRAY_KEYWORDS, *per_item) if kwargs.get(n) is not None]
    leaves = jax.tree.leaves((scores, labels, *(kwargs[n] for n in names)))
    traced = next((a for a in leaves if isinstance(a, jax.core.Tracer)), None)
    if traced is None:
        return scores, labels, kwargs
    kwargs = dict(kwargs, **{n: runtime(kwargs[n], traced) for n in names})
    return runtime(scores, traced), runtime(labels, traced), kwargs


_DOC = """
    ``segments[..., n]`` (integer ids) packs several lists in one row: the value is
    per list, ``[..., S]`` (``S = num_segments``, default ``n``) before any cutoff
    axis, slot ``s`` for the ``s``-th smallest id; :func:`jaxrank.metrics.segment_slots`
    says which slots hold a list. See ``docs/segments.rst``.
"""


def _per_segment(metric, per_item, label_axes, scores, labels, segments, num_segments, kwargs):
    scores = _checks.scores(scores)
    labels = jnp.asarray(labels)
    if labels.shape[: labels.ndim - label_axes] != scores.shape or labels.ndim != scores.ndim + label_axes:
        tail = " + (t,)" if label_axes else ""
        raise ValueError(f"labels must have the shape of scores {scores.shape}{tail}, got {labels.shape}")
    segments = _checks.segment_ids(segments, scores.shape)
    n = scores.shape[-1]
    num_segments = n if num_segments is None else _checks.positive_int(num_segments, "num_segments")
    if kwargs.get("judgments") is not None or kwargs.get("judgments_where") is not None:
        raise ValueError("segments cannot be combined with judgments (judgments are per row, not per segment)")
    if isinstance(kwargs.get("ranker"), Ranks):
        raise ValueError("segments needs a ranker (e.g. jaxrank.hard()), not precomputed Ranks")
    valid = _checks.mask(kwargs.pop("where", None), scores.shape)
    layout = slots(segments, valid, num_segments)
    too_many(layout.count, num_segments)
    # [..., S, n]: copy s keeps the items of slot s
    where = layout.slot[..., None, :] == jnp.arange(num_segments, dtype=jnp.int32)[:, None]
    shape = scores.shape[:-1] + (num_segments, n)

    def copies(x, tail: int = 0):
        at = x.ndim - 1 - tail  # the item axis
        return jnp.broadcast_to(jnp.expand_dims(x, at), shape + x.shape[at + 1 :])

    for name in per_item:
        if kwargs.get(name) is not None:
            kwargs[name] = copies(_checks.same_shape(kwargs[name], scores.shape, name))
    out = metric(copies(scores), copies(labels, label_axes), where=where, **kwargs)
    overflow = layout.count > num_segments
    batch = overflow.shape + (num_segments,)

    def poison(v):
        if not jnp.issubdtype(v.dtype, jnp.floating) or v.shape[: len(batch)] != batch:
            return v
        flag = overflow.reshape(overflow.shape + (1,) * (v.ndim - overflow.ndim))
        return jnp.where(flag, jnp.nan, v)

    return jax.tree_util.tree_map(poison, out)
