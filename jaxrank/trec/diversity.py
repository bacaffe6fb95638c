"""Diversity evaluation in the TREC layer: subtopic qrels, ``jaxrank ndeval`` and the
ir_measures diversity names (``alpha_nDCG@20``, ``ERR_IA@20``, ...).

The reference is ndeval (``../shared/ref/ndeval/ndeval.c``, TREC Web 2009-2014), whose
qrels are TREC qrels with a subtopic in the second column: ``topic subtopic docno judgment``.
The values come from the array functions (:func:`jaxrank.alpha_dcg`, :func:`jaxrank.err_ia`
and the rest) over every topic at once, in one jitted program; the normalised measures divide
a run's value by its ideal ranking's as ndeval divides them, so that the printed digits agree.
This module reads the files as ndeval reads them, orders the runs as ndeval (or pyndeval)
orders them, and prints ndeval's CSV.

ndeval's rules, kept here:

* qrels lines have at least 4 fields (more are ignored); topic, subtopic and judgment are
  natural numbers (digits only, at most 1000009), else ``syntax error``; a judgment above 1
  counts as 1. A run line has at least 6 fields; its topic may carry a prefix ending in ``-``
  (``wt09-12``), its rank is a natural number, its score is read only by ``-traditional``.
* A run is ordered by its rank column (``-traditional``: by score descending, then docno
  descending); a rank or a docno twice in a topic is an error; ``-M N`` keeps the first N.
* Every topic of the run gets a row (zeros when the qrels lack it); the ``amean`` row
  divides the sums by the topics in both files (``-c``: the qrels' topics; with a baseline,
  at least the rows printed). nNRBP of a topic without a relevant judgment is 0/0, which
  glibc prints ``-nan`` on x86-64.

One deliberate difference: a (topic, subtopic, docno) judged twice is refused (ndeval counts
it twice in MAP-IA's denominator and keeps one of the two judgments, chosen by its ``qsort``).

ir_measures (its pyndeval provider) differs from ndeval's command line in ways kept by
:func:`report_diversity`: runs are ordered by score descending, then docno *ascending*; a
judgment counts when ``>= rel``; topic and subtopic ids are any strings, judgments any
integers; cutoffs go to 20. pyndeval evaluates the queries in both the qrels and the run;
ir_measures adds the qrels queries the run lacks, at 0 (``queries="qrels"`` here).

Example:
    >>> qrels = {"1": {"a": {"d1": 1, "d2": 1}, "b": {"d3": 1}}}
    >>> run = {"1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
    >>> values = report_diversity(qrels, run, ["alpha_nDCG@2", "StRecall@2"]).summary
    >>> round(values["alpha_nDCG@2"], 4), values["StRecall@2"]
    (0.8066, 0.5)
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Optional

import numpy as np

from jaxrank.measures.names import DIVERSITY
from jaxrank.ranking.backend import bucket
from jaxrank.trec._report import Report
from jaxrank.trec._report import summary as _summary
from jaxrank.trec.subtopics import DEPTH, SubtopicQrels, read_subtopic_qrels

# ----------------------------------------------------------------------------- computing


@dataclasses.dataclass(frozen=True)
class _Lists:
    """Padded arrays of topics' ranked lists for the diversity functions."""

    scores: np.ndarray  # [T, n] float64: -position, so the stable hard ranker keeps the order
    where: np.ndarray  # [T, n]
    labels: np.ndarray  # [T, n, t] int8 0/1: relevant to the subtopic
    judgments: np.ndarray  # [T, m, t] int8 0/1, every judged document in docno order
    judgments_where: np.ndarray  # [T, m]


def _lists(qrels: SubtopicQrels, places: Sequence[int], ranked: Sequence[np.ndarray], rel: int) -> _Lists:
    """Labels of each ranked list from the qrels topic at the same place (``places[i]``)."""
    relevant = [qrels.relevant(p, rel) for p in places]
    count = bucket(len(places))
    n = bucket(max((r.size for r in ranked), default=1))
    m = bucket(max((j.shape[0] for j in relevant), default=1))
    t = bucket(max((j.shape[1] for j in relevant), default=1))
    labels = np.zeros((count, n, t), np.int8)
    judgments = np.zeros((count, m, t), np.int8)
    where = np.zeros((count, n), bool)
    jwhere = np.zeros((count, m), bool)
    for i, (p, docs, rj) in enumerate(zip(places, ranked, relevant)):
        judged = qrels.docnos[p]
        at = np.minimum(np.searchsorted(judged, docs), judged.size - 1)
        found = judged[at] == docs
        labels[i, : docs.size, : rj.shape[1]] = np.where(found[:, None], rj[at], False)
        judgments[i, : rj.shape[0], : rj.shape[1]] = rj
        where[i, : docs.size] = True
        jwhere[i, : rj.shape[0]] = True
    scores = np.broadcast_to(-np.arange(n, dtype=np.float64), (count, n))
    return _Lists(scores, where, labels, judgments, jwhere)


