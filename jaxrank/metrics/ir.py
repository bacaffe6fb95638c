"""Ranking metrics, each written once over :class:`jaxrank.ranking.Ranks`.

Conventions shared by every metric (see ``docs/conventions.rst``):

* ``scores``, ``labels``, ``where``: ``[..., n]``; leading axes are batch axes.
  The result has shape ``[...]``, plus a trailing axis when ``k`` is a sequence.
* An item is *relevant* when its label is ``>= rel``.
* ``judgments`` (``[..., m]``, with its own mask ``judgments_where``) holds the
  labels of every judged document of the query, retrieved or not; the number of
  relevant documents (recall, AP, R-precision) and the ideal ranking of nDCG come
  from it, as in trec_eval. Without it the list itself is taken as complete, as
  in rax and torchmetrics.
* A query without relevant documents scores 0 (trec_eval); choose what it means
  for a mean in :func:`jaxrank.aggregate`.
* ``ranker`` is :func:`jaxrank.hard` (default: exact ranks, ties ``"stable"``)
  or a smooth ranker; a precomputed :class:`~jaxrank.ranking.Ranks` may be passed
  to share one ranking pass between several metrics.
"""

from __future__ import annotations

import numbers
from typing import Callable, Optional, Sequence, Union

import jax
import jax.numpy as jnp

from jaxrank.ranking import HardRanks, Ranks, hard, row_sum

Array = jax.Array
Cutoff = Union[None, int, Sequence[int]]
Gain = Union[str, Callable[[Array], Array]]
Discount = Union[str, Callable[[Array], Array]]

_DEFAULT_RANKER = hard()


# Argument checks: static, before any tracing ---------------------------------------
def _cutoffs(k: Cutoff, name: str = "k") -> Optional[tuple[int, ...]]:
    if k is None:
        return None
    many = isinstance(k, (list, tuple))
    values = tuple(k) if many else (k,)
    if many and not values:
        raise ValueError(f"{name} must be a positive integer or a non-empty sequence of them")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v <= 0:
            raise ValueError(f"{name} must be a positive integer or a sequence of them, got {k!r}")
    return tuple(int(v) for v in values)


def _as_bool_mask(mask, shape, name: str, like: str) -> Array:
    if mask is None:
        return jnp.ones(shape, bool)
    mask = jnp.asarray(mask)
    if mask.shape != shape:
        raise ValueError(f"{name} must have the shape of {like} {shape}, got {mask.shape}")
    return mask.astype(bool)


def _inputs(scores, labels, where, judgments, judgments_where):
    scores = jnp.asarray(scores)
    labels = jnp.asarray(labels)
    if scores.ndim == 0:
        raise ValueError("scores must have at least one axis (the list), got a scalar")
    if not jnp.issubdtype(scores.dtype, jnp.floating):
        raise ValueError(f"scores must be floating point, got {scores.dtype}")
    if labels.shape != scores.shape:
        raise ValueError(f"labels must have the shape of scores {scores.shape}, got {labels.shape}")
    valid = _as_bool_mask(where, scores.shape, "where", "scores")
    fdtype = jnp.result_type(float)
    labels = jnp.where(valid, labels.astype(fdtype), 0)
    if judgments is not None:
        judgments = jnp.asarray(judgments)
        if judgments.ndim != scores.ndim or judgments.shape[:-1] != scores.shape[:-1]:
            raise ValueError(
                f"judgments must have shape {scores.shape[:-1]} + (m,), got {judgments.shape}"
            )
        jvalid = _as_bool_mask(judgments_where, judgments.shape, "judgments_where", "judgments")
        judgments = jnp.where(jvalid, judgments.astype(fdtype), 0)
    elif judgments_where is not None:
        raise ValueError("judgments_where was given without judgments")
    else:
        jvalid = None
    return scores, labels, valid, judgments, jvalid


def _ranks(ranker, scores, where, depth: Optional[int]) -> Ranks:
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


def _finish(values: Array, k: Cutoff) -> Array:
    """Drop the cutoff axis unless ``k`` was a sequence."""
    if not isinstance(k, (list, tuple)):
        return values[..., 0]
    return values


def _weights(ranks: Ranks, ks: Optional[tuple[int, ...]], per_position: Callable[[Array], Array]):
    """``f(pos) = per_position(pos) * [pos <= k]`` for every cutoff, as ``[..., P, C]``."""

    def f(pos):
        base = per_position(pos)[..., None]
        if ks is None:
            return base
        return base * ranks.cutoff(pos[..., None], jnp.asarray(ks, pos.dtype))

    return f


