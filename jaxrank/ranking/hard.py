"""Exact ranks and their tie policies: :func:`hard`, :class:`HardRanker`, :class:`HardRanks`."""

from __future__ import annotations

import dataclasses
import weakref
from typing import Optional

import jax
import jax.extend.core
import jax.numpy as jnp

from jaxrank.ranking._ties import TieGroups, exclusive, reduce_positions, survive
from jaxrank.ranking.backend import (
    TOP_K_MAX_DEPTH,
    argsort_descending,
    cumsum,
    row_sum,
    sort_key,
    take,
    top_k_order,
    top_k_order_of_scores,
)
from jaxrank.ranking.ranks import TIE_POLICIES, PositionFn, Ranks, Ties, float_dtype


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class HardRanks(TieGroups, Ranks):
    """Exact ranks, stored as the first ``depth`` positions of the ranking.

    Attributes:
      order: ``int32[..., depth]``, the item at each position (valid items first).
      n_valid: ``int32[..., 1]``, number of valid items in each list.
      key: ``int[..., n]``, the sort key of every item (equal keys: tied scores).
      key_sorted: ``int[..., depth]`` or None, the keys in rank order (prefix path).
      start, end: ``int32[..., depth]`` or None, the tie group of each position
        (computed with the sort on the full path; from the prefix otherwise).
      ties: the tie policy.
    """

    order: jax.Array
    n_valid: jax.Array
    key: jax.Array
    key_sorted: Optional[jax.Array] = None
    start: Optional[jax.Array] = None
    end: Optional[jax.Array] = None
    ties: str = dataclasses.field(metadata=dict(static=True), default="stable")

    smooth = False

    @property
    def size(self) -> int:
        return self.key.shape[-1]

    @property
    def depth(self) -> int:
        return self.order.shape[-1]

    def _positions(self) -> jax.Array:
        return jnp.arange(1, self.depth + 1, dtype=float_dtype())

    def valid_positions(self, dtype=bool) -> jax.Array:
        """``[..., depth]``: which positions hold a valid item (the first ``n_valid``)."""
        return (jnp.arange(self.depth) < self.n_valid).astype(dtype)

    def in_rank_order(self, v: jax.Array) -> jax.Array:
        """Per-item values ``v[..., n]`` at the ranked positions, ``[..., depth]``; 0 at the
        positions past the valid items."""
        v = jnp.broadcast_to(v, self.key.shape)
        return jnp.where(self.valid_positions(), take(v, self.order), jnp.zeros((), v.dtype))

    # Per-position terms: what two of the operations weigh by f(position) and sum. Callers
    # that must add them in rank order (jaxrank.trec, trec_eval's running sums) read them here.
    def linear_terms(self, g: jax.Array) -> jax.Array:
        """``[..., depth]``: ``g`` at each position (for ``"optimistic"`` / ``"pessimistic"``
        reordered inside each tie group by ``g``; for ``"expected"`` the mean of ``g`` over
        the position's tie group), so that ``linear(g, f) = sum_p terms_p f(p)``."""
        if self.ties == "expected":
            return self._expected_linear_terms(g)
        (h,) = self._prepare(g)
        return h

    def count_before_terms(self, g: jax.Array, w: jax.Array) -> jax.Array:
        """``[..., depth]``: per position, what :meth:`count_before` weighs by ``f(position)``
        (``g`` there times the ``w`` up to and including it, in expectation over tie orders
        for ``"expected"``), so that ``count_before(g, f, w) = sum_p terms_p f(p)``."""
        if self.ties == "expected":
            return self._expected_count_before(g, w)
        ws, gs = self._prepare(w, g)
        return gs * cumsum(ws)

    # The four operations: stable / optimistic / pessimistic here, expected in TieGroups.
    def linear(self, g: jax.Array, f: PositionFn) -> jax.Array:
        return reduce_positions(self.linear_terms(g), f(self._positions()))

    def prefix_sum(self, g: jax.Array, k: jax.Array) -> jax.Array:
        # The running sum read at position floor(k): a per-list cutoff would otherwise
        # need [..., n, C] weights, which XLA:CPU handles slowly inside a large program.
        running = cumsum(self.linear_terms(g))
        count = jnp.clip(jnp.floor(k), 0, self.depth).astype(jnp.int32)
        at = take(running, jnp.maximum(count - 1, 0))
        return jnp.where(count > 0, at, jnp.zeros((), at.dtype))

    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        return reduce_positions(self.count_before_terms(g, w), f(self._positions()))

    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        weights = f(self._positions())
        if self.ties == "expected":
            return reduce_positions(self._expected_survival(g, w), weights)
        ws, gs = self._prepare(w, g)
        return reduce_positions(gs * (exclusive(cumsum(ws)) == 0), weights)

    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        weights = f(self._positions())
        if self.ties == "expected":
            return self._expected_cascade(p, weights)
        (ps,) = self._prepare(p)
        return reduce_positions(ps * survive(ps), weights)


# Ranks already computed in the current trace, by the identity of the traced scores:
# {id(scores): [(trace state, weakref to where or None, ties, ranks), ...]}. Metrics called
# one by one on the same scores inside one jit then share one sort (XLA does not merge
# host callbacks). An entry dies with its scores tracer, and is used only in the trace
# that made it (a result from inside a cond or scan body must not leak out of it).
_TRACED: dict[int, list] = {}


