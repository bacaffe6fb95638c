"""Intent-aware (diversity) metrics: alpha-nDCG, ERR-IA, NRBP, P-IA, AP-IA, subtopic recall.

A query has ``t`` subtopics (intents); ``labels[..., n, t]`` holds each item's judgment for
each subtopic, and an item is relevant to subtopic ``s`` when ``labels[..., i, s] >= rel``
(:math:`y_{is} \\in \\{0, 1\\}` below). With :math:`c_s(i) = \\#\\{j \\prec i : y_{js} = 1\\}`
the relevant items for ``s`` ranked above ``i``, the novelty-discounted gain of item ``i`` is
:math:`\\sum_s y_{is} (1 - \\alpha)^{c_s(i)}` (Clarke et al., SIGIR 2008). Per subtopic that is
a cascade, :math:`(1 - \\alpha)^{c_s(i)} = \\prod_{j \\prec i} (1 - \\alpha y_{js})`, so

.. math:: \\sum_i f(r_i) \\sum_s y_{is} (1 - \\alpha)^{c_s(i)}
    = \\sum_s \\frac{1}{\\alpha}\\,\\text{cascade}(\\alpha y_s, f)

is the :class:`~jaxrank.ranking.Ranks` operation ``cascade`` once per subtopic: with
:func:`jaxrank.hard` it is ndeval's measure, with a smooth ranker its relaxation, the same code.

The normalisations are ndeval's (``../shared/ref/ndeval/ndeval.c``), so that the values equal
ndeval's and ir_measures' (pyndeval) per topic. ``T`` is the number of subtopics with at least
one relevant judgment (subtopics nobody judged relevant are not counted):

* alpha-DCG@k and ERR-IA@k divide the sum by the "ideal ideal" value, every position covering
  every subtopic: :math:`\\sum_{p \\le k} T (1 - \\alpha)^{p - 1} f(p)`, with
  :math:`f(p) = 1 / \\log_2(p + 1)` (alpha-DCG) or :math:`1 / p` (ERR-IA), except at
  ``k = 1``, which ndeval leaves undivided (its normalising loop starts at position 2);
* alpha-nDCG@k and nERR-IA@k divide that by the same value of the ideal ranking, which ndeval
  builds greedily (:func:`greedy_ideal_ranks`: at each position the item of largest
  novelty-discounted gain, ties to the later item);
* NRBP :math:`= \\frac{1 - (1 - \\alpha)\\beta}{T} \\sum_i \\beta^{r_i - 1} \\sum_s y_{is}
  (1 - \\alpha)^{c_s(i)}` (Clarke et al., ICTIR 2009), nNRBP its ratio to the ideal ranking's;
* P-IA@k :math:`= \\frac{1}{kT} \\sum_s \\#\\{i : r_i \\le k, y_{is} = 1\\}`;
* AP-IA is the mean over the ``T`` subtopics of average precision for that subtopic, whose
  denominator :math:`R_s` counts its relevant judgments;
* subtopic recall (strec@k) :math:`= \\frac{1}{T} \\#\\{s : \\exists i,\\ r_i \\le k,\\ y_{is} = 1\\}`,
  the cascade with :math:`\\alpha = 1`.

Without a cutoff the "ideal ideal" runs over the list's valid items. ``judgments[..., m, t]``
(with ``judgments_where[..., m]``) holds every judged document of the query, retrieved or
not, as ndeval reads its qrels: ``T``, :math:`R_s` and the ideal ranking come from them;
without them the list is taken as complete. A query with ``T = 0`` scores 0.

``alpha`` and ``beta`` may also be traced scalars (arguments of a jitted function): one
compiled program then serves every value, which is checked only when it is a number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks
from jaxrank.metrics import common as _c
from jaxrank.metrics.common import Array, Cutoff
from jaxrank.metrics.segments import segmented
from jaxrank.ranking import Ranks, hard
from jaxrank.ranking.backend import vary_like

_DEFAULT_RANKER = _c.DEFAULT_RANKER


class _Div(NamedTuple):
    ks: Optional[tuple[int, ...]]
    many: bool
    scores: Array
    rel: Array  # [..., n, t] 0/1 floats, 0 on invalid items
    valid: Array  # [..., n]
    judged: Array  # [..., m, t] 0/1: the relevant judgments (the list itself without judgments)
    jvalid: Array  # [..., m]
    ranks: Optional[Ranks]

    @property
    def covered(self) -> Array:
        """``T``: the subtopics with a relevant judgment, ``[...]``."""
        return jnp.sum(jnp.max(self.judged, axis=-2, initial=0), axis=-1)

    def finish(self, values: Array) -> Array:
        return values if self.many else values[..., 0]


def _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel, *, rank=True) -> _Div:
    ks = _c.cutoffs(k)
    scores = _checks.scores(scores)
    labels = jnp.asarray(labels)
    if labels.ndim != scores.ndim + 1 or labels.shape[:-1] != scores.shape:
        raise ValueError(f"labels must have shape {scores.shape} + (t,) (t subtopics), got {labels.shape}")
    valid = _checks.mask(where, scores.shape)
    fdtype = jnp.result_type(float)
    relevant = ((labels >= rel) & valid[..., None]).astype(fdtype)
    if judgments is None:
        if judgments_where is not None:
            raise ValueError("judgments_where was given without judgments")
        judged, jvalid = relevant, valid
    else:
        judgments = jnp.asarray(judgments)
        if (
            judgments.ndim != labels.ndim
            or judgments.shape[:-2] != scores.shape[:-1]
            or (judgments.shape[-1] != labels.shape[-1])
        ):
            raise ValueError(
                f"judgments must have shape {scores.shape[:-1]} + (m, {labels.shape[-1]}), got {judgments.shape}"
            )
        jvalid = _checks.mask(judgments_where, judgments.shape[:-1], "judgments_where", "judgments")
        judged = ((judgments >= rel) & jvalid[..., None]).astype(fdtype)
    depth = None if ks is None else max(ks)
    r = _c.ranks(ranker, scores, where, depth) if rank else None
    return _Div(ks, isinstance(k, (list, tuple)), scores, relevant, valid, judged, jvalid, r)


def _per_subtopic(op: Callable[[Array], Array], y: Array) -> Array:
    """``op(y[..., :, s])`` for every subtopic ``s``, ``[..., C]`` each, summed over ``s``."""
    return jnp.sum(jax.vmap(op, in_axes=-1, out_axes=0)(y), axis=0)


def _novelty_sum(r: Ranks, y: Array, f, alpha: float) -> Array:
    """:math:`\\sum_i f(r_i) \\sum_s y_{is} (1 - \\alpha)^{c_s(i)}`, ``[..., C]``."""
    if isinstance(alpha, float):
        if alpha == 0:
            return r.linear(jnp.sum(y, axis=-1), f)
        return _per_subtopic(lambda ys: r.cascade(alpha * ys, f), y) / alpha
    # traced: the cascade's quotient is 0/0 at alpha = 0, where the plain sum is the value
    safe = jnp.where(alpha == 0, 1.0, alpha)
    cascaded = _per_subtopic(lambda ys: r.cascade(safe * ys, f), y) / safe
    return jnp.where(alpha == 0, r.linear(jnp.sum(y, axis=-1), f), cascaded)


def greedy_ideal_ranks(judged: Array, valid: Array, alpha: float) -> Array:
    """ndeval's ideal ranking of the judged items: ranks ``1..m`` (valid items first).

    Position by position, the item of largest novelty-discounted gain
    :math:`\\sum_s y_{is} (1 - \\alpha)^{c_s}` among those not yet placed; ties go to the
    later item (ndeval's rule with its qrels in ascending docno order). The gains are summed
    over subtopics in order, as ndeval sums them, so that the same ties arise. Once no item
    has gain left, the rest follow in index order (they add nothing to any measure).

    Args:
      judged: ``[..., m, t]`` relevance (0/1) of each item to each subtopic.
      valid: ``[..., m]``.
      alpha: redundancy penalty in [0, 1].

    Example:
      >>> import jax.numpy as jnp
      >>> y = jnp.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
      >>> greedy_ideal_ranks(y, jnp.ones(3, bool), 0.5).tolist()  # ties go to the later item
      [3, 2, 1]
    """
    m, t = judged.shape[-2:]
    fdtype = judged.dtype
    index = jnp.arange(m)
    keep = 1.0 - jnp.asarray(alpha, fdtype)

    def gains(left, placed):
        # added subtopic by subtopic in order (ndeval's order, so that the same ties arise);
        # unrolled, XLA fuses the sum into one pass over the items
        total = jnp.zeros(judged.shape[:-1], fdtype)
        for s in range(t):
            total = total + judged[..., s] * left[..., s, None]
        return jnp.where(placed, -1.0, total)

    def more(carry):
        step, _, _, _, any_active = carry
        return (step < m) & any_active

    def place(carry):
        step, left, placed, ranks, _ = carry
        g = gains(left, placed)
        best = m - 1 - jnp.argmax(g[..., ::-1], axis=-1)  # the last of the largest
        active = jnp.max(g, axis=-1) > 0
        at = (index == best[..., None]) & active[..., None]
        ranks = jnp.where(at, step + 1, ranks)
        chosen = jnp.take_along_axis(judged, best[..., None, None], axis=-2)[..., 0, :]  # [..., t]
        left = left * jnp.where((chosen > 0) & active[..., None], keep, 1.0)
        # one step past the last placement finds nothing and ends the loop
        return step + 1, left, placed | at, ranks, jnp.any(active)

    init = (
        jnp.zeros((), jnp.int32),
        vary_like(jnp.ones(judged.shape[:-2] + (t,), fdtype), judged),
        vary_like(~valid, judged),
        vary_like(jnp.zeros(valid.shape, jnp.int32), judged),
        vary_like(jnp.asarray(True), judged),
    )
    _, _, _, ranks, _ = lax.while_loop(more, place, init)
    placed = jnp.sum(ranks > 0, axis=-1, keepdims=True)
    rest = valid & (ranks == 0)
    after = placed + jnp.cumsum(rest, axis=-1)
    n_valid = jnp.sum(valid, axis=-1, keepdims=True)
    return jnp.where(ranks > 0, ranks, jnp.where(valid, after, n_valid + jnp.cumsum(~valid, axis=-1)))


def _ideal_ideal(d: _Div, f, alpha: float) -> Array:
    """:math:`\\sum_{p \\le k} T (1 - \\alpha)^{p - 1} f(p)` per cutoff, ``[..., C]``; without
    a cutoff up to the number of valid items of the list. At ``k = 1`` it is 1: ndeval's
    normalising loop starts at the second position, so its (and pyndeval's) alpha-DCG@1 and
    ERR-IA@1 are the raw sums."""
    deepest = d.scores.shape[-1] if d.ks is None else max(d.ks)
    pos = jnp.arange(1, deepest + 1, dtype=d.rel.dtype)
    running = d.covered[..., None, None] * jnp.cumsum((1.0 - alpha) ** (pos - 1) * f(pos))[:, None]
    running = running.at[..., 0, :].set(1.0)  # [..., P, 1]
    if d.ks is None:
        count = jnp.sum(d.valid, axis=-1, keepdims=True)[..., None]  # [..., 1, 1]
        at = jnp.take_along_axis(running, jnp.maximum(count - 1, 0), axis=-2)[..., 0, :]
        return jnp.where(count[..., 0, :] > 0, at, 0.0)
    return running[..., jnp.asarray(d.ks) - 1, 0]


def _raw(d: _Div, f, alpha: float) -> Array:
    """:func:`_novelty_sum` of the list within the cutoffs, ``[..., C]``."""
    return _novelty_sum(d.ranks, d.rel, _c.weights(d.ranks, d.ks, f), alpha)


def _raw_ideal(d: _Div, f, alpha: float) -> Array:
    """:func:`_raw` of the judgments in ndeval's greedy ideal order, ``[..., C]``."""
    order = greedy_ideal_ranks(d.judged, d.jvalid, alpha).astype(d.rel.dtype)
    depth = None if d.ks is None else max(d.ks)
    r = hard("stable")(-order, d.jvalid, depth=depth)
    return _novelty_sum(r, d.judged, _c.weights(r, d.ks, f), alpha)


def _unit(value, name: str):
    """A number in [0, 1]; a traced value passes unchecked (module docstring)."""
    if isinstance(value, jax.core.Tracer):
        return value
    return _checks.in_range(value, name, 0.0, 1.0, closed_low=True, closed_high=True)


def _alpha(alpha):
    return _unit(alpha, "alpha")


def _beta(beta):
    return _unit(beta, "beta")


def _geometric(beta: float):
    return lambda pos: beta ** (pos - 1)


_ARGS = """
    Args:
      scores: ``[..., n]``.
      labels: ``[..., n, t]``, each item's judgment for each of ``t`` subtopics.
      k: cutoff, or a sequence of cutoffs (a trailing axis on the result).
      where: ``[..., n]`` valid items.
      rel: the smallest judgment that counts as relevant (ndeval: 1).
      ranker: :func:`jaxrank.hard` (ndeval's value) or a smooth ranker (its relaxation).
      judgments, judgments_where: ``[..., m, t]`` and ``[..., m]``, every judged document
        of the query (module docstring); without them the list is taken as complete.

    Returns:
      ``[...]``, or ``[..., C]`` for a sequence ``k``.
"""


def _documented(metric):
    metric.__doc__ = metric.__doc__.replace("    Example:", _ARGS.lstrip("\n") + "\n    Example:", 1)
    return metric


@segmented(label_axes=1)
@_documented
def alpha_dcg(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    alpha: float = 0.5,
) -> Array:
    """alpha-DCG@k as ndeval reports it: the novelty-discounted DCG over its "ideal ideal".

    .. math:: \\alpha\\text{-DCG@k} = \\frac{\\sum_i [r_i \\le k]\\, \\log_2(r_i + 1)^{-1}
        \\sum_s y_{is} (1 - \\alpha)^{c_s(i)}}{\\sum_{p \\le k} T (1 - \\alpha)^{p-1}\\,
        \\log_2(p + 1)^{-1}}

    (module docstring); ``alpha`` in [0, 1] is the redundancy penalty. TF-Ranking's
    ``AlphaDCGMetric`` is the numerator alone.

    Example:
      >>> import jaxrank
      >>> y = [[1, 0], [1, 0], [0, 1]]  # three items, two subtopics
      >>> round(float(jaxrank.alpha_dcg([3.0, 2.0, 1.0], y, k=2)), 4)  # (1 + .5/log2 3) / (2 + 1/log2 3)
      0.5
    """
    alpha = _alpha(alpha)
    d = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel)
    f = _c.log2_discount
    return d.finish(_c.safe_divide(_raw(d, f, alpha), _ideal_ideal(d, f, alpha)))


@segmented(label_axes=1)
@_documented
def alpha_ndcg(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    alpha: float = 0.5,
) -> Array:
    """alpha-nDCG@k: alpha-DCG over that of ndeval's greedy ideal ranking, 0 when it is 0.

    .. math:: \\alpha\\text{-nDCG@k} = \\frac{\\sum_i [r_i \\le k]\\, \\log_2(r_i + 1)^{-1}
        \\sum_s y_{is} (1 - \\alpha)^{c_s(i)}}{\\text{the same over the ideal ranking}}

    The ideal ranking is :func:`greedy_ideal_ranks` of the judgments (of the list without them).

    Example:
      >>> import jaxrank
      >>> y = [[1, 0], [1, 0], [0, 1]]
      >>> round(float(jaxrank.alpha_ndcg([3.0, 2.0, 1.0], y, k=2)), 4)  # (1 + .5/log2 3) / (1 + 1/log2 3)
      0.8066
    """
    alpha = _alpha(alpha)
    d = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel)
    f = _c.log2_discount
    return d.finish(_c.safe_divide(_raw(d, f, alpha), _raw_ideal(d, f, alpha)))


