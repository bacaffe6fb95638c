"""trec_eval's ``-R qrels_jg``: judgments from several judgment groups (users), and the
measures averaged over them: ``map_avgjg``, ``P_avgjg``, ``Rprec_mult_avgjg`` (``-m
qrels_jg``, with ``runid`` and ``num_q``).

A qrels_jg file is a qrels file whose second column names the judgment group
(``get_qrels_jg.c``): ``qid jg docno rel``. Each query's run is judged against each group's
judgments (``form_res_rels_jg.c``), each measure is computed per group as trec_eval's
``m_map_avgjg.c``, ``m_P_avgjg.c`` and ``m_Rprec_mult_avgjg.c`` compute it, summed over the
groups in ``strcmp`` order and divided by their number when there are several. These
measures are not performance-critical (trec_eval's own test has 3 queries): plain Python
float (C double) loops in trec_eval's order of operations.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional, Union

import numpy as np

from jaxrank.measures.plan import Column, MeasureError
from jaxrank.trec import files as trec
from jaxrank.trec._parse import STDIN, TrecFormatError, _one_int, _rel_error, read_whole
from jaxrank.trec._report import Report, ranked_queries, zscored
from jaxrank.trec._report import summary as _summary
from jaxrank.trec.zscores import read_zscores

__all__ = ["JG_MEASURES", "QrelsJG", "read_qrels_jg", "report_jg"]

FORMAT = "qid jg docno rel"
JG_MEASURES = ("runid", "num_q", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg")  # trec_eval's table order
_NONPOOL, _UNJUDGED = -1, -2


@dataclasses.dataclass(frozen=True)
class QrelsJG:
    """Judgments by group: ``queries[qid]`` is a list of ``(jg, {docno: rel})`` in ``strcmp``
    order of the group names (bytes); ``qids`` in ``strcmp`` order."""

    qids: list[str]
    queries: dict[str, list[tuple[bytes, dict[bytes, int]]]]


def read_qrels_jg(source: Union[str, os.PathLike, QrelsJG]) -> QrelsJG:
    """Read a qrels_jg file (``qid jg docno rel``; ``#`` lines and blank lines skipped).

    Raises:
        TrecFormatError: a line without 4 fields, a rel that is not an integer (as in
            :func:`jaxrank.trec.read_qrels`), a document twice in a group of a query (both
            lines named), an empty, missing or unreadable file.
    """
    if isinstance(source, QrelsJG):
        return source
    path = Path(os.fspath(source))
    name = "<stdin>" if str(path) == STDIN else str(path)
    data = read_whole(path)
    groups: dict[bytes, dict[bytes, dict[bytes, int]]] = {}
    seen: dict[tuple[bytes, bytes, bytes], int] = {}
    for i, line in enumerate(data.split(b"\n"), 1):
        fields = line.split()
        if not fields or line.startswith(b"#"):
            continue
        if len(fields) != 4:
            raise TrecFormatError(name, i, f"expected 4 fields ({FORMAT}), got {len(fields)}")
        qid, jg, docno, token = fields
        rel = _one_int(token)
        if rel is None:
            raise TrecFormatError(name, i, _rel_error(token))
        key = (qid, jg, docno)
        if key in seen:
            doc = docno.decode(errors="replace")
            reason = f"document {doc} twice in judgment group {jg.decode(errors='replace')} (lines {seen[key]} and {i})"
            raise TrecFormatError(name, i, reason)
        seen[key] = i
        groups.setdefault(qid, {}).setdefault(jg, {})[docno] = rel
    if not groups:
        raise TrecFormatError(name, 1, f"no data lines (empty, or only comments and blank lines); expected {FORMAT}")
    qids = sorted(groups)
    queries = {q.decode("utf-8", "surrogateescape"): [(jg, groups[q][jg]) for jg in sorted(groups[q])] for q in qids}
    return QrelsJG([q.decode("utf-8", "surrogateescape") for q in qids], queries)


@dataclasses.dataclass(frozen=True)
class _Plan:
    names: tuple[str, ...]  # JG_MEASURES requested, in table order
    p_cuts: tuple[int, ...]
    r_cuts: tuple[float, ...]


def parse_jg_measures(measures: Union[str, Iterable[str], None]) -> _Plan:
    """The judgment-group measures of ``-m`` strings (trec_eval's parameter syntax); any
    other measure is refused (trec_eval cannot compute it from qrels_jg judgments either)."""
    from jaxrank.measures.parse import trec_measure

    if measures is None:
        measures = ["qrels_jg"]
    elif isinstance(measures, str):
        measures = [measures]
    params: dict[str, Optional[str]] = {}
    for m in measures:
        name, _, p = m.partition(".")
        names = JG_MEASURES if name == "qrels_jg" and not p else (name,)
        if name not in JG_MEASURES and name != "qrels_jg":
            raise MeasureError(
                f"measure {m!r} cannot be computed from -R qrels_jg judgments (trec_eval cannot either); "
                "use qrels_jg, map_avgjg, P_avgjg, Rprec_mult_avgjg, runid, num_q"
            )
        for n in names:
            if params.get(n) is None:
                params[n] = p or None
    p_cuts = trec_measure("P", params.get("P_avgjg")).cuts if "P_avgjg" in params else ()
    r_cuts = trec_measure("Rprec_mult", params.get("Rprec_mult_avgjg")).cuts if "Rprec_mult_avgjg" in params else ()
    return _Plan(tuple(n for n in JG_MEASURES if n in params), tuple(p_cuts), tuple(r_cuts))


def _rel_lists(docs: Sequence[bytes], judged: dict[bytes, int], level: int, judged_only: bool):
    """One group's ``results_rel_list``, ``num_ret``, ``num_rel_ret`` and ``num_rel``."""
    rels = []
    for d in docs:
        r = judged.get(d)
        rels.append(_NONPOOL if r is None else (_UNJUDGED if r < 0 else r))
    if judged_only:
        rels = [r for r in rels if r >= 0]
    num_rel_ret = sum(1 for r in rels if r >= 0 and r >= level)
    num_rel = sum(1 for r in judged.values() if r >= 0 and r >= level)
    return rels, len(rels), num_rel_ret, num_rel


def _query_values(plan: _Plan, docs: Sequence[bytes], groups, level: int, judged_only: bool) -> dict[str, float]:
    n_p, n_r = len(plan.p_cuts), len(plan.r_cuts)
    ap, p, rp = 0.0, [0.0] * n_p, [0.0] * n_r
    for _, judged in groups:
        rels, num_ret, num_rel_ret, num_rel = _rel_lists(docs, judged, level, judged_only)
        # m_map_avgjg.c
        rel_so_far, total = 0, 0.0
        for i in range(num_ret):
            if rels[i] >= level:
                rel_so_far += 1
                total += rel_so_far / (i + 1)
        if rel_so_far:
            ap += total / num_rel
        # m_P_avgjg.c
        if n_p:
            k, rel_so_far = 0, 0
            for i in range(num_ret):
                if i == plan.p_cuts[k]:
                    p[k] += rel_so_far / i
                    k += 1
                    if k == n_p:
                        break
                if rels[i] >= level:
                    rel_so_far += 1
            while k < n_p:
                p[k] += rel_so_far / plan.p_cuts[k]
                k += 1
        # m_Rprec_mult_avgjg.c
        if n_r:
            cuts = [int(x * num_rel + 0.9) for x in plan.r_cuts]
            cur = n_r - 1
            while cur >= 0 and cuts[cur] > num_ret:
                rp[cur] += num_rel_ret / cuts[cur]
                cur -= 1
            rel_so_far = num_rel_ret
            i = num_ret
            while i > 0 and rel_so_far > 0:
                precis = rel_so_far / i
                while cur >= 0 and i == cuts[cur]:
                    rp[cur] += precis
                    cur -= 1
                if rels[i - 1] >= level:
                    rel_so_far -= 1
                i -= 1
    n = len(groups)
    if n > 1:
        ap /= n
        p = [x / n for x in p]
        rp = [x / n for x in rp]
    out = {"map_avgjg": ap}
    out.update({f"P_avgjg_{c}": v for c, v in zip(plan.p_cuts, p)})
    out.update({f"Rprec_mult_avgjg_{c:3.2f}": v for c, v in zip(plan.r_cuts, rp)})
    return out


def report_jg(
    qrels,
    run,
    measures: Union[str, Iterable[str], None] = None,
    *,
    complete: bool = False,
    max_docs: Optional[int] = None,
    rel_level: int = 1,
    judged_only: bool = False,
    zscores=None,
):
    """trec_eval ``-R qrels_jg``: a :class:`~jaxrank.trec.evaluate.Report` of the
    judgment-group measures (``measures``: ``"qrels_jg"`` by default)."""
    plan = parse_jg_measures(measures)
    zs = None if zscores is None else read_zscores(zscores)
    if max_docs is not None and max_docs < 0:
        raise ValueError(f"max_docs must be >= 0, got {max_docs}")
    q = read_qrels_jg(qrels)
    r = run if isinstance(run, trec.Run) else trec.read_run(run)
    qids, rows = [], []
    for qid, docs in ranked_queries(q.qids, r, complete, max_docs, lambda lo, hi: r.docnos[lo:hi].tolist()):
        qids.append(qid)
        rows.append(_query_values(plan, docs, q.queries[qid], int(rel_level), judged_only))
    if not qids:
        raise ValueError("no query is in both the qrels and the run")
    n_q = len(qids)
    columns, values, summary = [], {}, {}
    for name in plan.names:
        if name == "runid":
            c = Column("runid", kind="str", per_query=False, agg="runid")
            columns.append(c)
            values[c.name] = [""] * n_q
            summary[c.name] = r.tag
        elif name == "num_q":
            c = Column("num_q", kind="int", per_query=False, agg="count")
            columns.append(c)
            values[c.name] = np.ones(n_q)
            summary[c.name] = n_q
        else:
            for key in [k for k in rows[0] if _family(k) == name]:
                c = Column(key)
                v = np.array([row[key] for row in rows], np.float64)
                columns.append(c)
                values[key] = v
                summary[key] = _summary(c, v, n_q, complete, None)
    if zs is not None:
        columns, values, summary = zscored(zs, qids, columns, values, summary, complete, None)
    unjudged = tuple(x for x in r.qids.tolist() if x not in q.queries)
    return Report(qids=qids, columns=columns, values=values, summary=summary, unjudged=unjudged, zscore=zs is not None)


def _family(key: str) -> str:
    if key.startswith("P_avgjg_"):
        return "P_avgjg"
    if key.startswith("Rprec_mult_avgjg_"):
        return "Rprec_mult_avgjg"
    return key
