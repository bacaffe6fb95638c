"""Pieces every metric module shares: inputs, ranks, cutoff weights, gains."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple, Optional, Union

import jax
import jax.numpy as jnp

from jaxrank import _checks
from jaxrank.ranking import HardRanks, Ranks, hard
from jaxrank.ranking.backend import row_sum

Array = jax.Array
Cutoff = Union[None, int, Sequence[int]]
Gain = Union[str, Callable[[Array], Array]]
Discount = Union[str, Callable[[Array], Array]]

DEFAULT_RANKER = hard()
#: Rankers of the metrics whose usual definition averages over tied scores.
EXPECTED_RANKER = hard("expected")
#: Rankers of the metrics whose usual definition counts tied scores as wrongly ordered.
PESSIMISTIC_RANKER = hard("pessimistic")

cutoffs = _checks.cutoffs


def inputs(scores, labels, where, judgments, judgments_where):
    """Checked ``scores``, float ``labels`` (0 where masked), the mask, and the
    judgments (0 where masked) with their mask (both None without judgments)."""
    scores = _checks.scores(scores)
    labels = _checks.same_shape(labels, scores.shape, "labels")
    valid = _checks.mask(where, scores.shape)
    fdtype = jnp.result_type(float)
    labels = jnp.where(valid, labels.astype(fdtype), 0)
    judgments, jvalid = _checks.judgments(judgments, judgments_where, scores.shape)
    if judgments is not None:
        judgments = jnp.where(jvalid, judgments.astype(fdtype), 0)
    return scores, labels, valid, judgments, jvalid


def ranks(ranker, scores, where, depth: Optional[int]) -> Ranks:
    """``ranker(scores, where, depth=depth)``, or ``ranker`` itself when it already is
    :class:`Ranks` (checked to cover ``depth``)."""
    if isinstance(ranker, Ranks):
        if ranker.size != scores.shape[-1]:
            raise ValueError(f"ranker holds ranks of {ranker.size} items, scores have {scores.shape[-1]}")
        if isinstance(ranker, HardRanks) and ranker.depth < ranker.size:
            if depth is None or depth > ranker.depth:
                raise ValueError(
                    f"ranker holds only the first {ranker.depth} positions; "
                    f"this metric needs {'all' if depth is None else depth}"
                )
        return ranker
    if not callable(ranker):
        raise ValueError(f"ranker must be a ranker (e.g. jaxrank.hard()) or Ranks, got {ranker!r}")
    return ranker(scores, where, depth=depth)


def weights(r: Ranks, ks: Optional[tuple[int, ...]], per_position: Callable[[Array], Array]):
    """``f(pos) = per_position(pos) * [pos <= k]`` for every cutoff, as ``[..., P, C]``."""

    def f(pos):
        base = per_position(pos)[..., None]
        if ks is None:
            return base
        return base * r.cutoff(pos[..., None], jnp.asarray(ks, pos.dtype))

    return f


def ones(x):
    return jnp.ones_like(x)


def inverse(pos):
    return 1.0 / pos


class Prepared(NamedTuple):
    """A metric's checked inputs and the ranks it asked for (see :func:`prepare`)."""

    ks: Optional[tuple[int, ...]]
    many: bool  # ``k`` was a sequence: the result keeps its cutoff axis
    scores: Array
    labels: Array
    valid: Array
    judgments: Optional[Array]
    jvalid: Optional[Array]
    ranks: Optional[Ranks]

    def relevant(self, rel) -> Array:
        return relevant(self.labels, self.valid, rel)

    def num_relevant(self, rel) -> Array:
        return num_relevant(self.labels, self.valid, self.judgments, self.jvalid, rel)

    def weighted(self, weights, values: Array) -> Array:
        """Per-item ``values`` times ``weights`` (``[..., n]``; None: 1), 0 on invalid items."""
        if weights is not None:
            values = values * _checks.same_shape(weights, self.scores.shape, "weights").astype(values.dtype)
        return jnp.where(self.valid, values, 0)

    def weights(self, per_position: Callable[[Array], Array] = ones):
        return weights(self.ranks, self.ks, per_position)

    def at_cutoffs(self, values: Array, per_position: Callable[[Array], Array] = ones) -> Array:
        """:math:`\\sum_i v_i\\, f(r_i)\\, [r_i \\le k]` for every cutoff, ``[..., C]``
        (``f`` defaults to 1)."""
        return self.ranks.linear(values, self.weights(per_position))

    def finish(self, values: Array) -> Array:
        """Drop the cutoff axis unless ``k`` was a sequence."""
        return values if self.many else values[..., 0]


