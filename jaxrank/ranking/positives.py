"""Relevant items given by their indices: :func:`positives`, the labels of a retrieval list.

In a retrieval model's lists (a query against the batch's documents, or a corpus) almost
every candidate is irrelevant. :class:`Positives` holds, per list, the indices of its
relevant candidates and their grades, ``[..., r]``, in place of dense ``labels[..., n]``;
every metric takes it as its labels (``jaxrank.ndcg(scores, jaxrank.positives(idx), k=10)``)
and gives the value of the dense labels it stands for (:meth:`Positives.dense`).

A ranker that can rank the relevant candidates alone has a method
``at_positives(scores, where, positives, depth, axis_name)`` returning :class:`Ranks` over
the ``r`` relevant candidates (their smooth ranks among all ``n``), and the metric runs on
those: O(n r) work, or O(n depth) for a cutoff, never O(n^2) nor a sort of the list. The
other rankers, and the metrics that read the non-relevant items (precision without a
cutoff, fall-out, ...), get the dense labels (docs/retrieval_loss.md says which).

With ``axis_name`` the list is sharded over that ``shard_map`` axis (each device holds a
contiguous block of the candidates, in device order); indices are global. Only per-list
sums, maxima and the top ``depth`` candidates cross devices (:class:`ListAxis`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks
from jaxrank.ranking.backend import top_k_order, top_k_order_of_scores


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Positives:
    """The relevant items of each list by index: ``indices[..., r]`` (int, ``-1`` pads),
    ``grades[..., r]`` (their labels). Build it with :func:`positives`."""

    indices: jax.Array
    grades: jax.Array

    @property
    def valid(self) -> jax.Array:
        """``bool[..., r]``: the slots that name an item, once (a repeated index counts
        once, with its largest grade; the other slots are padding)."""
        idx, g = self.indices, self.grades
        named = idx >= 0
        r = idx.shape[-1]
        earlier = jnp.arange(r)[:, None] > jnp.arange(r)[None, :]  # [i, j]: j before i
        same = (idx[..., :, None] == idx[..., None, :]) & named[..., None, :]
        better = (g[..., None, :] > g[..., :, None]) | ((g[..., None, :] == g[..., :, None]) & earlier)
        return named & ~jnp.any(same & better, axis=-1)

    def dense(self, n: int, dtype=None) -> jax.Array:
        """The labels ``[..., n]`` these positives stand for: each named item's grade, 0 elsewhere."""
        dtype = self.grades.dtype if dtype is None else dtype
        valid = self.valid
        idx = jnp.where(valid, self.indices, n)  # padding scatters past the end, dropped
        batch = idx.shape[:-1]
        flat_idx = idx.reshape(-1, idx.shape[-1])
        flat_g = jnp.where(valid, self.grades, 0).astype(dtype).reshape(flat_idx.shape)
        rows = jnp.arange(flat_idx.shape[0])[:, None]
        out = jnp.zeros((flat_idx.shape[0], n), dtype).at[rows, flat_idx].set(flat_g, mode="drop")
        return out.reshape(batch + (n,))


def positives(indices, grades=None) -> Positives:
    """The relevant items of each list by their indices, as a metric's labels.

    Args:
      indices: ``int[..., r]``, the index of each relevant item in its list (the last axis
        of the scores); ``-1`` pads a list with fewer than ``r``. A repeated index counts
        once, with its largest grade.
      grades: ``[..., r]``, the label of each (default 1). Items not named have label 0.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores = jnp.array([[0.3, 0.9, 0.1, 0.5]])
      >>> pos = jaxrank.positives([[2, 3]], grades=[[2, 1]])
      >>> pos.dense(4).tolist()
      [[0, 0, 2, 1]]
      >>> round(float(jaxrank.ndcg(scores, pos, k=3)[0]), 6) == round(float(jaxrank.ndcg(scores, pos.dense(4), k=3)[0]), 6)
      True
    """
    indices = jnp.asarray(indices)
    if indices.ndim == 0:
        raise ValueError("positives: indices must have at least one axis (the relevant items of a list), got a scalar")
    if not jnp.issubdtype(indices.dtype, jnp.integer):
        raise ValueError(f"positives: indices must be integers (-1 pads), got {indices.dtype}")
    if grades is None:
        grades = jnp.ones(indices.shape, jnp.int32)
    grades = jnp.asarray(grades)
    if grades.shape != indices.shape:
        raise ValueError(f"positives: grades must have the shape of indices {indices.shape}, got {grades.shape}")
    return Positives(indices.astype(jnp.int32), grades)