# The quantities computed by the array functions: name -> (function, has a cutoff, takes
# alpha, takes beta). ndeval normalises afterwards, dividing a run's value by the same value
# of its ideal ranking (``renormalize``); those divisions are done here, in ndeval's order.
_QUANTITIES = {
    "err": ("err_ia", True, True, False),
    "dcg": ("alpha_dcg", True, True, False),
    "nrbp": ("nrbp", False, True, True),
    "ap": ("ap_ia", False, False, False),
    "p": ("precision_ia", True, False, False),
    "strec": ("subtopic_recall", True, False, False),
}
_IDEAL = ("err", "dcg", "nrbp")  # those ndeval also computes over the ideal ranking


@functools.cache
def _program(k: tuple[int, ...]) -> Callable:
    """One jitted program per cutoffs: every quantity of :data:`_QUANTITIES` over the ranked
    lists, and those of :data:`_IDEAL` over the judged documents in ndeval's greedy ideal
    order (``ideal_err``, ...). ``alpha`` and ``beta`` are traced: every (alpha, beta) of a
    measure list shares the program."""
    import jax
    import jax.numpy as jnp

    from jaxrank import metrics
    from jaxrank.metrics import greedy_ideal_ranks
    from jaxrank.ranking.backend import inverse_permutation
    from jaxrank.ranking.hard import in_given_order

    def quantity(name, alpha, beta, ranks, scores, labels, where, judgments, judgments_where):
        function, cut, with_alpha, with_beta = _QUANTITIES[name]
        options: dict = {"alpha": alpha} if with_alpha else {}
        if with_beta:
            options["beta"] = beta
        return getattr(metrics, function)(
            scores,
            labels,
            k=k if cut else None,
            where=where,
            ranker=ranks,
            judgments=judgments,
            judgments_where=judgments_where,
            **options,
        )

    def program(scores, labels, where, judgments, judgments_where, alpha, beta):
        listed = jnp.broadcast_to(jnp.arange(scores.shape[-1]), scores.shape)  # the lists come in rank order
        ranks = in_given_order(listed, scores, where)
        out = {
            n: quantity(n, alpha, beta, ranks, scores, labels, where, judgments, judgments_where) for n in _QUANTITIES
        }
        position = greedy_ideal_ranks(judgments.astype(scores.dtype), judgments_where, alpha)  # 1..m, valid first
        ideal_scores = -position.astype(scores.dtype)
        ideal = in_given_order(inverse_permutation(position - 1), ideal_scores, judgments_where)
        for n in _IDEAL:
            out[f"ideal_{n}"] = quantity(
                n, alpha, beta, ideal, ideal_scores, judgments, judgments_where, judgments, judgments_where
            )
        return out

    return jax.jit(program)


def _quantities(lists: _Lists, k: tuple[int, ...], alpha: float, beta: float) -> dict[str, np.ndarray]:
    """``[T, C]`` float64 values of every quantity (``C = len(k)``, 1 without a cutoff),
    the ideal ranking's as ``ideal_err`` and so on."""
    import jax

    with jax.enable_x64(True):
        parameters = np.float64(alpha), np.float64(beta)
        out = _program(k)(lists.scores, lists.labels, lists.where, lists.judgments, lists.judgments_where, *parameters)
        rows = lists.scores.shape[0]
        return {n: np.asarray(v, np.float64).reshape(rows, -1) for n, v in out.items()}


def _family_values(family: str, q: dict[str, np.ndarray], lists: _Lists, k: tuple[int, ...]) -> np.ndarray:
    """``[T, C]`` values of an ir_measures family from :func:`_quantities`' ``q``, normalised
    as ndeval normalises them."""
    simple = {"ERR_IA": "err", "alpha_DCG": "dcg", "NRBP": "nrbp", "AP_IA": "ap", "P_IA": "p", "StRecall": "strec"}
    with np.errstate(invalid="ignore", divide="ignore"):
        if family in simple:
            v = q[simple[family]].copy()
        elif family == "nNRBP":  # 0/0 (no relevant judgment) is NaN, as in ndeval
            v = q["nrbp"] / q["ideal_nrbp"]
        else:  # ndeval divides only where alpha-DCG is not 0
            name = "dcg" if family == "alpha_nDCG" else "err"
            v = np.where(q["dcg"] != 0, q[name] / q[f"ideal_{name}"], 0.0)
    return v