def prepare(scores, labels, k, where, ranker, judgments, judgments_where, *, full=False, rank=True) -> Prepared:
    """Every metric's prologue: the cutoffs of ``k``, the checked inputs (:func:`inputs`),
    and ``ranker``'s ranks over the first ``max(k)`` positions (all of them without
    ``k`` or with ``full``; none with ``rank=False``)."""
    ks = cutoffs(k)
    scores, labels, valid, judgments, jvalid = inputs(scores, labels, where, judgments, judgments_where)
    # The unchecked ``where`` object goes to the ranker: hard() finds the ranks of an
    # earlier metric of the same trace by its identity.
    depth = None if full or ks is None else max(ks)
    r = ranks(ranker, scores, where, depth) if rank else None
    return Prepared(ks, isinstance(k, (list, tuple)), scores, labels, valid, judgments, jvalid, r)


def relevant(labels: Array, valid: Array, rel) -> Array:
    return ((labels >= rel) & valid).astype(labels.dtype)


def num_relevant(labels, valid, judgments, jvalid, rel) -> Array:
    if judgments is None:
        return row_sum(relevant(labels, valid, rel))
    return row_sum(relevant(judgments, jvalid, rel))


def safe_divide(num: Array, den: Array) -> Array:
    """``num / den``, and ``num`` where ``den`` is 0: there ``num`` is 0 for every ranker
    (a sum over fewer items, with non-negative weights), except for signed weights such as
    rax's ``bound_t12n`` cutoff, whose sum may be 0 where the items are not, and which rax
    divides by 1. ``den`` lacks ``num``'s last axis or matches it."""
    den = jnp.broadcast_to(den, num.shape) if den.ndim == num.ndim else den[..., None]
    return num / jnp.where(den != 0, den, 1)


def item_values(r: Ranks, f: Callable[[Array], Array], g: Array) -> Array:
    """Per item, :math:`E[f(r_i)]` (``f`` maps positions ``[..., P]`` to ``[..., P]``):
    the gradient in ``g`` of ``linear(g, f)``, which is linear in ``g``, so that any
    ranker's ranks are read through the :class:`Ranks` interface in one backward pass.
    ``g`` is where the gradient is taken; it matters only to rankers whose tie policy
    orders a group by the item weight (optimistic / pessimistic)."""
    return jax.grad(lambda v: jnp.sum(r.linear(v, lambda pos: f(pos)[..., None])))(g)


# Gains and discounts --------------------------------------------------------------
def gain_fn(gain: Gain) -> Callable[[Array], Array]:
    if callable(gain):
        return gain
    if gain == "linear":
        return lambda y: jnp.maximum(y, 0)
    if gain == "exp":
        return lambda y: jnp.exp2(jnp.maximum(y, 0)) - 1
    raise ValueError(f"gain must be 'linear', 'exp' or a callable, got {gain!r}")


def log2_discount(pos: Array) -> Array:
    """The standard discount of 1-based positions, :math:`1 / \\log_2(1 + p)`."""
    return 1.0 / jnp.log2(pos + 1.0)


def discount_fn(discount: Discount) -> Callable[[Array], Array]:
    if callable(discount):
        return discount
    if discount == "log2":
        return log2_discount
    raise ValueError(f"discount must be 'log2' or a callable, got {discount!r}")
