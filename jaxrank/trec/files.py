"""TREC qrels and run files <-> padded numpy arrays.

Reading follows trec_eval (``get_qrels.c``, ``get_trec_results.c``, ``form_res_rels.c``):

* qrels lines are ``qid iter docno rel`` and run lines ``qid Q0 docno rank score tag``, fields
  separated by any ASCII whitespace; ``iter``, ``Q0`` and ``rank`` are ignored, and a run line
  may carry extra fields after the tag (ignored, as trec_eval does).
* A qrels file whose first line is BEIR's header ``query-id<TAB>corpus-id<TAB>score``
  (``qrels/<split>.tsv`` of BEIR's layout) is read as ``qid docno rel`` lines below it, with
  the same rules; a ``.tsv`` file of three fields without that header is refused.
* Blank lines and lines whose first non-blank character is ``#`` are ignored (trec_eval
  rejects blank lines in qrels; being lenient there changes no result).
* The documents of a query are ranked by score descending, ties broken by docno descending
  (``strcmp`` of the bytes); the rank field of the file plays no part.
* Queries are ordered by ``strcmp`` of their qids, so ``"10"`` comes before ``"9"``.
* A negative rel means "in the pool but unjudged": it is kept, it is not relevant, and the
  document is not "judged" (``-J`` drops it, as trec_eval does).
* A document twice in a query is an error, in a run and in qrels (trec_eval stops on both).

Docnos are ``bytes`` (numpy ``S`` dtype): comparing them is then exactly trec_eval's ``strcmp``,
and a 5M-document run takes a quarter of the memory of ``str`` arrays. Qids are ``str``.

Files are read in blocks of whole lines, and each block is split into fields with numpy
operations on its bytes: no Python code runs per line.

Example:
    >>> qrels_path, run_path = demo_paths()
    >>> batch = to_batch(read_qrels(qrels_path), read_run(run_path))
    >>> batch.qids.tolist()
    ['q1', 'q2', 'q3']
    >>> batch.scores.shape == batch.labels.shape == batch.where.shape
    True
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Optional, Union

import numpy as np

from jaxrank._npsort import argsort_high_bits
from jaxrank.trec._parse import (
    _QRELS,
    _RUN,
    STDIN,
    TrecFormatError,
    _Block,
    _blocks,
    _decode,
    _encode,
    _Entries,
    _factorize,
    _hash,
    _Lines,
    _one_float,
    _one_int,
    _Spec,
    _widen,
    _words,
)
from jaxrank.trec.join import _match, _offsets, _packed, _pad, _raise_duplicate, _take, run_order

__all__ = [
    "Batch",
    "Qrels",
    "Run",
    "TrecFormatError",
    "demo_paths",
    "read_qrels",
    "read_run",
    "to_batch",
    "write_run",
]

#: What the readers accept: a path, a ``{qid: {docno: value}}`` dict, records, a DataFrame.
Source = Union[str, os.PathLike, Mapping, Iterable, Any]


# ----------------------------------------------------------------------------- data classes


def _per_query(qids: np.ndarray, offsets: np.ndarray) -> Iterator[tuple[str, slice]]:
    for i, q in enumerate(qids.tolist()):
        yield q, slice(int(offsets[i]), int(offsets[i + 1]))


@dataclasses.dataclass(frozen=True, eq=False)
class _ReadOnly:
    """Its numpy fields are made read-only when it is built (they may share memory)."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, np.ndarray):
                value.setflags(write=False)


@dataclasses.dataclass(frozen=True, eq=False)
class _ByQuery(_ReadOnly):
    """Entries in blocks by query: those of ``qids[i]`` are ``offsets[i]:offsets[i + 1]``."""

    qids: np.ndarray
    offsets: np.ndarray
    docnos: np.ndarray

    def __len__(self) -> int:
        return int(self.qids.size)

    def _to_dict(self, values: np.ndarray) -> dict[str, dict]:
        docnos, per_entry = _decode(self.docnos).tolist(), values.tolist()
        return {q: dict(zip(docnos[s], per_entry[s])) for q, s in _per_query(self.qids, self.offsets)}


