"""Kernels of the families that read the ranked list itself, outside the ``Ranks`` interface.

``bpref``/``gm_bpref``, ``infAP``, ``binG``, ``iprec_at_recall``, ``11pt_avg``, ``G``,
``ndcg_rel``, ``Rndcg`` and ``relstring`` read the relevance values in rank order
(``ranks.in_rank_order``, through ``_Ctx.rr_s``, ``rel_s``, ``cum_rel`` and ``dcg_running``),
and ``ideal_dcg`` reads the ideal ordering of the judgments (``_Ctx.ideal``). Why they are
not a :mod:`jaxrank.metrics` function nor a ``Ranks`` operation: their per-position terms
are not linear in the ranked items. They depend on prefix counts through a min (bpref's
``min(nonrel above, R)``, infAP's judged-above ratio), through a running max over
positions (interpolated precision), through the logarithm of a prefix count (binG, G), or
on prefix DCGs divided by ideal prefix DCGs (ndcg_rel, Rndcg); relstring returns the ranked
values themselves. They still use the one ranking of the call (``_Ctx.ranks``): no second
sort. The other families are in :mod:`jaxrank.measures.kernels`, which merges this module's
:data:`FAMILIES` into its table.

Each value is formed with trec_eval's double arithmetic, in the order of its C loop
(``../shared/ref/trec_eval/m_*.c``): running sums added left to right, divisions where it
divides, no fused multiply-add, the C library's ``log2`` (:mod:`jaxrank.measures._exact`), so
that a value on a rounding tie of the 4th decimal prints as trec_eval prints it.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np

from jaxrank.measures._ctx import _col, _safe_div, kernel_table
from jaxrank.measures._exact import at, log2_of, rounded, running_sum, total
from jaxrank.measures.plan import INFAP_EPSILON
from jaxrank.ranking.backend import cumsum, divide, opaque, row_sum

FAMILIES, _family = kernel_table()


@_family("ideal_dcg")
def _ideal_dcg(ctx, m):
    return _col(ctx.ideal_dcg_running(m.pairs)[..., -1])


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
        # trec_eval: 1 - min(before, R) / min(N, R), or 1 when nothing nonrelevant is above
        ratio = divide(jnp.minimum(before, big_r), jnp.where(denom > 0, denom, 1.0))
        term = jnp.where(before > 0, 1.0 - ratio, 1.0)
        return _safe_div(total(jnp.where(rel, term, 0.0)), big_r[..., 0])

    return _col(ctx.memo(("bpref", level), build))


@functools.lru_cache(maxsize=16)
def _infap_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``1 / (j + 1)`` and ``j / (j + 1)`` for ``j = 0..n-1``, divided on the host (IEEE)."""
    j = np.arange(n, dtype=np.float64)
    return 1.0 / (j + 1.0), j / (j + 1.0)


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
    inv, frac = (jnp.asarray(t, f) for t in _infap_tables(ctx.n))
    # trec_eval: 1/(j+1) + (j/(j+1)) * ((rs-1+nr+pu)/j) * ((rs-1+eps)/(rs-1+nr+2eps)), with
    # the counts formed as integers before epsilon is added (opaque: XLA would fold the
    # constants of rs - 1 + nr + 2e-5 together and lose digits)
    above = opaque(jnp.maximum(rs - 1.0, 0.0))
    judged_above = opaque(above + nr)
    seen = divide(judged_above + pu, fj)
    precision = divide(above + INFAP_EPSILON, judged_above + 2 * INFAP_EPSILON)
    term = inv + rounded(rounded(frac * seen) * precision)
    term = jnp.where(j == 0, 1.0, term)
    return _col(_safe_div(total(jnp.where(rel, term, 0.0)), ctx.num_rel(level)))


@_family("binG")
def _bing(ctx, m):
    level = ctx.level(m)
    rel = ctx.rel_s(level)
    rs = ctx.cum_rel(level)
    i = jnp.arange(ctx.n, dtype=ctx.fdtype)
    # 1 / log2(3 + i - rel_so_far): an integer from 2 to n + 2 at a relevant position
    term = jnp.where(rel > 0, divide(1.0, log2_of(jnp.where(rel > 0, 3.0 + i - rs, 2.0), ctx.n + 3)), 0.0)
    return _col(_safe_div(total(term), ctx.num_rel(level)))


def _interpolated(ctx, m):
    """trec_eval's interpolated precision at recall cutoffs (``iprec_at_recall``,
    ``11pt_avg``), one value per cutoff, as trec_eval's walk over the cutoffs from the last.

    At the c-th relevant document (rank r_c) the value is the best precision at any rank
    >= r_c; trec_eval turns a recall x into c = lround(x R) (trec_eval 9: (long)(x R + 0.9)).
    Precision falls between relevant documents, so that best is the largest precision at a
    relevant document with at least c relevant documents up to it: one masked max per cutoff.
    Each precision is trec_eval's quotient rel_so_far / rank, so the max picks its bits.
    """
    level = ctx.level(m)
    cr = ctx.cum_rel(level)
    rel = ctx.rel_s(level) > 0
    prec = jnp.where(rel, divide(cr, ctx.pos), 0.0)
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
    sum_ = jnp.zeros_like(values[0])
    for v in reversed(values):  # trec_eval's summation order
        sum_ = sum_ + v
    return _col(divide(sum_, float(len(values))))


