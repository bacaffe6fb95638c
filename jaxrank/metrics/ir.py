"""The IR metrics of trec_eval and its peers (precision ... rbp), each once over :class:`Ranks`."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Optional, Union

import jax.numpy as jnp

from jaxrank import _checks
from jaxrank.metrics import common as _c
from jaxrank.metrics._ideal import ideal_dcg
from jaxrank.metrics.common import Array, Cutoff, Discount, Gain
from jaxrank.metrics.curves import threshold_precision_sum
from jaxrank.metrics.segments import segmented
from jaxrank.ranking import HardRanks, hard
from jaxrank.ranking.backend import row_sum

_DEFAULT_RANKER = _c.DEFAULT_RANKER


# Set and cutoff metrics -----------------------------------------------------------------
@segmented()
def precision(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    adaptive: bool = False,
) -> Array:
    """Precision at ``k``: the fraction of the top ``k`` that is relevant.

    .. math:: P@k = \\frac{1}{k} \\sum_i [y_i \\ge rel]\\,[r_i \\le k]

    Lists shorter than ``k`` still divide by ``k`` (trec_eval, ranx);
    ``adaptive=True`` divides by :math:`\\min(k, n)` instead (rax, TF-Ranking,
    torchmetrics' ``adaptive_k``). Without ``k``: relevant retrieved over retrieved.

    ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.precision([0.3, 0.2, 0.1], [1, 0, 1], k=2))
      0.5
    """
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    hits = p.at_cutoffs(p.relevant(rel))
    if p.ks is None or adaptive:
        return p.finish(_c.safe_divide(hits, p.at_cutoffs(p.valid.astype(p.labels.dtype))))
    return p.finish(hits / jnp.asarray(p.ks, hits.dtype))


@segmented()
def recall(
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
    """Recall at ``k``: the fraction of the relevant documents in the top ``k``.

    .. math:: R@k = \\frac{1}{R} \\sum_i [y_i \\ge rel]\\,[r_i \\le k]

    :math:`R` counts the relevant documents of ``judgments`` when given (trec_eval),
    else of the list. 0 when :math:`R = 0`.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.recall([0.3, 0.2, 0.1], [1, 0, 1], k=2))
      0.5
      >>> float(jaxrank.recall([0.3, 0.2, 0.1], [1, 0, 1], k=2, judgments=[1, 1, 1, 1]))
      0.25
    """
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    return p.finish(_c.safe_divide(p.at_cutoffs(p.relevant(rel)), p.num_relevant(rel)))


@segmented()
def fallout(
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
    """Fall-out at ``k``: the fraction of the non-relevant documents in the top ``k``.

    .. math:: FO@k = \\frac{1}{N} \\sum_i [0 \\le y_i < rel]\\,[r_i \\le k]

    :math:`N` counts the judged non-relevant documents (label in ``[0, rel)``) of
    ``judgments`` when given, else of the list; 0 when :math:`N = 0`.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.fallout([0.3, 0.2, 0.1], [1, 0, 0], k=2))
      0.5
    """
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)

    def nonrelevant(y, mask):
        return ((y >= 0) & (y < rel) & mask).astype(y.dtype)

    misses = p.at_cutoffs(nonrelevant(p.labels, p.valid))
    pool = nonrelevant(p.labels, p.valid) if p.judgments is None else nonrelevant(p.judgments, p.jvalid)
    return p.finish(_c.safe_divide(misses, row_sum(pool)))


@segmented()
def success(
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
    """Success (hit rate) at ``k``: 1 when a relevant item is in the top ``k``.

    .. math:: S@k = \\big[\\min_{i: y_i \\ge rel} r_i \\le k\\big]

    ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> [float(v) for v in jaxrank.success([0.3, 0.2, 0.1], [0, 0, 1], k=(2, 3))]
      [0.0, 1.0]
    """
    return _first_relevant(_c.ones, scores, labels, k, where, rel, ranker, judgments, judgments_where)


@segmented()
def reciprocal_rank(
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
    """Reciprocal rank of the first relevant item, 0 if none is within ``k``.

    .. math:: RR@k = \\max_{i: y_i \\ge rel} \\frac{[r_i \\le k]}{r_i}

    trec_eval's ``recip_rank`` has no cutoff (``k=None``).

    ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.reciprocal_rank([0.3, 0.2, 0.1], [0, 1, 1]))
      0.5
    """
    return _first_relevant(_c.inverse, scores, labels, k, where, rel, ranker, judgments, judgments_where)


def _first_relevant(per_position, scores, labels, k, where, rel, ranker, judgments, judgments_where) -> Array:
    """``per_position`` of the first relevant item's position, 0 past ``k`` (success, RR)."""
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    relevant = p.relevant(rel)
    return p.finish(p.ranks.survival(relevant, p.weights(per_position), relevant))


