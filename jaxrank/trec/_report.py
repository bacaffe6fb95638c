"""What every trec_eval mode reports: :class:`Report` (per-query values, trec_eval's summary,
its text, JSON, CSV and DataFrame forms), trec_eval's summary of one column over the queries
(:func:`summary`, z-scores included), ``-Z``'s conversion (:func:`zscored`) and the queries a
report covers (:func:`ranked_queries`, with trec_eval's placeholder ranking for a judged query
the run lacks under ``-c``). :mod:`jaxrank.trec.evaluate`, the judgment-group, preference and
diversity modes build their reports with these.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

import numpy as np

from jaxrank.measures.plan import MIN_GEO_MEAN, Column
from jaxrank.trec import files as trec
from jaxrank.trec.zscores import ZScores

#: trec_eval's ranking for a judged query missing from the run (``-c``): one document that no
#: qrels line names.
BOGUS_DOCNO = b"ceci_nest_pas_un_docno"


@dataclasses.dataclass
class Report:
    """Evaluated measures: per-query values and trec_eval's summary.

    Attributes:
        qids: the evaluated queries, in trec_eval's order.
        columns: one :class:`~jaxrank.measures.parse.Column` per printed measure name, in order.
        values: column name -> per-query values (``[Q]`` float64 array, or a list of str).
        summary: column name -> summary value (float, int or str), for summary columns.
        unjudged: the run's queries absent from the qrels, in run order: skipped, as
            trec_eval skips them (with ``-c`` too); ``jaxrank eval`` reports how many.
        zscore: the values are z-scores (trec_eval ``-Z``): printed ``Z%-22s``, all
            ``%6.4f`` (:mod:`jaxrank.trec.zscores`).
    """

    qids: list[str]
    columns: list[Column]
    values: dict[str, Any]
    summary: dict[str, Any]
    unjudged: tuple[str, ...] = ()
    zscore: bool = False

    # -- Python values ----------------------------------------------------------------------
    def _value(self, column: Column, i: int):
        v = self.values[column.name][i]
        if column.kind == "int":
            return int(v)
        if column.kind == "str":
            return v
        return float(v)

    def query_values(self) -> dict[str, dict[str, Any]]:
        """``{qid: {measure: value}}`` for the per-query columns."""
        cols = [c for c in self.columns if c.per_query]
        table = {}
        for c in cols:
            v = self.values[c.name]
            if c.kind == "str":
                table[c.name] = list(v)
            else:
                table[c.name] = np.asarray(v).astype(np.int64 if c.kind == "int" else np.float64).tolist()
        return {q: {c.name: table[c.name][i] for c in cols} for i, q in enumerate(self.qids)}

    def to_dict(self, per_query: bool = False) -> dict:
        """``{measure: value}``, or ``{"all": {...}, "per_query": {qid: {...}}}``."""
        if not per_query:
            return dict(self.summary)
        return {"all": dict(self.summary), "per_query": self.query_values()}

    def to_frame(self, per_query: bool = False):
        """A pandas DataFrame: one row per query (with ``per_query``) and a row ``all``;
        one column per measure."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - pandas is optional
            raise ImportError("as_frame=True needs pandas: pip install pandas") from e
        rows = {}
        if per_query:
            rows.update(self.query_values())
        rows["all"] = dict(self.summary)
        names = [c.name for c in self.columns]
        frame = pd.DataFrame.from_dict(rows, orient="index")
        frame = frame.reindex(columns=[n for n in names if n in frame.columns])
        frame.index.name = "qid"
        return frame

    # -- text -----------------------------------------------------------------------------
    def _strings(self, column: Column) -> list[str]:
        v = self.values[column.name]
        if column.kind == "str":
            return [f"'{s}'" if column.name.startswith("relstring") else s for s in v]
        if column.kind == "int":
            return np.asarray(v).astype(np.int64).astype(str).tolist()
        return format_values(np.asarray(v, np.float64))

    def _summary_string(self, column: Column) -> str:
        v = self.summary[column.name]
        if column.kind == "str":
            return str(v)
        if column.kind == "int":
            return str(int(v))
        return format_values(np.asarray([v], np.float64))[0]

    def rows(self, per_query: bool = False, summary: bool = True) -> list[tuple[str, str, str]]:
        """(measure, qid, printed value) in trec_eval's order."""
        out = []
        if per_query:
            cols = [c for c in self.columns if c.per_query]
            strings = [self._strings(c) for c in cols]
            for i, q in enumerate(self.qids):
                out.extend((c.name, q, s[i]) for c, s in zip(cols, strings))
        if summary:
            out.extend((c.name, "all", self._summary_string(c)) for c in self.columns if c.summary)
        return out

    def to_trec(self, per_query: bool = False, summary: bool = True) -> str:
        """trec_eval's output: ``%-22s\\t%s\\t%s`` lines (floats ``%6.4f``, counts ``%ld``)."""
        parts = []
        cols = [c for c in self.columns if c.per_query]
        if per_query and cols and self.qids:
            # [Q, C] lines built by numpy string ufuncs, joined once
            values = np.stack([np.asarray(self._strings(c), dtype=str) for c in cols], axis=1)
            heads = np.asarray([f"{self._prefix(c)}{c.name:<22}\t" for c in cols], dtype=str)[None, :]
            qids = np.strings.add(np.asarray(self.qids, dtype=str), "\t")[:, None]
            lines = np.strings.add(np.strings.add(heads, qids), values)
            parts.append("\n".join(lines.ravel().tolist()) + "\n")
        if summary:
            cols = [c for c in self.columns if c.summary]
            # the floats formatted in one call (format_values is elementwise): many runs print many
            floats = [i for i, c in enumerate(cols) if c.kind not in ("str", "int")]
            texts = [None if c.kind not in ("str", "int") else self._summary_string(c) for c in cols]
            if floats:
                values = format_values(np.asarray([self.summary[cols[i].name] for i in floats], np.float64))
                for i, t in zip(floats, values):
                    texts[i] = t
            parts.extend(f"{self._prefix(c)}{c.name:<22}\tall\t{t}\n" for c, t in zip(cols, texts))
        return "".join(parts)

    def _prefix(self, column: Column) -> str:
        return "Z" if self.zscore and column.kind != "str" else ""

    def to_json(self, per_query: bool = False, run: Optional[str] = None) -> str:
        """``{"all": {...}}``, plus ``"per_query": {qid: {...}}`` with ``per_query``, on one
        line; ``run`` (one of several runs) adds ``"run": run`` first."""
        data: dict[str, Any] = {} if run is None else {"run": run}
        data["all"] = dict(self.summary)
        if per_query:
            data["per_query"] = self.query_values()
        return json.dumps(data) + "\n"

    def to_csv(
        self, per_query: bool = False, summary: bool = True, run: Optional[str] = None, header: bool = True
    ) -> str:
        """``measure,qid,value`` rows in trec_eval's order, values at full precision; ``run``
        (one of several runs) adds a first column ``run``; ``header=False`` leaves out the
        header row (the runs after the first)."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        lead = () if run is None else (run,)
        if header:
            writer.writerow(["run"] * bool(lead) + ["measure", "qid", "value"])
        if per_query:
            table = self.query_values()
            cols = [c for c in self.columns if c.per_query]
            for q in self.qids:
                writer.writerows((*lead, c.name, q, table[q][c.name]) for c in cols)
        if summary:
            writer.writerows((*lead, c.name, "all", self.summary[c.name]) for c in self.columns if c.summary)
        return buf.getvalue()


def format_values(v: np.ndarray) -> list[str]:
    """``printf("%6.4f")`` of each value, vectorised.

    The value times 10^4 is rounded in float64; where that could differ from the correct
    rounding of the exact binary value (a fraction within 1e-6 of one half), and for NaN and
    infinities, each value is formatted by Python, which rounds exactly as C does. NaN prints
    as glibc prints trec_eval's 0/0 on x86: ``-nan``.
    """
    v = np.asarray(v, np.float64).reshape(-1)
    if v.size == 0:
        return []
    a = np.abs(v) * 1e4
    finite = np.isfinite(a) & (a < 2.0**52)
    a = np.where(finite, a, 0.0)
    frac = a - np.floor(a)
    slow = ~finite | (np.abs(frac - 0.5) < 1e-6)
    n = np.floor(a + 0.5).astype(np.int64)
    whole, part = np.divmod(n, 10000)
    text = np.strings.add(np.where(np.signbit(v), "-", ""), whole.astype(str))
    text = np.strings.add(np.strings.add(text, "."), np.strings.zfill(part.astype(str), 4))
    out = text.tolist()
    for i in np.flatnonzero(slow).tolist():
        x = float(v[i])
        if math.isnan(x):
            out[i] = "  -nan"
        else:
            out[i] = "%6.4f" % x  # noqa: UP031 - trec_eval's printf format
    return out


def summary(column: Column, v, n_q: int, complete: bool, positive, *, tag: str = "", zscores: bool = False):
    """trec_eval's summary of one column over its ``n_q`` queries.

    The running sum of the per-query doubles in query order, divided by ``n_q`` for means;
    for geometric means the sum of ``log(max(v, MIN_GEO_MEAN))`` (the C library's ``log``
    and ``exp``, Python's ``math``), except for z-scores, whose sum is already of logs'
    place; counts are ints (doubles for z-scores); ``num_rel`` with ``-c`` counts the
    qrels' relevant entries (``positive``) whatever the values; ``runid`` is the run's tag.
    """
    if column.agg == "runid":
        return tag
    if column.agg == "count":
        return float(n_q) if zscores else n_q
    if column.agg == "num_rel" and complete:
        n = int(np.sum(positive))
        return float(n) if zscores else n
    if zscores:
        total = float(np.cumsum(v)[-1]) if np.size(v) else 0.0
        if column.agg in ("sum", "num_rel"):
            return total
        return math.exp(total / n_q) if column.agg == "gmean" else total / n_q
    if column.agg in ("sum", "num_rel"):
        return int(np.sum(np.asarray(v).astype(np.int64)))
    if column.agg == "gmean":
        logs = [math.log(max(x, MIN_GEO_MEAN)) for x in np.asarray(v, np.float64).tolist()]
        return math.exp(np.cumsum(logs)[-1] / n_q)
    return float(np.cumsum(np.asarray(v, np.float64))[-1] / n_q)  # trec_eval's running sum


def zscored(zs: ZScores, qids: list, columns: list, values: dict, summaries: dict, complete: bool, positive):
    """trec_eval ``-Z``: every numeric value as a z-score (``convert_zscores.c``), summed
    and averaged as trec_eval sums and averages them; counts become doubles."""
    z = zs.convert(qids, columns, values)
    out_columns, out_values, out_summary = [], dict(values), dict(summaries)
    for c in columns:
        if c.kind != "str":
            c = dataclasses.replace(c, kind="float")
            out_values[c.name] = z.get(c.name, np.asarray(values[c.name], np.float64))
            if c.summary:
                out_summary[c.name] = summary(c, out_values[c.name], len(qids), complete, positive, zscores=True)
        out_columns.append(c)
    return out_columns, out_values, out_summary


def ranked_queries(
    qids: Sequence[str],
    run: trec.Run,
    complete: bool,
    max_docs: Optional[int],
    ranked: Callable[[int, int], list],
) -> Iterator[tuple[str, list]]:
    """``(qid, documents)`` for each of ``qids`` (the judged queries, in order) that the run
    has, its documents ``ranked(lo, hi)`` from the run's entries ``lo:hi``; with ``complete``
    (``-c``) every judged query, one the run lacks ranking :data:`BOGUS_DOCNO` alone; at most
    ``max_docs`` documents (``-M``)."""
    at = {qid: i for i, qid in enumerate(run.qids.tolist())}
    for qid in qids:
        i = at.get(qid)
        if i is None and not complete:
            continue
        docs = [BOGUS_DOCNO] if i is None else ranked(int(run.offsets[i]), int(run.offsets[i + 1]))
        yield qid, docs if max_docs is None else docs[:max_docs]
