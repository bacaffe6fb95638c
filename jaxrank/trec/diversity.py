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
import os
import platform
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from jaxrank.trec._names import DIVERSITY
from jaxrank.trec._parse import TrecFormatError, _open
from jaxrank.trec.files import _file_name

__all__ = [
    "COLUMNS",
    "NdevalRun",
    "SubtopicQrels",
    "TopicTable",
    "evaluate_run",
    "ndeval_text",
    "read_ndeval_run",
    "read_subtopic_qrels",
    "report_diversity",
]

#: ndeval's evaluation depth: the cutoffs stop there (``DEPTH`` in ndeval.c).
DEPTH = 20
#: ndeval's output columns after ``runid,topic``, in order.
COLUMNS = (
    *("ERR-IA@5", "ERR-IA@10", "ERR-IA@20", "nERR-IA@5", "nERR-IA@10", "nERR-IA@20"),
    *("alpha-DCG@5", "alpha-DCG@10", "alpha-DCG@20", "alpha-nDCG@5", "alpha-nDCG@10", "alpha-nDCG@20"),
    *("NRBP", "nNRBP", "MAP-IA", "P-IA@5", "P-IA@10", "P-IA@20", "strec@5", "strec@10", "strec@20"),
)
_NDEVAL_CUTOFFS = (5, 10, 20)
_LARGE_ENOUGH = 100000  # ndeval's overflow guard in naturalNumber
_MISSING = np.iinfo(np.int64).min  # no qrels line for this (document, subtopic)
# 0/0 in C is the processor's default NaN: negative on x86 (glibc prints "-nan"), positive on ARM
_NAN_TEXT = "-nan" if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686") else "nan"

Source = Union[str, os.PathLike, Mapping, Iterable, Any]


# ----------------------------------------------------------------------------- reading files


def _read(path: Union[str, os.PathLike], what: str) -> tuple[str, bytes]:
    """A file's name (for messages) and bytes (``.gz`` read through gzip, ``-`` standard
    input); refuses a missing or empty file as ndeval does."""
    p = Path(path)
    name = _file_name(p)
    try:
        with _open(p) as f:
            data = f.read()
    except OSError as e:
        raise TrecFormatError(name, None, f"cannot open {what} file: {e.strerror or e}") from None
    if not data:
        raise TrecFormatError(name, None, f"{what} file is empty")
    return name, data


