"""One kernel per trec_eval / ir_measures family: ``(ctx, measure) -> [Q, C]`` values.

Every kernel of one call shares a :class:`~jaxrank.trec._ctx._Ctx`: the run ranked once with
``jaxrank.hard("stable")`` (documents come pre-ordered so that this is trec_eval's order).
Measures that :mod:`jaxrank.metrics` has (P, recall, AP/map_cut, R-precision, RR, nDCG, DCG,
success, ERR, RBP with ``rel``, the counts, set_P, set_recall) are those functions, called
with that :class:`~jaxrank.ranking.HardRanks` as ``ranker=``; trec_eval's graded rbp,
rbp_resid and unj go through the ``Ranks`` operations (``ranks.linear``), being linear in
the ranked items; the set measures and utility are arithmetic on the counts.

Families that do not compute through the ``Ranks`` interface (neither a metrics function
nor a ``Ranks`` operation): ``bpref``/``gm_bpref``, ``infAP``, ``binG``, ``iprec_at_recall``,
``11pt_avg``, ``G``, ``ndcg_rel``, ``Rndcg`` and ``relstring`` read the ranked list itself
(the relevance values in rank order, ``ranks.in_rank_order``, through ``_Ctx.rr_s``,
``rel_s``, ``cum_rel`` and ``dcg_terms``), and ``ideal_dcg`` reads the ideal ordering of the
judgments (``_Ctx.ideal``). Why: their per-position terms are not linear in the ranked
items. They depend on prefix counts through a min (bpref's ``min(nonrel above, R)``,
infAP's judged-above ratio), through a running max over positions (interpolated
precision), through the logarithm of a prefix count (binG, G), or on prefix DCGs divided by
ideal prefix DCGs (ndcg_rel, Rndcg); relstring returns the ranked values themselves. They
still use the one ranking of the call: no second sort.

Relevance values follow trec_eval's ``form_res_rels``: a retrieved document has its qrels rel
when judged (rel >= 0), -1 when absent from the qrels and -2 when in the qrels with a negative
rel (pooled but unjudged); "relevant" means rel >= the level (``-l``), except that nDCG-style
gains use the raw rels and ignore the level, as trec_eval does.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxrank import metrics
from jaxrank.ranking._backend import cumsum, row_sum
from jaxrank.trec._ctx import _col, _Ctx, _identity, _safe_div
from jaxrank.trec._plan import INFAP_EPSILON
from jaxrank.trec.measures import Measure, _valid_int

# Each family: (ctx, measure) -> [Q, C] values (C = number of columns; relstring: codes).
_FAMILIES: dict[str, Callable[[_Ctx, Measure], jax.Array]] = {}


def _family(*names):
    def register(fn):
        for n in names:
            _FAMILIES[n] = fn
        return fn

    return register


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
    return _col(ctx.num_rel_ret(ctx.level(m)))


@_family("map", "gm_map")
def _map(ctx, m):
    return _col(
        ctx.memo(("map", ctx.level(m)), lambda: ctx.metric(metrics.average_precision, judged=True, rel=ctx.level(m)))
    )


@_family("map_cut")
def _map_cut(ctx, m):
    return ctx.metric(metrics.average_precision, judged=True, rel=ctx.level(m), k=list(m.cuts))


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
    """Hits in the top k over k, for each cutoff k, divided as trec_eval divides: XLA would
    fold a division by constants into the weights of the hit count (18 x 0.001 is not
    18 / 1000), so the divisor is made data-dependent."""
    hits = ctx.metric(metrics.num_rel_ret, labels=labels, rel=level, k=list(cuts))
    return hits / jnp.where(hits >= 0, jnp.asarray(cuts, ctx.fdtype), 1.0)


@_family("P")
def _precision(ctx, m):
    return _over_cutoffs(ctx, None, ctx.level(m), m.cuts)


@_family("recall")
def _recall(ctx, m):
    return ctx.metric(metrics.recall, judged=True, rel=ctx.level(m), k=list(m.cuts))


@_family("success")
def _success(ctx, m):
    return ctx.metric(metrics.success, rel=ctx.level(m), k=list(m.cuts))


@_family("relative_P")
def _relative_p(ctx, m):
    level = ctx.level(m)
    hits = ctx.metric(metrics.num_rel_ret, rel=level, k=list(m.cuts))
    big_r = ctx.num_rel(level)[..., None]
    return _safe_div(hits, jnp.minimum(jnp.asarray(m.cuts, ctx.fdtype), big_r))


@_family("set_P")
def _set_p(ctx, m):
    return _col(ctx.metric(metrics.precision, rel=ctx.level(m)))


@_family("set_recall")
def _set_recall(ctx, m):
    return _col(ctx.metric(metrics.recall, judged=True, rel=ctx.level(m)))


def _counts(ctx, m):
    level = ctx.level(m)
    return ctx.num_ret(), ctx.num_rel(level), ctx.num_rel_ret(level)


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
    return _col(jnp.where(rel_ret > 0, _safe_div((x + 1.0) * p * r, x * p + r), 0.0))


@_family("utility")
def _utility(ctx, m):
    ret, rel, rel_ret = _counts(ctx, m)
    a, b, c, d = m.cuts
    n = ctx.plan.num_docs
    return _col(a * rel_ret + b * (ret - rel_ret) + c * (rel - rel_ret) + d * (n + rel_ret - ret - rel))


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


def _whole(ctx) -> int:
    """A cutoff that keeps both the whole list and every judgment."""
    return max(ctx.n, ctx.m)


def _ndcg_rels(ctx):
    """trec_eval's ``ndcg`` and ``ndcg_cut`` (gains are the rels), ``{k: [Q]}``: one
    :func:`metrics.ndcg` call for every cutoff of the plan and the whole list (``k = n``),
    so that the judgments are put in their ideal order once. The whole list's key is
    ``max(n, m)``: the ideal DCG counts every judged document, also past the run's end."""

    def build():
        cuts = {k for m in ctx.plan.measures if m.family == "ndcg_cut" and not m.pairs for k in m.cuts}
        ks = sorted(cuts | {_whole(ctx)})
        values = ctx.metric(metrics.ndcg, judged=True, k=ks, ideal_ranks=ctx.ideal_ranks(()))
        return {k: values[..., i] for i, k in enumerate(ks)}

    return ctx.memo("ndcg_rels", build)


