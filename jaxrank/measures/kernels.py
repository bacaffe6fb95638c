"""One kernel per trec_eval / ir_measures family: ``(ctx, measure) -> [Q, C]`` values.

Every kernel of one call shares a :class:`~jaxrank.measures._ctx._Ctx`: the run ranked once with
``jaxrank.hard("stable")`` (documents come pre-ordered so that this is trec_eval's order).

Each trec_eval measure is formed with trec_eval's double arithmetic, in the order of its C
loop (``../shared/ref/trec_eval/m_*.c``; :mod:`jaxrank.measures._exact` holds the operations
and why XLA needs them): sums added in rank order, divisions where trec_eval divides (P is
hits / k, not hits x 1/k; recall hits / R), the C library's ``log2``, no fused multiply-add.
A value on a rounding tie of the 4th decimal then prints as trec_eval prints it. The counts
(num_rel_ret at cutoffs, success, R-precision, RR) come from :mod:`jaxrank.metrics` called
with that :class:`~jaxrank.ranking.HardRanks` as ``ranker=``; the sums over positions (AP,
DCG, trec_eval's rbp and rbp_resid) read the per-position terms of the ranks
(``HardRanks.linear_terms`` / ``count_before_terms``), which also hold the expectation over
tie orders when :mod:`jaxrank.measures.accumulate` asks for ``ties="expected"``; the set measures and
utility are arithmetic on the counts.

The families whose terms are not linear in the ranked items (bpref, infAP, binG,
interpolated precision, G, ndcg_rel, Rndcg, relstring, ideal_dcg) read the ranked list
itself: they are in :mod:`jaxrank.measures._ranked_list`, which says why. :data:`_FAMILIES`
is the table of both modules, the one that the engine and the accumulator look up.

Relevance values follow trec_eval's ``form_res_rels``: a retrieved document has its qrels rel
when judged (rel >= 0), -1 when absent from the qrels and -2 when in the qrels with a negative
rel (pooled but unjudged); "relevant" means rel >= the level (``-l``), except that nDCG-style
gains use the raw rels and ignore the level, as trec_eval does.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrank import metrics
from jaxrank.measures import _ranked_list
from jaxrank.measures._ctx import _col, _safe_div, kernel_table
from jaxrank.measures._exact import at, powers, rounded, running_sum, total
from jaxrank.measures.parse import _valid_int
from jaxrank.ranking.backend import divide, row_sum

_BY_RANKS, _family = kernel_table()


@_family("runid", "num_q")
def _nothing(ctx, m):
    return jnp.zeros(ctx.scores.shape[:-1] + (1,), ctx.fdtype)


@_family("num_ret")
def _num_ret(ctx, m):
    return _col(ctx.num_ret())


@_family("num_rel")
def _num_rel(ctx, m):
    return _col(ctx.num_rel(ctx.level(m)))


@_family("num_rel_ret")
def _num_rel_ret(ctx, m):
    if m.cuts:  # ranx's hits@k: the relevant documents in the top k
        return ctx.metric(metrics.num_rel_ret, rel=ctx.level(m), k=list(m.cuts))
    return _col(ctx.num_rel_ret(ctx.level(m)))


def _precisions(ctx, level):
    """trec_eval's ``rel_so_far / (i + 1)`` at each relevant position (0 elsewhere)."""

    def build():
        rel = (ctx.where & (ctx.rr >= level)).astype(ctx.fdtype)
        h = ctx.ranks.count_before_terms(rel, rel)  # rel_so_far at a relevant position
        return jnp.where(h != 0, divide(h, ctx.pos), 0.0)

    return ctx.memo(("precisions", level), build)


def _ap_running(ctx, level):
    return ctx.memo(("ap_running", level), lambda: running_sum(_precisions(ctx, level)))


@_family("map", "gm_map")
def _map(ctx, m):
    level = ctx.level(m)

    def build():
        if any(x.family == "map_cut" and ctx.level(x) == level for x in ctx.plan.measures):
            sums = _ap_running(ctx, level)[..., -1]
        else:
            sums = total(_precisions(ctx, level))
        return _safe_div(sums, ctx.num_rel(level))

    return _col(ctx.memo(("map", level), build))


@_family("map_cut")
def _map_cut(ctx, m):
    level = ctx.level(m)
    return _safe_div(at(_ap_running(ctx, level), m.cuts), ctx.num_rel(level)[..., None])


@_family("Rprec")
def _rprec(ctx, m):
    return _col(ctx.metric(metrics.r_precision, judged=True, rel=ctx.level(m)))


@_family("Rprec_mult")
def _rprec_mult(ctx, m):
    level = ctx.level(m)
    return ctx.metric(metrics.r_precision, judged=True, rel=level, mult=[float(x) for x in m.cuts])