def _lines(data: bytes) -> list[bytes]:
    """The lines as ndeval's ``mygetline`` gives them (a last line may lack its newline)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


_SPACE = np.zeros(256, bool)
_SPACE[[9, 10, 11, 12, 13, 32]] = True  # C's isspace


def _table(data: bytes, count: int) -> Optional[list[np.ndarray]]:
    """The fields of every line as ``count`` columns (``S`` arrays) when every line has
    exactly ``count`` fields, the usual file; else None, and the caller reads line by line
    (naming the line ndeval would refuse)."""
    buf = np.frombuffer(data, np.uint8)
    space = _SPACE[buf]
    starts = np.flatnonzero(~space & np.concatenate(([True], space[:-1])))
    newlines = np.flatnonzero(buf == 10)
    lines = newlines.size + (not data.endswith(b"\n"))
    per_line = np.bincount(np.searchsorted(newlines, starts), minlength=lines)
    if per_line.size != lines or np.any(per_line != count):
        return None
    tokens = data.split()
    return [np.array(tokens[i::count], dtype=bytes) for i in range(count)]


def _naturals(column: np.ndarray) -> Optional[np.ndarray]:
    """:func:`natural_number` of every token of a column, when all are natural numbers
    within 6 significant digits (so ndeval's overflow guard cannot trip); else None."""
    if column.dtype.itemsize > 6 and np.any(np.char.str_len(np.char.lstrip(column, b"0")) > 6):
        return None
    if not np.all(np.char.isdigit(column)):  # b"" is no digit string either
        return None
    return column.astype(np.int64)


def natural_number(token: bytes) -> int:
    """ndeval's ``naturalNumber``: the value of a string of ASCII digits, -1 for anything
    else and for values past its overflow guard (at most 1000009 passes).

    >>> natural_number(b"007"), natural_number(b"-1"), natural_number(b"1e3"), natural_number(b"1000010")
    (7, -1, -1, -1)
    """
    if not token or not token.isdigit():
        return -1
    if len(token.lstrip(b"0")) <= 6:  # the guard (value > 100000 before a digit) cannot trip
        return int(token)
    value = 0
    for digit in token:
        if value > _LARGE_ENOUGH:
            return -1
        value = 10 * value + digit - 48
    return value


def _run_topic(token: bytes, line: bytes, second: bytes) -> int:
    """ndeval's ``parseTopic``: a natural number, or what follows the first ``-`` of a
    prefixed topic (``wt09-12``). Without a digit first nor a ``-``, ndeval reads on past
    the token's end: the next field when a single blank separates them."""
    if token[:1].isdigit():
        return natural_number(token)
    dash = token.find(b"-")
    if dash >= 0:
        return natural_number(token[dash + 1 :])
    end = len(line) - len(line.lstrip()) + len(token)
    return natural_number(second) if not line[end + 1 : end + 2].isspace() else -1


_STRTOD = re.compile(
    rb"[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?"
    rb"|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)",
    re.I,
)


def _strtod(token: bytes) -> Optional[float]:
    """The number at the start of ``token``, as C's ``sscanf("%lf")`` reads it; None if none."""
    m = _STRTOD.match(token)
    if m is None:
        return None
    text = m.group(0).decode()
    if "x" in text.lower():
        sign = -1.0 if text.startswith("-") else 1.0
        return sign * float.fromhex(text.lstrip("+-"))
    return float(text)


# ----------------------------------------------------------------------------- subtopic qrels


@dataclasses.dataclass(frozen=True, eq=False)
class SubtopicQrels:
    """Subtopic judgments by topic, as ndeval reads its qrels.

    Attributes:
        topics: the topic ids, ascending (ints from ndeval files, str otherwise).
        docnos: per topic, its judged documents, ``bytes`` (``S`` dtype), ascending
            (``strcmp`` order: ndeval's greedy ideal breaks ties by it).
        subtopics: per topic, its subtopic ids: the columns of ``judgments``.
        judgments: per topic, ``[m, t]`` int64: the judgment of each document for each
            subtopic, :data:`numpy.iinfo(np.int64).min` where no line judges the pair.
    """

    topics: tuple
    docnos: tuple[np.ndarray, ...]
    subtopics: tuple[np.ndarray, ...]
    judgments: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return len(self.topics)

    def relevant(self, i: int, rel: int = 1) -> np.ndarray:
        """``[m, t]`` bool: which documents of topic ``i`` are relevant to which subtopic."""
        j = self.judgments[i]
        return (j >= rel) & (j != _MISSING)

    def to_dict(self) -> dict:
        """``{topic: {subtopic: {docno: judgment}}}``."""
        out: dict = {}
        for topic, docnos, subs, j in zip(self.topics, self.docnos, self.subtopics, self.judgments):
            names = [d.decode("utf-8", "surrogateescape") for d in docnos.tolist()]
            out[topic] = {
                s: {names[r]: int(j[r, c]) for r in np.flatnonzero(j[:, c] != _MISSING).tolist()}
                for c, s in enumerate(subs.tolist())
            }
        return out


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogateescape")


def _subtopic_qrels(
    name: str, topics: list, subtopics: list, docnos: list[bytes], judgments: list[int], line_of: Callable
) -> SubtopicQrels:
    """Group the entries by topic; refuses a (topic, subtopic, docno) judged twice."""
    topic_names, topic_codes = np.unique(np.asarray(topics), return_inverse=True)
    docno_arr = np.array(docnos, dtype=bytes)
    sub_arr = np.asarray(subtopics)
    values = np.asarray(judgments, dtype=np.int64)
    order = np.argsort(topic_codes, kind="stable")
    bounds = np.searchsorted(topic_codes[order], np.arange(topic_names.size + 1))
    out_docnos, out_subs, out_j = [], [], []
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        idx = order[lo:hi]
        d_names, d_codes = np.unique(docno_arr[idx], return_inverse=True)
        s_names, s_codes = np.unique(sub_arr[idx], return_inverse=True)
        key = d_codes.astype(np.int64) * s_names.size + s_codes
        seen = np.full(d_names.size * s_names.size, -1, np.int64)
        seen[key[::-1]] = np.arange(key.size)[::-1]  # each pair's first entry
        twice = np.flatnonzero(seen[key] != np.arange(key.size))
        if twice.size:
            i, first = int(idx[twice[0]]), int(idx[seen[key[twice[0]]]])
            where = "" if line_of(first) is None else f" (also at line {line_of(first)})"
            raise TrecFormatError(
                name,
                line_of(i),
                f"document {docnos[i].decode(errors='replace')} judged twice for topic {topics[i]} "
                f"subtopic {subtopics[i]}{where}",
            )
        table = np.full((d_names.size, s_names.size), _MISSING, np.int64)
        table[d_codes, s_codes] = values[idx]
        out_docnos.append(d_names)
        out_subs.append(s_names)
        out_j.append(table)
    return SubtopicQrels(tuple(topic_names.tolist()), tuple(out_docnos), tuple(out_subs), tuple(out_j))


def _qrels_file(path: Union[str, os.PathLike], ndeval: bool) -> SubtopicQrels:
    name, data = _read(path, "qrel")
    columns = _table(data, 4)
    if columns is not None:  # the usual file: whole columns at once
        topic, subtopic, docno, judgment = columns
        if ndeval:
            numbers = [_naturals(c) for c in (topic, subtopic, judgment)]
            if all(v is not None for v in numbers):
                return _subtopic_qrels(name, numbers[0], numbers[1], docno, np.minimum(numbers[2], 1), lambda i: i + 1)
        else:
            try:  # integers, negative ones too (ir_measures reads them with int())
                values = judgment.astype(np.int64)
            except ValueError:
                values = None
            if values is not None:
                text = [np.char.decode(c, "utf-8", "surrogateescape") for c in (topic, subtopic)]
                return _subtopic_qrels(name, text[0], text[1], docno, values, lambda i: i + 1)
    return _qrels_lines(name, _lines(data), ndeval)


def _qrels_lines(name: str, lines: list[bytes], ndeval: bool) -> SubtopicQrels:
    """Line by line: the first line ndeval refuses is named."""
    topics, subtopics, docnos, judgments = [], [], [], []
    ints: dict[bytes, int] = {}
    for i, line in enumerate(lines):
        a = line.split(None, 4)
        if len(a) < 4:
            raise TrecFormatError(
                name, i + 1, f"syntax error in qrel file: {len(a)} fields, expected 4 (topic subtopic docno judgment)"
            )
        if ndeval:
            got = [ints.get(t) if t in ints else ints.setdefault(t, natural_number(t)) for t in (a[0], a[1], a[3])]
            bad = [what for what, v in zip(("topic", "subtopic", "judgment"), got) if v < 0]
            if bad:
                token = a[(0, 1, 3)[("topic", "subtopic", "judgment").index(bad[0])]]
                raise TrecFormatError(
                    name, i + 1, f"syntax error in qrel file: the {bad[0]} must be a natural number, got {token!r}"
                )
            topics.append(got[0])
            subtopics.append(got[1])
            judgments.append(min(got[2], 1))
        else:
            try:
                judgments.append(int(a[3]))
            except ValueError:
                raise TrecFormatError(name, i + 1, f"the judgment must be an integer, got {a[3]!r}") from None
            topics.append(a[0].decode("utf-8", "surrogateescape"))
            subtopics.append(a[1].decode("utf-8", "surrogateescape"))
        docnos.append(a[2])
    return _subtopic_qrels(name, topics, subtopics, docnos, judgments, lambda i: i + 1)


def _judgment(value: Any, name: str, line: Optional[int]) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer, float, np.floating, str, bytes)):
        raise TrecFormatError(name, line, f"the judgment must be an integer, got {value!r}")
    try:
        number = float(value) if isinstance(value, (float, np.floating)) else int(value)
    except ValueError:
        raise TrecFormatError(name, line, f"the judgment must be an integer, got {value!r}") from None
    if isinstance(number, float) and not number.is_integer():
        raise TrecFormatError(name, line, f"the judgment must be an integer, got {value!r}")
    return int(number)