@_family("ndcg_cut")
def _ndcg_cut(ctx, m):
    if not m.pairs:
        return jnp.stack([_ndcg_rels(ctx)[k] for k in m.cuts], -1)
    return _ndcg_gains(ctx, m.pairs, list(m.cuts))


def _ndcg_gains(ctx, pairs, k):
    """nDCG with a gain map: gains passed as labels (results: every rel; ideal: the positive
    gains of judged documents), so the ideal is ordered by gain, as trec_eval orders it."""
    gains = ctx.gains(ctx.rr, pairs)
    ideal = ctx.ideal_gains(pairs)
    return metrics.ndcg(
        ctx.scores,
        gains,
        k=k,
        where=ctx.where,
        ranker=ctx.ranks,
        gain=_identity,
        judgments=ideal,
        judgments_where=ideal > 0,
        ideal_ranks=ctx.ideal_ranks(pairs),
    )


@_family("ndcg")
def _ndcg(ctx, m):
    if not m.pairs:
        return _col(_ndcg_rels(ctx)[_whole(ctx)])
    return _col(_ndcg_gains(ctx, m.pairs, None))


@_family("dcg")
def _dcg(ctx, m):
    gains = ctx.gains(ctx.rr, m.pairs)
    return _col(ctx.metric(metrics.dcg, labels=gains, gain=_identity))


@_family("ideal_dcg")
def _ideal_dcg(ctx, m):
    ig = ctx.ideal(m.pairs)
    return _col(row_sum(ig * metrics.log2_discount(jnp.arange(1, ctx.m + 1, dtype=ctx.fdtype))))


@_family("ndcg_exp")
def _ndcg_exp(ctx, m):
    k = list(m.cuts) if m.cuts else None
    out = ctx.metric(metrics.ndcg, judged=True, k=k, gain="exp", ideal_ranks=ctx.ideal_ranks(()))
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


def _decay(p, cuts):
    def f(pos):
        w = ((1.0 - p) * jnp.power(p, pos - 1.0))[..., None]
        if cuts:
            w = w * (pos[..., None] <= jnp.asarray(cuts, pos.dtype))
        return w

    return f


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
    g = jnp.where(ctx.where, g, 0.0)
    out = ctx.ranks.linear(g, _decay(p, m.cuts))
    return out


@_family("rbp_resid")
def _rbp_resid(ctx, m):
    p = dict(m.pairs).get("p", 0.9)
    unj = (ctx.where & (ctx.rr < 0)).astype(ctx.fdtype)
    tail = jnp.power(p, ctx.num_ret())
    resid = ctx.ranks.linear(unj, _decay(p, ()))[..., 0] + tail
    return _col(jnp.where(row_sum(unj) > 0, resid, 0.0))