@segmented(label_axes=1)
@_documented
def err_ia(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    alpha: float = 0.5,
) -> Array:
    """Intent-aware ERR@k as ndeval reports it (Chapelle et al., CIKM 2009): each subtopic's
    ERR with stopping chance ``alpha`` per relevant item, summed, over the "ideal ideal".

    .. math:: \\text{ERR-IA@k} = \\frac{\\sum_i [r_i \\le k]\\, r_i^{-1}
        \\sum_s y_{is} (1 - \\alpha)^{c_s(i)}}{\\sum_{p \\le k} T (1 - \\alpha)^{p-1} p^{-1}}

    Example:
      >>> import jaxrank
      >>> y = [[1, 0], [1, 0], [0, 1]]
      >>> round(float(jaxrank.err_ia([3.0, 2.0, 1.0], y, k=2)), 4)  # (1 + .5/2) / (2 + 1/2)
      0.5
    """
    alpha = _alpha(alpha)
    d = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel)
    return d.finish(_c.safe_divide(_raw(d, _c.inverse, alpha), _ideal_ideal(d, _c.inverse, alpha)))


@segmented(label_axes=1)
@_documented
def nerr_ia(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    alpha: float = 0.5,
) -> Array:
    """ERR-IA@k over that of ndeval's greedy ideal ranking (collection-dependent
    normalisation), 0 when it is 0.

    .. math:: \\text{nERR-IA@k} = \\frac{\\sum_i [r_i \\le k]\\, r_i^{-1}
        \\sum_s y_{is} (1 - \\alpha)^{c_s(i)}}{\\text{the same over the ideal ranking}}

    Example:
      >>> import jaxrank
      >>> y = [[1, 0], [1, 0], [0, 1]]
      >>> round(float(jaxrank.nerr_ia([3.0, 2.0, 1.0], y, k=2)), 4)  # (1 + .5/2) / (1 + 1/2)
      0.8333
    """
    alpha = _alpha(alpha)
    d = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel)
    return d.finish(_c.safe_divide(_raw(d, _c.inverse, alpha), _raw_ideal(d, _c.inverse, alpha)))