def _qrels_columns(name: str, rows: Iterable[tuple], numbered: bool) -> SubtopicQrels:
    topics, subtopics, docnos, judgments = [], [], [], []
    for i, (topic, subtopic, docno, judgment) in enumerate(rows):
        topics.append(str(topic))
        subtopics.append(str(subtopic))
        docnos.append(_bytes(docno))
        judgments.append(_judgment(judgment, name, i + 1 if numbered else None))
    if not topics:
        raise TrecFormatError(name, None, "no judgments")
    return _subtopic_qrels(
        name, topics, subtopics, docnos, judgments, (lambda i: i + 1) if numbered else (lambda i: None)
    )


def read_subtopic_qrels(source: Source, *, ndeval: bool = False) -> SubtopicQrels:
    """Read diversity qrels: a judgment per (topic, subtopic, document).

    Args:
        source: a path to a qrels file whose second column is the subtopic (``topic
            subtopic docno judgment`` lines; ``.gz`` allowed; ``-`` standard input), a dict
            ``{topic: {subtopic: {docno: judgment}}}``, records with ir_datasets' field
            names ``query_id, doc_id, relevance, iteration`` (the subtopic; ir_measures'
            pyndeval provider reads it so), or a DataFrame with those columns.
        ndeval: read a file as ndeval does: natural-number topics (ints), subtopics and
            judgments, judgments above 1 counted as 1. Otherwise (ir_measures) topic and
            subtopic ids are strings and a judgment any integer.

    Raises:
        TrecFormatError: a line with fewer than 4 fields, a field ndeval refuses (a
            negative or non-numeric judgment...), a pair judged twice, an empty, missing or
            unreadable file; the message names the file and line.

    >>> q = read_subtopic_qrels({"7": {"1": {"d2": 1, "d1": 0}, "2": {"d2": 2}}})
    >>> q.topics, q.docnos[0].tolist(), q.relevant(0).tolist()
    (('7',), [b'd1', b'd2'], [[False, False], [True, True]])
    """
    if isinstance(source, (str, os.PathLike)):
        return _qrels_file(source, ndeval)
    if isinstance(source, Mapping):
        rows = []
        for topic, subs in source.items():
            if not isinstance(subs, Mapping) or not all(isinstance(d, Mapping) for d in subs.values()):
                raise TrecFormatError("<dict>", None, f"topic {topic!r}: expected {{subtopic: {{docno: judgment}}}}")
            rows.extend((topic, s, d, j) for s, docs in subs.items() for d, j in docs.items())
        return _qrels_columns("<dict>", rows, numbered=False)
    fields = ("query_id", "iteration", "doc_id", "relevance")
    if hasattr(source, "columns") and hasattr(source, "to_numpy"):  # a DataFrame
        missing = set(fields) - set(source.columns)
        if missing:
            raise TrecFormatError("<DataFrame>", None, f"missing columns {sorted(missing)}")
        return _qrels_columns("<DataFrame>", zip(*(source[f].tolist() for f in fields)), numbered=True)
    if not isinstance(source, Iterable):
        raise TypeError(
            f"cannot read subtopic qrels from {type(source).__name__}: expected a path, a dict, records or a DataFrame"
        )

    def records():
        for i, r in enumerate(source):
            try:
                yield tuple(getattr(r, f) for f in fields)
            except AttributeError:
                raise TrecFormatError("<records>", i + 1, f"expected {', '.join(fields)}, got {r!r}") from None

    return _qrels_columns("<records>", records(), numbered=True)