@_family("bpref", "gm_bpref")
def _bpref(ctx, m):
    level = ctx.level(m)

    def build():
        rr, valid = ctx.rr_s(), ctx.valid_s()
        rel = valid & (rr >= max(level, 0))
        nonrel = valid & (rr >= 0) & (rr < level)
        big_r = ctx.num_rel(level)[..., None]
        big_n = row_sum(ctx.jvalid & (ctx.judg < level))[..., None]
        before = cumsum(nonrel.astype(ctx.fdtype))  # at a relevant position: nonrel above it
        denom = jnp.minimum(big_n, big_r)
        # trec_eval: 1 - min(before, R) / min(N, R). Written as a difference of counts over
        # the count: XLA turns x / broadcast(y) into x * (1 / y), and 1 - 10 * (1 / 10)
        # would be -5.6e-17 (printed -0.0000) where trec_eval has 0.
        term = jnp.where(before > 0, (denom - jnp.minimum(before, big_r)) / jnp.where(denom > 0, denom, 1), 1.0)
        return _safe_div(row_sum(jnp.where(rel, term, 0.0)), big_r[..., 0])

    return _col(ctx.memo(("bpref", level), build))


@_family("infAP")
def _infap(ctx, m):
    level = ctx.level(m)
    rr, valid = ctx.rr_s(), ctx.valid_s()
    f = ctx.fdtype
    rel = valid & (rr >= max(level, 0))
    nonrel = (valid & (rr >= 0) & (rr < level)).astype(f)
    pooled = (valid & (rr == -2)).astype(f)
    rs = cumsum(rel.astype(f))
    nr, pu = cumsum(nonrel), cumsum(pooled)  # inclusive; equal to "before" at relevant items
    j = jnp.arange(ctx.n, dtype=f)
    fj = jnp.where(j > 0, j, 1.0)
    # trec_eval forms the counts as integers, then adds epsilon. XLA would fold the constants
    # of rs - 1 + nr + 2e-5 into nr + rs + (2e-5 - 1) and lose digits; the max()s (no-ops at
    # relevant documents, where rs >= 1) keep each count exact before epsilon is added.
    above = jnp.maximum(rs - 1.0, 0.0)
    judged_above = jnp.maximum(above + nr, 0.0)
    term = 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((judged_above + pu) / fj) * (
        (above + INFAP_EPSILON) / (judged_above + 2 * INFAP_EPSILON)
    )
    term = jnp.where(j == 0, 1.0, term)
    return _col(_safe_div(row_sum(jnp.where(rel, term, 0.0)), ctx.num_rel(level)))


@_family("binG")
def _bing(ctx, m):
    level = ctx.level(m)
    rel = ctx.rel_s(level)
    rs = ctx.cum_rel(level)
    i = jnp.arange(ctx.n, dtype=ctx.fdtype)
    term = jnp.where(rel > 0, 1.0 / jnp.log2(jnp.maximum(3.0 + i - rs, 2.0)), 0.0)
    return _col(_safe_div(row_sum(term), ctx.num_rel(level)))


def _interpolated(ctx, m):
    """trec_eval's interpolated precision at recall cutoffs (``iprec_at_recall``,
    ``11pt_avg``), one value per cutoff, as trec_eval's walk over the cutoffs from the last.

    At the c-th relevant document (rank r_c) the value is the best precision at any rank
    >= r_c; trec_eval turns a recall x into c = lround(x R) (trec_eval 9: (long)(x R + 0.9)).
    Precision falls between relevant documents, so that best is the largest precision at a
    relevant document with at least c relevant documents up to it: one masked max per cutoff.
    """
    level = ctx.level(m)
    cr = ctx.cum_rel(level)
    rel = ctx.rel_s(level) > 0
    prec = jnp.where(rel, cr / ctx.pos, 0.0)
    rel_ret = cr[..., -1]
    big_r = ctx.num_rel(level)

    # x R, rounded before it is used: the max keeps XLA:CPU from fusing the product into an
    # FMA with what follows (trec_eval rounds the product, then adds or rounds again)
    v = jnp.maximum(jnp.asarray(m.cuts, ctx.fdtype) * big_r[..., None], -1.0)  # [Q, C]
    if ctx.plan.version == "9":
        counts = jnp.floor(v + 0.9)
    else:
        counts = jnp.floor(v)
        counts = counts + (v - counts >= 0.5)  # lround, for v >= 0
    at_count = jnp.max(jnp.where(cr[..., None, :] >= counts[..., None], prec[..., None, :], 0.0), axis=-1)
    final = jnp.where(ctx.num_ret() > 0, jnp.max(prec, axis=-1), jnp.nan)  # 0/0 in trec_eval
    if list(m.cuts) == sorted(m.cuts):
        # increasing cutoffs (always for iprec_at_recall): trec_eval's walk reduces to this
        return jnp.where(counts > rel_ret[..., None], 0.0, jnp.where(counts >= 1, at_count, final[..., None]))
    values = [None] * len(m.cuts)  # 11pt_avg with unsorted parameters: the walk itself
    skipping = jnp.ones(rel_ret.shape, bool)
    stuck = jnp.zeros(rel_ret.shape, bool)
    walk = rel_ret
    for i in reversed(range(len(m.cuts))):
        c = counts[..., i]
        skipping = skipping & (c > rel_ret)
        match = ~skipping & ~stuck & (c >= 1) & (c <= walk)
        values[i] = jnp.where(skipping, 0.0, jnp.where(match, at_count[..., i], final))
        walk = jnp.where(match, c, walk)
        stuck = stuck | (~skipping & ~match)
    return values


