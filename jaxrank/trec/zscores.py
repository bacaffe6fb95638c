"""trec_eval's ``-Z zscores_file``: each query's values as z-scores against reference means.

A z-scores file has lines ``qid measure mean stddev`` (trec_eval's ``get_zscores.c``): for
every query and every printed measure name (``P_5``, ``iprec_at_recall_0.10``, ``gm_map``),
the mean and standard deviation of that value over some reference runs. trec_eval then
replaces each per-query value ``v`` by ``(v - mean) / stddev`` (``convert_zscores.c``;
when ``stddev`` is 0: 0 if ``v == mean``, else -1000000) before it sums and prints, so the
summary is the mean (or sum, or geometric mean) of the z-scores, and every line but
``runid`` and ``relstring`` is printed ``Z%-22s\\t%s\\t%6.4f``.

Where trec_eval finds no line for a query or a measure it prints -1000000 (its
``MISSING_ZSCORE_VALUE``) in silence, which then swamps the summary: jaxrank refuses such a
file, naming the query and the measure, except for the summary-only geometric means
(``gm_map``, ``gm_bpref``, whose per-query value is the log of the measure), where it gives
trec_eval's value (trec_eval's own test file has no lines for them; the summary is then
``exp(-1000000)``, printed 0.0000).

The lookup is trec_eval's binary search over the lines sorted by ``(qid, measure)`` with
``strcmp``, including its bound: it may look one entry past a query's lines, at the next
query's first measure, and then use that entry (a measure missing from a query but first
in the next one).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from jaxrank.measures.plan import MIN_GEO_MEAN, Column
from jaxrank.trec._parse import STDIN, TrecFormatError, read_whole

__all__ = ["MISSING_ZSCORE_VALUE", "ZScores", "read_zscores"]

MISSING_ZSCORE_VALUE = -1000000.0  # trec_eval.h
FORMAT = "qid measure mean stddev"

# what C's atof reads whole (decimal; inf, nan): anything else is refused, as atof would
# silently read a prefix of it (or 0)
_NUMBER = re.compile(rb"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class ZScores:
    """A z-scores file, as trec_eval holds it: entries sorted by ``(qid, measure)``.

    Attributes:
        name: the file's name (in messages).
        qids: the distinct qids (bytes), sorted with ``strcmp``.
        starts: query ``k``'s entries are ``starts[k]:starts[k + 1]``.
        measures, means, stddevs, lines: one per entry (``lines``: the file's line numbers,
            or None for a dict).
    """

    name: str
    qids: list[bytes]
    starts: list[int]
    measures: list[bytes]
    means: list[float]
    stddevs: list[float]
    lines: list[Optional[int]]

    def find_query(self, qid: bytes) -> Optional[int]:
        """trec_eval's ``find_qid``: the query's index, or None (its search may read one
        entry past the last query, undefined memory in C: not found here)."""
        start, end = 0, len(self.qids)
        while start <= end:
            cur = (start + end) // 2
            if cur >= len(self.qids):
                return None
            if qid < self.qids[cur]:
                end = cur - 1
            elif qid > self.qids[cur]:
                start = cur + 1
            else:
                return cur
        return None

    def find_measure(self, k: int, measure: bytes) -> Optional[int]:
        """trec_eval's ``find_meas`` in query ``k``'s entries: the entry, or None. Its upper
        bound is one past the query's last entry, which is the next query's first."""
        base = self.starts[k]
        start, end = 0, self.starts[k + 1] - base
        while start <= end:
            cur = base + (start + end) // 2
            if cur >= len(self.measures):
                return None
            if measure < self.measures[cur]:
                end = cur - base - 1
            elif measure > self.measures[cur]:
                start = cur - base + 1
            else:
                return cur
        return None

    def convert(
        self, qids: Sequence[str], columns: Sequence[Column], values: Mapping[str, Any]
    ) -> dict[str, np.ndarray]:
        """``{column name: z-scores per query}`` for the numeric columns but ``num_q``, as
        ``convert_zscores.c`` converts them (the geometric means' values are the logs, as
        trec_eval holds them). Raises :class:`TrecFormatError` for a query or a printed
        measure the file has no line for."""
        found = []
        for q in qids:
            k = self.find_query(q.encode("utf-8", "surrogateescape"))
            if k is None:
                raise TrecFormatError(
                    self.name, None, f"no z-scores for query {q} (trec_eval would print -1000000 for its every measure)"
                )
            found.append(k)
        out = {}
        for column in columns:
            if column.kind == "str" or column.agg == "count":
                continue
            key = column.name.encode("utf-8", "surrogateescape")
            v = np.asarray(values[column.name], np.float64).tolist()
            z = []
            for q, k, x in zip(qids, found, v):
                if column.agg == "gmean":
                    x = math.log(max(x, MIN_GEO_MEAN))
                e = self.find_measure(k, key)
                if e is None:
                    if column.per_query:
                        reason = f"no z-score for query {q}, measure {column.name} (trec_eval would print -1000000)"
                        raise TrecFormatError(self.name, None, reason)
                    z.append(MISSING_ZSCORE_VALUE)
                    continue
                mean, sd = self.means[e], self.stddevs[e]
                if sd:
                    z.append((x - mean) / sd)
                else:
                    z.append(0.0 if x == mean else MISSING_ZSCORE_VALUE)
            out[column.name] = np.array(z, np.float64)
        return out


def _number(token: bytes) -> Optional[float]:
    return float(token) if _NUMBER.fullmatch(token) else None


def _from_entries(name: str, entries: list[tuple[bytes, bytes, float, float, Optional[int]]]) -> ZScores:
    if not entries:
        raise TrecFormatError(name, 1 if name != "<dict>" else None, f"no data lines; expected {FORMAT}")
    entries.sort(key=lambda e: (e[0], e[1]))
    for a, b in zip(entries, entries[1:]):
        if a[:2] == b[:2]:
            where = f" (lines {a[4]} and {b[4]})" if a[4] is not None else ""
            reason = f"query {a[0].decode(errors='replace')}, measure {a[1].decode(errors='replace')} twice{where}"
            raise TrecFormatError(name, b[4], reason)
    qids, starts = [], []
    for i, e in enumerate(entries):
        if not qids or qids[-1] != e[0]:
            qids.append(e[0])
            starts.append(i)
    starts.append(len(entries))
    return ZScores(
        name,
        qids,
        starts,
        [e[1] for e in entries],
        [e[2] for e in entries],
        [e[3] for e in entries],
        [e[4] for e in entries],
    )


def read_zscores(source: Union[str, os.PathLike, Mapping, ZScores]) -> ZScores:
    """Read a z-scores file (``qid measure mean stddev`` lines, whitespace-separated; blank
    lines and lines starting with ``#`` are skipped), or take ``{qid: {measure: (mean,
    stddev)}}``.

    Raises:
        TrecFormatError: a line without exactly 4 fields, a mean or stddev that is not a
            number (C's ``atof`` would read a prefix of it, or 0), a query and measure twice,
            an empty, missing or unreadable file (file and line named).
    """
    if isinstance(source, ZScores):
        return source
    if isinstance(source, Mapping):
        entries = []
        for q, per in source.items():
            if not isinstance(per, Mapping):
                raise TrecFormatError("<dict>", None, f"query {q!r}: expected a dict measure -> (mean, stddev)")
            for m, pair in per.items():
                try:
                    mean, sd = (float(x) for x in pair)
                except (TypeError, ValueError):
                    raise TrecFormatError(
                        "<dict>", None, f"query {q!r}, measure {m!r}: expected (mean, stddev), got {pair!r}"
                    ) from None
                entries.append(
                    (
                        str(q).encode("utf-8", "surrogateescape"),
                        str(m).encode("utf-8", "surrogateescape"),
                        mean,
                        sd,
                        None,
                    )
                )
        return _from_entries("<dict>", entries)
    path = Path(os.fspath(source))
    name = "<stdin>" if str(path) == STDIN else str(path)
    data = read_whole(path)
    entries = []
    for i, line in enumerate(data.split(b"\n"), 1):
        fields = line.split()
        if not fields or fields[0].startswith(b"#"):
            continue
        if len(fields) != 4:
            raise TrecFormatError(name, i, f"expected 4 fields ({FORMAT}), got {len(fields)}")
        mean, sd = _number(fields[2]), _number(fields[3])
        for what, token, x in (("mean", fields[2], mean), ("stddev", fields[3], sd)):
            if x is None:
                raise TrecFormatError(name, i, f"{what} is not a number: {token.decode(errors='replace')!r}")
        entries.append((fields[0], fields[1], mean, sd, i))
    return _from_entries(name, entries)