def _relevant(labels: Array, valid: Array, rel) -> Array:
    return ((labels >= rel) & valid).astype(labels.dtype)


def _num_relevant(labels, valid, judgments, jvalid, rel) -> Array:
    if judgments is None:
        return row_sum(_relevant(labels, valid, rel))
    return row_sum(_relevant(judgments, jvalid, rel))


def _safe_divide(num: Array, den: Array) -> Array:
    den = jnp.broadcast_to(den, num.shape) if den.ndim == num.ndim else den[..., None]
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1), 0.0)


def _ones(x):
    return jnp.ones_like(x)


def _inverse(pos):
    return 1.0 / pos


# Gains and discounts --------------------------------------------------------------
def _gain_fn(gain: Gain) -> Callable[[Array], Array]:
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


def _discount_fn(discount: Discount) -> Callable[[Array], Array]:
    if callable(discount):
        return discount
    if discount == "log2":
        return log2_discount
    raise ValueError(f"discount must be 'log2' or a callable, got {discount!r}")


# Counts ------------------------------------------------------------------------------
def num_ret(scores, labels, *, k: Cutoff = None, where=None, ranker=_DEFAULT_RANKER) -> Array:
    """Number of items retrieved (within the top ``k``): :math:`\\min(n, k)`.

    Example:
      >>> import jaxrank
      >>> int(jaxrank.num_ret([0.3, 0.2, 0.1], [1, 0, 0], k=2))
      2
    """
    ks = _cutoffs(k)
    scores, labels, valid, _, _ = _inputs(scores, labels, where, None, None)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))
    return _finish(ranks.linear(valid.astype(labels.dtype), _weights(ranks, ks, _ones)), k)


def num_rel(
    scores, labels, *, where=None, rel=1, judgments=None, judgments_where=None
) -> Array:
    """Number of relevant documents of the query: from ``judgments`` when given
    (trec_eval), else from the list.

    Example:
      >>> import jaxrank
      >>> int(jaxrank.num_rel([0.3, 0.2], [1, 0], judgments=[1, 2, 0, 1]))
      3
    """
    scores, labels, valid, judgments, jvalid = _inputs(scores, labels, where, judgments, judgments_where)
    return _num_relevant(labels, valid, judgments, jvalid, rel)


def num_rel_ret(
    scores, labels, *, k: Cutoff = None, where=None, rel=1, ranker=_DEFAULT_RANKER
) -> Array:
    """Number of relevant items within the top ``k``:
    :math:`\\sum_i [y_i \\ge rel]\\,[r_i \\le k]`.

    Example:
      >>> import jaxrank
      >>> int(jaxrank.num_rel_ret([0.3, 0.2, 0.1], [0, 1, 1], k=2))
      1
    """
    ks = _cutoffs(k)
    scores, labels, valid, _, _ = _inputs(scores, labels, where, None, None)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))
    return _finish(ranks.linear(_relevant(labels, valid, rel), _weights(ranks, ks, _ones)), k)


# Set and cutoff metrics -----------------------------------------------------------------
def precision(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    adaptive: bool = False,
) -> Array:
    """Precision at ``k``: the fraction of the top ``k`` that is relevant.

    .. math:: P@k = \\frac{1}{k} \\sum_i [y_i \\ge rel]\\,[r_i \\le k]

    Lists shorter than ``k`` still divide by ``k`` (trec_eval, ranx);
    ``adaptive=True`` divides by :math:`\\min(k, n)` instead (rax, TF-Ranking,
    torchmetrics' ``adaptive_k``). Without ``k``: relevant retrieved over retrieved.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.precision([0.3, 0.2, 0.1], [1, 0, 1], k=2))
      0.5
    """
    ks = _cutoffs(k)
    scores, labels, valid, _, _ = _inputs(scores, labels, where, None, None)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))
    f = _weights(ranks, ks, _ones)
    hits = ranks.linear(_relevant(labels, valid, rel), f)
    if ks is None or adaptive:
        retrieved = ranks.linear(valid.astype(labels.dtype), f)
        return _finish(_safe_divide(hits, retrieved), k)
    return _finish(hits / jnp.asarray(ks, hits.dtype), k)


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
    ks = _cutoffs(k)
    scores, labels, valid, judgments, jvalid = _inputs(scores, labels, where, judgments, judgments_where)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))
    hits = ranks.linear(_relevant(labels, valid, rel), _weights(ranks, ks, _ones))
    return _finish(_safe_divide(hits, _num_relevant(labels, valid, judgments, jvalid, rel)), k)


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
    ks = _cutoffs(k)
    scores, labels, valid, judgments, jvalid = _inputs(scores, labels, where, judgments, judgments_where)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))

    def nonrelevant(y, mask):
        return ((y >= 0) & (y < rel) & mask).astype(y.dtype)

    misses = ranks.linear(nonrelevant(labels, valid), _weights(ranks, ks, _ones))
    pool = nonrelevant(labels, valid) if judgments is None else nonrelevant(judgments, jvalid)
    return _finish(_safe_divide(misses, row_sum(pool)), k)