# ----------------------------------------------------------------------------- ndeval runs


@dataclasses.dataclass(frozen=True, eq=False)
class NdevalRun:
    """A run as ndeval orders it.

    Attributes:
        runid: the sixth field of the file's first line.
        topics: ``[T]`` int64, ascending.
        offsets: ``[T + 1]``; topic ``topics[i]``'s documents are ``offsets[i]:offsets[i + 1]``.
        docnos: ``[N]`` bytes, each topic's in ndeval's order.
    """

    runid: str
    topics: np.ndarray
    offsets: np.ndarray
    docnos: np.ndarray

    def lists(self) -> list[np.ndarray]:
        """Each topic's documents, in order."""
        return [self.docnos[a:b] for a, b in zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist())]


def _first_twice(keys: Sequence[np.ndarray]) -> Optional[tuple[int, int]]:
    """The first adjacent pair of entries (in the order of ``keys``, already sorted) equal
    in every key, or None."""
    same = np.ones(keys[0].size - 1, bool)
    for k in keys:
        same &= k[1:] == k[:-1]
    at = np.flatnonzero(same)
    return None if at.size == 0 else (int(at[0]), int(at[0]) + 1)


def read_ndeval_run(path: Union[str, os.PathLike], *, traditional: bool = False, depth: int = 0) -> NdevalRun:
    """Read a run file as ndeval does (``processRun``).

    Args:
        path: ``topic Q0 docno rank score runid`` lines (``.gz`` allowed).
        traditional: order by score descending, then docno descending (ndeval
            ``-traditional``), instead of by the rank column.
        depth: keep the first ``depth`` documents of each topic (ndeval ``-M``); 0 keeps all.

    Raises:
        TrecFormatError: a line ndeval refuses, a rank or a docno twice in a topic (the
            docnos after the ``depth`` cut), an empty, missing or unreadable file.
    """
    name, data = _read(path, "run")
    columns = _table(data, 6)
    parsed = None if columns is None else _run_columns(columns, traditional)
    runid, topics, ranks, docno_arr, scores = parsed or _run_lines(name, _lines(data), traditional)
    return _ndeval_order(name, runid, topics, ranks, docno_arr, scores, traditional, depth)