@segmented()
def average_precision(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    threshold_ties: bool = False,
) -> Array:
    """Average precision (truncated at ``k``).

    .. math:: AP@k = \\frac{1}{R} \\sum_{i: y_i \\ge rel} [r_i \\le k]\\,
        \\frac{\\#\\{j: y_j \\ge rel, r_j \\le r_i\\}}{r_i}

    :math:`R` is the number of relevant documents in ``judgments`` when given,
    else in the list (trec_eval divides ``map_cut`` by all of them too).
    ``threshold_ties=True`` makes each group of tied scores one threshold, as
    scikit-learn's ``average_precision_score``: every relevant item of a group takes
    the precision at the group's end (cut at ``k``); it needs the exact ranker, whose
    tie policy then does not matter.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.average_precision([0.3, 0.2, 0.1], [1, 0, 1])), 5)  # (1 + 2/3) / 2
      0.83333
    """
    threshold_ties = _checks.boolean(threshold_ties, "threshold_ties")
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where, rank=not threshold_ties)
    relevant = p.relevant(rel)
    if threshold_ties:
        total = threshold_precision_sum(p.scores, where, relevant, ranker, p.ks)
    else:
        total = p.ranks.count_before(relevant, p.weights(_c.inverse), relevant)
    return p.finish(_c.safe_divide(total, p.num_relevant(rel)))


@segmented()
def r_precision(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    mult: Union[float, Sequence[float]] = 1.0,
) -> Array:
    """Precision at :math:`R`, the number of relevant documents (no ``k``).

    .. math:: RP = \\frac{1}{R} \\sum_i [y_i \\ge rel]\\,[r_i \\le R]

    ``mult`` measures at :math:`\\lfloor mult \\cdot R + 0.9 \\rfloor` instead
    (trec_eval's ``Rprec_mult``, which rounds this way), dividing by that cutoff; a
    sequence of them gives a trailing axis, from one ranking pass (like ``k``).

    ``k`` (the cutoff is R) cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.r_precision([0.3, 0.2, 0.1], [0, 1, 1]))  # R = 2
      0.5
      >>> # cutoffs floor(0.5 * 2 + 0.9) = 1 and floor(1.5 * 2 + 0.9) = 3
      >>> [round(float(v), 4) for v in jaxrank.r_precision([0.3, 0.2, 0.1], [0, 1, 1], mult=(0.5, 1.5))]
      [0.0, 0.6667]
    """
    many = isinstance(mult, (list, tuple))
    mults = tuple(mult) if many else (mult,)
    if not mults or any(isinstance(x, bool) or not isinstance(x, numbers.Real) or not x > 0 for x in mults):
        raise ValueError(f"mult must be a positive number or a non-empty sequence of them, got {mult!r}")
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where, full=True)
    big_r = p.num_relevant(rel)
    # The max keeps XLA:CPU from fusing the product and the sum into one FMA, which rounds
    # once where trec_eval rounds twice (e.g. 0.7 * 3 + 0.9 would floor to 3, not 2).
    cut = jnp.stack([jnp.floor(jnp.maximum(x * big_r, -1.0) + 0.9) if x != 1.0 else big_r for x in mults], axis=-1)

    hits = p.ranks.prefix_sum(p.relevant(rel), cut)
    values = _c.safe_divide(hits, cut)
    return values if many else values[..., 0]


@segmented(per_item=("weights",))
def dcg(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    gain: Gain = "linear",
    discount: Discount = "log2",
    weights=None,
) -> Array:
    """Discounted cumulative gain at ``k``.

    .. math:: DCG@k = \\sum_i \\frac{w_i\\, G(y_i)\\,[r_i \\le k]}{\\log_2(1 + r_i)}

    ``gain``: ``"linear"`` :math:`G(y) = \\max(y, 0)` (trec_eval), ``"exp"``
    :math:`2^y - 1` (Burges et al., gdeval), or a callable on labels.
    ``discount``: ``"log2"`` or a callable on 1-based positions.
    ``weights``: per-item weights :math:`w` (``[..., n]``, default 1), as rax's.

    ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.dcg([0.3, 0.2, 0.1], [0, 3, 0])), 5)  # 3 / log2(3)
      1.89279
    """
    gain_fn, discount_fn = _c.gain_fn(gain), _c.discount_fn(discount)
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    return p.finish(p.at_cutoffs(p.weighted(weights, gain_fn(p.labels)), discount_fn))