@_family("recip_rank")
def _recip_rank(ctx, m):
    return _col(ctx.metric(metrics.reciprocal_rank, rel=ctx.level(m)))


@_family("rr_cut")
def _rr_cut(ctx, m):
    return ctx.metric(metrics.reciprocal_rank, rel=ctx.level(m), k=list(m.cuts))


def _over_cutoffs(ctx, labels, level, cuts):
    """Hits in the top k over k, for each cutoff k, divided as trec_eval divides (18 x 0.001
    is not 18 / 1000)."""
    hits = ctx.metric(metrics.num_rel_ret, labels=labels, rel=level, k=list(cuts))
    return divide(hits, jnp.asarray(cuts, ctx.fdtype))


@_family("P")
def _precision(ctx, m):
    return _over_cutoffs(ctx, None, ctx.level(m), m.cuts)


@_family("recall")
def _recall(ctx, m):
    level = ctx.level(m)
    hits = ctx.metric(metrics.num_rel_ret, rel=level, k=list(m.cuts))
    return _safe_div(hits, ctx.num_rel(level)[..., None])


@_family("success")
def _success(ctx, m):
    if not m.cuts:  # ranx's hit_rate: a relevant document anywhere in the run
        return _col(ctx.metric(metrics.success, rel=ctx.level(m)))
    return ctx.metric(metrics.success, rel=ctx.level(m), k=list(m.cuts))


@_family("f1")
def _f1(ctx, m):
    """ranx's f1@k: ``2 (P R) / (P + R)`` of P@k (hits / k) and R@k (hits / R), 0 when both
    are 0; without a cutoff ranx's f1 is trec_eval's ``set_F``."""
    level = ctx.level(m)
    hits = ctx.metric(metrics.num_rel_ret, rel=level, k=list(m.cuts))
    p = divide(hits, jnp.asarray(m.cuts, ctx.fdtype))
    r = _safe_div(hits, ctx.num_rel(level)[..., None])
    return 2.0 * _safe_div(rounded(p * r), p + r)


@_family("relative_P")
def _relative_p(ctx, m):
    level = ctx.level(m)
    hits = ctx.metric(metrics.num_rel_ret, rel=level, k=list(m.cuts))
    big_r = ctx.num_rel(level)[..., None]
    return _safe_div(hits, jnp.minimum(jnp.asarray(m.cuts, ctx.fdtype), big_r))


def _counts(ctx, m):
    level = ctx.level(m)
    return ctx.num_ret(), ctx.num_rel(level), ctx.num_rel_ret(level)


@_family("set_P")
def _set_p(ctx, m):
    ret, _, rel_ret = _counts(ctx, m)
    return _col(_safe_div(rel_ret, ret))


@_family("set_recall")
def _set_recall(ctx, m):
    _, rel, rel_ret = _counts(ctx, m)
    return _col(_safe_div(rel_ret, rel))


@_family("set_relative_P")
def _set_relative_p(ctx, m):
    ret, rel, rel_ret = _counts(ctx, m)
    return _col(jnp.where(ret > 0, _safe_div(rel_ret, jnp.minimum(ret, rel)), 0.0))


@_family("set_map")
def _set_map(ctx, m):
    ret, rel, rel_ret = _counts(ctx, m)
    return _col(_safe_div(rel_ret * rel_ret, ret * rel))


@_family("set_F")
def _set_f(ctx, m):
    ret, rel, rel_ret = _counts(ctx, m)
    x = m.cuts[0]
    p, r = _safe_div(rel_ret, ret), _safe_div(rel_ret, rel)
    # trec_eval: (x + 1) * P * R / (x * P + R), each product rounded (no FMA)
    num = rounded(rounded((x + 1.0) * p) * r)
    return _col(jnp.where(rel_ret > 0, _safe_div(num, rounded(x * p) + r), 0.0))


@_family("utility")
def _utility(ctx, m):
    ret, rel, rel_ret = _counts(ctx, m)
    a, b, c, d = m.cuts
    n = ctx.plan.num_docs
    # trec_eval's sum of four products, left to right, each product rounded (no FMA)
    value = rounded(a * rel_ret) + rounded(b * (ret - rel_ret))
    value = value + rounded(c * (rel - rel_ret))
    return _col(value + rounded(d * (n + rel_ret - ret - rel)))


@_family("num_nonrel_judged_ret")
def _num_nonrel_judged_ret(ctx, m):
    ret, _, rel_ret = _counts(ctx, m)
    unjudged = row_sum(ctx.where & (ctx.rr < 0))
    return _col(ret - unjudged - rel_ret)


