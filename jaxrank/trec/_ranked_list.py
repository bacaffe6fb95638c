"""Kernels of the families that read the ranked list itself, outside the ``Ranks`` interface.

``bpref``/``gm_bpref``, ``infAP``, ``binG``, ``iprec_at_recall``, ``11pt_avg``, ``G``,
``ndcg_rel``, ``Rndcg`` and ``relstring`` read the relevance values in rank order
(``ranks.in_rank_order``, through ``_Ctx.rr_s``, ``rel_s``, ``cum_rel`` and ``dcg_terms``),
and ``ideal_dcg`` reads the ideal ordering of the judgments (``_Ctx.ideal``). Why they are
not a :mod:`jaxrank.metrics` function nor a ``Ranks`` operation: their per-position terms
are not linear in the ranked items. They depend on prefix counts through a min (bpref's
``min(nonrel above, R)``, infAP's judged-above ratio), through a running max over
positions (interpolated precision), through the logarithm of a prefix count (binG, G), or
on prefix DCGs divided by ideal prefix DCGs (ndcg_rel, Rndcg); relstring returns the ranked
values themselves. They still use the one ranking of the call (``_Ctx.ranks``): no second
sort. The other families are in :mod:`jaxrank.trec.kernels`, which merges this module's
:data:`FAMILIES` into its table.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxrank import metrics
from jaxrank.ranking._backend import cumsum, row_sum
from jaxrank.trec._ctx import _col, _safe_div, kernel_table
from jaxrank.trec._plan import INFAP_EPSILON

FAMILIES, _family = kernel_table()


@_family("ideal_dcg")
def _ideal_dcg(ctx, m):
    return _col(_ideal_dcg_running(ctx, m.pairs)[..., -1])


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
    """The ideal DCG of the first 1..m judgments (shared by ideal_dcg, ndcg_rel, Rndcg)."""

    def build():
        ig = ctx.ideal(pairs)
        return cumsum(ig * metrics.log2_discount(jnp.arange(1, ctx.m + 1, dtype=ctx.fdtype)))

    return ctx.memo(("ideal_dcg_running", pairs), build)


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