def check(pos: Positives, scores_shape: tuple[int, ...], name: str = "labels") -> None:
    """Refuse positives whose batch axes differ from the scores', or (outside ``jit``) an
    index past the list."""
    if pos.indices.shape[:-1] != tuple(scores_shape[:-1]):
        raise ValueError(
            f"{name}: positives must have the batch axes of scores {tuple(scores_shape[:-1])}, "
            f"got indices of shape {pos.indices.shape}"
        )
    _checks.indices_within(pos.indices, scores_shape[-1], name)


@dataclasses.dataclass(frozen=True)
class ListAxis:
    """The reductions over a list that may be sharded over a ``shard_map`` axis.

    ``axis_name`` None: the list is whole here, every reduction is local. Otherwise each
    device holds ``local`` consecutive items of the list, device ``i`` the items from
    ``i * local``.
    """

    axis_name: Optional[str]
    local: int

    @property
    def offset(self):
        return 0 if self.axis_name is None else lax.axis_index(self.axis_name) * self.local

    @property
    def size(self) -> int:
        return self.local if self.axis_name is None else self.local * lax.axis_size(self.axis_name)

    def sum(self, x):
        return x if self.axis_name is None else lax.psum(x, self.axis_name)

    def max(self, x):
        return x if self.axis_name is None else lax.pmax(x, self.axis_name)

    def at(self, x: jax.Array, indices: jax.Array) -> jax.Array:
        """``x[..., indices]`` with global ``indices[..., r]`` (0 for one not in the list),
        differentiable: on a sharded list each device adds the items it holds."""
        local = indices - self.offset
        inside = (local >= 0) & (local < self.local)
        got = jnp.take_along_axis(x, jnp.clip(local, 0, self.local - 1), axis=-1)
        return self.sum(jnp.where(inside, got, 0))

    def top(self, x: jax.Array, valid: jax.Array, depth: int) -> tuple[jax.Array, jax.Array, jax.Array]:
        """The first ``depth`` valid items of the list by descending ``x`` (the ranking
        primitive's order: ties by index, NaN below every number), as (global indices, keys,
        ``x`` at them), each ``[..., depth]``; ``x`` differentiable. A sharded list merges each
        device's top ``depth``."""
        d = min(depth, self.local)
        order, top_key = top_k_order_of_scores(lax.stop_gradient(x), d, valid)
        values = jnp.take_along_axis(x, order, axis=-1)
        if d < depth:  # a shard shorter than the depth: pad with keys below every item
            pad = [(0, 0)] * (x.ndim - 1) + [(0, depth - d)]
            order = jnp.pad(order, pad)
            top_key = jnp.pad(top_key, pad, constant_values=jnp.iinfo(top_key.dtype).min)
            values = jnp.pad(values, pad)
        order = order + self.offset
        if self.axis_name is None:
            return order, top_key, values
        merged = [self._gathered(a) for a in (order, top_key, values)]
        at, top_key = top_k_order(merged[1], depth)  # shards in order: ties stay by global index
        return jnp.take_along_axis(merged[0], at, axis=-1), top_key, jnp.take_along_axis(merged[2], at, axis=-1)

    def _gathered(self, x: jax.Array) -> jax.Array:
        """Every device's ``x[..., c]`` side by side, ``[..., devices * c]``, the same on every
        device (typed so: a sum of each device's block placed at its offset, where
        ``all_gather``'s result is typed as varying)."""
        devices, c = lax.axis_size(self.axis_name), x.shape[-1]
        start = lax.axis_index(self.axis_name) * c
        placed = jnp.arange(devices * c) - start
        inside = (placed >= 0) & (placed < c)
        spread = jnp.where(inside, jnp.take(x, jnp.clip(placed, 0, c - 1), axis=-1), jnp.zeros((), x.dtype))
        return self.sum(spread)

    def gather(self, x: jax.Array) -> jax.Array:
        """The whole list ``[..., n]`` on every device (the dense fallback)."""
        return x if self.axis_name is None else self._gathered(x)
