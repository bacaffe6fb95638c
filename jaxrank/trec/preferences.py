"""trec_eval's ``-R prefs`` and ``-R qrels_prefs``: preference judgments, and the preference
measures (``-m all_prefs``: ``prefs_simp``, ``prefs_pair``, ``prefs_avgjg``,
``prefs_avgjg_Rnonrel`` and their ``_ret`` / ``_imp`` variants, and the counts).

A prefs file has lines ``qid jg jsg docno rel_level`` (``get_prefs.c``): within a judgment
sub-group (jsg) of a judgment group (jg, a user), a document with a higher rel_level is
preferred to one with a lower; a qrels_prefs file is a qrels file read so
(``get_qrels_prefs.c``: ``qid jg docno rel_level``, one sub-group per group). Each query's
preferences are counted against the run as ``form_prefs_counts.c`` counts them (a group
with one sub-group as equivalence classes of rel_level, one with several as a preference
array closed under transitivity), and each measure is formed as its ``m_prefs_*.c`` forms it.
This is a port of that C code, in its order of operations (plain Python and NumPy; the
measures are not performance-critical).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Optional, Union

import numpy as np

from jaxrank.measures.names import PREFS_MEASURES
from jaxrank.measures.plan import Column, MeasureError
from jaxrank.trec import files as trec
from jaxrank.trec._parse import STDIN, TrecFormatError, read_whole
from jaxrank.trec._report import Report, ranked_queries, zscored
from jaxrank.trec._report import summary as _summary
from jaxrank.trec.zscores import read_zscores

__all__ = ["PREFS_MEASURES", "Prefs", "read_prefs", "report_prefs"]

_COUNTS = PREFS_MEASURES[:3]
_NICKNAMES = {
    "all_prefs": ("runid", "num_q", *PREFS_MEASURES),
    "prefs": ("runid", "num_q", *PREFS_MEASURES[:6]),
}
_ORDER = ("runid", "num_q", *PREFS_MEASURES)
_NUMBER = re.compile(rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)", re.IGNORECASE)
FORMATS = {"prefs": "qid jg jsg docno rel_level", "qrels_prefs": "qid jg docno rel_level"}


@dataclasses.dataclass(frozen=True)
class Prefs:
    """Preference judgments: ``queries[qid]`` is a list of ``(jg, jsg, rel_level, docno,
    line)``; ``qids`` in ``strcmp`` order; ``name`` the file (in messages)."""

    name: str
    qids: list[str]
    queries: dict[str, list[tuple[bytes, bytes, float, bytes, int]]]


def read_prefs(source: Union[str, os.PathLike, Prefs], rel_format: str = "prefs") -> Prefs:
    """Read a prefs file (``rel_format="prefs"``: ``qid jg jsg docno rel_level``) or a
    qrels file as preferences (``"qrels_prefs"``: ``qid jg docno rel_level``); ``#`` lines
    and blank lines are skipped.

    Raises:
        TrecFormatError: a line with another number of fields, a rel_level that is not a
            number (C's ``atof`` would read a prefix of it, or 0), an empty, missing or
            unreadable file (file and line named).
    """
    if isinstance(source, Prefs):
        return source
    fmt = FORMATS[rel_format]
    n_fields = len(fmt.split())
    path = Path(os.fspath(source))
    name = "<stdin>" if str(path) == STDIN else str(path)
    data = read_whole(path)
    queries: dict[bytes, list] = {}
    for i, line in enumerate(data.split(b"\n"), 1):
        fields = line.split()
        if not fields or line.startswith(b"#"):
            continue
        if len(fields) != n_fields:
            raise TrecFormatError(name, i, f"expected {n_fields} fields ({fmt}), got {len(fields)}")
        if n_fields == 5:
            qid, jg, jsg, docno, token = fields
        else:
            (qid, jg, docno, token), jsg = fields, b"0"
        if not _NUMBER.fullmatch(token):
            raise TrecFormatError(name, i, f"rel_level is not a number: {token.decode(errors='replace')!r}")
        queries.setdefault(qid, []).append((jg, jsg, float(token), docno, i))
    if not queries:
        raise TrecFormatError(name, 1, f"no data lines (empty, or only comments and blank lines); expected {fmt}")
    qids = sorted(queries)
    return Prefs(
        name,
        [q.decode("utf-8", "surrogateescape") for q in qids],
        {q.decode("utf-8", "surrogateescape"): queries[q] for q in qids},
    )


# ----------------------------------------------------------------------------- form_prefs_counts.c


@dataclasses.dataclass
class _JG:
    ecs: list  # [(rel_level, [docid ranks])] (equivalence classes), or [] with a prefs array
    last_ec: int = 0  # where the last class starts in the query's pool of ranks (rank_pool)
    pa: Optional[np.ndarray] = None
    rel_array: Optional[list] = None
    ful_ret: int = 0
    poss_ret: int = 0
    ful_imp: int = 0
    poss_imp: int = 0
    poss_notoccur: int = 0
    nonrel: int = 0
    nonrel_ret: int = 0
    rel: int = 0
    rel_ret: int = 0


def _counts(name: str, docs: list[bytes], prefs: list) -> tuple[list[_JG], np.ndarray, int, int, list[int]]:
    """trec_eval's ``form_prefs_counts`` for one query: the judgment groups with their
    counts, the counts array, num_judged, num_judged_ret and the classes' ranks, laid out as
    trec_eval lays them out."""
    judged = {p[3] for p in prefs}
    rank: dict[bytes, int] = {}
    for d in docs:  # retrieved judged documents, in rank order
        if d in judged and d not in rank:
            rank[d] = len(rank)
    njr = len(rank)
    for d in sorted(judged):  # then the others, in docno order
        if d not in rank:
            rank[d] = len(rank)
    nj = len(rank)
    entries = sorted(((jg, jsg, rel, rank[d], d, line) for jg, jsg, rel, d, line in prefs), key=_entry_order)
    counts = np.zeros((nj, nj), np.int64)
    jgs: list[_JG] = []
    pool: list[int] = []
    start = 0
    while start < len(entries):
        end = start
        while end < len(entries) and entries[end][0] == entries[start][0]:
            end += 1
        group = entries[start:end]
        sub_groups = len({e[1] for e in group})
        jgs.append(_jg_pa(name, group, nj, njr, counts) if sub_groups > 1 else _jg_ec(name, group, njr, counts))
        if jgs[-1].ecs:  # trec_eval lays the classes of these groups out one after the other
            jgs[-1].last_ec = len(pool) + sum(len(ranks) for _, ranks in jgs[-1].ecs[:-1])
            pool.extend(r for _, ranks in jgs[-1].ecs for r in ranks)
        start = end
    return jgs, counts, nj, njr, pool


def _entry_order(e):
    return (e[0], e[1], -e[2], e[3])  # jg, jsg, rel_level descending, rank


def _jg_ec(name: str, group: list, njr: int, counts: np.ndarray) -> _JG:
    ecs: list = []
    for _, _, rel, r, _, _ in group:
        if not ecs or ecs[-1][0] != rel:
            ecs.append((rel, []))
        ecs[-1][1].append(r)
    jg = _JG(ecs)
    for k1, (rel1, ranks1) in enumerate(ecs):
        n_ret = next((i for i, r in enumerate(ranks1) if r >= njr), len(ranks1))
        if rel1 > 0.0:
            jg.rel_ret += n_ret
            jg.rel += len(ranks1)
        else:
            jg.nonrel_ret += n_ret
            jg.nonrel += len(ranks1)
        for _, ranks2 in ecs[k1 + 1 :]:
            for r1 in ranks1:
                for r2 in ranks2:
                    counts[r1, r2] += 1
                    if r1 == r2:
                        line = max(e[5] for e in group if e[3] == r1)
                        doc = next(e[4] for e in group if e[3] == r1)
                        reason = f"document {doc.decode(errors='replace')} has two rel_levels in one judgment sub-group"
                        raise TrecFormatError(name, line, reason)
                    if r1 < r2:
                        if r2 < njr:
                            jg.ful_ret += 1
                        elif r1 < njr:
                            jg.ful_imp += 1
                        else:
                            jg.poss_notoccur += 1
                    else:
                        if r1 < njr:
                            jg.poss_ret += 1
                        elif r2 < njr:
                            jg.poss_imp += 1
                        else:
                            jg.poss_notoccur += 1
    jg.poss_ret += jg.ful_ret
    jg.poss_imp += jg.ful_imp
    return jg


def _jg_pa(name: str, group: list, nj: int, njr: int, counts: np.ndarray) -> _JG:
    pa = np.zeros((nj, nj), bool)
    rel_array = [-1.0] * nj
    n = len(group)
    for i, (_, jsg, rel, r, doc, line) in enumerate(group):
        if (rel_array[r] > 0.0 and rel == 0.0) or (rel_array[r] == 0.0 and rel > 0.0):
            reason = f"document {doc.decode(errors='replace')} has both 0 and non-0 rel_level in one judgment group"
            raise TrecFormatError(name, line, reason)
        rel_array[r] = rel
        j = i + 1
        while j < n and group[j][1] == jsg and group[j][2] == rel:
            j += 1
        while j < n and group[j][1] == jsg:
            pa[r, group[j][3]] = True
            j += 1
    # add_transitives: multiply by itself (with the diagonal) until nothing changes
    np.fill_diagonal(pa, True)
    step = pa.astype(np.int64)
    closed = pa
    while True:
        nxt = (step @ closed.astype(np.int64)) > 0
        if np.array_equal(nxt, closed):
            break
        closed = nxt
    pa = closed.copy()
    np.fill_diagonal(pa, False)
    conflict = np.argwhere(pa & pa.T)
    if conflict.size:
        ranks = {e[3]: e for e in group}
        a, b = (ranks.get(int(x)) for x in conflict[0])
        docs = " and ".join(e[4].decode(errors="replace") for e in (a, b) if e is not None)
        raise TrecFormatError(name, None, f"inconsistent preferences in judgment group (trec_eval aborts): {docs}")
    jg = _JG([], pa=pa, rel_array=rel_array)
    for i in range(njr):
        if rel_array[i] > 0.0:
            jg.rel_ret += 1
        elif rel_array[i] == 0.0:
            jg.nonrel_ret += 1
    jg.rel, jg.nonrel = jg.rel_ret, jg.nonrel_ret
    for i in range(njr, nj):
        if rel_array[i] > 0.0:
            jg.rel += 1
        elif rel_array[i] == 0.0:
            jg.nonrel += 1
    counts += pa
    upper = np.triu(pa, 1)
    jg.poss_ret = int(np.tril(pa[:njr, :njr], -1).sum())
    jg.ful_ret = int(upper[:njr, :njr].sum())
    jg.ful_imp = int(pa[:njr, njr:].sum())
    jg.poss_imp = int(pa[njr:, :njr].sum())
    jg.poss_notoccur = int(pa[njr:, njr:].sum())
    jg.poss_ret += jg.ful_ret
    jg.poss_imp += jg.ful_imp
    return jg


# ----------------------------------------------------------------------------- m_prefs_*.c


class _Undefined(Exception):
    """trec_eval reads memory it has not written for this query: no defined value."""


def _recalculate(jg: _JG, njr: int, ret: bool, pool: list[int]) -> tuple[int, int]:
    """``recalculate`` of m_prefs_avgjg_Rnonrel.c (``ret=False``) and of
    m_prefs_avgjg_Rnonrel_ret.c (``ret=True``)."""
    ful = poss = 0
    if jg.ecs:
        # trec_eval's new class of the first R nonrelevant documents: R ranks from the start of
        # the last class, past its end when the last class (rel_level < 0) is smaller than R
        size = jg.rel_ret if ret else jg.rel
        new_nonrel = pool[jg.last_ec : jg.last_ec + size]
        if len(new_nonrel) < size:
            raise _Undefined

        def kept(ranks):
            if not ret:
                return ranks
            out = []
            for r in ranks:  # the C loops stop at the first unretrieved
                if r >= njr:
                    break
                out.append(r)
            return out

        for k1 in range(len(jg.ecs)):
            for k2 in range(k1 + 1, len(jg.ecs) - 1):
                for r1 in kept(jg.ecs[k1][1]):
                    for r2 in kept(jg.ecs[k2][1]):
                        if r1 < r2 and (ret or r1 < njr):
                            ful += 1
                        else:
                            poss += 1
        for k1 in range(len(jg.ecs)):
            for r1 in kept(jg.ecs[k1][1]):
                for r2 in kept(new_nonrel):
                    if r1 < r2 and (ret or r1 < njr):
                        ful += 1
                    else:
                        poss += 1
        return ful, poss + ful
    a, rel_array = jg.pa, jg.rel_array
    nj = len(rel_array)
    seen = 0
    limit = njr if ret else nj
    i = 0
    while i < limit:
        if rel_array[i] == 0.0:
            seen += 1
            if seen == jg.rel + 1:
                break
        i += 1
    first = i
    keep = np.array([not (k >= first and rel_array[k] == 0.0) for k in range(nj)], bool)
    b = a & keep[:, None] & keep[None, :]
    poss += int(np.tril(b[:njr, :njr], -1).sum())
    ful += int(np.triu(b[:njr, :njr], 1).sum())
    if not ret:
        ful += int(b[:njr, njr:].sum())
        poss += int(b[njr:, :njr].sum()) + int(b[njr:, njr:].sum())
    return ful, poss + ful


def _div(a: float, b: float) -> float:
    """C's double division: x/0 is inf (or -inf), 0/0 NaN."""
    if b:
        return a / b
    return float("nan") if a == 0 or a != a else math.copysign(float("inf"), a)


def _avgjg(jgs: list[_JG], parts: tuple[str, ...]) -> float:
    total = 0.0
    for jg in jgs:
        ful = jg.ful_ret + (jg.ful_imp if "imp" in parts else 0)
        poss = jg.poss_ret + (jg.poss_imp if "imp" in parts else 0) + (jg.poss_notoccur if "notoccur" in parts else 0)
        if poss:
            total += _div(ful, poss)
    return total / len(jgs) if total > 0.0 else 0.0


def _avgjg_rnonrel(jgs: list[_JG], njr: int, ret: bool, pool: list[int]) -> float:
    total = 0.0
    for jg in jgs:
        big_r, big_n = (jg.rel_ret, jg.nonrel_ret) if ret else (jg.rel, jg.nonrel)
        if big_r >= big_n:
            if ret:
                ful, poss = jg.ful_ret, jg.poss_ret
            else:
                ful = jg.ful_ret + jg.ful_imp
                poss = jg.poss_ret + jg.poss_imp + jg.poss_notoccur
            ful += jg.rel_ret * (big_r - big_n)
            poss += jg.rel * (big_r - big_n)
        else:
            ful, poss = _recalculate(jg, njr, ret, pool)
        total += _div(ful, poss)
    return total / len(jgs) if total > 0.0 else 0.0


def _pair(c: np.ndarray, nj: int, njr: int, areas: str) -> float:
    total, pairs = 0.0, 0

    def add(i, j, ratio):
        nonlocal total, pairs
        if c[i, j] or c[j, i]:
            pairs += 1
            if ratio:
                total += float(c[i, j]) / float(c[i, j] + c[j, i])

    for i in range(njr):
        for j in range(i + 1, njr):
            add(i, j, True)
    if areas in ("all", "imp"):
        for i in range(njr):
            for j in range(njr, nj):
                add(i, j, True)
    if areas == "all":
        for i in range(njr, nj):
            for j in range(i + 1, nj):
                add(i, j, False)
    return total / pairs if pairs else 0.0


def _query_values(name: str, qid: str, docs: list[bytes], prefs: list) -> dict[str, float]:
    jgs, c, nj, njr, pool = _counts(name, docs, prefs)

    def rnonrel(ret: bool) -> float:
        try:
            return _avgjg_rnonrel(jgs, njr, ret, pool)
        except _Undefined:
            raise TrecFormatError(
                name,
                None,
                f"query {qid}: a judgment group's lowest rel_level is below 0 and has fewer documents than its "
                f"relevant ones: trec_eval's prefs_avgjg_Rnonrel{'_ret' if ret else ''} then reads memory it did "
                "not write (no defined value); use rel_levels >= 0",
            ) from None

    ful_ret = sum(jg.ful_ret for jg in jgs)
    ful_imp = sum(jg.ful_imp for jg in jgs)
    poss_ret = sum(jg.poss_ret for jg in jgs)
    poss_imp = sum(jg.poss_imp for jg in jgs)
    poss_not = sum(jg.poss_notoccur for jg in jgs)

    def simp(ful, poss):
        return ful / poss if poss else 0.0

    return {
        "prefs_num_prefs_poss": float(poss_ret + poss_imp + poss_not),
        "prefs_num_prefs_ful": float(ful_ret + ful_imp),
        "prefs_num_prefs_ful_ret": float(ful_ret),
        "prefs_simp": simp(ful_ret + ful_imp, poss_ret + poss_imp + poss_not),
        "prefs_pair": _pair(c, nj, njr, "all"),
        "prefs_avgjg": _avgjg(jgs, ("imp", "notoccur")),
        "prefs_avgjg_Rnonrel": rnonrel(False),
        "prefs_simp_ret": simp(ful_ret, poss_ret),
        "prefs_pair_ret": _pair(c, nj, njr, "ret"),
        "prefs_avgjg_ret": _avgjg(jgs, ()),
        "prefs_avgjg_Rnonrel_ret": rnonrel(True),
        "prefs_simp_imp": simp(ful_ret + ful_imp, poss_ret + poss_imp),
        "prefs_pair_imp": _pair(c, nj, njr, "imp"),
        "prefs_avgjg_imp": _avgjg(jgs, ("imp",)),
    }


def parse_prefs_measures(measures: Union[str, Iterable[str], None]) -> tuple[str, ...]:
    """The preference measures of ``-m`` strings, in trec_eval's table order (default
    ``all_prefs``); any other measure is refused (trec_eval cannot compute it from
    preferences either)."""
    if measures is None:
        measures = ["all_prefs"]
    elif isinstance(measures, str):
        measures = [measures]
    names: set[str] = set()
    for m in measures:
        if m in _NICKNAMES:
            names.update(_NICKNAMES[m])
        elif m in _ORDER:
            names.add(m)
        else:
            raise MeasureError(
                f"measure {m!r} cannot be computed from preference judgments (trec_eval cannot either); "
                "use all_prefs, prefs, runid, num_q or a prefs_* measure"
            )
    return tuple(n for n in _ORDER if n in names)


def report_prefs(
    prefs,
    run,
    measures: Union[str, Iterable[str], None] = None,
    *,
    rel_format: str = "prefs",
    complete: bool = False,
    max_docs: Optional[int] = None,
    zscores=None,
):
    """trec_eval ``-R prefs`` / ``-R qrels_prefs``: a :class:`~jaxrank.trec.evaluate.Report`
    of the preference measures (``measures``: ``"all_prefs"`` by default)."""
    names = parse_prefs_measures(measures)
    zs = None if zscores is None else read_zscores(zscores)
    if max_docs is not None and max_docs < 0:
        raise ValueError(f"max_docs must be >= 0, got {max_docs}")
    p = read_prefs(prefs, rel_format)
    r = run if isinstance(run, trec.Run) else trec.read_run(run)

    def ranked(lo: int, hi: int) -> list:  # form_prefs_counts.c breaks score ties by docno ascending
        pairs = zip(r.scores[lo:hi].tolist(), r.docnos[lo:hi].tolist())
        return [d for _, d in sorted(pairs, key=lambda t: (-t[0], t[1]))]

    qids, rows = [], []
    for qid, docs in ranked_queries(p.qids, r, complete, max_docs, ranked):
        qids.append(qid)
        rows.append(_query_values(p.name, qid, docs, p.queries[qid]))
    if not qids:
        raise ValueError("no query is in both the preferences and the run")
    n_q = len(qids)
    columns, values, summary = [], {}, {}
    for name in names:
        if name == "runid":
            c = Column("runid", kind="str", per_query=False, agg="runid")
            values[name], summary[name] = [""] * n_q, r.tag
        elif name == "num_q":
            c = Column("num_q", kind="int", per_query=False, agg="count")
            values[name], summary[name] = np.ones(n_q), n_q
        elif name in _COUNTS:
            c = Column(name, kind="int", agg="sum")
            v = np.array([row[name] for row in rows], np.float64)
            values[name], summary[name] = v, _summary(c, v, n_q, complete, None)
        else:
            c = Column(name)
            v = np.array([row[name] for row in rows], np.float64)
            values[name], summary[name] = v, _summary(c, v, n_q, complete, None)
        columns.append(c)
    if zs is not None:
        columns, values, summary = zscored(zs, qids, columns, values, summary, complete, None)
    unjudged = tuple(x for x in r.qids.tolist() if x not in p.queries)
    return Report(qids=qids, columns=columns, values=values, summary=summary, unjudged=unjudged, zscore=zs is not None)