@segmented(per_item=("weights",))
def ndcg(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    gain: Gain = "linear",
    discount: Discount = "log2",
    ideal_ranks: Optional[HardRanks] = None,
    weights=None,
) -> Array:
    """Normalised DCG: :math:`DCG@k / IDCG@k`, 0 when the ideal is 0.

    The ideal DCG is :func:`dcg` of the ideal ranking (labels used as scores),
    computed by the same code with the exact ranker, over ``judgments`` when
    given (trec_eval, ranx) or over the list (rax, torchmetrics, scikit-learn).
    ``ideal_ranks``: that ideal ranking, when the caller already has it (exact
    ranks of the judgments, or of the labels, by descending value; items of gain 0
    may be left out), so that the same judgments are not ranked twice.
    ``weights`` (per item, as :func:`dcg`'s) weigh the gains of both; the ideal then
    orders the items by weighted gain :math:`w_i G(y_i)` (rax's ``ndcg_metric``), and
    cannot come from ``judgments`` or ``ideal_ranks``.

    ``rel`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.ndcg([0.3, 0.2, 0.1], [0, 1, 0])), 5)  # (1/log2 3) / 1
      0.63093
    """
    _c.gain_fn(gain), _c.discount_fn(discount)  # fail early on bad arguments
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where, rank=False)
    # An absent mask stays absent: the rankers then skip counting valid items.
    valid = None if where is None else p.valid
    actual = dcg(p.scores, p.labels, k=k, where=valid, ranker=ranker, gain=gain, discount=discount, weights=weights)
    if weights is not None:
        if p.judgments is not None or ideal_ranks is not None:
            raise ValueError("ndcg: weights cannot be combined with judgments or ideal_ranks (they carry no weights)")
        ideal_gains = p.weighted(weights, _c.gain_fn(gain)(p.labels))
        ideal = dcg(
            ideal_gains,
            p.labels,
            k=k,
            where=valid,
            ranker=hard("stable"),
            gain=gain,
            discount=discount,
            weights=weights,
        )
        return jnp.where(ideal > 0, actual / jnp.where(ideal > 0, ideal, 1), 0.0)
    ideal_labels, ideal_valid = (p.labels, valid) if p.judgments is None else (p.judgments, p.jvalid)
    if ideal_ranks is not None and not isinstance(ideal_ranks, HardRanks):
        raise ValueError(f"ideal_ranks must be exact ranks (HardRanks), got {type(ideal_ranks).__name__}")
    # A soft cutoff with a floor past k (jaxrank.laplace's reach) counts the items past k in
    # the DCG; the ideal ranking is scored by the same cutoff, so the ratio keeps its range.
    reach = float(getattr(ranker, "reach", 0.0)) if p.ks is not None else 0.0
    ks = p.ks if not reach else p.ks + (ideal_labels.shape[-1],)

    def ranked(y=ideal_labels):  # [..., C]
        by = hard("stable") if ideal_ranks is None else ideal_ranks
        cut = None if ks is None else list(ks)
        ideal = dcg(y, y, k=cut, where=ideal_valid, ranker=by, gain=gain, discount=discount)
        return ideal[..., None] if cut is None else ideal

    if ideal_ranks is None and isinstance(gain, str):
        # integer grades: the ideal from counts per grade, not a second ranking; the labels
        # in their own dtype (integers are counted without a float copy)
        every = p.valid if p.judgments is None else p.jvalid
        grades = jnp.asarray(labels if p.judgments is None else judgments)
        # the ranking path converts the labels to floats itself (as _c.inputs does), inside
        # its branch: no float copy of the labels is kept alive beside the counting one
        in_branch = lambda: ranked(jnp.where(every, grades.astype(ideal_labels.dtype), 0))  # noqa: E731
        ideal = ideal_dcg(grades, every, ks, _c.gain_fn(gain), _c.discount_fn(discount), in_branch)
    else:
        ideal = ranked()
    if reach:
        ideal = (1 - reach) * ideal[..., :-1] + reach * ideal[..., -1:]
    ideal = p.finish(ideal)
    return jnp.where(ideal > 0, actual / jnp.where(ideal > 0, ideal, 1), 0.0)


@segmented()
def err(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    max_label: float = 4,
) -> Array:
    """Expected reciprocal rank (Chapelle et al., 2009), a cascade model.

    .. math:: ERR@k = \\sum_i \\frac{[r_i \\le k]}{r_i}\\, p_i
        \\prod_{j: r_j < r_i} (1 - p_j), \\qquad p_i = \\frac{2^{y_i} - 1}{2^{y_{max}}}

    ``max_label`` is :math:`y_{max}`, the highest grade of the scale (4 in gdeval).

    ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.err([0.3, 0.2], [4, 4])), 5)  # 15/16 + (1/2)(15/16)(1/16)
      0.9668
    """
    full = getattr(ranker, "ties", None) == "expected"
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where, full=full)
    stop = jnp.where(p.valid, (jnp.exp2(jnp.maximum(p.labels, 0)) - 1) / jnp.exp2(max_label), 0)
    return p.finish(p.ranks.cascade(stop, p.weights(_c.inverse)))


@segmented()
def rbp(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    p: float = 0.8,
) -> Array:
    """Rank-biased precision (Moffat & Zobel, 2008) with persistence ``p``.

    .. math:: RBP@k = (1 - p) \\sum_i [y_i \\ge rel]\\,[r_i \\le k]\\, p^{r_i - 1}

    ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.rbp([0.3, 0.2], [0, 1], p=0.5))  # 0.5 * 0.5
      0.25
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p!r}")

    def decay(pos):
        return (1 - p) * jnp.power(p, pos - 1)

    prep = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    return prep.finish(prep.at_cutoffs(prep.relevant(rel), decay))