@segmented(label_axes=1)
@_documented
def nrbp(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    alpha: float = 0.5,
    beta: float = 0.5,
) -> Array:
    """Novelty- and rank-biased precision (Clarke et al., ICTIR 2009), ``beta`` the patience.

    .. math:: \\text{NRBP} = \\frac{1 - (1 - \\alpha)\\beta}{T} \\sum_i [r_i \\le k]\\,
        \\beta^{r_i - 1} \\sum_s y_{is} (1 - \\alpha)^{c_s(i)}

    ndeval has no cutoff (``k=None``).

    Example:
      >>> import jaxrank
      >>> y = [[1, 0], [1, 0], [0, 1]]
      >>> float(jaxrank.nrbp([3.0, 2.0, 1.0], y))  # (1 - .25)/2 (1 + .5 * .5 + .25 * 1)
      0.5625
    """
    alpha, beta = _alpha(alpha), _beta(beta)
    d = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel)
    scale = (1.0 - (1.0 - alpha) * beta) / jnp.where(d.covered > 0, d.covered, 1)
    return d.finish(_raw(d, _geometric(beta), alpha) * scale[..., None])


@segmented(label_axes=1)
@_documented
def nnrbp(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    alpha: float = 0.5,
    beta: float = 0.5,
) -> Array:
    """NRBP over that of ndeval's greedy ideal ranking, 0 when it is 0 (ndeval: NaN).

    .. math:: \\text{nNRBP} = \\frac{\\sum_i [r_i \\le k]\\, \\beta^{r_i - 1}
        \\sum_s y_{is} (1 - \\alpha)^{c_s(i)}}{\\text{the same over the ideal ranking}}

    Example:
      >>> import jaxrank
      >>> y = [[1, 0], [1, 0], [0, 1]]
      >>> round(float(jaxrank.nnrbp([3.0, 2.0, 1.0], y)), 4)  # 1.5 / (1 + .5 + .25 * .5)
      0.9231
    """
    alpha, beta = _alpha(alpha), _beta(beta)
    d = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel)
    f = _geometric(beta)
    return d.finish(_c.safe_divide(_raw(d, f, alpha), _raw_ideal(d, f, alpha)))


