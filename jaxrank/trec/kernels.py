"""One kernel per trec_eval / ir_measures family: ``(ctx, measure) -> [Q, C]`` values.

Every kernel of one call shares a :class:`~jaxrank.trec._ctx._Ctx`: the run ranked once with
``jaxrank.hard("stable")`` (documents come pre-ordered so that this is trec_eval's order).
Measures that :mod:`jaxrank.metrics` has (P, recall, AP/map_cut, R-precision, RR, nDCG, DCG,
success, ERR, RBP with ``rel``, the counts, set_P, set_recall) are those functions, called
with that :class:`~jaxrank.ranking.HardRanks` as ``ranker=``; trec_eval's graded rbp,
rbp_resid and unj go through the ``Ranks`` operations (``ranks.linear``), being linear in
the ranked items; the set measures and utility are arithmetic on the counts.

The families whose terms are not linear in the ranked items (bpref, infAP, binG,
interpolated precision, G, ndcg_rel, Rndcg, relstring, ideal_dcg) read the ranked list
itself: they are in :mod:`jaxrank.trec._ranked_list`, which says why. :data:`_FAMILIES`
is the table of both modules, the one that the engine and the accumulator look up.

Relevance values follow trec_eval's ``form_res_rels``: a retrieved document has its qrels rel
when judged (rel >= 0), -1 when absent from the qrels and -2 when in the qrels with a negative
rel (pooled but unjudged); "relevant" means rel >= the level (``-l``), except that nDCG-style
gains use the raw rels and ignore the level, as trec_eval does.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrank import metrics
from jaxrank.ranking._backend import row_sum
from jaxrank.trec import _ranked_list
from jaxrank.trec._ctx import _col, _identity, _safe_div, kernel_table
from jaxrank.trec.measures import _valid_int

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


# Every family, by name.
_FAMILIES = {**_BY_RANKS, **_ranked_list.FAMILIES}