@_family("unj")
def _unj(ctx, m):
    return _over_cutoffs(ctx, (ctx.rr < 0).astype(ctx.fdtype), 1, m.cuts)


@_family("judged")
def _judged(ctx, m):
    flags = (ctx.rr != -1).astype(ctx.fdtype)  # in the qrels, whatever its rel
    k = list(m.cuts) if m.cuts else None
    out = ctx.metric(metrics.precision, labels=flags, rel=1, k=k, adaptive=True)
    return out if m.cuts else _col(out)


def _ndcg_at(ctx, pairs, cuts):
    """trec_eval's ndcg_cut: the results DCG of the first k documents over the ideal DCG of
    the first k judgments, ``[Q, C]`` (0 where the ideal is 0)."""
    return _safe_div(at(ctx.dcg_running(pairs), cuts), at(ctx.ideal_dcg_running(pairs), cuts))


@_family("ndcg_cut")
def _ndcg_cut(ctx, m):
    return _ndcg_at(ctx, m.pairs, m.cuts)


@_family("ndcg")
def _ndcg(ctx, m):
    """trec_eval's ndcg: the whole list's DCG over the ideal DCG of every judgment of positive
    gain (also past the run's end)."""
    return _col(_safe_div(ctx.dcg_total(m.pairs), ctx.ideal_dcg_running(m.pairs)[..., -1]))


@_family("dcg")
def _dcg(ctx, m):
    return _col(ctx.dcg_total(m.pairs))


@_family("dcg_cut")
def _dcg_cut(ctx, m):
    """The results DCG of the first k documents (ranx's ``dcg@k``)."""
    return at(ctx.dcg_running(m.pairs), m.cuts)


@_family("ndcg_exp", "dcg_exp")
def _ndcg_exp(ctx, m):
    """nDCG (``ndcg_exp``) or DCG (``dcg_exp``) with gain ``2^rel - 1`` (Burges et al.;
    ranx's ``ndcg_burges``, ``dcg_burges``); a gain map (ranx's ``-l``: the levels below it
    gain 0) applies to the rels before the exponential."""
    k = list(m.cuts) if m.cuts else None
    if m.family == "dcg_exp":
        out = ctx.metric(metrics.dcg, labels=ctx.gains(ctx.rr, m.pairs), k=k, gain="exp")
    elif not m.pairs:
        out = ctx.metric(metrics.ndcg, judged=True, k=k, gain="exp", ideal_ranks=ctx.ideal_ranks(()))
    else:
        labels, judgments = ctx.gains(ctx.rr, m.pairs), ctx.ideal_gains(m.pairs)
        kw = dict(where=ctx.where, ranker=ctx.ranks, judgments=judgments, judgments_where=ctx.jvalid)
        out = metrics.ndcg(ctx.scores, labels, k=k, gain="exp", ideal_ranks=ctx.ideal_ranks(m.pairs), **kw)
    return out if m.cuts else _col(out)


@_family("err")
def _err(ctx, m):
    k = list(m.cuts) if m.cuts else None
    out = ctx.metric(metrics.err, k=k, max_label=4)
    return out if m.cuts else _col(out)


@_family("rbp_bin")
def _rbp_bin(ctx, m):
    p = dict(m.pairs)["p"]
    k = list(m.cuts) if m.cuts else None
    out = ctx.metric(metrics.rbp, rel=ctx.level(m), p=p, k=k)
    return out if m.cuts else _col(out)


@_family("rbp")
def _rbp(ctx, m):
    """trec_eval's rbp: graded, gains rescaled to [0, 1] per query when some gain is outside
    (min and max over the gains of the levels 0..max rel of the query and the gain pairs)."""
    pairs = dict(m.pairs)
    p = pairs.get("p", 0.9)
    gain_pairs = tuple((k, v) for k, v in m.pairs if _valid_int(k))
    overridden = {int(k) for k, _ in gain_pairs}
    max_level = jnp.max(jnp.where(ctx.jvalid, ctx.judg, -1.0), axis=-1)  # -1: no level
    # smallest and largest default gain (= level) among the levels 0..max_level not overridden
    top = max_level
    for _ in range(len(overridden)):
        top = jnp.where(jnp.isin(top, jnp.asarray(sorted(overridden), ctx.fdtype)), top - 1, top)
    bottom = jnp.zeros_like(max_level)
    for _ in range(len(overridden)):
        bottom = jnp.where(jnp.isin(bottom, jnp.asarray(sorted(overridden), ctx.fdtype)), bottom + 1, bottom)
    has_default = (top >= 0) & (bottom <= max_level)
    lo = jnp.where(has_default, bottom, jnp.inf)
    hi = jnp.where(has_default, top, -jnp.inf)
    for _, v in gain_pairs:
        lo, hi = jnp.minimum(lo, v), jnp.maximum(hi, v)
    rescale = ((lo < 0) | (hi > 1))[..., None]
    g = ctx.gains(ctx.rr, gain_pairs)
    listed = ctx.rr >= 0
    for k in overridden:
        listed = listed | (ctx.rr == k)
    scaled = _safe_div(g - lo[..., None], (hi - lo)[..., None])
    g = jnp.where(rescale & listed, scaled, g)
    return _rbp_of(ctx, g, p, m.cuts)


