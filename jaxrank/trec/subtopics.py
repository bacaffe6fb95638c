"""Subtopic qrels and ndeval runs, read as ndeval reads them (the rules are listed in
:mod:`jaxrank.trec.diversity`): :func:`read_subtopic_qrels` (``topic subtopic docno
judgment``, or the ir_measures sources) and :func:`read_ndeval_run` (ordered as ndeval or
pyndeval orders a run). ``strtod`` is the C library's number reading, as ndeval's
``-traditional`` reads scores (the command line uses it too).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import numpy as np

from jaxrank.trec._parse import TrecFormatError, _open
from jaxrank.trec.files import _file_name

#: ndeval's evaluation depth: the cutoffs stop there (``DEPTH`` in ndeval.c).
DEPTH = 20
_LARGE_ENOUGH = 100000  # ndeval's overflow guard in naturalNumber
_MISSING = np.iinfo(np.int64).min  # no qrels line for this (document, subtopic)

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


def strtod(token: bytes) -> Optional[float]:
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


def _data_lines(name: str, data: bytes) -> tuple[bytes, Optional[np.ndarray]]:
    """The qrels lines as trec_eval 10 (and jaxrank's ordinary reader) reads them: blank lines
    and lines whose first non-blank character is ``#`` are skipped. The other lines, and
    their 1-based line numbers (None when every line is kept)."""
    lines = _lines(data)
    keep = [i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith(b"#")]
    if len(keep) == len(lines):
        return data, None
    if not keep:
        raise TrecFormatError(
            name, 1, "no data lines (only comments and blank lines); expected topic subtopic docno judgment"
        )
    return b"".join(lines[i] + b"\n" for i in keep), np.asarray(keep) + 1


def _text(token: bytes) -> str:
    """A field as text for messages (not a bytes repr)."""
    return token.decode("utf-8", "replace")


def _qrels_file(path: Union[str, os.PathLike], ndeval: bool) -> SubtopicQrels:
    name, data = _read(path, "qrel")
    columns = _table(data, 4)
    numbers = None
    if not ndeval and (columns is None or b"#" in data):  # ndeval reads every line; ir_measures' names skip
        data, numbers = _data_lines(name, data)  # comments and blank lines
        columns = _table(data, 4) if numbers is not None else columns
    line_of = (lambda i: i + 1) if numbers is None else (lambda i: int(numbers[i]))
    if columns is not None:  # the usual file: whole columns at once
        topic, subtopic, docno, judgment = columns
        if ndeval:
            numbers = [_naturals(c) for c in (topic, subtopic, judgment)]
            if all(v is not None for v in numbers):
                return _subtopic_qrels(name, numbers[0], numbers[1], docno, np.minimum(numbers[2], 1), line_of)
        else:
            try:  # integers, negative ones too (ir_measures reads them with int())
                values = judgment.astype(np.int64)
            except ValueError:
                values = None
            if values is not None:
                text = [np.char.decode(c, "utf-8", "surrogateescape") for c in (topic, subtopic)]
                return _subtopic_qrels(name, text[0], text[1], docno, values, line_of)
    return _qrels_lines(name, _lines(data), ndeval, line_of)


def _qrels_lines(name: str, lines: list[bytes], ndeval: bool, line_of: Callable = lambda i: i + 1) -> SubtopicQrels:
    """Line by line: the first line ndeval refuses is named (``line_of``: the file's line
    number of each line given)."""
    topics, subtopics, docnos, judgments = [], [], [], []
    ints: dict[bytes, int] = {}
    for i, line in enumerate(lines):
        a = line.split(None, 4)
        if len(a) < 4:
            raise TrecFormatError(
                name,
                line_of(i),
                f"syntax error in qrel file: {len(a)} fields, expected 4 (topic subtopic docno judgment)",
            )
        if ndeval:
            got = [ints.get(t) if t in ints else ints.setdefault(t, natural_number(t)) for t in (a[0], a[1], a[3])]
            bad = [what for what, v in zip(("topic", "subtopic", "judgment"), got) if v < 0]
            if bad:
                token = a[(0, 1, 3)[("topic", "subtopic", "judgment").index(bad[0])]]
                raise TrecFormatError(
                    name,
                    line_of(i),
                    f"syntax error in qrel file: the {bad[0]} must be a natural number, got {_text(token)!r}",
                )
            topics.append(got[0])
            subtopics.append(got[1])
            judgments.append(min(got[2], 1))
        else:
            try:
                judgments.append(int(a[3]))
            except ValueError:
                raise TrecFormatError(
                    name, line_of(i), f"the judgment must be an integer, got {_text(a[3])!r}"
                ) from None
            topics.append(a[0].decode("utf-8", "surrogateescape"))
            subtopics.append(a[1].decode("utf-8", "surrogateescape"))
        docnos.append(a[2])
    return _subtopic_qrels(name, topics, subtopics, docnos, judgments, line_of)


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
            value = strtod(token)
            if value is None:
                raise TrecFormatError(
                    name, i + 1, f"the score must be a number (-traditional orders by it), got {_text(token)!r}"
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