@dataclasses.dataclass(frozen=True, eq=False)
class Qrels(_ByQuery):
    """Relevance judgments, one block of entries per query.

    Attributes:
        qids: ``[Q]`` str, sorted by ``strcmp`` (trec_eval's order).
        offsets: ``[Q + 1]`` int64; the entries of ``qids[i]`` are ``offsets[i]:offsets[i + 1]``.
        docnos: ``[M]`` bytes (``S`` dtype). Within a query, entries are in an order fixed by
            the docnos alone (a hash order that makes lookups fast), not the input order.
        rels: ``[M]`` int64; negative means pooled but unjudged.
    """

    rels: np.ndarray

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{qid: {docno: rel}}``, as pytrec_eval takes it."""
        return self._to_dict(self.rels)

    @functools.cached_property
    def _places(self) -> dict[str, int]:
        """Each qid's place in ``qids``: built once, so that matching the parts of a run
        costs each part's queries only."""
        return {q: i for i, q in enumerate(self.qids.tolist())}


@dataclasses.dataclass(frozen=True, eq=False)
class Run(_ByQuery):
    """A ranked run, the documents of each query in trec_eval's order.

    Attributes:
        qids: ``[Q]`` str, sorted by ``strcmp``.
        offsets: ``[Q + 1]`` int64; the documents of ``qids[i]`` are ``offsets[i]:offsets[i + 1]``.
        docnos: ``[N]`` bytes (``S`` dtype), by score descending, then docno descending.
        scores: ``[N]`` float64.
        tag: the run tag of the last line (trec_eval's ``runid``), or ``""``.
    """

    scores: np.ndarray
    tag: str = ""

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docno: score}}``, as pytrec_eval takes it."""
        return self._to_dict(self.scores)

    # The hash of each docno, when the reader kept the one it computed (the parts of a run
    # file, which the matching with the qrels then need not hash again); None otherwise.
    _hashes: ClassVar[Optional[np.ndarray]] = None


@dataclasses.dataclass(frozen=True, eq=False)
class Batch(_ReadOnly):
    """Padded per-query arrays for the metrics: ``Q`` queries, ``n`` and ``m`` columns.

    Attributes:
        qids: ``[Q]`` str, the evaluated queries in trec_eval's order.
        docnos: ``[Q, n]`` bytes, ``b""`` where padded; each row in trec_eval's order.
        scores: ``[Q, n]`` float64, 0.0 where padded.
        labels: ``[Q, n]`` int64, the qrels rel of each document, 0 if it is not in the qrels
            (negative for a document in the qrels with a negative rel).
        judged: ``[Q, n]`` bool, in the qrels with rel >= 0.
        pooled: ``[Q, n]`` bool, in the qrels at all (any rel).
        where: ``[Q, n]`` bool, a retrieved document (False on padding).
        judgments: ``[Q, m]`` int64, the rel of every qrels entry of the query, retrieved or
            not (negative rels included), 0 where padded.
        judgments_where: ``[Q, m]`` bool, False on padding.

    Arrays are read-only and may share memory with the :class:`Run`.
    """

    qids: np.ndarray
    docnos: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    judged: np.ndarray
    pooled: np.ndarray
    where: np.ndarray
    judgments: np.ndarray
    judgments_where: np.ndarray


# ----------------------------------------------------------------------------- entries


def _from_file(path: Path, spec: _Spec) -> _Entries:
    name = _file_name(path)
    if path.is_dir():
        raise TrecFormatError(name, None, "is a directory, not a file")
    return _from_blocks(name, spec, _blocks(path, spec))


def _file_name(path: Path) -> str:
    """How messages name a file: its path, or ``<stdin>`` for ``-`` (standard input)."""
    return "<stdin>" if str(path) == STDIN else str(path)


def _from_blocks(name: str, spec: _Spec, blocks: Iterable[_Block]) -> _Entries:
    """The entries of parsed blocks, in order, and their tag (the last block's with one)."""
    heads, head_lens, docnos, values, lines = [], [], [], [], []
    tag = None
    for block in blocks:
        spec = block.spec  # a qrels file's first line may have told another layout
        if block.qids.size == 0:
            continue
        q = _words(block.qids)  # qids come in long runs: keep one per run
        change = np.any(q[1:] != q[:-1], axis=1) if q.shape[1] > 1 else q[1:, 0] != q[:-1, 0]
        at = np.flatnonzero(np.concatenate(([True], change)))
        heads.append(block.qids[at])
        head_lens.append(np.diff(np.append(at, block.qids.size)))
        docnos.append(block.docnos)
        values.append(block.values)
        lines.append((block.qids.size, block.lines))
        tag = block.tag if block.tag is not None else tag
    if not heads:
        raise TrecFormatError(name, 1, f"no data lines (empty, or only comments and blank lines); expected {spec.fmt}")
    qid_names, head_codes = _factorize(np.concatenate(heads))
    code_type = np.int32 if qid_names.size < 2**31 else np.int64
    qids = np.repeat(head_codes.astype(code_type), np.concatenate(head_lens))
    starts = np.cumsum([0] + [n for n, _ in lines])
    blocks_lines = [line for _, line in lines]

    def line_of(i: int) -> int:
        k = int(np.searchsorted(starts, i, side="right")) - 1
        return blocks_lines[k](i - int(starts[k]))

    all_docnos = _widen(np.concatenate(docnos)) if len(docnos) > 1 else _widen(docnos[0])
    docnos.clear()  # free each part once joined: these arrays are as long as the file
    all_values = np.concatenate(values)
    values.clear()
    tag_text = (tag or b"").decode(errors="replace")
    return _Entries(name, qids, qid_names, all_docnos, all_values, line_of, tag_text)


def _as_float(v: Any) -> float | None:
    if isinstance(v, (bytes, str)):
        return _one_float(v.encode() if isinstance(v, str) else v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _as_int(v: Any) -> int | None:
    if isinstance(v, (bytes, str)):
        return _one_int(v.encode() if isinstance(v, str) else v)
    if isinstance(v, (float, np.floating)):
        return int(v) if float(v).is_integer() else None
    return int(v) if isinstance(v, (int, np.integer)) else None


def _values(raw: list[Any], spec: _Spec, name: str, line_of: Callable[[int], int | None]) -> np.ndarray:
    """Scores (float64) or rels (int64) from Python values."""
    arr = np.asarray(raw)
    if arr.ndim == 1 and arr.dtype.kind in ("iufb" if spec.kind == "run" else "iub"):
        return arr.astype(np.float64 if spec.kind == "run" else np.int64)
    if arr.ndim == 1 and arr.dtype.kind == "f":  # rels as floats, e.g. a pandas column
        if np.all((np.abs(arr) < 2**62) & (arr == np.round(arr))):
            return arr.astype(np.int64)
    convert = _as_float if spec.kind == "run" else _as_int
    out = []
    for i, v in enumerate(raw):
        x = convert(v)
        if x is None:
            raise TrecFormatError(name, line_of(i), f"{spec.value_error}: {v!r}")
        out.append(x)
    return np.array(out, dtype=np.float64 if spec.kind == "run" else np.int64)


def _from_columns(name: str, spec: _Spec, qids: list[Any], docnos: list[Any], raw: list[Any], line_of) -> _Entries:
    if not qids:
        raise TrecFormatError(name, None, "no entries")
    values = _values(raw, spec, name, line_of)
    qid_names, codes = _factorize(_encode(qids))
    return _Entries(name, codes, qid_names, _encode(docnos), values, line_of)


def _entries(source: Source, spec: _Spec) -> _Entries:
    """Entries from a path, a ``{qid: {docno: value}}`` dict, records or a DataFrame."""
    value_attr = "score" if spec.kind == "run" else "relevance"
    if isinstance(source, (str, os.PathLike)):
        return _from_file(Path(source), spec)
    if isinstance(source, Mapping):
        qids, docnos, raw = [], [], []
        for q, docs in source.items():
            if not isinstance(docs, Mapping):
                reason = f"query {q!r}: expected a dict docno -> {value_attr}"
                raise TrecFormatError("<dict>", None, reason)
            qids.extend([q] * len(docs))
            docnos.extend(docs.keys())
            raw.extend(docs.values())
        return _from_columns("<dict>", spec, qids, docnos, raw, lambda i: None)
    row = lambda i: i + 1  # noqa: E731 - records and rows are numbered from 1
    if hasattr(source, "columns") and hasattr(source, "to_numpy"):  # a DataFrame
        missing = {"query_id", "doc_id", value_attr} - set(source.columns)
        if missing:
            raise TrecFormatError("<DataFrame>", None, f"missing columns {sorted(missing)}")
        return _from_columns(
            "<DataFrame>",
            spec,
            source["query_id"].tolist(),
            source["doc_id"].tolist(),
            source[value_attr].tolist(),
            row,
        )
    if not isinstance(source, Iterable):
        raise TypeError(
            f"cannot read a {spec.kind} from {type(source).__name__}: expected a path, a dict, records or a DataFrame"
        )
    qids, docnos, raw = [], [], []
    for i, r in enumerate(source):
        try:
            qids.append(r.query_id)
            docnos.append(r.doc_id)
            raw.append(getattr(r, value_attr))
        except AttributeError:
            raise TrecFormatError(
                "<records>", i + 1, f"expected query_id, doc_id and {value_attr}, got {r!r}"
            ) from None
    return _from_columns("<records>", spec, qids, docnos, raw, row)


# ----------------------------------------------------------------------------- public API


def read_qrels(source: Source) -> Qrels:
    """Read relevance judgments.

    Args:
        source: a path to a qrels file (``qid iter docno rel`` lines, or BEIR's
            ``qrels/<split>.tsv``: the header ``query-id<TAB>corpus-id<TAB>score``, then
            ``qid docno rel`` lines; ``.gz`` allowed), a pytrec_eval-style dict
            ``{qid: {docno: rel}}``, an iterable of records with attributes
            ``query_id, doc_id, relevance`` (ir_measures' ``Qrel``), or a DataFrame with
            those columns.

    Raises:
        TrecFormatError: a line without exactly 4 fields (3 in BEIR's layout), a rel that is
            not an integer (``1.0`` and ``1e0`` are 1, as trec_eval reads them; ``0.5`` is
            refused), a document judged twice for a query, a ``.tsv`` file of three fields
            without BEIR's header, an empty, missing or unreadable file.

    >>> q = read_qrels({"q1": {"d2": 1, "d1": 0}, "q0": {"d9": -1}})
    >>> q.qids.tolist(), q.offsets.tolist(), q.to_dict()["q1"] == {"d1": 0, "d2": 1}
    (['q0', 'q1'], [0, 1, 3], True)
    """
    e = _entries(source, _QRELS)
    h = _hash(e.docnos)
    key = _packed(e.qids, e.qid_names.size, h)
    order = argsort_high_bits(key).view(np.int64)  # by qid, then docno hash: what _match relies on
    if np.any((k := np.sort(key))[1:] == k[:-1]):
        _raise_duplicate(e, key, np.argsort(key, kind="stable"), " in the qrels")
    offsets = _offsets(np.bincount(e.qids, minlength=e.qid_names.size))
    return Qrels(_decode(e.qid_names), offsets, e.docnos[order], e.values[order])


def read_run(source: Source) -> Run:
    """Read a run and put the documents of each query in trec_eval's order.

    Args:
        source: a path to a run file (``qid Q0 docno rank score tag`` lines, extra fields
            ignored; ``.gz`` allowed), a pytrec_eval-style dict ``{qid: {docno: score}}``, an
            iterable of records with ``query_id, doc_id, score`` (ir_measures'
            ``ScoredDoc``), or a DataFrame with those columns.

    Raises:
        TrecFormatError: a line with fewer than 6 fields, a score that is not a number or is
            NaN, a document twice in a query (both lines named), an empty, missing or unreadable
            file.

    >>> r = read_run({"q1": {"a": 1.0, "b": 2.0, "c": 1.0}})
    >>> r.docnos.astype(str).tolist(), r.scores.tolist()
    (['b', 'c', 'a'], [2.0, 1.0, 1.0])
    """
    return _run_from_entries(_entries(source, _RUN))


def _run_from_entries(e: _Entries, keep_hashes: bool = False) -> Run:
    """The entries of a run in trec_eval's order; raises for a NaN score, else for a
    document twice in a query. ``keep_hashes``: the Run keeps its docnos' hashes (a part of
    a file: see ``Run._hashes``)."""
    nan = np.isnan(e.values)
    if nan.any():  # trec_eval's order of NaN scores is its C library's qsort's accident
        i = int(np.argmax(nan))
        raise TrecFormatError(e.name, e.line_of(i), _NAN_SCORE)
    h = _hash(e.docnos)
    key = _packed(e.qids, e.qid_names.size, h.copy() if keep_hashes else h)  # _packed overwrites h
    key.sort()
    if np.any(key[1:] == key[:-1]):
        key = _packed(e.qids, e.qid_names.size, _hash(e.docnos))
        _raise_duplicate(e, key, np.argsort(key, kind="stable"), "")
    del key
    order = run_order(e.qids, e.qid_names.size, e.values, e.docnos)
    offsets = _offsets(np.bincount(e.qids, minlength=e.qid_names.size))
    e.qids = None  # free memory as we go: these arrays are as long as the file
    docnos, e.docnos = (e.docnos if order is None else e.docnos[order]), None
    scores, e.values = (e.values if order is None else e.values[order]), None
    run = Run(_decode(e.qid_names), offsets, docnos, scores, e.tag)
    if keep_hashes:
        object.__setattr__(run, "_hashes", h if order is None else h[order])
    return run


_NAN_SCORE = "score is NaN (trec_eval's ranking of NaN scores depends on its C library's sort)"
_PART_LINES = 1 << 16  # lines of a run file read and ordered at a time by _run_parts


class _Scattered(Exception):
    """A query's lines are not together in the run file: :func:`_run_parts` cannot cut it."""


def _cut(block: _Block, lo: int, hi: int) -> _Block:
    lines = block.lines
    lines = _Lines(lines.first + lo, None) if lines.listed is None else _Lines(lines.first, lines.listed[lo:hi])
    return _Block(lines, block.qids[lo:hi], block.docnos[lo:hi], block.values[lo:hi], block.tag, block.spec)


def _run_parts(path: str | os.PathLike) -> Iterator[Run]:
    """A run file as Runs of about ``_PART_LINES`` lines, each holding every line of its
    queries, in file order: the file's Run is their union, and no part is as big as the file.

    Raises :class:`_Scattered` when a query's lines are not all together (its lines in two
    parts), and the errors of :func:`read_run` with the same precedence: a line that cannot
    be read first, then a NaN score, then a document twice (the first of each in the file).
    """
    path = Path(path)
    name = _file_name(path)
    if path.is_dir():
        raise TrecFormatError(name, None, "is a directory, not a file")
    seen: set[bytes] = set()
    pending: list[_Block] = []
    n_pending = 0
    errors: dict[str, TrecFormatError] = {}
    empty = True

    def part(blocks: list[_Block]) -> Iterator[Run]:
        e = _from_blocks(name, _RUN, blocks)
        names = e.qid_names.tolist()
        if seen.intersection(names):
            raise _Scattered(name)
        seen.update(names)
        if errors:  # a later error may still outrank the one found: NaN scores only
            if "nan" not in errors and np.isnan(e.values).any():
                errors["nan"] = TrecFormatError(name, e.line_of(int(np.argmax(np.isnan(e.values)))), _NAN_SCORE)
            return
        try:
            yield _run_from_entries(e, keep_hashes=True)
        except TrecFormatError as error:
            errors["nan" if error.reason == _NAN_SCORE else "other"] = error

    for block in _blocks(path, _RUN):
        if block.qids.size == 0:
            continue
        empty = False
        pending.append(block)
        n_pending += block.qids.size
        if n_pending < _PART_LINES:
            continue
        # cut where the last query starts: its lines may continue in the next block
        last = block.qids[-1]
        k = len(pending) - 1
        while k >= 0 and not np.any(other := pending[k].qids != last):
            k -= 1
        if k < 0:
            continue  # one query so far: keep reading
        at = int(np.flatnonzero(other)[-1]) + 1
        head = pending[:k] + [_cut(pending[k], 0, at)]
        tail = [_cut(pending[k], at, pending[k].qids.size)] + pending[k + 1 :]
        yield from part(head)
        pending, n_pending = tail, sum(b.qids.size for b in tail)
    if empty:
        raise TrecFormatError(name, 1, f"no data lines (empty, or only comments and blank lines); expected {_RUN.fmt}")
    if pending:
        yield from part(pending)
    if errors:
        raise errors.get("nan", errors.get("other"))


def write_run(run: Run, path: str | os.PathLike, tag: str | None = None) -> Path:
    """Write ``run`` as a TREC run file; the rank is the 1-based position in trec_eval's order.

    Scores are written in the shortest form that reads back as the same float64. The tag is
    ``tag``, else ``run.tag``, else ``"jaxrank"``.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "x.run"
    >>> _ = write_run(read_run({"q": {"d1": 0.5, "d2": 1.5}}), path, tag="t")
    >>> path.read_text()
    'q Q0 d2 1 1.5 t\\nq Q0 d1 2 0.5 t\\n'
    """
    path = Path(path)
    tag_bytes = (tag if tag is not None else (run.tag or "jaxrank")).encode()
    if not tag_bytes or len(tag_bytes.split()) != 1:
        raise ValueError(f"the run tag must be one word, got {tag_bytes!r}")
    with open(path, "wb") as f:
        for qid, rows in _per_query(run.qids, run.offsets):
            q = qid.encode("utf-8", "surrogateescape")
            docs = zip(run.docnos[rows].tolist(), run.scores[rows].tolist())
            # %r of a float is its shortest repr, which reads back as the same float64.
            f.write(b"".join([b"%s Q0 %s %d %r %s\n" % (q, d, i, x, tag_bytes) for i, (d, x) in enumerate(docs, 1)]))
    return path


def _find(run: Run, qids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and number of the run's documents for each of ``qids`` (0, 0 when absent)."""
    if run.qids.size == 0:
        return np.zeros(qids.size, dtype=np.int64), np.zeros(qids.size, dtype=np.int64)
    index = {q: i for i, q in enumerate(run.qids.tolist())}
    at = np.array([index.get(q, -1) for q in qids.tolist()], dtype=np.int64)
    found = at >= 0
    lens = np.diff(run.offsets)
    return np.where(found, run.offsets[:-1][at], 0), np.where(found, lens[at], 0)


def to_batch(
    qrels: Qrels,
    run: Run,
    *,
    complete: bool = False,
    max_docs: int | None = None,
    judged_only: bool = False,
) -> Batch:
    """Padded arrays for the queries trec_eval evaluates.

    Args:
        qrels: judgments, from :func:`read_qrels`.
        run: a run, from :func:`read_run`.
        complete: trec_eval ``-c``: also the queries of the qrels that the run lacks, with no
            documents. Queries of the run that the qrels lack are always dropped.
        max_docs: trec_eval ``-M``: only the first ``max_docs`` documents of each query.
        judged_only: trec_eval ``-J``: drop the documents that are not judged (absent from
            the qrels, or with a negative rel). As in trec_eval, after the ``max_docs`` cut.

    >>> q = read_qrels({"1": {"a": 1, "z": 2}, "2": {"b": 0}})
    >>> r = read_run({"1": {"a": 0.5, "b": 0.5, "c": 0.9}, "3": {"a": 1.0}})
    >>> b = to_batch(q, r)
    >>> b.qids.tolist(), b.docnos.astype(str).tolist(), b.labels.tolist()
    (['1'], [['c', 'b', 'a']], [[0, 0, 1]])
    >>> sorted(b.judgments[0].tolist()), to_batch(q, r, complete=True).qids.tolist()
    ([1, 2], ['1', '2'])
    """
    j = _joined(qrels, run, complete=complete, max_docs=max_docs, judged_only=judged_only)
    n = max(1, int(j.run_lens.max(initial=0)))
    m = max(1, int(j.rel_lens.max(initial=0)))
    return Batch(
        qids=j.qids,
        docnos=_pad(j.docnos, j.run_lens, n, b""),
        scores=_pad(j.scores, j.run_lens, n, 0.0),
        labels=_pad(j.labels, j.run_lens, n, 0),
        judged=_pad(j.judged, j.run_lens, n, False),
        pooled=_pad(j.pooled, j.run_lens, n, False),
        where=_pad(np.ones(j.docnos.size, dtype=bool), j.run_lens, n, False),
        judgments=_pad(j.judgments, j.rel_lens, m, 0),
        judgments_where=_pad(np.ones(j.judgments.size, dtype=bool), j.rel_lens, m, False),
    )


@dataclasses.dataclass
class _Joined:
    """:func:`to_batch`'s arrays before padding: the documents of query ``qids[i]`` are the
    next ``run_lens[i]`` entries of the per-document arrays, its judgments the next
    ``rel_lens[i]`` entries of ``judgments``."""

    qids: np.ndarray
    rel_q: np.ndarray  # the place of each of qids in the qrels
    run_lens: np.ndarray
    docnos: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    judged: np.ndarray
    pooled: np.ndarray
    rel_lens: np.ndarray
    judgments: np.ndarray


def _joined(qrels: Qrels, run: Run, *, complete: bool, max_docs: int | None, judged_only: bool) -> _Joined:
    if max_docs is not None and max_docs < 0:
        raise ValueError(f"max_docs must be >= 0, got {max_docs}")
    if complete:
        qids, rel_q = qrels.qids, np.arange(qrels.qids.size)
        run_starts, run_lens = _find(run, qids)
    else:
        places = qrels._places
        at = np.array([places.get(q, -1) for q in run.qids.tolist()], dtype=np.int64)
        run_q = np.flatnonzero(at >= 0)  # both in strcmp order: so are the queries in both
        qids, rel_q = run.qids[run_q], at[run_q]
        run_starts, run_lens = run.offsets[run_q], np.diff(run.offsets)[run_q]
    if max_docs is not None:
        run_lens = np.minimum(run_lens, max_docs)
    rel_lens = np.diff(qrels.offsets)[rel_q]
    rel_docnos = _take(qrels.docnos, qrels.offsets[rel_q], rel_lens)
    judgments = _take(qrels.rels, qrels.offsets[rel_q], rel_lens)
    docnos = _take(run.docnos, run_starts, run_lens)
    scores = _take(run.scores, run_starts, run_lens)
    h = None if run._hashes is None else _take(run._hashes, run_starts, run_lens)

    hit = _match(run_lens, docnos, rel_lens, rel_docnos, h)
    pooled = hit >= 0
    labels = judgments[np.maximum(hit, 0)] if judgments.size else np.zeros(hit.size, np.int64)
    labels = np.where(pooled, labels, 0)
    judged = pooled & (labels >= 0)
    if judged_only:
        keep = np.flatnonzero(judged)
        docnos, scores, labels, pooled, judged = (x[keep] for x in (docnos, scores, labels, pooled, judged))
        run_lens = np.bincount(np.repeat(np.arange(qids.size), run_lens)[keep], minlength=qids.size)
    qids = qids.astype(qrels.qids.dtype if qids.size else "U1")
    return _Joined(qids, rel_q, run_lens, docnos, scores, labels, judged, pooled, rel_lens, judgments)


def demo_paths() -> tuple[Path, Path]:
    """Paths of the small demo qrels and run shipped with the package.

    Synthetic (numpy seed 20240611): queries q1-q3 with 50-80 retrieved documents, graded
    rels 0-2 and some -1, relevant documents not retrieved, tied scores; q4 is only in the
    qrels (see ``complete=True``).

    >>> [p.name for p in demo_paths()]
    ['demo.qrels', 'demo.run']
    """
    here = Path(__file__).resolve().parent.parent / "data"
    return here / "demo.qrels", here / "demo.run"