def _rbp_of(ctx, g, p, cuts):
    """trec_eval's sum of gains ``g`` (input order): sum += gain * p^i (p^i a running
    product), then (1 - p) * sum, over the whole run or the first k of each cutoff."""
    g = jnp.where(ctx.where, g, 0.0)
    terms = ctx.ranks.linear_terms(g) * powers(p, ctx.n, ctx.fdtype)[: ctx.n]
    if not cuts:
        return _col((1.0 - p) * total(terms))
    return (1.0 - p) * at(running_sum(terms), cuts)


@_family("rbp_gain")
def _rbp_gain(ctx, m):
    """ranx's ``rbp.95``: RBP of the rels themselves as gains (not rescaled to [0, 1] as
    trec_eval's rbp; a gain map zeroes the levels below ranx's ``-l``)."""
    return _rbp_of(ctx, ctx.gains(ctx.rr, m.pairs), dict(m.pairs)["p"], m.cuts)


@_family("rbp_resid")
def _rbp_resid(ctx, m):
    p = dict(m.pairs).get("p", 0.9)
    unj = (ctx.where & (ctx.rr < 0)).astype(ctx.fdtype)
    pw = powers(p, ctx.n, ctx.fdtype)
    sum_ = total(ctx.ranks.linear_terms(unj) * pw[: ctx.n])
    # trec_eval: p^num_ret + (1 - p) * sum, the product rounded (no FMA)
    resid = jnp.take(pw, ctx.num_ret().astype(jnp.int32)) + rounded((1.0 - p) * sum_)
    return _col(jnp.where(row_sum(unj) > 0, resid, 0.0))


# ir_measures' Accuracy and Compat, and the C/W/L measures of its cwl_eval provider: the
# metrics of jaxrank.metrics.agreement and .cwl over the shared ranking.
@_family("accuracy")
def _accuracy(ctx, m):
    k = list(m.cuts) if m.cuts else None
    labels = jnp.where(ctx.rr == -1, 0.0, ctx.rr)  # ir_measures: a document not in the qrels is 0
    out = ctx.metric(metrics.accuracy, labels=labels, rel=ctx.level(m), k=k)
    return out if m.cuts else _col(out)


@_family("compat")
def _compat(ctx, m):
    """Compat's ideal is the judgments by rel, nDCG's ideal ordering (computed in the stage
    that sorts: engine._SORTING)."""
    level, pairs = ctx.level(m), dict(m.pairs)
    ideal = ctx.ideal_ranks(()) if level >= 1 else None  # it holds the rels > 0
    kw = dict(p=pairs["p"], normalize=bool(pairs["normalize"]), ideal_ranks=ideal)
    return _col(ctx.metric(metrics.compatibility, judged=True, rel=level, **kw))


_CWL = {
    "inst": (metrics.inst, ("T",)),
    "insq": (metrics.insq, ("T",)),
    "bpm": (metrics.bpm, ("T",)),
    "sdcg": (metrics.sdcg, ()),
    "nerr8": (metrics.nerr8, ()),
    "nerr9": (metrics.nerr9, ()),
    "nerr10": (metrics.nerr10, ("p",)),
    "nerr11": (metrics.nerr11, ("T",)),
}


@_family(*_CWL)
def _cwl(ctx, m):
    """cwl-eval as ir_measures calls it: rels clipped to [min_rel, max_rel] after negative
    ones to 0, scaled to [0, 1]; a document not in the qrels gains 0; at most its 1000
    documents (``max_n``)."""
    fn, names = _CWL[m.family]
    pairs = dict(m.pairs)
    low, high = pairs["min_rel"], pairs["max_rel"]
    labels = jnp.where(ctx.rr == -1, low, jnp.maximum(ctx.rr, 0.0))
    k = min(m.cuts[0], metrics.cwl.DEPTH) if m.cuts else metrics.cwl.DEPTH
    extra = {name: pairs[name] for name in names}
    return _col(ctx.metric(fn, labels=labels, k=k, min_rel=low, max_rel=high, **extra))


# Every family, by name.
_FAMILIES = {**_BY_RANKS, **_ranked_list.FAMILIES}