def success(
    scores, labels, *, k: Cutoff = None, where=None, rel=1, ranker=_DEFAULT_RANKER
) -> Array:
    """Success (hit rate) at ``k``: 1 when a relevant item is in the top ``k``.

    .. math:: S@k = \\big[\\min_{i: y_i \\ge rel} r_i \\le k\\big]

    Example:
      >>> import jaxrank
      >>> [float(v) for v in jaxrank.success([0.3, 0.2, 0.1], [0, 0, 1], k=(2, 3))]
      [0.0, 1.0]
    """
    ks = _cutoffs(k)
    scores, labels, valid, _, _ = _inputs(scores, labels, where, None, None)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))
    relevant = _relevant(labels, valid, rel)
    return _finish(ranks.survival(relevant, _weights(ranks, ks, _ones), relevant), k)


def reciprocal_rank(
    scores, labels, *, k: Cutoff = None, where=None, rel=1, ranker=_DEFAULT_RANKER
) -> Array:
    """Reciprocal rank of the first relevant item, 0 if none is within ``k``.

    .. math:: RR@k = \\max_{i: y_i \\ge rel} \\frac{[r_i \\le k]}{r_i}

    trec_eval's ``recip_rank`` has no cutoff (``k=None``).

    Example:
      >>> import jaxrank
      >>> float(jaxrank.reciprocal_rank([0.3, 0.2, 0.1], [0, 1, 1]))
      0.5
    """
    ks = _cutoffs(k)
    scores, labels, valid, _, _ = _inputs(scores, labels, where, None, None)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))
    relevant = _relevant(labels, valid, rel)
    return _finish(ranks.survival(relevant, _weights(ranks, ks, _inverse), relevant), k)


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
) -> Array:
    """Average precision (truncated at ``k``).

    .. math:: AP@k = \\frac{1}{R} \\sum_{i: y_i \\ge rel} [r_i \\le k]\\,
        \\frac{\\#\\{j: y_j \\ge rel, r_j \\le r_i\\}}{r_i}

    :math:`R` is the number of relevant documents in ``judgments`` when given,
    else in the list (trec_eval divides ``map_cut`` by all of them too).

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.average_precision([0.3, 0.2, 0.1], [1, 0, 1])), 5)  # (1 + 2/3) / 2
      0.83333
    """
    ks = _cutoffs(k)
    scores, labels, valid, judgments, jvalid = _inputs(scores, labels, where, judgments, judgments_where)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))
    relevant = _relevant(labels, valid, rel)
    total = ranks.count_before(relevant, _weights(ranks, ks, _inverse), relevant)
    return _finish(_safe_divide(total, _num_relevant(labels, valid, judgments, jvalid, rel)), k)


def r_precision(
    scores,
    labels,
    *,
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
    scores, labels, valid, judgments, jvalid = _inputs(scores, labels, where, judgments, judgments_where)
    ranks = _ranks(ranker, scores, where, None)
    big_r = _num_relevant(labels, valid, judgments, jvalid, rel)
    # The max keeps XLA:CPU from fusing the product and the sum into one FMA, which rounds
    # once where trec_eval rounds twice (e.g. 0.7 * 3 + 0.9 would floor to 3, not 2).
    cut = jnp.stack(
        [jnp.floor(jnp.maximum(x * big_r, -1.0) + 0.9) if x != 1.0 else big_r for x in mults], axis=-1
    )

    hits = ranks.prefix_sum(_relevant(labels, valid, rel), cut)
    values = _safe_divide(hits, cut)
    return values if many else values[..., 0]


def dcg(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    ranker=_DEFAULT_RANKER,
    gain: Gain = "linear",
    discount: Discount = "log2",
) -> Array:
    """Discounted cumulative gain at ``k``.

    .. math:: DCG@k = \\sum_i \\frac{G(y_i)\\,[r_i \\le k]}{\\log_2(1 + r_i)}

    ``gain``: ``"linear"`` :math:`G(y) = \\max(y, 0)` (trec_eval), ``"exp"``
    :math:`2^y - 1` (Burges et al., gdeval), or a callable on labels.
    ``discount``: ``"log2"`` or a callable on 1-based positions.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.dcg([0.3, 0.2, 0.1], [0, 3, 0])), 5)  # 3 / log2(3)
      1.89279
    """
    ks = _cutoffs(k)
    gain_fn, discount_fn = _gain_fn(gain), _discount_fn(discount)
    scores, labels, valid, _, _ = _inputs(scores, labels, where, None, None)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))
    gains = jnp.where(valid, gain_fn(labels), 0)
    return _finish(ranks.linear(gains, _weights(ranks, ks, discount_fn)), k)