def _run_columns(columns: list[np.ndarray], traditional: bool) -> Optional[tuple]:
    """The run's fields from whole columns, or None when a token needs ndeval's reading
    line by line (a malformed field, a topic without digits, a score with other characters)."""
    topic, _, docno, rank, score, tag = columns
    names, at = np.unique(topic, return_inverse=True)
    if not all(t[:1].isdigit() or b"-" in t for t in names.tolist()):
        return None
    values = np.array([_run_topic(t, b"", b"") for t in names.tolist()], np.int64)
    ranks = _naturals(rank)
    if ranks is None or np.any(values < 0):
        return None
    scores = None
    if traditional:
        if b"".join(score.tolist()).translate(None, b"0123456789.+-eE"):
            return None
        try:
            scores = score.astype(np.float64)  # a plain decimal: as C's strtod reads it
        except ValueError:
            return None
    return tag[0].decode("utf-8", "surrogateescape"), values[at], ranks, docno, scores


def _run_lines(name: str, lines: list[bytes], traditional: bool) -> tuple:
    """The run's fields line by line: the first line ndeval refuses is named."""
    n = len(lines)
    topics = np.empty(n, np.int64)
    ranks = np.empty(n, np.int64)
    docnos, score_tokens = [], []
    runid = ""
    known: dict[bytes, int] = {}  # topic tokens that parse alone
    for i, line in enumerate(lines):
        a = line.split(None, 6)
        topic = rank = -1
        if len(a) >= 6:
            topic = known.get(a[0], -1)
            if topic < 0:
                topic = _run_topic(a[0], line, a[1])
                if a[0][:1].isdigit() or b"-" in a[0]:
                    known[a[0]] = topic
            rank = natural_number(a[3])
        if topic < 0 or rank < 0:
            what = (
                f"{len(a)} fields, expected 6"
                if len(a) < 6
                else ("bad topic" if topic < 0 else "the rank must be a natural number")
            )
            raise TrecFormatError(name, i + 1, f"syntax error in run file: {what}: {line.decode(errors='replace')!r}")
        if i == 0:
            runid = a[5].decode("utf-8", "surrogateescape")
        topics[i], ranks[i] = topic, rank
        docnos.append(a[2])
        score_tokens.append(a[4])
    scores = None
    if traditional:
        scores = np.empty(n, np.float64)
        for i, token in enumerate(score_tokens):
            value = _strtod(token)
            if value is None:
                raise TrecFormatError(
                    name, i + 1, f"the score must be a number (-traditional orders by it), got {token!r}"
                )
            scores[i] = value
    return runid, topics, ranks, np.array(docnos, dtype=bytes), scores