def _reusable(scores, where, ties: str, depth: Optional[int]) -> Optional[HardRanks]:
    if not isinstance(scores, jax.core.Tracer):
        return None
    state = jax.extend.core.get_opaque_trace_state(convention="flax")
    for entry_state, where_ref, entry_ties, ranks in _TRACED.get(id(scores), ()):
        same_where = where is None if where_ref is None else where_ref() is where
        deep_enough = ranks.depth == ranks.size or (depth is not None and depth <= ranks.depth)
        if same_where and entry_ties == ties and deep_enough and entry_state == state:
            return ranks
    return None


def _remember(scores, where, ties: str, ranks: HardRanks) -> None:
    if not isinstance(scores, jax.core.Tracer):
        return
    try:
        where_ref = None if where is None else weakref.ref(where)
    except TypeError:  # a mask that takes no weak reference (a list): not remembered
        return
    key = id(scores)
    if key not in _TRACED:
        weakref.finalize(scores, _TRACED.pop, key, None)
        _TRACED[key] = []
    state = jax.extend.core.get_opaque_trace_state(convention="flax")
    _TRACED[key].append((state, where_ref, ties, ranks))


@dataclasses.dataclass(frozen=True)
class HardRanker:
    """Exact 1-based ranks; see :func:`hard`.

    Within one trace (one ``jit``), calls on the same traced ``scores`` and ``where``
    objects return the ranks computed first when they hold enough positions, so
    metrics called one by one share one sort.
    """

    ties: str = "stable"

    smooth = False

    def __call__(
        self, scores: jax.Array, where: Optional[jax.Array] = None, *, depth: Optional[int] = None
    ) -> HardRanks:
        known = _reusable(scores, where, self.ties, depth)
        if known is not None:
            return known
        ranks = self._rank(jnp.asarray(scores), where, depth)
        _remember(scores, where, self.ties, ranks)
        return ranks

    def _rank(self, scores: jax.Array, where: Optional[jax.Array], depth: Optional[int]) -> HardRanks:
        n = scores.shape[-1]
        if where is None:
            valid = jnp.ones(scores.shape, bool)
            n_valid = jnp.full(scores.shape[:-1] + (1,), n, jnp.int32)
        else:
            valid = jnp.asarray(where, bool)
            n_valid = row_sum(valid, keepdims=True).astype(jnp.int32)
        key = sort_key(scores, valid)
        top_k = depth is not None and depth < n and depth <= TOP_K_MAX_DEPTH and self.ties in ("stable", "expected")
        if top_k:
            # Both outputs whole: a slice of them would be folded into XLA's sort + slice
            # pattern for TopK, which then falls back to a full sort.
            if where is None and scores.dtype in (jnp.float32, jnp.float64):
                order, key_sorted = top_k_order_of_scores(scores, depth)  # no keys of the whole list
            else:
                order, key_sorted = top_k_order(key, depth)
            return HardRanks(order, n_valid, key, key_sorted if self.ties == "expected" else None, ties=self.ties)
        if self.ties == "stable":
            return HardRanks(argsort_descending(key), n_valid, key, ties=self.ties)
        order, start, end = argsort_descending(key, bounds=True)
        return HardRanks(order, n_valid, key, start=start, end=end, ties=self.ties)


def in_given_order(order: jax.Array, scores: jax.Array, where: jax.Array) -> HardRanks:
    """Exact ranks (ties ``"stable"``) of lists already ordered: ``order[..., p]`` is the item
    at position ``p``, valid items first, and ``scores`` rank the items in that order. No
    sort, so no host callback in the compiled program (:func:`jaxrank.ranking.given` with
    ``exact=True``, ``jaxrank ndeval``)."""
    n_valid = row_sum(where, keepdims=True).astype(jnp.int32)
    return HardRanks(order.astype(jnp.int32), n_valid, sort_key(scores, where), ties="stable")


def hard(ties: Ties = "stable") -> HardRanker:
    """The exact ranker.

    Valid items are ranked by score, descending; invalid items get no rank and
    are never counted. NaN scores rank below every number (``-inf`` included),
    in input order; ``-0.0`` and ``0.0`` are one score. What equal scores mean
    is set by ``ties``:

    * ``"stable"`` (default): the earlier input index ranks first. This is what
      rax, torchmetrics and TF-Ranking (unshuffled) do, and, with documents
      pre-ordered by docno descending (as :mod:`jaxrank.trec` does), exactly
      what trec_eval does. It is also the fastest: no tie-group bookkeeping.
    * ``"expected"``: every metric is the exact mean over all orders of each
      tie group (McSherry & Najork, 2008). A model that scores every item
      alike gets the random-ranking value, whatever the input order: use it
      for validation when scores can tie (quantised or bfloat16 scores, a
      collapsed model). It costs a few extra passes over the list, and
      ``err`` an O(n x largest tie group) scan.
    * ``"optimistic"`` / ``"pessimistic"``: the largest / smallest value of the
      metric over the orders of each tie group (the group is ordered by the
      metric's item weight, e.g. relevance, descending / ascending). For
      fall-out, where lower is better, "optimistic" is still the largest value.

    Args:
      ties: the tie policy.

    Returns:
      A ranker: ``ranker(scores, where, depth=None) -> HardRanks``. ``depth``
      asks for the first ``depth`` positions only (``lax.top_k`` when small).

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores = jnp.array([1.0, 1.0, 0.0])
      >>> labels = jnp.array([0, 1, 0])
      >>> float(jaxrank.reciprocal_rank(scores, labels, ranker=jaxrank.hard("stable")))
      0.5
      >>> float(jaxrank.reciprocal_rank(scores, labels, ranker=jaxrank.hard("expected")))
      0.75
    """
    if ties not in TIE_POLICIES:
        raise ValueError(f"ties must be one of {TIE_POLICIES}, got {ties!r}")
    return HardRanker(ties)