def ndcg(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    ranker=_DEFAULT_RANKER,
    gain: Gain = "linear",
    discount: Discount = "log2",
    judgments=None,
    judgments_where=None,
    ideal_ranks: Optional[HardRanks] = None,
) -> Array:
    """Normalised DCG: :math:`DCG@k / IDCG@k`, 0 when the ideal is 0.

    The ideal DCG is :func:`dcg` of the ideal ranking (labels used as scores),
    computed by the same code with the exact ranker, over ``judgments`` when
    given (trec_eval, ranx) or over the list (rax, torchmetrics, scikit-learn).
    ``ideal_ranks``: that ideal ranking, when the caller already has it (exact
    ranks of the judgments, or of the labels, by descending value; items of gain 0
    may be left out), so that the same judgments are not ranked twice.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.ndcg([0.3, 0.2, 0.1], [0, 1, 0])), 5)  # (1/log2 3) / 1
      0.63093
    """
    _cutoffs(k), _gain_fn(gain), _discount_fn(discount)  # fail early on bad arguments
    scores, labels, valid, judgments, jvalid = _inputs(scores, labels, where, judgments, judgments_where)
    # An absent mask stays absent: the rankers then skip counting valid items.
    valid = None if where is None else valid
    actual = dcg(scores, labels, k=k, where=valid, ranker=ranker, gain=gain, discount=discount)
    ideal_labels, ideal_valid = (labels, valid) if judgments is None else (judgments, jvalid)
    if ideal_ranks is not None and not isinstance(ideal_ranks, HardRanks):
        raise ValueError(f"ideal_ranks must be exact ranks (HardRanks), got {type(ideal_ranks).__name__}")
    ideal = dcg(
        ideal_labels,
        ideal_labels,
        k=k,
        where=ideal_valid,
        ranker=hard("stable") if ideal_ranks is None else ideal_ranks,
        gain=gain,
        discount=discount,
    )
    return jnp.where(ideal > 0, actual / jnp.where(ideal > 0, ideal, 1), 0.0)


def err(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    ranker=_DEFAULT_RANKER,
    max_label: float = 4,
) -> Array:
    """Expected reciprocal rank (Chapelle et al., 2009), a cascade model.

    .. math:: ERR@k = \\sum_i \\frac{[r_i \\le k]}{r_i}\\, p_i
        \\prod_{j: r_j < r_i} (1 - p_j), \\qquad p_i = \\frac{2^{y_i} - 1}{2^{y_{max}}}

    ``max_label`` is :math:`y_{max}`, the highest grade of the scale (4 in gdeval).

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.err([0.3, 0.2], [4, 4])), 5)  # 15/16 + (1/2)(15/16)(1/16)
      0.9668
    """
    ks = _cutoffs(k)
    scores, labels, valid, _, _ = _inputs(scores, labels, where, None, None)
    depth = None if ks is None or getattr(ranker, "ties", None) == "expected" else max(ks)
    ranks = _ranks(ranker, scores, where, depth)
    stop = jnp.where(valid, (jnp.exp2(jnp.maximum(labels, 0)) - 1) / jnp.exp2(max_label), 0)
    return _finish(ranks.cascade(stop, _weights(ranks, ks, _inverse)), k)


def rbp(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    p: float = 0.8,
) -> Array:
    """Rank-biased precision (Moffat & Zobel, 2008) with persistence ``p``.

    .. math:: RBP@k = (1 - p) \\sum_i [y_i \\ge rel]\\,[r_i \\le k]\\, p^{r_i - 1}

    Example:
      >>> import jaxrank
      >>> float(jaxrank.rbp([0.3, 0.2], [0, 1], p=0.5))  # 0.5 * 0.5
      0.25
    """
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p!r}")
    ks = _cutoffs(k)
    scores, labels, valid, _, _ = _inputs(scores, labels, where, None, None)
    ranks = _ranks(ranker, scores, where, None if ks is None else max(ks))

    def decay(pos):
        return (1 - p) * jnp.power(p, pos - 1)

    return _finish(ranks.linear(_relevant(labels, valid, rel), _weights(ranks, ks, decay)), k)
