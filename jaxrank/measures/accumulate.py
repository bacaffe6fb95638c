"""Many measures on padded arrays, ranked once; a mergeable metric state for streaming.

:func:`compute` evaluates measure strings (trec_eval's ``"ndcg_cut.10"``, ir_measures'
``"nDCG@10"``, as :func:`jaxrank.evaluate` takes them) on a padded batch and returns the
value of each query; :func:`accumulator` keeps, instead of the per-query values, a few sums
per measure that merge by addition, so that chunks, devices and hosts combine with ``+``
or ``jax.lax.psum``.

Both go through the measure table of :mod:`jaxrank.measures.parse` (its parser and its per-query
kernels): one ranking of the batch, shared by every measure, and no second implementation
of any measure.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable
from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _checks
from jaxrank.measures._aggregate import EMPTIES, GMEAN_FLOOR

# The trec engine's pieces used here: the parser and Plan (public), and the per-query
# kernels over one shared ranking, _Ctx and _FAMILIES (private to jaxrank.trec).
from jaxrank.measures._ctx import _Ctx
from jaxrank.measures.kernels import _FAMILIES
from jaxrank.measures.parse import Plan, parse_measures
from jaxrank.ranking import TIE_POLICIES, hard

__all__ = ["Accumulator", "State", "accumulator", "compute"]

Measures = Union[str, Iterable[str]]

# Kernels that read the ranked list in one order (prefix counts through min/max/log):
# exact for ties="stable" only; every other kernel goes through the Ranks operations.
_STABLE_ONLY = frozenset(
    {
        "bpref",
        "gm_bpref",
        "infAP",
        "binG",
        "iprec_at_recall",
        "11pt_avg",
        "G",
        "ndcg_rel",
        "Rndcg",
        "relstring",
    }
)

#: Aggregations over queries that the state streams exactly (see :func:`accumulator`).
HOWS: tuple[str, ...] = ("mean", "gmean", "min", "max")


@dataclasses.dataclass(frozen=True)
class _Spec:
    """What the traced computation needs besides arrays (hashable: a jit static argument)."""

    plan: Plan
    columns: tuple[tuple[int, int], ...]  # (measure index, column index) of each output
    ties: str


def _spec(measures: Measures, *, rel: int, ties: str, num_docs: int) -> tuple[_Spec, tuple]:
    """The static computation of every numeric column of ``measures`` (per-query and
    summary ones alike, so that :func:`compute` and :func:`accumulator` share one compiled
    function), and those columns."""
    if ties not in TIE_POLICIES:
        raise ValueError(f"ties must be one of {TIE_POLICIES}, got {ties!r}")
    if isinstance(rel, bool) or not isinstance(rel, (int, np.integer)):
        raise ValueError(f"rel must be an integer, got {rel!r}")
    if measures is None:
        raise ValueError("measures must be a measure string or a list of them, got None")
    parsed = parse_measures(measures)
    chosen, names, columns = [], set(), []
    for i, m in enumerate(parsed):
        for j, c in enumerate(m.columns):
            if c.kind != "str" and c.name not in names:
                names.add(c.name)
                chosen.append((i, j))
                columns.append(c)
    if ties != "stable":
        bad = sorted({parsed[i].source for i, _ in chosen if parsed[i].family in _STABLE_ONLY})
        if bad:
            raise ValueError(f"ties={ties!r}: {bad} read the ranked list in one order; use ties='stable'")
    plan = Plan(measures=parsed, level=int(rel), num_docs=int(num_docs))
    return _Spec(plan, tuple(chosen), ties), tuple(columns)


def _select(columns, keep, measures) -> tuple[int, ...]:
    picked = tuple(i for i, c in enumerate(columns) if keep(c))
    if not picked:
        raise ValueError(f"measures {measures!r} have no value of this kind (see the docstring)")
    return picked


def _arrays(scores, labels, where, judgments, judgments_where):
    """Checked inputs, leading axes flattened: ([Q, n] x 3, [Q, m] x 2, batch shape)."""
    scores = _checks.scores(scores)
    labels = _checks.same_shape(labels, scores.shape, "labels")
    where = _checks.mask(where, scores.shape)
    judg, jmask = _checks.judgments(judgments, judgments_where, scores.shape)
    batch, n = scores.shape[:-1], scores.shape[-1]
    # at least the default float: bfloat16 scores rank exactly after an exact upcast
    fdtype = jnp.promote_types(scores.dtype, jnp.result_type(float))
    scores = scores.astype(fdtype).reshape(-1, n)
    labels = labels.astype(fdtype).reshape(-1, n)
    where = where.reshape(-1, n)
    # trec_eval's relevance codes: -1 absent from the qrels, -2 judged with a negative rel
    rr = jnp.where((labels < 0) & (labels != -1), -2.0, labels)
    if judg is None:  # the list is complete
        judg, jmask = jnp.where(where, rr, -1.0), where
    else:
        m = judg.shape[-1]
        judg, jmask = judg.astype(fdtype).reshape(-1, m), jmask.reshape(-1, m)
    return scores, rr, where, judg, jmask, batch


@functools.partial(jax.jit, static_argnames=("spec",))
def _values(spec: _Spec, scores, rr, where, judg, jmask):
    """``[Q, C]`` per-query values of the chosen columns and ``bool[Q, C]``: the query has
    no relevant document at the measure's level. One ranking per document set: the batch
    as given, and the judged documents only if some measure asks for that."""
    plan = spec.plan
    contexts = {}
    values, empty = [], []
    for i, j in spec.columns:
        m = plan.measures[i]
        if m.judged_only not in contexts:
            w = where & (rr >= 0) if m.judged_only else where
            ranks = hard(spec.ties)(scores, w, depth=None)
            contexts[m.judged_only] = (_Ctx(plan, scores, rr, w, judg, jmask, ranks=ranks), {})
        ctx, outs = contexts[m.judged_only]
        if i not in outs:
            outs[i] = _FAMILIES[m.family](ctx, m)
        values.append(outs[i][:, j].astype(scores.dtype))
        empty.append(ctx.num_rel(ctx.level(m)) == 0)
    return jnp.stack(values, -1), jnp.stack(empty, -1)


def compute(
    scores,
    labels,
    measures: Measures,
    *,
    where=None,
    judgments=None,
    judgments_where=None,
    rel: int = 1,
    ties: str = "stable",
    num_docs: int = 0,
) -> dict[str, jax.Array]:
    """The value of every query for every measure, from one ranking of the batch.

    Each measure is the kernel :func:`jaxrank.evaluate` uses, so that on the same data the
    values are trec_eval's (or ir_measures') per-query values; the functions of
    :mod:`jaxrank.metrics` are those kernels where they exist (``P@k`` is
    ``jaxrank.precision(k=k)``, ``nDCG@k`` is ``jaxrank.ndcg(k=k)``, ``AP`` is
    ``jaxrank.average_precision``, ...), all fed the same :class:`~jaxrank.ranking.HardRanks`.
    Jittable (the measures are static); leading axes are batch axes.

    Relevance follows trec_eval: a label ``>= rel`` is relevant (``P(rel=2)@5`` sets its own
    level); nDCG-style gains are the labels themselves. A label of ``-1`` marks a retrieved
    document that is not judged (absent from the qrels), any other negative label one judged
    as unjudged (trec_eval's negative qrel, pooled: infAP); both are non-relevant, and bpref,
    infAP, ``Judged@k``, ``unj`` tell them from judged ones.

    Args:
      scores: ``[..., n]`` floats.
      labels: ``[..., n]`` relevance of each item (see above).
      measures: a measure string or a list of them: trec_eval names (``"map"``,
        ``"ndcg_cut.5,10"``, ``"P"``: one output per cutoff, named as trec_eval prints it,
        ``"P_5"``) or ir_measures strings (``"nDCG@10"``, ``"AP"``, ``"R@100"``,
        ``"P(rel=2)@5"``), as :func:`jaxrank.evaluate` takes them. As ``trec_eval -q``,
        only measures with a per-query value are returned: ``runid``, ``num_q``,
        ``gm_map``, ``gm_bpref`` (summaries) and ``relstring`` (text) are left out;
        use :func:`accumulator` for summaries.
      where: ``bool[..., n]``, valid items (default: all).
      judgments: ``[..., m]``, the labels of every judged document of the query, retrieved
        or not (trec_eval's qrels: recall, AP, R-precision and the nDCG ideal count the
        relevant ones that were not retrieved). None: the list is complete.
      judgments_where: ``bool[..., m]``, valid judgments (default: all).
      rel: trec_eval's ``-l``: the relevance level of measures that name none.
      ties: the :func:`jaxrank.hard` tie policy. ``"stable"`` (the earlier item first;
        with documents in docno-descending order within equal scores this is trec_eval's
        order) serves every measure; the others serve the measures that go through the
        :class:`~jaxrank.ranking.Ranks` operations (not bpref, infAP, binG, G, ndcg_rel,
        Rndcg, iprec_at_recall, 11pt_avg: a ValueError names them).
      num_docs: trec_eval's ``-N`` (documents in the collection), for ``utility``.

    Returns:
      ``{name: [...]}``, one entry per printed name (``"P_5"``, ``"nDCG@10"``), in
      :func:`jaxrank.evaluate`'s order; counts (``num_ret``) as floats.

    Raises:
      ValueError: bad shapes or options, an unknown measure (a
        :class:`~jaxrank.measures.parse.MeasureError` naming the closest names).

    Example:
      >>> import jaxrank
      >>> out = jaxrank.compute([[0.9, 0.8, 0.1]], [[1, 0, 1]], ["AP", "P.2", "nDCG@2"])
      >>> {name: round(float(v[0]), 4) for name, v in out.items()}
      {'P_2': 0.5, 'AP': 0.8333, 'nDCG@2': 0.6131}
    """
    spec, columns = _spec(measures, rel=rel, ties=ties, num_docs=num_docs)
    picked = _select(columns, lambda c: c.per_query, measures)
    *arrays, batch = _arrays(scores, labels, where, judgments, judgments_where)
    values, _ = _values(spec, *arrays)
    values = values.reshape(batch + (len(columns),))
    return {columns[i].name: values[..., i] for i in picked}


# ----------------------------------------------------------------------------- accumulator


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class State:
    """The accumulated state of an :class:`Accumulator`: a pytree of ``[C]`` arrays (one
    entry per output), whatever the number of queries.

    Attributes:
      sum: :math:`\\sum_q u_q x_q` over the queries that count, where ``x`` is the value
        (its log, floored at 1e-5, for geometric means; 1 for ``num_q``).
      weight: :math:`\\sum_q u_q` over the same queries.
      empty: the number of queries without a relevant document (measures aggregated by
        a mean; 0 for counts).
      extreme: the running minimum (``how="min"``) or maximum (``how="max"``) of the
        values; None for the other aggregations.
    """

    sum: jax.Array
    weight: jax.Array
    empty: jax.Array
    extreme: Optional[jax.Array] = None


@dataclasses.dataclass(frozen=True, eq=False)
class Accumulator:
    """Streams measures over batches of queries; see :func:`accumulator`.

    Attributes:
      names: the output names, in order.
      how: the aggregation of the measures that trec_eval averages.
      empty: the policy for queries without a relevant document (None: none).
    """

    names: tuple[str, ...]
    how: str
    empty: Optional[str]
    _spec: _Spec = dataclasses.field(repr=False)
    _picked: tuple[int, ...] = dataclasses.field(repr=False)  # columns of the spec's output
    _modes: tuple[str, ...] = dataclasses.field(repr=False)  # per output: mean/log/min/max/sum/count

    def init(self) -> State:
        """The state of no query (the identity of :meth:`merge`)."""
        zeros = jnp.zeros((len(self.names),), jnp.result_type(float))
        extreme = None
        if self.how in ("min", "max"):
            extreme = jnp.full(zeros.shape, jnp.inf if self.how == "min" else -jnp.inf, zeros.dtype)
        return State(zeros, zeros, zeros, extreme)

    def update(
        self,
        state: State,
        scores,
        labels,
        *,
        where=None,
        judgments=None,
        judgments_where=None,
        query_where=None,
        weights=None,
    ) -> State:
        """``state`` plus the queries of one padded batch (pure; jittable).

        Args:
          state: from :meth:`init`, :meth:`update` or :meth:`merge`.
          scores, labels, where, judgments, judgments_where: as :func:`compute`.
          query_where: ``bool[...]`` (the batch axes): which rows are queries; False marks
            padding rows (e.g. the end of the last chunk). Default: all.
          weights: ``[...]`` non-negative query weights :math:`u_q` (not with ``how``
            ``"min"``/``"max"``). Default: 1.

        Returns:
          The new state.
        """
        *arrays, batch = _arrays(scores, labels, where, judgments, judgments_where)
        f = jnp.result_type(float)
        u = jnp.ones(batch, f)
        if weights is not None:
            if self.how in ("min", "max"):
                raise ValueError(f"weights are not supported with how={self.how!r}")
            weights = jnp.asarray(weights)
            if weights.shape != batch:
                raise ValueError(f"weights must have the batch shape of scores {batch}, got {weights.shape}")
            u = weights.astype(f)
        if query_where is not None:
            query_where = jnp.asarray(query_where)
            if query_where.shape != batch:
                raise ValueError(f"query_where must have the batch shape of scores {batch}, got {query_where.shape}")
            u = jnp.where(query_where.astype(bool), u, 0.0)
        u = u.reshape(-1, 1)
        present = u > 0
        values, is_empty = _values(self._spec, *arrays)
        picked = np.asarray(self._picked)
        values, is_empty = values[:, picked].astype(f), is_empty[:, picked]
        modes = np.asarray(self._modes)
        averaged = np.isin(modes, ("mean", "log", "min", "max"))
        if self.empty is None:
            is_empty = jnp.zeros_like(is_empty)
        is_empty = is_empty & averaged & present
        if self.empty == "zero":
            values = jnp.where(is_empty, 0.0, values)
        elif self.empty == "one":
            values = jnp.where(is_empty, 1.0, values)
        keep = present & ~is_empty if self.empty == "skip" else present
        logs = jnp.log(jnp.maximum(values, GMEAN_FLOOR))
        x = jnp.where(modes == "log", logs, jnp.where(modes == "count", 1.0, values))
        extreme = state.extreme
        if extreme is not None:
            if self.how == "min":
                extreme = jnp.minimum(extreme, jnp.min(jnp.where(keep, x, jnp.inf), axis=0))
            else:
                extreme = jnp.maximum(extreme, jnp.max(jnp.where(keep, x, -jnp.inf), axis=0))
        return State(
            state.sum + jnp.sum(jnp.where(keep, u * x, 0.0), axis=0),
            state.weight + jnp.sum(jnp.where(keep, u, 0.0), axis=0),
            state.empty + jnp.sum(is_empty, axis=0).astype(f),
            extreme,
        )

    def merge(self, a: State, b: State) -> State:
        """The state of the queries of ``a`` and of ``b``: sums added, extremes combined."""
        extreme = a.extreme
        if extreme is not None:
            extreme = jnp.minimum(a.extreme, b.extreme) if self.how == "min" else jnp.maximum(a.extreme, b.extreme)
        return State(a.sum + b.sum, a.weight + b.weight, a.empty + b.empty, extreme)

    def psum(self, state: State, axis_name) -> State:
        """:meth:`merge` over a mapped axis (``shard_map``, ``pmap``): ``jax.lax.psum`` of
        the sums, ``pmin``/``pmax`` of the extremes. For ``how`` ``"mean"`` or ``"gmean"``
        it is ``jax.lax.psum(state, axis_name)``."""
        extreme = state.extreme
        if extreme is not None:
            extreme = (jax.lax.pmin if self.how == "min" else jax.lax.pmax)(extreme, axis_name)
        summed = jax.lax.psum((state.sum, state.weight, state.empty), axis_name)
        return State(*summed, extreme)

    def compute(self, state: State) -> dict[str, jax.Array]:
        """``{name: value}`` from a state (no query: NaN for averages, 0 for counts).

        Raises:
          ValueError: ``empty="error"`` and some query had no relevant document (needs a
            concrete state: call it outside ``jit``).
        """
        if self.empty == "error":
            try:
                count = np.asarray(state.empty)
            except jax.errors.TracerArrayConversionError as e:
                raise ValueError("empty='error' needs a concrete state; call compute outside jit") from e
            bad = [name for name, e in zip(self.names, count) if e > 0]
            if bad:
                raise ValueError(
                    f"queries without a relevant document (empty='error') for {bad}: "
                    f"{count[count > 0].astype(int).tolist()}"
                )
        out = {}
        for i, (name, mode) in enumerate(zip(self.names, self._modes)):
            total, weight = state.sum[i], state.weight[i]
            if mode in ("sum", "count"):
                out[name] = total
                continue
            if mode in ("min", "max"):
                value = jnp.where(weight > 0, state.extreme[i], jnp.nan)
            else:
                mean = jnp.where(weight > 0, total / jnp.where(weight > 0, weight, 1.0), jnp.nan)
                value = jnp.exp(mean) if mode == "log" else mean
            if self.empty == "nan":
                value = jnp.where(state.empty[i] > 0, jnp.nan, value)
            out[name] = value
        return out


def accumulator(
    measures: Measures,
    *,
    how: str = "mean",
    empty: Optional[str] = None,
    rel: int = 1,
    ties: str = "stable",
    num_docs: int = 0,
) -> Accumulator:
    """A mergeable state for streaming ``measures`` over batches, devices and hosts.

    ``acc.init()`` gives the state of no query, ``acc.update(state, scores, labels, ...)``
    adds a padded batch (pure, jittable; the per-query values are :func:`compute`'s),
    ``acc.merge(a, b)`` combines two states and ``acc.compute(state)`` gives
    ``{name: value}``. The state (:class:`State`) is three ``[C]`` arrays of sums, C the
    number of outputs, whatever the number of queries; for means they are the whole state,
    so ``jax.lax.psum(state, axis_name)`` is the merge across devices (``acc.psum`` does
    the right collective for every ``how``).

    .. math:: \\mathrm{mean} = \\frac{\\sum_q u_q v_q}{\\sum_q u_q}, \\qquad
        \\mathrm{gmean} = \\exp\\frac{\\sum_q u_q \\log\\max(v_q, 10^{-5})}{\\sum_q u_q}

    Each output is aggregated as trec_eval's ``all`` line aggregates it: ``gm_map`` and
    ``gm_bpref`` by the geometric mean, counts (``num_ret``, ``num_rel``, ``num_rel_ret``,
    ``NumRet``) by their sum, ``num_q`` counts the queries, the rest by ``how``. What
    streams exactly (the same value whatever the split of the queries, up to the order of
    float additions): ``"mean"``, ``"gmean"``, sums, query weights (all by addition), and
    ``"min"``/``"max"`` (by min/max). A median does not stream in O(1) memory: keep the
    per-query values of :func:`compute` and call ``jaxrank.aggregate(values,
    how="median")``.

    Args:
      measures: as :func:`compute` (``runid`` and ``relstring`` are left out).
      how: ``"mean"`` (trec_eval), ``"gmean"`` (floored at 1e-5), ``"min"`` or ``"max"``.
      empty: None (default): every query counts with its value, as in trec_eval's
        ``all`` line (0 for a measure of relevance when the query has no relevant
        document). Otherwise the policy of :func:`jaxrank.aggregate` for queries without
        a relevant document (at the measure's level; from ``judgments`` when given), in
        the outputs aggregated by ``how``: ``"zero"``, ``"one"``, ``"skip"`` (left out),
        ``"nan"`` (the result is NaN) or ``"error"`` (``compute`` raises).
      rel, ties, num_docs: as :func:`compute`.

    Returns:
      An :class:`Accumulator`.

    Example:
      >>> import jaxrank
      >>> acc = jaxrank.accumulator(["AP", "P@2"])
      >>> state = acc.update(acc.init(), [[0.9, 0.8, 0.1]], [[1, 0, 1]])
      >>> state = acc.update(state, [[0.2, 0.7]], [[0, 1]])
      >>> {k: round(float(v), 4) for k, v in acc.compute(state).items()}
      {'AP': 0.9167, 'P@2': 0.5}
    """
    if how not in HOWS:
        hint = " (a median does not stream: aggregate compute()'s per-query values)" if how == "median" else ""
        raise ValueError(f"how must be one of {HOWS}, got {how!r}{hint}")
    if empty is not None and empty not in EMPTIES:
        raise ValueError(f"empty must be None or one of {EMPTIES}, got {empty!r}")
    spec, columns = _spec(measures, rel=rel, ties=ties, num_docs=num_docs)
    picked = _select(columns, lambda c: c.summary, measures)
    mean_mode = {"mean": "mean", "gmean": "log", "min": "min", "max": "max"}[how]
    modes = tuple(
        {"gmean": "log", "count": "count", "sum": "sum", "num_rel": "sum"}.get(columns[i].agg, mean_mode)
        for i in picked
    )
    return Accumulator(tuple(columns[i].name for i in picked), how, empty, spec, picked, modes)