def _integral(pairs) -> bool:
    """Whether every gain of a gain map is an integer (then every sum of gains is exact in
    any order, and so is a log2 argument formed of them)."""
    return all(float(v).is_integer() for _, v in pairs)


@_family("G")
def _g(ctx, m):
    g = ctx.ranked_gains(m.pairs)
    ig = ctx.ideal_at_positions(m.pairs)
    cost = jnp.maximum(ig, 1.0)
    exact = _integral(m.pairs)
    # running sums of gains: integers (any order) unless a gain map has fractions
    sum_results = cumsum(g) if exact else running_sum(g)
    sum_cost = cumsum(cost) if exact else running_sum(cost)
    arg = opaque(2.0 + sum_cost) - sum_results  # C: (2 + sum_cost) - sum_results
    # the C library's log2 for integers (a table up to gains of 4 on every position), XLA's
    # otherwise: a gain map with fractions, or larger gains, may differ from trec_eval by an ulp
    size = 3 + ctx.n + 4 * max(ctx.n, ctx.m)
    in_table = (arg < size) & (arg == jnp.floor(arg))
    log = jnp.where(in_table, log2_of(jnp.where(in_table, arg, 2.0), size), jnp.log2(jnp.maximum(arg, 1.0)))
    term = jnp.where(g != 0, divide(g, log), 0.0)
    ideal = ctx.ideal(m.pairs)
    sum_ideal = row_sum(ideal) if exact else total(ideal)
    return _col(_safe_div(total(term), sum_ideal))


@_family("ndcg_rel")
def _ndcg_rel(ctx, m):
    g = ctx.ranked_gains(m.pairs)
    dcg = ctx.dcg_running(m.pairs)
    idcg = ctx.ideal_dcg_running(m.pairs)
    idcg_n = at(idcg, ctx.pos)  # ideal DCG after min(rank, m) judgments
    idcg_total = idcg[..., -1]
    r_pos = row_sum(ctx.ideal(m.pairs) > 0)
    at_rel = jnp.where(g > 0, divide(dcg, jnp.where(g > 0, idcg_n, 1.0)), 0.0)
    n_rel_ret = row_sum(g > 0)
    # trec_eval: sum += (num_rel - num_rel_ret) * results_dcg / ideal_dcg (NaN when the ideal
    # is 0, and then the value is 0, as sum > 0 fails)
    rest = divide(rounded((r_pos - n_rel_ret) * dcg[..., -1]), idcg_total)
    sum_ = total(at_rel) + rest
    return _col(jnp.where(sum_ > 0, _safe_div(sum_, r_pos), 0.0))


@_family("Rndcg")
def _rndcg(ctx, m):
    level = ctx.level(m)
    dcg = ctx.dcg_running(m.pairs)
    ig = ctx.ideal(m.pairs)
    idcg = ctx.ideal_dcg_running(m.pairs)
    r_pos = row_sum(ig > 0)[..., None]
    b = jnp.arange(1, ctx.m + 1, dtype=ctx.fdtype)  # number of ideal documents before
    nxt = jnp.concatenate([ig[..., 1:], jnp.zeros_like(ig[..., :1])], -1)
    boundary = (b <= r_pos) & ((b == r_pos) | (nxt != ig))
    dcg_at = jnp.take_along_axis(dcg, jnp.broadcast_to(jnp.minimum(jnp.arange(ctx.m), ctx.n - 1), ig.shape), -1)
    # dcg has n columns; an ideal prefix longer than the list sees the whole list's DCG.
    # The boundaries in rank order, then the end of the list (trec_eval's order of addition)
    sum_ = total(jnp.where(boundary, _safe_div(dcg_at, idcg), 0.0))
    count = row_sum(boundary)
    extra = (r_pos[..., 0] + 1 < ctx.num_ret()) & (idcg[..., -1] > 0)
    sum_ = sum_ + jnp.where(extra, _safe_div(dcg[..., -1], idcg[..., -1]), 0.0)
    count = count + extra
    value = divide(sum_, count)  # 0/0 when no boundary, as trec_eval
    return _col(jnp.where(ctx.num_rel(level) > 0, value, 0.0))


@_family("relstring")
def _relstring(ctx, m):
    width = max(0, min(int(m.cuts[0]), ctx.n))
    return jnp.where(ctx.valid_s()[..., :width], ctx.rr_s()[..., :width], -100.0)