def _ndeval_order(name, runid, topics, ranks, docno_arr, scores, traditional: bool, depth: int) -> NdevalRun:
    """ndeval's order of a run's entries (by rank, or by score and docno), its checks for a
    rank or docno twice in a topic, and its depth cut."""
    n = topics.size
    _, codes = np.unique(docno_arr, return_inverse=True)
    if traditional:
        order = np.lexsort((-codes, -scores, topics))
    else:
        order = np.lexsort((ranks, topics))
        twice = _first_twice([topics[order], ranks[order]])
        if twice is not None:
            first, second = int(order[twice[0]]), int(order[twice[1]])
            lo, hi = sorted((first, second))
            raise TrecFormatError(
                name, hi + 1, f"duplicate rank ({ranks[hi]}) for topic {topics[hi]} in run file (also at line {lo + 1})"
            )
    sorted_topics = topics[order]
    starts = np.flatnonzero(np.r_[True, sorted_topics[1:] != sorted_topics[:-1]])
    position = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    if depth > 0:
        order = order[position < depth]
    by_docno = order[np.lexsort((codes[order], topics[order]))]
    twice = _first_twice([topics[by_docno], codes[by_docno]])
    if twice is not None:
        lo, hi = sorted((int(by_docno[twice[0]]), int(by_docno[twice[1]])))
        raise TrecFormatError(
            name,
            hi + 1,
            f"duplicate docno ({docno_arr[hi].decode(errors='replace')}) for topic {topics[hi]} in run file "
            f"(also at line {lo + 1})",
        )
    kept = topics[order]
    heads = np.flatnonzero(np.r_[True, kept[1:] != kept[:-1]])
    offsets = np.r_[heads, kept.size].astype(np.int64)
    return NdevalRun(runid, kept[heads], offsets, docno_arr[order])


# ----------------------------------------------------------------------------- computing


@dataclasses.dataclass(frozen=True)
class _Lists:
    """Padded arrays of topics' ranked lists for the diversity functions."""

    scores: np.ndarray  # [T, n] float64: -position, so the stable hard ranker keeps the order
    where: np.ndarray  # [T, n]
    labels: np.ndarray  # [T, n, t] int8 0/1: relevant to the subtopic
    judgments: np.ndarray  # [T, m, t] int8 0/1, every judged document in docno order
    judgments_where: np.ndarray  # [T, m]


def _bucket(x: int) -> int:
    """A padded size: the power of two at or above ``x`` (at least 4), so that runs of
    similar sizes share compiled programs."""
    return 1 << max(x - 1, 3).bit_length()


