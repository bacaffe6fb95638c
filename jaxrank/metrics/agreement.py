"""How far a ranking agrees with the order of the judgments: ir_measures' ``Accuracy`` (pairs
of relevant and non-relevant documents in the top k) and ``Compat`` (Clarke, Vtyurina &
Smucker's compatibility: rank-biased overlap with the ideal ranking), each once over
:class:`~jaxrank.ranking.Ranks`.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks
from jaxrank.metrics import common as _c
from jaxrank.metrics.common import Array, Cutoff
from jaxrank.metrics.segments import segmented
from jaxrank.ranking import HardRanks, hard
from jaxrank.ranking.backend import row_sum, take, vary_like

_DEFAULT_RANKER = _c.DEFAULT_RANKER


@segmented()
def accuracy(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
) -> Array:
    """ir_measures' ``Accuracy``: among the top ``k``, the fraction of the (relevant,
    non-relevant) pairs that are ranked relevant first.

    .. math:: Acc@k = 1 - \\frac{1}{R_k N_k} \\sum_{i: y_i \\ge rel} [r_i \\le k]\\,
        \\#\\{j: y_j < rel,\\ r_j < r_i\\}

    :math:`R_k`, :math:`N_k`: the relevant and the non-relevant items in the top ``k``
    (without ``k``: in the list). It is ``count_before`` of the non-relevant items at the
    relevant ones, over :math:`R_k N_k`. No pair (no relevant or no non-relevant item in the
    top ``k``): 0, as :func:`jaxrank.ordered_pair_accuracy` (ir_measures reports no value
    for a query without a relevant document in the top ``k``, i.e. 0 in its means, and
    divides by zero when all of the top ``k`` are relevant).

    ``judgments`` and ``judgments_where`` cannot change the value: they are accepted (and
    checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> # rank order: rel, non, rel, non: 1 of the 4 pairs has the non-relevant first
      >>> float(jaxrank.accuracy([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0]))
      0.75
    """
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    relevant = p.relevant(rel)
    other = jnp.where(p.valid, 1.0 - relevant, 0.0).astype(relevant.dtype)
    w = p.weights()
    wrong = p.ranks.count_before(relevant, w, other)
    pairs = p.ranks.linear(relevant, w) * p.ranks.linear(other, w)
    some = pairs > 0
    return p.finish(jnp.where(some, 1.0 - wrong / jnp.where(some, pairs, 1.0), 0.0))


@segmented()
def compatibility(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    p: float = 0.95,
    normalize: bool = True,
    ideal_ranks: Optional[HardRanks] = None,
) -> Array:
    """Compatibility (Clarke, Vtyurina & Smucker, TOIS 2021; ir_measures' ``Compat``): the
    rank-biased overlap of the ranking :math:`R` with the ideal ranking :math:`I`,

    .. math:: Compat = \\frac{\\sum_{d=1}^{D} p^{d-1} |R_{:d} \\cap I_{:d}| / d}
        {\\sum_{d=1}^{D} p^{d-1} \\min(d, |I|) / d}, \\qquad D = \\max(|R|, |I|)

    (``normalize=False``: over :math:`\\sum_{d \\le D} p^{d-1}` instead, plain RBO). The
    ideal holds the relevant documents (label ``>= rel``) of ``judgments`` when given (else
    of the list) by label, descending; documents of one label keep the ranking's order,
    the retrieved ones first, as ir_measures orders them (by the run's score within a
    grade). ``k`` cuts the ranking after ``k`` documents (ir_measures has no cutoff).
    0 without a relevant document. The relevant items of the list are taken to be among the
    judgments (as they are when both come from one qrels). ``ideal_ranks``: that ideal ranking by label, when the
    caller has it (exact ranks of the judgments, e.g. nDCG's; documents below ``rel`` may
    be in it), so that the judgments are not ranked again.

    Written over the ranks: at depth :math:`d` the ideal is every document of a label above
    :math:`t_d` (the ideal's label at :math:`d`, :math:`s_d` of them) and the first
    :math:`d - s_d` of label :math:`t_d` in the ranking's order, so
    :math:`|R_{:d} \\cap I_{:d}| = A_d + \\min(B_d, d - s_d)` with :math:`A_d`,
    :math:`B_d` the documents of label above and equal to :math:`t_d` in the top
    :math:`d`: ``prefix_sum`` at every depth, once per distinct label of the ideal (a
    ``while_loop``; with a smooth ranker, whose gradient needs a fixed trip count, once per
    ideal position: O(m) prefix sums of every depth).

    Example:
      >>> import jaxrank
      >>> # ranking 1, 2 (labels); ideal 2, 1: overlap 0 at depth 1, 2 at depth 2
      >>> round(float(jaxrank.compatibility([0.9, 0.5], [1, 2], p=0.5)), 5)  # (0.5 * 2/2) / (1 + 0.5 * 2/2)
      0.33333
    """
    prob = _checks.in_range(p, "p", 0.0, 1.0, closed_high=True)
    normalize = _checks.boolean(normalize, "normalize")
    if ideal_ranks is not None and not isinstance(ideal_ranks, HardRanks):
        raise ValueError(f"ideal_ranks must be exact ranks (HardRanks), got {type(ideal_ranks).__name__}")
    prep = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    y, valid = prep.labels, prep.valid
    ideal_y, ideal_valid = (y, valid) if prep.judgments is None else (prep.judgments, prep.jvalid)
    by = hard("stable")(ideal_y, ideal_valid & (ideal_y >= rel), depth=None) if ideal_ranks is None else ideal_ranks
    grades = by.in_rank_order(ideal_y)  # [..., m], by label, descending
    in_ideal = by.valid_positions() & (grades >= rel)
    size = row_sum(in_ideal).astype(jnp.int32)  # |I|
    m = grades.shape[-1]

    n = y.shape[-1]
    ks = (n,) if prep.ks is None else prep.ks
    depth = max(min(max(ks), n), m)
    d = jnp.arange(1, depth + 1)  # [depth]
    cut = jnp.minimum(d, jnp.asarray(ks)[:, None])  # [C, depth]: the ranking cut at k
    flat = jnp.broadcast_to(cut.reshape(-1).astype(y.dtype), y.shape[:-1] + (cut.size,))
    shape = y.shape[:-1] + cut.shape

    def group(j, live, carry):
        """The depths of the ideal's label group that starts at position ``j`` (where
        ``live``); ``above`` carries the documents of the labels above it in the top d."""
        overlap, above = carry
        t = take(grades, jnp.minimum(j, m - 1)[..., None])  # [..., 1]
        end = row_sum(in_ideal & (grades >= t)).astype(jnp.int32)  # the group is [j, end)
        upto = prep.ranks.prefix_sum(((y >= t) & valid).astype(y.dtype), flat).reshape(shape)
        here = ((d > j[..., None]) & (d <= end[..., None]) & live[..., None])[..., None, :]  # [..., 1, depth]
        overlap = jnp.where(here, above + jnp.minimum(upto - above, (d - j[..., None])[..., None, :]), overlap)
        return end, (overlap, jnp.where(live[..., None, None], upto, above))

    # the loops' carry, typed as varying over any shard_map axis the labels or ranks vary over
    zeros = jnp.zeros(shape, y.dtype)
    for x in (y, valid, *jax.tree.leaves(prep.ranks)):
        zeros = vary_like(zeros, x)
    carry = (zeros, zeros)
    if prep.ranks.smooth:
        # every ideal position, those inside a group adding nothing: a fixed trip count
        def body(j, carry):
            at = jnp.full(size.shape, j, jnp.int32)
            first = (j == 0) | (
                take(grades, jnp.maximum(at - 1, 0)[..., None])[..., 0] != take(grades, at[..., None])[..., 0]
            )
            return group(at, first & (at < size), carry)[1]

        overlap, above = lax.fori_loop(0, m, body, carry)
    else:
        # exact ranks: one pass per distinct label of the ideal, as long as a list has one
        def step(state):
            j, carry = state
            end, carry = group(j, j < size, carry)
            return jnp.where(j < size, end, j), carry

        overlap, above = lax.while_loop(lambda state: jnp.any(state[0] < size), step, (jnp.zeros_like(size), carry))[1]
    # past the ideal's end, the ideal is all of it: every relevant document in the top d
    overlap = jnp.where((d > size[..., None])[..., None, :], above, overlap)

    # the depth D of each list and cutoff: the longer of the (cut) ranking and the ideal
    retrieved = row_sum(valid).astype(jnp.int32)[..., None]  # [..., 1]
    big_d = jnp.maximum(jnp.minimum(retrieved, jnp.asarray(ks)), size[..., None])[..., None]  # [..., C, 1]
    fd = d.astype(y.dtype)
    decay = jnp.where(d <= big_d, jnp.power(jnp.asarray(prob, y.dtype), fd - 1.0), 0.0)  # [..., C, depth]
    num = jnp.sum(decay / fd * overlap, axis=-1)
    if normalize:
        value = _c.safe_divide(num, jnp.sum(decay / fd * jnp.minimum(fd, size[..., None, None]), axis=-1))
    else:
        value = num / jnp.sum(decay, axis=-1)
    return prep.finish(value)