@segmented(label_axes=1)
@_documented
def precision_ia(
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
    """Intent-aware precision@k: relevant (item, subtopic) pairs in the top ``k`` over ``kT``.

    .. math:: \\text{P-IA@k} = \\frac{1}{kT} \\sum_i [r_i \\le k] \\sum_s y_{is}

    As ndeval, a list shorter than ``k`` still divides by ``k``; without ``k``, by its length.

    Example:
      >>> import jaxrank
      >>> y = [[1, 0], [1, 0], [0, 1]]
      >>> float(jaxrank.precision_ia([3.0, 2.0, 1.0], y, k=2))  # 2 / (2 * 2)
      0.5
    """
    d = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel)
    hits = d.ranks.linear(jnp.sum(d.rel, axis=-1), _c.weights(d.ranks, d.ks, _c.ones))
    length = jnp.sum(d.valid, axis=-1)[..., None] if d.ks is None else jnp.asarray(d.ks, d.rel.dtype)
    return d.finish(_c.safe_divide(hits, length * d.covered[..., None]))


@segmented(label_axes=1)
@_documented
def ap_ia(
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
    """Intent-aware average precision (ndeval's MAP-IA per topic): the mean over the ``T``
    judged subtopics of each one's average precision.

    .. math:: \\text{AP-IA@k} = \\frac{1}{T} \\sum_{s: R_s > 0} \\frac{1}{R_s}
        \\sum_i [r_i \\le k]\\, y_{is} \\frac{\\#\\{j : r_j \\le r_i, y_{js} = 1\\}}{r_i}

    :math:`R_s` counts the relevant judgments of subtopic ``s``. ndeval has no cutoff.

    Example:
      >>> import jaxrank
      >>> y = [[1, 0], [1, 0], [0, 1]]
      >>> round(float(jaxrank.ap_ia([3.0, 2.0, 1.0], y)), 4)  # ((1 + 2/2) / 2 + 1/3) / 2
      0.6667
    """
    d = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel)
    f = _c.weights(d.ranks, d.ks, _c.inverse)
    relevant = jnp.sum(d.judged, axis=-2)  # R_s, [..., t]

    def one(ys, r_s):
        return _c.safe_divide(d.ranks.count_before(ys, f, ys), r_s)

    total = jnp.sum(jax.vmap(one, in_axes=(-1, -1), out_axes=0)(d.rel, relevant), axis=0)
    return d.finish(_c.safe_divide(total, d.covered))


@segmented(label_axes=1)
@_documented
def subtopic_recall(
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
    """Subtopic recall (ndeval's strec@k, Zhai et al. 2003): the share of the ``T`` judged
    subtopics that an item in the top ``k`` is relevant to.

    .. math:: \\text{S-recall@k} = \\frac{1}{T} \\sum_s \\Big(1 - \\prod_{i: r_i \\le k}
        (1 - y_{is})\\Big)

    the cascade with :math:`\\alpha = 1` (module docstring).

    Example:
      >>> import jaxrank
      >>> y = [[1, 0], [1, 0], [0, 1]]
      >>> float(jaxrank.subtopic_recall([3.0, 2.0, 1.0], y, k=2))
      0.5
    """
    d = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, rel)
    return d.finish(_c.safe_divide(_raw(d, _c.ones, 1.0), d.covered))
