"""The context every kernel of one call shares (:class:`_Ctx`: one ranking and its
rank-order views, memoised, and the gains of the nDCG family), the tables kernels register
in (:func:`kernel_table`) and small helpers of the kernels of :mod:`jaxrank.measures.kernels`
and :mod:`jaxrank.measures._ranked_list`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxrank import metrics
from jaxrank.measures._exact import log2_positions, running_sum, total
from jaxrank.measures.parse import Measure, Plan, _valid_int
from jaxrank.ranking import HardRanks, hard
from jaxrank.ranking.backend import cumsum, divide

# A kernel: (ctx, measure) -> [Q, C] values (C = number of columns; relstring: codes).
Kernel = Callable[["_Ctx", Measure], jax.Array]


def kernel_table() -> tuple[dict[str, Kernel], Callable[..., Callable[[Kernel], Kernel]]]:
    """An empty table of kernels by family name, and the decorator ``@family(*names)`` that
    enters a kernel in it under each of its names."""
    table: dict[str, Kernel] = {}

    def family(*names: str) -> Callable[[Kernel], Kernel]:
        def register(fn: Kernel) -> Kernel:
            for n in names:
                table[n] = fn
            return fn

        return register

    return table, family


def _safe_div(num, den):
    """``num / den`` divided as C divides (:func:`_exact.divide`), 0 where ``den <= 0``."""
    ok = den > 0
    return jnp.where(ok, divide(num, jnp.where(ok, den, 1)), 0.0)


def _col(x):
    return x[..., None] if x.ndim == 1 else x


class _Ctx:
    """What every measure of one call shares: one ranking and its rank-order views.

    ``rr`` holds trec_eval's relevance values in input order (rel when judged, -1 not in
    the qrels, -2 pooled but unjudged); ``judg``/``jvalid`` the qrels rels of the query and
    the mask of the judged ones (rel >= 0), which are what trec_eval counts.
    """

    def __init__(self, plan: Plan, scores, rr, where, judg, jmask, ranks=None, ideals=None):
        self.plan = plan
        self.where = where
        self.rr = rr.astype(scores.dtype)
        self.judg = judg.astype(scores.dtype)
        self.jmask = jmask
        self.jvalid = jmask & (judg >= 0)
        self.scores = scores
        self.ranks: HardRanks = hard("stable")(scores, where, depth=None) if ranks is None else ranks
        self.n = scores.shape[-1]
        self.m = judg.shape[-1]
        self.fdtype = scores.dtype
        self._memo: dict = {("ideal", p): v for p, v in (ideals or {}).items()}

    def memo(self, key, fn):
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def level(self, measure: Measure) -> int:
        return self.plan.level if measure.level is None else measure.level

    # -- metrics.py, with the shared ranking ----------------------------------------------
    def metric(self, fn: Callable, labels=None, judged: bool = False, **kw):
        """``fn(scores, labels, where=, ranker=ranks, **kw)``; ``judged`` adds the qrels."""
        extra = dict(judgments=self.judg, judgments_where=self.jvalid) if judged else {}
        labels = self.rr if labels is None else labels
        ranker = {} if fn is metrics.num_rel else dict(ranker=self.ranks)
        return fn(self.scores, labels, where=self.where, **ranker, **extra, **kw)

    def num_ret(self):
        return self.memo("num_ret", lambda: self.metric(metrics.num_ret))

    def num_rel(self, level):
        return self.memo(("num_rel", level), lambda: self.metric(metrics.num_rel, judged=True, rel=level))

    def num_rel_ret(self, level):
        return self.memo(("num_rel_ret", level), lambda: self.metric(metrics.num_rel_ret, rel=level))

    # -- rank-order views -----------------------------------------------------------------
    @property
    def pos(self):
        return jnp.arange(1, self.n + 1, dtype=self.fdtype)

    def valid_s(self):
        return self.memo("valid_s", self.ranks.valid_positions)

    def in_rank_order(self, v):
        """``v[..., n]`` (input order) in rank order; invalid positions hold 0."""
        return self.ranks.in_rank_order(v)

    def rr_s(self):
        return self.memo("rr_s", lambda: self.in_rank_order(self.rr))

    def rel_s(self, level):
        """Relevant (rel >= level) in rank order, as floats."""
        return self.memo(("rel_s", level), lambda: (self.valid_s() & (self.rr_s() >= level)).astype(self.fdtype))

    def cum_rel(self, level):
        return self.memo(("cum_rel", level), lambda: cumsum(self.rel_s(level)))

    # -- gains (nDCG family, rbp) ---------------------------------------------------------
    def gains(self, values, pairs):
        """trec_eval's ``get_gain``: the gain of each relevance value. Levels >= 0 default to
        the level, other values to 0; ``pairs`` with integer names override."""
        out = jnp.where(values >= 0, values, 0.0)
        for name, value in pairs:
            if _valid_int(name):
                out = jnp.where(values == int(name), value, out)
        return out

    def ideal_gains(self, pairs):
        """The gains of the judged documents, input order, 0 for the unjudged."""
        return self.memo(("ideal_gains", pairs), lambda: jnp.where(self.jvalid, self.gains(self.judg, pairs), 0.0))

    def ideal_ranks(self, pairs):
        """The exact ranking of the judged documents of positive gain by gain: the ideal
        ordering that nDCG (``metrics.ndcg(ideal_ranks=)``) and :meth:`ideal` share."""

        def build():
            g = self.ideal_gains(pairs)
            return hard("stable")(g, g > 0, depth=None)

        return self.memo(("ideal_ranks", pairs), build)

    def ideal(self, pairs):
        """Positive gains of the judged documents, sorted descending: ``[Q, m]`` (0 after)."""
        return self.memo(("ideal", pairs), lambda: self.ideal_ranks(pairs).in_rank_order(self.ideal_gains(pairs)))

    def ideal_at_positions(self, pairs):
        """The ideal gains aligned with the ``n`` retrieval positions (padded or cut)."""
        ig = self.ideal(pairs)
        if self.m >= self.n:
            return ig[..., : self.n]
        return jnp.pad(ig, [(0, 0)] * (ig.ndim - 1) + [(0, self.n - self.m)])

    def wants(self, *families: str) -> bool:
        """Whether the plan asks for any of ``families`` (a kernel that can give a total
        or a whole running sum computes the running sum only when someone reads it)."""
        return any(m.family in families for m in self.plan.measures)

    def ranked_gains(self, pairs):
        """The gain of each position (``ranks.linear_terms``: rank order, or its expectation
        over tie orders), 0 past the retrieved documents."""
        return self.memo(
            ("ranked_gains", pairs),
            lambda: self.ranks.linear_terms(jnp.where(self.where, self.gains(self.rr, pairs), 0.0)),
        )

    def dcg_running(self, pairs):
        """The results DCG after each position, ``[Q, n]``, as trec_eval's loops form it: each
        gain divided by the C library's ``log2(rank + 1)``, added in rank order."""
        return self.memo(("dcg_running", pairs), lambda: running_sum(self._dcg_terms(pairs)))

    def dcg_total(self, pairs):
        """The last of :meth:`dcg_running` (a loop without the running values when no
        kernel of the plan reads them)."""
        if self.wants("ndcg_cut", "ndcg_rel", "Rndcg") or ("dcg_running", pairs) in self._memo:
            return self.dcg_running(pairs)[..., -1]
        return self.memo(("dcg_total", pairs), lambda: total(self._dcg_terms(pairs)))

    def _dcg_terms(self, pairs):
        return divide(self.ranked_gains(pairs), log2_positions(self.n, self.fdtype))

    def ideal_dcg_running(self, pairs):
        """The ideal DCG of the first 1..m judgments, ``[Q, m]``, added as trec_eval adds it."""

        def build():
            return running_sum(divide(self.ideal(pairs), log2_positions(self.m, self.fdtype)))

        return self.memo(("ideal_dcg_running", pairs), build)
