"""Rank correlations of scores with labels, per list: Spearman's rho, Kendall's tau-b
(scipy's ``spearmanr`` / ``kendalltau``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrank.metrics import common as _c
from jaxrank.metrics.common import Array
from jaxrank.metrics.segments import segmented
from jaxrank.ranking.backend import row_sum


def _identity(pos: Array) -> Array:
    return pos


def _both_ranks(scores, labels, where, ranker, judgments, judgments_where):
    """Per-item ranks of the scores (by ``ranker``) and average ranks of the labels,
    both descending, and the mask; exact ranks are multiples of 1/2 and are rounded
    to them (the backward pass that reads them off sums in floats)."""
    p = _c.prepare(scores, labels, None, where, ranker, judgments, judgments_where)
    by_label = _c.EXPECTED_RANKER(p.labels, p.valid, depth=None)
    zeros = jnp.zeros(p.labels.shape, p.labels.dtype)
    label_ranks = jnp.round(2 * _c.item_values(by_label, _identity, zeros)) / 2
    # a tie policy that orders a group by the item weight orders it by the label
    score_ranks = _c.item_values(p.ranks, _identity, -label_ranks)
    if not p.ranks.smooth:
        score_ranks = jnp.round(2 * score_ranks) / 2
    return score_ranks, label_ranks, p.valid


@segmented()
def spearman(
    scores,
    labels,
    *,
    where=None,
    ranker=_c.EXPECTED_RANKER,
    judgments=None,
    judgments_where=None,
) -> Array:
    """Spearman's rank correlation of scores and labels: the Pearson correlation of
    their ranks.

    .. math:: \\rho = \\frac{\\sum_i (r_i - \\bar r)(q_i - \\bar q)}
        {\\sqrt{\\sum_i (r_i - \\bar r)^2 \\sum_i (q_i - \\bar q)^2}}

    :math:`r_i` is item i's rank under ``ranker`` (read through the :class:`Ranks`
    interface, so any ranker works), :math:`q_i` the average rank of its label. The
    default ``hard("expected")`` gives tied scores their average rank: the value is
    scipy's ``spearmanr``. With a smooth ranker the soft ranks make it differentiable
    (a Spearman loss: ``1 - spearman(..., ranker=jaxrank.softrank(...))``). A list
    with fewer than two valid items, or constant scores or labels, gives 0 (scipy: nan).
    ``judgments`` and ``judgments_where`` cannot change the value: they are accepted
    (and checked) so that every metric takes the same keywords.

    Example (the blog's worked example: ranks [1, 3, 2] against [1, 2, 3]):
      >>> import jaxrank
      >>> float(jaxrank.spearman([0.6, 0.4, 0.5], [0.9, 0.6, 0.3]))
      0.5
    """
    rs, ry, valid = _both_ranks(scores, labels, where, ranker, judgments, judgments_where)
    v = valid.astype(rs.dtype)
    count = jnp.maximum(row_sum(v, keepdims=True), 1)
    cs = (rs - row_sum(rs * v, keepdims=True) / count) * v
    cy = (ry - row_sum(ry * v, keepdims=True) / count) * v
    den = row_sum(cs * cs) * row_sum(cy * cy)
    ok = den > 0
    return jnp.where(ok, row_sum(cs * cy) / jnp.sqrt(jnp.where(ok, den, 1)), 0.0)


@segmented()
def kendall_tau(
    scores,
    labels,
    *,
    where=None,
    ranker=_c.EXPECTED_RANKER,
    judgments=None,
    judgments_where=None,
) -> Array:
    """Kendall's tau-b of scores and labels.

    .. math:: \\tau_b = \\frac{C - D}{\\sqrt{(n_0 - n_1)(n_0 - n_2)}}

    :math:`C` and :math:`D` count the concordant and discordant pairs, :math:`n_0 =
    n(n-1)/2`, :math:`n_1` and :math:`n_2` the pairs tied in the ranks of the scores
    and of the labels. Ranks come from ``ranker`` (default ``hard("expected")``: tied
    scores stay tied, as scipy's ``kendalltau``; ``hard()`` breaks them by index).
    Pairs are compared in blocks of rows: O(n^2) work, O(n) memory per list. The value
    is piecewise constant in the scores (no useful gradient). Fewer than two valid
    items, or constant scores or labels, give 0 (scipy: nan). ``judgments`` and
    ``judgments_where`` cannot change the value: they are accepted (and checked) so
    that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.kendall_tau([0.6, 0.4, 0.5], [0.9, 0.6, 0.3])), 5)
      0.33333
    """
    rs, ry, valid = _both_ranks(scores, labels, where, ranker, judgments, judgments_where)
    rs, ry = jax.lax.stop_gradient(rs), jax.lax.stop_gradient(ry)
    n = rs.shape[-1]
    block = max(1, min(n, (1 << 20) // max(1, rs.size)))
    pad = -n % block
    rows = [jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)]) for x in (rs, ry, valid)]

    def one_block(start):
        def piece(x):
            return jax.lax.dynamic_slice_in_dim(x, start, block, axis=-1)[..., :, None]

        bs, by, bv = (piece(x) for x in rows)
        pair = bv & valid[..., None, :]
        ds, dy = jnp.sign(bs - rs[..., None, :]), jnp.sign(by - ry[..., None, :])
        totals = [ds * dy, (ds == 0) & pair, (dy == 0) & pair]
        return jnp.stack([jnp.sum(jnp.where(pair, t, 0), axis=(-2, -1)) for t in totals])

    starts = jnp.arange(0, n + pad, block)
    sums = jnp.sum(jax.lax.map(one_block, starts), axis=0)
    count = row_sum(valid)
    # each sum counts ordered pairs and the diagonal (i, i), which is tied in both
    s_minus_d = sums[0] / 2
    n0 = count * (count - 1) / 2
    n1, n2 = (sums[1] - count) / 2, (sums[2] - count) / 2
    den = (n0 - n1) * (n0 - n2)
    ok = den > 0
    return jnp.where(ok, s_minus_d / jnp.sqrt(jnp.where(ok, den, 1)), 0.0)


def _ones(pos: Array) -> Array:
    return jnp.ones_like(pos)[..., None]


@segmented()
def ordered_pair_accuracy(
    scores,
    labels,
    *,
    where=None,
    ranker=_c.PESSIMISTIC_RANKER,
    judgments=None,
    judgments_where=None,
) -> Array:
    """Ordered pair accuracy: the fraction of the pairs with different labels that
    are ranked in label order.

    .. math:: OPA = \\frac{\\sum_{i, j} [y_i > y_j]\\,[r_i < r_j]}{\\sum_{i, j} [y_i > y_j]}

    The pairs are counted through the ranker, one grade :math:`t` at a time: for the
    items of label :math:`t`, the number of items of higher label ranked above them is
    ``count_before`` with :math:`g = [y = t]`, :math:`w = [y > t]`. The default
    ranker, ``hard("pessimistic")``, counts tied scores as wrongly ordered (rax's
    ``opa_metric``, TF-Ranking's ``OPAMetric``); ``hard("expected")`` counts them one
    half (for binary labels that is :func:`roc_auc`); a smooth ranker gives
    :math:`\\sum_{y_i > y_j} \\pi_{ij}`, with :math:`\\pi_{ij}` its chance that
    ``i`` is above ``j``. A list without such pairs gives 0. Cost: with exact ranks, one
    ``count_before`` per distinct label (a ``while_loop``); with a smooth ranker, ``n`` of
    them (reverse-mode differentiation needs a fixed trip count), O(n^3) for ``approx``.
    ``judgments`` and ``judgments_where`` cannot change the value: they are accepted
    (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> # pairs (2 > 1), (2 > 0), (1 > 0): the last is ranked the wrong way
      >>> round(float(jaxrank.ordered_pair_accuracy([0.9, 0.1, 0.5], [2, 1, 0])), 4)
      0.6667
    """
    p = _c.prepare(scores, labels, None, where, ranker, judgments, judgments_where)
    # Each label's items form one tie group of the labels' exact ranking: its start is
    # the number of higher labels, its end the position of the next lower grade.
    by_label = _c.EXPECTED_RANKER(p.labels, p.valid, depth=None)
    grade = by_label.in_rank_order(p.labels)
    n = p.labels.shape[-1]
    n_valid = by_label.n_valid[..., 0]
    pairs = row_sum(jnp.where(by_label.valid_positions(), by_label.start, 0))

    def correct(c):  # the pairs below the grade at position c of each row (0 past the list)
        t = jnp.take_along_axis(grade, jnp.minimum(c, n - 1)[..., None], axis=-1)
        g = (p.labels == t) & p.valid & (c < n_valid)[..., None]
        w = (p.labels > t) & p.valid
        return p.ranks.count_before(g.astype(p.labels.dtype), _ones, w.astype(p.labels.dtype))[..., 0]

    def next_grade(c):
        return jnp.take_along_axis(by_label.end, jnp.minimum(c, n - 1)[..., None], axis=-1)[..., 0]

    if p.ranks.smooth:
        # reverse-mode needs a fixed trip count: every position, those inside a grade add 0
        first = by_label.start == jnp.arange(n)
        starts = jnp.where(first, jnp.arange(n), n)
        total = jnp.sum(jax.lax.map(lambda c: correct(starts[..., c]), jnp.arange(n), batch_size=min(n, 16)), axis=0)
    else:
        # exact ranks have no gradient: one pass per distinct grade, as long as a row has one
        def body(carry):
            c, total = carry
            return next_grade(c), total + correct(c)

        start = (n_valid * 0, pairs * 0)  # shaped (and varying under shard_map) like the rows
        total = jax.lax.while_loop(lambda carry: jnp.any(carry[0] < n_valid), body, start)[1]
    return _c.safe_divide(total[..., None], pairs)[..., 0]
