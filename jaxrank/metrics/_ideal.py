"""The ideal DCG of graded labels, from counts per grade.

The ideal ranking orders the items by label, so with integer grades it is known
without ordering anything: grade ``t`` occupies the positions after the
:math:`c_{>t}` items of higher grade. With :math:`c_{\\ge t}` the number of valid
items of label at least ``t`` and :math:`D(c) = \\sum_{p \\le \\min(c, k)} d(p)` the
cumulative discount,

.. math:: IDCG@k = \\sum_{t \\ge 1} G(t)\\, \\big(D(c_{\\ge t}) - D(c_{\\ge t + 1})\\big),

one pass over the labels per grade, from the highest grade down, stopping once every
list has ``k`` items above the grade (the rest of the ideal list is past the cutoff).
That is a few row sums instead of a second top-``k`` (or a full sort without ``k``).
Labels of gain 0 (``<= 0`` for the string gains) never need a position. Lists whose
positive labels are not all integers, or whose top grade exceeds :data:`MAX_GRADES`,
take the ranking path (the ideal ranked by the exact ranker); :func:`ideal_dcg`
chooses per batch at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank.ranking.backend import row_sum, vary_like
from jaxrank.ranking.ranks import float_dtype

#: Counting is used up to this many positive grades (one pass over the labels each).
MAX_GRADES = 32


def _cumulative_discount(n: int, cuts: tuple[int, ...], discount: Callable, dtype) -> jax.Array:
    """``D[c, j] = sum_{p <= min(c, k_j)} d(p)`` for ``c = 0..n``, shape ``[n + 1, C]``."""
    positions = jnp.arange(1, n + 1, dtype=dtype)
    d = discount(positions)
    within = positions[:, None] <= jnp.asarray(cuts, dtype)
    return jnp.concatenate([jnp.zeros((1, len(cuts)), dtype), jnp.cumsum(d[:, None] * within, axis=0)])


def _by_counts(labels, top, cuts, gain, discount, dtype):
    n = labels.shape[-1]
    table = _cumulative_discount(n, cuts, discount, dtype)
    deepest = min(max(cuts), n)

    def more(carry):
        t, above, _ = carry
        return (t >= 1) & jnp.any(above < deepest)

    def grade(carry):
        t, above, total = carry
        # labels are 0 where masked and t >= 1: the comparison alone leaves masked items out
        count = row_sum(labels >= t.astype(labels.dtype)).astype(jnp.int32)
        total = total + gain(t) * (table[count] - table[above])
        return t - 1, count, total

    above = vary_like(jnp.zeros(labels.shape[:-1], jnp.int32), labels)  # typed as the body's carry in shard_map
    total = vary_like(jnp.zeros(labels.shape[:-1] + (len(cuts),), dtype), labels)
    return lax.while_loop(more, grade, (top.astype(dtype), above, total))[2]


def ideal_dcg(
    labels: jax.Array,
    valid: jax.Array,
    ks: Optional[tuple[int, ...]],
    gain: Callable[[jax.Array], jax.Array],
    discount: Callable[[jax.Array], jax.Array],
    by_ranking: Callable[[], jax.Array],
) -> jax.Array:
    """IDCG at every cutoff, ``[..., C]`` (``C = 1`` without ``ks``).

    ``labels[..., n]`` and ``valid[..., n]``; ``gain`` must give 0 to labels ``<= 0`` and
    apply elementwise (the string gains); ``by_ranking()`` computes the same value by
    ranking the labels, for batches that counting cannot take. Integer (or boolean)
    labels are counted as they are: no float copy of them, and no test of integrality.
    """
    cuts = (labels.shape[-1],) if ks is None else ks
    dtype = float_dtype()
    if labels.dtype == jnp.bool_:
        labels = labels.astype(jnp.int32)
    labels = jnp.where(valid, labels, jnp.zeros((), labels.dtype))
    if jnp.issubdtype(labels.dtype, jnp.integer):
        # The top grade, as float32 (monotone, so a grade past MAX_GRADES stays past it): a
        # float max reads the labels once, where XLA:CPU reduces integers several times slower.
        top = jnp.maximum(jnp.max(labels.astype(jnp.float32)), 0)
    else:
        # One pass finds the top grade and, as +inf, any positive label that is not an integer.
        top = jnp.max(jnp.where(labels > 0, jnp.where(labels == jnp.floor(labels), labels, jnp.inf), 0), initial=0)
    countable = top <= MAX_GRADES
    top = jnp.where(countable, top, 0)
    return lax.cond(countable, lambda: _by_counts(labels, top, cuts, gain, discount, dtype), by_ranking)