def _interpolated_once(ctx, m):
    """:func:`_interpolated`, shared by ``iprec_at_recall`` and ``11pt_avg`` (same cutoffs
    by default): traced once."""
    return ctx.memo(("interpolated", ctx.level(m), tuple(m.cuts)), lambda: _interpolated(ctx, m))


@_family("iprec_at_recall")
def _iprec(ctx, m):
    values = _interpolated_once(ctx, m)
    return values if not isinstance(values, list) else jnp.stack(values, -1)


@_family("11pt_avg")
def _eleven_pt(ctx, m):
    values = _interpolated_once(ctx, m)
    if not isinstance(values, list):
        values = [values[..., i] for i in range(len(m.cuts))]
    total = jnp.zeros_like(values[0])
    for v in reversed(values):  # trec_eval's summation order
        total = total + v
    return _col(total / len(values))


@_family("G")
def _g(ctx, m):
    g, _ = ctx.dcg_terms(m.pairs)
    ig = ctx.ideal_at_positions(m.pairs)
    sum_results = cumsum(g)
    sum_cost = cumsum(jnp.maximum(ig, 1.0))
    term = jnp.where(g != 0, g / jnp.log2(2.0 + sum_cost - sum_results), 0.0)
    return _col(_safe_div(row_sum(term), row_sum(ctx.ideal(m.pairs))))


def _ideal_dcg_running(ctx, pairs):
    ig = ctx.ideal(pairs)
    return cumsum(ig * metrics.log2_discount(jnp.arange(1, ctx.m + 1, dtype=ctx.fdtype)))


@_family("ndcg_rel")
def _ndcg_rel(ctx, m):
    g, dcg = ctx.dcg_terms(m.pairs)
    ig_n = ctx.ideal_at_positions(m.pairs)
    idcg_n = cumsum(ig_n * metrics.log2_discount(ctx.pos))
    idcg_total = _ideal_dcg_running(ctx, m.pairs)[..., -1]
    r_pos = row_sum(ctx.ideal(m.pairs) > 0)
    at_rel = jnp.where(g > 0, _safe_div(dcg, idcg_n), 0.0)
    n_rel_ret = row_sum(g > 0)
    total = row_sum(at_rel) + (r_pos - n_rel_ret) * _safe_div(dcg[..., -1], idcg_total)
    return _col(jnp.where(total > 0, _safe_div(total, r_pos), 0.0))


@_family("Rndcg")
def _rndcg(ctx, m):
    level = ctx.level(m)
    _, dcg = ctx.dcg_terms(m.pairs)
    ig = ctx.ideal(m.pairs)
    idcg = _ideal_dcg_running(ctx, m.pairs)
    r_pos = row_sum(ig > 0)[..., None]
    b = jnp.arange(1, ctx.m + 1, dtype=ctx.fdtype)  # number of ideal documents before
    nxt = jnp.concatenate([ig[..., 1:], jnp.zeros_like(ig[..., :1])], -1)
    boundary = (b <= r_pos) & ((b == r_pos) | (nxt != ig))
    dcg_at = jnp.take_along_axis(dcg, jnp.broadcast_to(jnp.minimum(jnp.arange(ctx.m), ctx.n - 1), ig.shape), -1)
    # dcg has n columns; an ideal prefix longer than the list sees the whole list's DCG
    total = row_sum(jnp.where(boundary, _safe_div(dcg_at, idcg), 0.0))
    count = row_sum(boundary)
    extra = (r_pos[..., 0] + 1 < ctx.num_ret()) & (idcg[..., -1] > 0)
    total = total + jnp.where(extra, _safe_div(dcg[..., -1], idcg[..., -1]), 0.0)
    count = count + extra
    value = total / count  # 0/0 when no boundary, as trec_eval
    return _col(jnp.where(ctx.num_rel(level) > 0, value, 0.0))


@_family("relstring")
def _relstring(ctx, m):
    width = max(0, min(int(m.cuts[0]), ctx.n))
    return jnp.where(ctx.valid_s()[..., :width], ctx.rr_s()[..., :width], -100.0)