def _lists(qrels: SubtopicQrels, places: Sequence[int], ranked: Sequence[np.ndarray], rel: int) -> _Lists:
    """Labels of each ranked list from the qrels topic at the same place (``places[i]``)."""
    relevant = [qrels.relevant(p, rel) for p in places]
    count = _bucket(len(places))
    n = _bucket(max((r.size for r in ranked), default=1))
    m = _bucket(max((j.shape[0] for j in relevant), default=1))
    t = _bucket(max((j.shape[1] for j in relevant), default=1))
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

    import jaxrank
    from jaxrank.metrics import greedy_ideal_ranks
    from jaxrank.ranking._backend import inverse_permutation
    from jaxrank.ranking.hard import in_given_order

    def quantity(name, alpha, beta, ranks, scores, labels, where, judgments, judgments_where):
        function, cut, with_alpha, with_beta = _QUANTITIES[name]
        options: dict = {"alpha": alpha} if with_alpha else {}
        if with_beta:
            options["beta"] = beta
        return getattr(jaxrank, function)(
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


# ----------------------------------------------------------------------------- ndeval


@dataclasses.dataclass(frozen=True, eq=False)
class TopicTable:
    """ndeval's 21 values for each topic of a run.

    Attributes:
        runid: the run's id.
        topics: ``[T]`` int64, the run's topics, ascending.
        values: ``[T, 21]`` float64, in :data:`COLUMNS` order; zeros for a topic the qrels
            lack, nNRBP NaN (ndeval's 0/0) for a topic without a relevant judgment.
        judged: how many of the topics the qrels have (ndeval's ``actualTopics``).
    """

    runid: str
    topics: np.ndarray
    values: np.ndarray
    judged: int


def evaluate_run(qrels: SubtopicQrels, run: NdevalRun, *, alpha: float = 0.5, beta: float = 0.5) -> TopicTable:
    """ndeval's values for every topic of ``run`` (``applyQrels``), one call per measure.

    >>> q = read_subtopic_qrels({"1": {"0": {"d1": 1}, "1": {"d2": 1}}})
    >>> r = NdevalRun("r", np.array([1]), np.array([0, 2]), np.array([b"d2", b"d1"]))
    >>> q = SubtopicQrels((1,), q.docnos, q.subtopics, q.judgments)  # ndeval's int topics
    >>> dict(zip(COLUMNS, evaluate_run(q, r).values[0].round(4).tolist()))["strec@5"]
    1.0
    """
    place = {t: i for i, t in enumerate(qrels.topics)}
    rows = [i for i, t in enumerate(run.topics.tolist()) if t in place]
    ranked = run.lists()
    values = np.zeros((run.topics.size, len(COLUMNS)), np.float64)
    if rows:
        lists = _lists(qrels, [place[int(run.topics[i])] for i in rows], [ranked[i] for i in rows], 1)
        q = _quantities(lists, _NDEVAL_CUTOFFS, alpha, beta)
        parts = [_family_values(f, q, lists, _NDEVAL_CUTOFFS) for f in DIVERSITY]
        values[rows] = np.concatenate(parts, axis=1)[: len(rows)]
    return TopicTable(run.runid, run.topics, values, len(rows))


def risk_based(r: np.ndarray, b: np.ndarray, risk_alpha: float) -> np.ndarray:
    """ndeval's ``RiskBased``: ``r - b`` where ``r >= b``, else ``(1 + risk_alpha)(r - b)``
    (NaN compares false, as in C)."""
    diff = r - b
    with np.errstate(invalid="ignore"):
        return np.where(r >= b, diff, (risk_alpha + 1) * diff)


def _rows(
    run: TopicTable, base: Optional[TopicTable], complete: bool
) -> list[tuple[int, Optional[int], Optional[int]]]:
    """ndeval's ``outputMeasures`` walk: (topic, row of run or None, row of baseline or None)
    for each printed row. Baseline topics the run lacks are printed only with ``-c``."""
    r_topics = run.topics.tolist()
    if base is None:
        return [(t, i, None) for i, t in enumerate(r_topics)]
    b_topics = base.topics.tolist()
    i = j = 0
    out = []
    while i < len(r_topics) or (j < len(b_topics) and complete):
        if i < len(r_topics) and j < len(b_topics):
            if r_topics[i] == b_topics[j]:
                out.append((r_topics[i], i, j))
                i, j = i + 1, j + 1
            elif r_topics[i] > b_topics[j]:
                if complete:
                    out.append((b_topics[j], None, j))
                j += 1
            else:
                out.append((r_topics[i], i, None))
                i += 1
        elif i >= len(r_topics):
            out.append((b_topics[j], None, j))
            j += 1
        else:
            out.append((r_topics[i], i, None))
            i += 1
    return out


def _fmt(values: np.ndarray) -> list[str]:
    """``printf("%.6f")`` of each value (Python rounds the exact binary value as glibc does)."""
    return [_NAN_TEXT if v != v else f"{v:.6f}" for v in values.tolist()]


def ndeval_text(
    run: TopicTable,
    *,
    qrels_topics: Optional[int] = None,
    baseline: Optional[TopicTable] = None,
    risk_alpha: float = 0.0,
    risk_alpha_text: str = "0",
) -> str:
    """ndeval's output, byte for byte: the CSV header, a row per topic, the ``amean`` row.

    Args:
        run: the run's values (:func:`evaluate_run`).
        qrels_topics: ndeval ``-c``: average over this many topics (the qrels'), and print
            the baseline's topics the run lacks.
        baseline: ndeval ``-baseline``: print the risk-sensitive differences against it.
        risk_alpha: ndeval ``-riskAlpha``: losses weigh ``1 + risk_alpha``.
        risk_alpha_text: ``risk_alpha`` as typed (ndeval prints it in the runid).
    """
    complete = qrels_topics is not None
    rows = _rows(run, baseline, complete)
    zeros = np.zeros(len(COLUMNS))
    r = np.array([run.values[i] if i is not None else zeros for _, i, _ in rows]).reshape(-1, len(COLUMNS))
    runid = run.runid
    if baseline is not None:
        b = np.array([baseline.values[j] if j is not None else zeros for _, _, j in rows]).reshape(-1, len(COLUMNS))
        r = risk_based(r, b, risk_alpha)
        runid = f"{run.runid} (rel to. {baseline.runid}; rs=1+a; a={risk_alpha_text})"
    divisor = qrels_topics if complete else run.judged
    if baseline is not None:
        divisor = max(divisor, len(rows))
    total = np.cumsum(np.vstack([zeros, r]), axis=0)[-1]  # C's running sums from 0.0, in order
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / np.float64(divisor)
    lines = ["runid,topic," + ",".join(COLUMNS)]
    lines.extend(f"{runid},{topic}," + ",".join(_fmt(v)) for (topic, _, _), v in zip(rows, r))
    lines.append(f"{runid},amean," + ",".join(_fmt(mean)))
    return "\n".join(lines) + "\n"


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
            :class:`~jaxrank.trec.measures.Measure` s, all diversity ones.
        max_docs: evaluate only the first ``max_docs`` documents of each query.
        rel_level: the ``rel`` of measures that do not set it.
        judged_only: drop retrieved documents without a qrels line (as ``judged_only=True``).

    Returns:
        a :class:`jaxrank.trec.Report` (its ``unjudged``: the run's queries the qrels lack,
        skipped as pyndeval skips them).
    """
    from jaxrank.trec.evaluate import Report, _aggregate
    from jaxrank.trec.measures import MeasureError, parse_measures

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
        summary[column.name] = _aggregate(column, values[column.name], len(qids), "", complete, None)
    return Report(qids=qids, columns=columns, values=values, summary=summary, unjudged=tuple(unjudged))