# ----------------------------------------------------------------------------- ir_measures names


def _pyndeval_lists(run, topics: Sequence[str], max_docs: Optional[int]) -> tuple[dict[str, np.ndarray], list[str]]:
    """Each query's documents in pyndeval's order (score descending, then docno ascending),
    for the queries of ``topics``; and the run's other queries."""
    from jaxrank.trec import files as trec

    r = run if isinstance(run, trec.Run) else trec.read_run(run)
    wanted = set(topics)
    out, others = {}, []
    for i, q in enumerate(r.qids.tolist()):
        if q not in wanted:
            others.append(q)
            continue
        lo, hi = int(r.offsets[i]), int(r.offsets[i + 1])
        docs, scores = r.docnos[lo:hi], r.scores[lo:hi]
        order = np.lexsort((docs, -scores))
        out[q] = docs[order][:max_docs] if max_docs is not None else docs[order]
    return out, others


def report_diversity(
    qrels,
    run,
    measures: Sequence,
    *,
    complete: bool = False,
    max_docs: Optional[int] = None,
    rel_level: int = 1,
    judged_only: bool = False,
):
    """Evaluate the ir_measures diversity measures as ir_measures does with pyndeval:
    the values of each query in both the qrels and the run (``complete``: every query of
    the qrels, those the run lacks scoring 0), and their means.

    Args:
        qrels: subtopic qrels (:func:`read_subtopic_qrels`'s sources, or a
            :class:`SubtopicQrels`).
        run: a run (a path, ``{qid: {docno: score}}``, records, a DataFrame, a
            :class:`jaxrank.trec.Run`).
        measures: measure strings (``alpha_nDCG@20``) or parsed
            :class:`~jaxrank.measures.parse.Measure` s, all diversity ones.
        max_docs: evaluate only the first ``max_docs`` documents of each query.
        rel_level: the ``rel`` of measures that do not set it.
        judged_only: drop retrieved documents without a qrels line (as ``judged_only=True``).

    Returns:
        a :class:`jaxrank.trec.Report` (its ``unjudged``: the run's queries the qrels lack,
        skipped as pyndeval skips them).
    """
    from jaxrank.measures.parse import MeasureError, parse_measures

    parsed = parse_measures([m for m in measures if isinstance(m, str)]) + tuple(
        m for m in measures if not isinstance(m, str)
    )
    other = [m.source for m in parsed if m.family not in DIVERSITY]
    if other:
        raise MeasureError(f"{', '.join(other)}: not a diversity measure (evaluate those apart)")
    q = qrels if isinstance(qrels, SubtopicQrels) else read_subtopic_qrels(qrels)
    topics = [str(t) for t in q.topics]
    lists, unjudged = _pyndeval_lists(run, topics, max_docs)
    qids = topics if complete else [t for t in topics if t in lists]
    if not qids:
        raise ValueError("no query is in both the qrels and the run")
    place = {t: i for i, t in enumerate(topics)}
    present = [t for t in qids if t in lists]
    at = [qids.index(t) for t in present]
    groups: dict[tuple, list] = {}  # pyndeval's invocations: one per (rel, judged_only, alpha, beta)
    for meas in parsed:
        params = dict(meas.pairs)
        key = (
            rel_level if meas.level is None else meas.level,
            judged_only or meas.judged_only,
            params.get("alpha", 0.5),
            params.get("beta", 0.5),
        )
        groups.setdefault(key, []).append(meas)
    per_measure: dict[int, np.ndarray] = {}
    # every group's cutoffs in each: one compiled program for all groups of the same shapes
    k = tuple(sorted({c for m in parsed for c in m.cuts})) or (DEPTH,)
    for (rel, judged, alpha, beta), group in groups.items():
        ranked = [lists[t] for t in present]
        if judged:
            ranked = [d[np.isin(d, q.docnos[place[t]])] for d, t in zip(ranked, present)]
        batch = _lists(q, [place[t] for t in present], ranked, rel)
        quantities = _quantities(batch, k, alpha, beta)
        for meas in group:
            got = _family_values(meas.family, quantities, batch, k)
            v = np.zeros(len(qids), np.float64)
            v[at] = got[: len(present), k.index(meas.cuts[0]) if meas.cuts else 0]
            per_measure[id(meas)] = v
    columns, values, summary = [], {}, {}
    for meas in parsed:
        column = meas.columns[0]
        if column.name in values:
            continue
        columns.append(column)
        values[column.name] = per_measure[id(meas)]
        summary[column.name] = _summary(column, values[column.name], len(qids), complete, None)
    return Report(qids=qids, columns=columns, values=values, summary=summary, unjudged=tuple(unjudged))
