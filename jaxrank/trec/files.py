"""TREC qrels and run files <-> padded numpy arrays.

Reading follows trec_eval (``get_qrels.c``, ``get_trec_results.c``, ``form_res_rels.c``):

* qrels lines are ``qid iter docno rel`` and run lines ``qid Q0 docno rank score tag``, fields
  separated by any ASCII whitespace; ``iter``, ``Q0`` and ``rank`` are ignored, and a run line
  may carry extra fields after the tag (ignored, as trec_eval does).
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
operations on its bytes: no Python code runs per line, so a 5M-line run takes about a second.

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
import gzip
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, Union

import numpy as np

from jaxrank._npsort import argsort_high_bits, index_bits

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

_BLOCK_BYTES = 1 << 22  # bytes read at a time: small blocks keep the parser's temporaries small
_PAD = 64  # spare bytes before and after a block, so 8-byte reads near a token stay inside
_THREADS = 2 if (os.cpu_count() or 1) > 1 else 1  # parsing threads
_MAX_DIGITS = 14  # decimals with at most this many digits are parsed exactly by the fast path


class TrecFormatError(ValueError):
    """A malformed qrels or run input; the message is ``file:line: what is wrong``.

    Attributes: ``source`` (the file name, or ``<dict>``, ``<records>``, ``<DataFrame>``),
    ``line`` (1-based line or record number, None when there is none) and ``reason``.
    """

    def __init__(self, source: str, line: int | None, reason: str) -> None:
        self.source, self.line, self.reason = source, line, reason
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {reason}")


# ----------------------------------------------------------------------------- data classes


def _readonly(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.setflags(write=False)


def _per_query(qids: np.ndarray, offsets: np.ndarray) -> Iterator[tuple[str, slice]]:
    for i, q in enumerate(qids.tolist()):
        yield q, slice(int(offsets[i]), int(offsets[i + 1]))


@dataclasses.dataclass(frozen=True, eq=False)
class Qrels:
    """Relevance judgments, one block of entries per query.

    Attributes:
        qids: ``[Q]`` str, sorted by ``strcmp`` (trec_eval's order).
        offsets: ``[Q + 1]`` int64; the entries of ``qids[i]`` are ``offsets[i]:offsets[i + 1]``.
        docnos: ``[M]`` bytes (``S`` dtype). Within a query, entries are in an order fixed by
            the docnos alone (a hash order that makes lookups fast), not the input order.
        rels: ``[M]`` int64; negative means pooled but unjudged.
    """

    qids: np.ndarray
    offsets: np.ndarray
    docnos: np.ndarray
    rels: np.ndarray

    def __post_init__(self) -> None:
        _readonly(self.qids, self.offsets, self.docnos, self.rels)

    def __len__(self) -> int:
        return int(self.qids.size)

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{qid: {docno: rel}}``, as pytrec_eval takes it."""
        docnos, rels = _decode(self.docnos).tolist(), self.rels.tolist()
        return {q: dict(zip(docnos[s], rels[s])) for q, s in _per_query(self.qids, self.offsets)}


@dataclasses.dataclass(frozen=True, eq=False)
class Run:
    """A ranked run, the documents of each query in trec_eval's order.

    Attributes:
        qids: ``[Q]`` str, sorted by ``strcmp``.
        offsets: ``[Q + 1]`` int64; the documents of ``qids[i]`` are ``offsets[i]:offsets[i + 1]``.
        docnos: ``[N]`` bytes (``S`` dtype), by score descending, then docno descending.
        scores: ``[N]`` float64.
        tag: the run tag of the last line (trec_eval's ``runid``), or ``""``.
    """

    qids: np.ndarray
    offsets: np.ndarray
    docnos: np.ndarray
    scores: np.ndarray
    tag: str = ""

    def __post_init__(self) -> None:
        _readonly(self.qids, self.offsets, self.docnos, self.scores)

    def __len__(self) -> int:
        return int(self.qids.size)

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docno: score}}``, as pytrec_eval takes it."""
        docnos, scores = _decode(self.docnos).tolist(), self.scores.tolist()
        return {q: dict(zip(docnos[s], scores[s])) for q, s in _per_query(self.qids, self.offsets)}


@dataclasses.dataclass(frozen=True, eq=False)
class Batch:
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

    def __post_init__(self) -> None:
        _readonly(*(getattr(self, f.name) for f in dataclasses.fields(self)))


# ----------------------------------------------------------------------------- array helpers


def _decode(a: np.ndarray) -> np.ndarray:
    """Bytes array -> str array (UTF-8; undecodable bytes survive as surrogates)."""
    text = [x.decode("utf-8", "surrogateescape") for x in a.ravel().tolist()]
    return np.array(text, dtype=str if text else "U1").reshape(a.shape)


def _encode(values: Iterable[Any]) -> np.ndarray:
    """Strings (or anything ``str()`` takes) -> bytes array, width a multiple of 8."""
    raw = [
        (v if isinstance(v, str) else str(v)).encode("utf-8", "surrogateescape") for v in values
    ]
    return _widen(np.array(raw, dtype=bytes) if raw else np.zeros(0, dtype="S8"))


def _widen(a: np.ndarray) -> np.ndarray:
    """The bytes array with a width that is a multiple of 8, so it views as uint64 words."""
    w = max(8, -(-a.dtype.itemsize // 8) * 8)
    return a if a.dtype.itemsize == w else a.astype(f"S{w}")


def _words(a: np.ndarray, big_endian: bool = False) -> np.ndarray:
    """``[N]`` bytes -> ``[N, w]`` uint64 words. Big-endian words compare like the strings
    (``strcmp``, as zero padding sorts first); little-endian ones are a free view."""
    a = np.ascontiguousarray(_widen(a))
    if big_endian:
        return a.view(">u8").reshape(a.size, -1).astype(np.uint64)
    return a.view(np.uint64).reshape(a.size, -1)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, in place: a bijection of uint64 that spreads every input bit."""
    t = z >> np.uint64(30)
    z ^= t
    z *= np.uint64(0xBF58476D1CE4E5B9)
    np.right_shift(z, np.uint64(27), out=t)
    z ^= t
    z *= np.uint64(0x94D049BB133111EB)
    np.right_shift(z, np.uint64(31), out=t)
    z ^= t
    return z


def _hash(strings: np.ndarray) -> np.ndarray:
    """64-bit hash of each bytes string, the same for any width of the array. Hashes only
    propose matches; every match is confirmed on the bytes."""
    w = _words(strings)
    h = w[:, 0] * np.uint64(0x9E3779B97F4A7C15)
    for j in range(1, w.shape[1]):
        h += w[:, j] * np.uint64(0xC2B2AE3D27D4EB4F + 2 * j)
    return _mix(h)


def _packed(major: np.ndarray, n_major: int, minor: np.ndarray) -> np.ndarray:
    """uint64 keys sorting by ``major`` (an index below ``n_major``), then by the top bits
    of the uint64 ``minor``, which is overwritten with the keys."""
    bits = max(1, int(n_major).bit_length())
    minor >>= np.uint64(bits)
    high = major.astype(np.uint64)
    high <<= np.uint64(64 - bits)
    minor |= high
    return minor


def _descending(scores: np.ndarray) -> np.ndarray:
    """uint64 keys in ascending order for scores in descending order (-0.0 equals 0.0)."""
    bits = (scores + 0.0).view(np.uint64)  # + 0.0 turns -0.0 into 0.0
    top = np.uint64(1 << 63)
    return ~np.where(bits >= top, ~bits, bits | top)


def _ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + l) for s, l in zip(starts, lens)])``, vectorised."""
    lens = np.asarray(lens, dtype=np.int64)
    ends = np.cumsum(lens)
    total = int(ends[-1]) if ends.size else 0
    shift = np.repeat(np.asarray(starts, dtype=np.int64) - (ends - lens), lens)
    return np.arange(total, dtype=np.int64) + shift


def _take(a: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The ranges ``a[s:s + l]`` one after the other; a view when they are contiguous."""
    lens = np.asarray(lens, dtype=np.int64)
    if starts.size and np.all(starts[1:] == starts[:-1] + lens[:-1]):
        return a[int(starts[0]) : int(starts[0]) + int(lens.sum())]
    return a[_ranges(starts, lens)]


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def _factorize(names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values sorted by ``strcmp``, index of each value among them), for a bytes
    array with few distinct values (qids). Sorting hashes is far faster than sorting bytes;
    values are grouped by the top bits of their hash, and every group is confirmed on the
    bytes."""
    h = _hash(names)
    order = argsort_high_bits(h).view(np.int64)
    top = h[order] >> np.uint64(index_bits(h.size))
    first = np.empty(h.size, dtype=bool)
    first[:1] = True
    np.not_equal(top[1:], top[:-1], out=first[1:])
    codes = np.empty(h.size, dtype=np.int64)
    codes[order] = np.cumsum(first) - 1
    representative = order[first]  # the first of each group in input order
    found = names[representative]
    if not np.array_equal(_words(found)[codes], _words(names)):  # one hash, two qids: never seen
        found, codes = np.unique(names, return_inverse=True)
        return found, codes.astype(np.int64).ravel()
    order = np.argsort(found, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return found[order], rank[codes]


# ----------------------------------------------------------------------------- number parsing


def _one_float(token: bytes) -> float | None:
    """A score the vectorised parser did not take (exponent, inf, nan, many digits)."""
    if b"_" in token:  # Python's float() accepts "1_0"; C's strtod does not
        return None
    try:
        return float(token)
    except ValueError:
        return None


def _one_int(token: bytes) -> int | None:
    if b"_" in token:
        return None
    try:
        v = int(token)
    except ValueError:
        return None
    return v if -(2**63) <= v < 2**63 else None


_POW10 = 10 ** np.arange(19, dtype=np.int64)


def _parse_decimals(
    right: np.ndarray, lens: np.ndarray, first: np.ndarray, allow_dot: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Numbers ``[+-]digits[.digits]`` with at most 14 digits -> (float64 values, ok).

    ``right`` holds the tokens right-aligned and left-padded with ``'0'`` (``[k, w]`` uint8, w
    a multiple of 8), ``first`` their first bytes. Each digit then has a place value fixed by
    its column, so the digits, with the dot read as a 0, make one integer; dropping the dot's
    place gives the mantissa, exact in a float64, and dividing it by an exact power of ten is
    correctly rounded, as ``strtod`` is. ``ok`` is False for every other row.
    """
    k, w = right.shape
    sign = (first == ord("-")) | (first == ord("+"))
    fits = lens <= w
    if sign.any():
        rows = np.flatnonzero(sign & fits)
        right[rows, w - lens[rows]] = ord("0")
    digit = right - np.uint8(ord("0"))
    dot = digit == np.uint8(ord(".") - ord("0") + 256)
    nondigit = digit > 9
    # Row checks on whole rows at once: a bool row of 8 columns is one uint64 word.
    dot_words = dot.view(np.uint64)
    has_other = np.any((nondigit & ~dot).view(np.uint64), axis=1)
    word_with_dot = dot_words != 0
    n_dot_words = np.count_nonzero(word_with_dot, axis=1) if w > 8 else word_with_dot[:, 0]
    dots = dot_words.sum(axis=1) if w > 8 else dot_words[:, 0]  # the one dot's word, if one
    one_dot = (dots & (dots - np.uint64(1))) == 0  # a single byte set: a power of two
    n_dots = (n_dot_words > 0).astype(np.int64)
    n_digits = lens - sign - n_dots
    ok = fits & ~has_other & (n_dot_words <= 1) & one_dot & (n_digits >= 1)
    ok &= (n_digits <= _MAX_DIGITS) & (n_dots <= (1 if allow_dot else 0))
    digit *= ~nondigit  # the dot counts as a 0 digit
    whole = digit[:, 0].astype(np.int64)
    for j in range(1, w):  # Horner's rule on columns (no BLAS: its threads cost more here)
        whole *= 10
        whole += digit[:, j]
    whole[~ok] = 0
    if allow_dot and n_dots.any():
        # Column of the dot: its word, and its byte within the word (log2 of the power of 2).
        word = np.argmax(word_with_dot, axis=1) if w > 8 else 0
        byte = (np.frexp(dots.astype(np.float64))[1] - 1) // 8
        frac = np.where(n_dots > 0, w - 1 - (8 * word + byte), 0)
        scale = _POW10[np.clip(frac, 0, 18)]
        low = whole % scale
        whole = np.where(n_dots > 0, (whole - low) // 10 + low, whole) / scale
    return np.where(first == ord("-"), -whole, whole).astype(np.float64), ok


# ----------------------------------------------------------------------------- file parsing


@dataclasses.dataclass(frozen=True)
class _Spec:
    """How to read one kind of file."""

    kind: str  # "run" or "qrels"
    n_fields: int
    exact: bool  # qrels: exactly n_fields (as trec_eval); run: at least (the rest is ignored)
    value_field: int
    fmt: str

    def count_error(self, got: int) -> str:
        return f"expected {self.n_fields} fields ({self.fmt}), got {got}"

    @property
    def value_error(self) -> str:
        return "score is not a number" if self.kind == "run" else "relevance is not an integer"


_RUN = _Spec("run", 6, False, 4, "qid Q0 docno rank score tag")
_QRELS = _Spec("qrels", 4, True, 3, "qid iter docno rel")

_SPACE = np.zeros(256, dtype=bool)
_SPACE[[9, 10, 11, 12, 13, 32]] = True  # C isspace() in the C locale
_KEEP_LOW = np.array([(1 << (8 * i)) - 1 for i in range(9)], dtype=np.uint64)
_ZEROS = np.uint64(0x3030303030303030)  # eight '0' characters


@dataclasses.dataclass(frozen=True)
class _Text:
    """A block of whole lines: ``buf[_PAD:_PAD + n]``, with _PAD spare bytes on each side."""

    buf: np.ndarray
    n: int
    newlines: np.ndarray  # offsets of the newlines, from the block's start
    first_line: int  # 1-based number of the block's first line

    @property
    def body(self) -> np.ndarray:
        return self.buf[_PAD : _PAD + self.n]

    def words_at(self, at: np.ndarray, reach: int) -> np.ndarray:
        """The 8 bytes from each block offset ``at``, which lies at most ``reach`` bytes
        before the block or after its end."""
        unaligned = np.ndarray((self.buf.size - 7,), dtype="<u8", buffer=self.buf, strides=(1,))
        at = at + _PAD
        if reach + 8 > _PAD:  # very long tokens only: keep reads inside the buffer
            np.clip(at, 0, unaligned.size - 1, out=at)
        return unaligned[at]


@dataclasses.dataclass
class _Block:
    """The entries of one block, in file order."""

    lines: _Lines
    qids: np.ndarray  # bytes
    docnos: np.ndarray  # bytes, width a multiple of 8
    values: np.ndarray  # float64 scores or int64 rels
    tag: bytes | None  # the run tag of the block's last entry


@dataclasses.dataclass(frozen=True)
class _Lines:
    """Line numbers of a block's entries: consecutive from ``first``, or listed."""

    first: int
    listed: np.ndarray | None

    def __call__(self, i: int) -> int:
        return self.first + i if self.listed is None else int(self.listed[i])


def _left_words(text: _Text, s: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Tokens ``s:s + lens`` as ``[k, w]`` uint64 words, zero padded on the right; they view
    as a bytes array. Reading 8 bytes at a time is several times faster than byte gathers."""
    n_words = max(1, -(-int(lens.max()) // 8)) if lens.size else 1
    out = np.empty((s.size, n_words), dtype=np.uint64)
    for j in range(n_words):
        in_word = np.minimum(np.maximum(lens - 8 * j, 0), 8) if j else np.minimum(lens, 8)
        out[:, j] = text.words_at(s + 8 * j, 8 * n_words) & _KEEP_LOW[in_word]
    return out


def _right_bytes(text: _Text, e: np.ndarray, lens: np.ndarray, n_words: int) -> np.ndarray:
    """Tokens ending at ``e`` as a ``[k, 8 * n_words]`` uint8 matrix, right-aligned and
    padded on the left with ``'0'`` characters."""
    out = np.empty((e.size, n_words), dtype=np.uint64)
    for j in range(n_words):
        inside = np.minimum(np.maximum(lens - 8 * (n_words - 1 - j), 0), 8)  # token bytes here
        keep = ~_KEEP_LOW[8 - inside]  # they are the high (last) bytes of the word
        out[:, j] = (text.words_at(e - 8 * (n_words - j), 8 * n_words) & keep) | (_ZEROS & ~keep)
    return out.view(np.uint8).reshape(e.size, 8 * n_words)


def _as_bytes(words: np.ndarray) -> np.ndarray:
    return words.view(f"S{8 * words.shape[1]}").reshape(words.shape[0])


def _space_mask(body: np.ndarray, n_newlines: int) -> np.ndarray:
    """C ``isspace`` of each byte. ``<= 32`` is the same unless the block holds one of the
    control characters C counts as part of a token (0-8, 14-31): counting is cheaper."""
    others = np.count_nonzero(body < 32) - n_newlines
    for c in (9, 13, 11, 12):  # tab, CR, VT, FF
        if others == 0:
            break
        others -= np.count_nonzero(body == c)
    return body <= 32 if others == 0 else _SPACE[body]


def _tokens(text: _Text) -> tuple[np.ndarray, np.ndarray]:
    """Start and end offsets of the whitespace-separated tokens of a block."""
    # From the byte before the block (a space): each token then adds one edge where it starts
    # and one where it ends, and edge i of the extended array is offset i of the block.
    space = _space_mask(text.buf[_PAD - 1 : _PAD + text.n], text.newlines.size)
    edges = np.flatnonzero(space[1:] != space[:-1])
    return edges[0::2], edges[1::2]


def _line_tokens(
    starts: np.ndarray, newlines: np.ndarray, n_fields: int
) -> tuple[np.ndarray | slice, np.ndarray]:
    """Index of the first token of each line (a slice when regular), and tokens per line."""
    n_lines = newlines.size
    if (
        n_lines
        and starts.size == n_fields * n_lines
        and np.all(starts[n_fields::n_fields] > newlines[:-1])
        and np.all(starts[n_fields - 1 :: n_fields] < newlines)
    ):
        # Every line starts after the previous newline and has its n-th token before its own
        # newline; with n_fields tokens per line on average, each line has exactly n_fields.
        return slice(0, starts.size, n_fields), np.full(n_lines, n_fields)
    before = np.searchsorted(starts, newlines)
    counts = np.diff(before, prepend=0)
    return before - counts, counts


def _field(
    starts: np.ndarray, ends: np.ndarray, first: np.ndarray | slice, f: int
) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(first, slice):
        s, e = starts[first.start + f :: first.step], ends[first.start + f :: first.step]
    else:
        s, e = starts[first + f], ends[first + f]
    return s, e - s


def _parse_block(text: _Text, spec: _Spec, name: str) -> _Block:
    """The entries of one block of lines. Raises for its first malformed line."""
    body = text.body
    starts, ends = _tokens(text)
    first, counts = _line_tokens(starts, text.newlines, spec.n_fields)
    data = counts > 0
    if isinstance(first, slice):
        data &= body[starts[first]] != ord("#")
    elif starts.size:
        data &= body[starts[np.minimum(first, starts.size - 1)]] != ord("#")
    bad = data & ((counts != spec.n_fields) if spec.exact else (counts < spec.n_fields))
    error = None  # (line index, message) of the first line that cannot be split right
    if bad.any():
        k = int(np.argmax(bad))
        error = (k, spec.count_error(int(counts[k])))
    if np.count_nonzero(body == 0):  # C strings end at a NUL: trec_eval cannot read it either
        k = int(np.searchsorted(text.newlines, np.argmax(body == 0)))
        if error is None or k < error[0]:
            error = (k, "NUL byte in the line")
    if error is not None:  # parse the lines before it: one of them may fail first
        data[error[0] :] = False
    lines = _Lines(text.first_line, None)
    if not data.all():
        keep = np.flatnonzero(data)
        lines = _Lines(text.first_line, text.first_line + keep)
        if isinstance(first, slice):
            first = np.arange(first.start, first.stop, first.step)
        first = first[keep]

    qids = _as_bytes(_left_words(text, *_field(starts, ends, first, 0)))
    docnos = _as_bytes(_left_words(text, *_field(starts, ends, first, 2)))
    s, lens = _field(starts, ends, first, spec.value_field)
    width = min(4, max(1, -(-int(lens.max()) // 8))) if lens.size else 1
    values, ok = _parse_decimals(
        _right_bytes(text, s + lens, lens, width), lens, body[s], allow_dot=spec.kind == "run"
    )
    if spec.kind == "qrels":
        values = values.astype(np.int64)
    if not ok.all():  # exponents, inf, nan, 15+ digits: exactly, by Python, row by row
        rows = np.flatnonzero(~ok)
        tokens = _as_bytes(_left_words(text, s[rows], lens[rows])).tolist()
        convert = _one_float if spec.kind == "run" else _one_int
        converted = [convert(t) for t in tokens]
        if None in converted:
            i = converted.index(None)
            raise TrecFormatError(
                name, lines(int(rows[i])),
                f"{spec.value_error}: {tokens[i].decode(errors='replace')!r}",
            )
        values[rows] = converted
    if error is not None:
        raise TrecFormatError(name, text.first_line + error[0], error[1])
    tag = None
    if spec.kind == "run" and counts.size:
        t, lens_t = _field(starts, ends, first, 5)
        if t.size:
            tag = body[t[-1] : t[-1] + lens_t[-1]].tobytes()
    return _Block(lines, qids, docnos, values, tag)


def _open(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _new_buffer(size: int, carry: np.ndarray) -> np.ndarray:
    buf = np.empty(_PAD + size + _PAD, dtype=np.uint8)
    buf[:_PAD] = ord(" ")  # _tokens reads the byte before the block as a space
    buf[_PAD : _PAD + carry.size] = carry
    return buf


def _texts(path: Path, name: str) -> Iterator[_Text]:
    """Read ``path`` in blocks of whole lines, each in its own buffer. A missing final
    newline is added."""
    try:
        f = _open(path)
    except OSError as e:
        raise TrecFormatError(name, None, f"cannot open file: {e.strerror or e}") from None
    size = _BLOCK_BYTES
    buf = _new_buffer(size, np.zeros(0, dtype=np.uint8))
    have, line = 0, 1
    with f:
        while True:
            try:
                got = f.readinto(memoryview(buf)[_PAD + have : _PAD + size])
            except OSError as e:
                raise TrecFormatError(name, None, f"cannot read file: {e}") from None
            if not got:  # end of file
                if have:
                    buf[_PAD + have] = ord("\n")
                    newlines = np.flatnonzero(buf[_PAD : _PAD + have + 1] == 10)
                    yield _Text(buf, have + 1, newlines, line)
                return
            have += got
            newlines = np.flatnonzero(buf[_PAD : _PAD + have] == 10)
            if newlines.size == 0:
                if have == size:  # a line longer than the buffer: grow it
                    size *= 2
                    buf = _new_buffer(size, buf[_PAD : _PAD + have])
                continue
            n = int(newlines[-1]) + 1
            yield _Text(buf, n, newlines, line)
            line += newlines.size
            size = max(_BLOCK_BYTES, 2 * (have - n))  # room to read after the carried bytes
            buf, have = _new_buffer(size, buf[_PAD + n : _PAD + have]), have - n


def _blocks(path: Path, spec: _Spec) -> Iterator[_Block]:
    """Parsed blocks of the file, in order; two threads parse while the file is read (numpy
    releases the GIL in the heavy operations)."""
    name = str(path)
    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        pending: deque[Future[_Block]] = deque()
        try:
            for text in _texts(path, name):
                pending.append(pool.submit(_parse_block, text, spec, name))
                if len(pending) > _THREADS:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


# ----------------------------------------------------------------------------- entries


@dataclasses.dataclass
class _Entries:
    """Flat entries in input order, and how to name their lines in messages."""

    name: str
    qids: np.ndarray  # [N] int64 index into qid_names
    qid_names: np.ndarray  # [Q] bytes, sorted
    docnos: np.ndarray  # [N] bytes, width a multiple of 8
    values: np.ndarray  # [N] float64 or int64
    line_of: Callable[[int], int | None]
    tag: str = ""


def _from_file(path: Path, spec: _Spec) -> _Entries:
    name = str(path)
    if path.is_dir():
        raise TrecFormatError(name, None, "is a directory, not a file")
    heads, head_lens, docnos, values, lines = [], [], [], [], []
    tag = None
    for block in _blocks(path, spec):
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
        raise TrecFormatError(
            name, 1, f"no data lines (empty, or only comments and blank lines); expected {spec.fmt}"
        )
    qid_names, head_codes = _factorize(np.concatenate(heads))
    code_type = np.int32 if qid_names.size < 2**31 else np.int64
    qids = np.repeat(head_codes.astype(code_type), np.concatenate(head_lens))
    starts = np.cumsum([0] + [n for n, _ in lines])
    blocks_lines = [line for _, line in lines]

    def line_of(i: int) -> int:
        k = int(np.searchsorted(starts, i, side="right")) - 1
        return blocks_lines[k](i - int(starts[k]))

    all_docnos = _widen(np.concatenate(docnos))
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


def _values(
    raw: list[Any], spec: _Spec, name: str, line_of: Callable[[int], int | None]
) -> np.ndarray:
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


def _from_columns(
    name: str, spec: _Spec, qids: list[Any], docnos: list[Any], raw: list[Any], line_of
) -> _Entries:
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
            "<DataFrame>", spec, source["query_id"].tolist(), source["doc_id"].tolist(),
            source[value_attr].tolist(), row,
        )
    if not isinstance(source, Iterable):
        raise TypeError(
            f"cannot read a {spec.kind} from {type(source).__name__}: expected a path, a dict, "
            "records or a DataFrame"
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


def _raise_duplicate(e: _Entries, key: np.ndarray, order: np.ndarray, in_what: str) -> None:
    """Raise for the (qid, docno) pair met twice whose second line comes first, if any.

    ``key[order]`` is sorted, stably (so equal keys are in input order), and equal pairs
    have equal keys; equal keys need not be equal pairs (hash collisions: checked apart)."""
    k = key[order]
    eq = np.flatnonzero(k[1:] == k[:-1])
    a, b = order[eq], order[eq + 1]
    same = (e.qids[a] == e.qids[b]) & (e.docnos[a] == e.docnos[b])
    pairs = list(zip(b[same].tolist(), a[same].tolist()))  # (second, first)
    for i in eq[~same].tolist():  # a collision: compare every member of its group
        members = np.sort(order[np.flatnonzero(k == k[i])]).tolist()
        for x, first in enumerate(members):
            pairs += [
                (second, first) for second in members[x + 1 :]
                if e.qids[first] == e.qids[second] and e.docnos[first] == e.docnos[second]
            ]
    if not pairs:
        return
    second, first = min(pairs)
    l1, l2 = e.line_of(first), e.line_of(second)
    lines = "" if l1 is None else f" (lines {l1} and {l2})"
    raise TrecFormatError(
        e.name, l2,
        f"document {bytes(e.docnos[second]).decode(errors='replace')!r} appears twice for query "
        f"{bytes(e.qid_names[e.qids[second]]).decode(errors='replace')!r}{in_what}{lines}",
    )


def _tie_groups(equal_next: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions in a run of equal neighbours (``equal_next[i]``: i and i + 1 are equal),
    and the number of their run."""
    member = np.zeros(equal_next.size + 1, dtype=bool)
    member[:-1] |= equal_next
    member[1:] |= equal_next
    pos = np.flatnonzero(member)
    new_group = np.ones(pos.size, dtype=bool)
    new_group[1:] = ~equal_next[pos[1:] - 1]
    return pos, np.cumsum(new_group)


def _sort_groups(order: np.ndarray, pos: np.ndarray, keys: list[np.ndarray]) -> None:
    """Reorder ``order[pos]`` in place by ``keys`` (``np.lexsort`` keys of ``order[pos]``,
    primary last; the primary key numbers the contiguous groups)."""
    order[pos] = order[pos][np.lexsort(keys)]


def _docno_desc_keys(docnos: np.ndarray) -> list[np.ndarray]:
    """``np.lexsort`` keys (least significant first) ordering docnos descending."""
    w = _words(docnos, big_endian=True)
    return [~w[:, j] for j in range(w.shape[1] - 1, -1, -1)]


def _run_order(
    qids: np.ndarray, n_q: int, scores: np.ndarray, docnos: np.ndarray
) -> np.ndarray | None:
    """Permutation to trec_eval's order (qid, score desc, docno desc); None if already there.

    Fast when each query's lines are together and ranked (the usual layout of run files):
    then only tied scores are checked and the queries moved; else one argsort of packed keys.
    """
    n = qids.size
    new_q = qids[1:] != qids[:-1]
    block_start = np.concatenate(([0], np.flatnonzero(new_q) + 1))
    block_q = qids[block_start]
    if block_q.size != n_q or not np.all((scores[1:] <= scores[:-1]) | new_q):
        return _sorted_order(qids, n_q, scores, docnos)
    order = None
    tie = (scores[1:] == scores[:-1]) & ~new_q
    if tie.any():  # equal scores next to each other must be in descending docno order
        at = np.flatnonzero(tie)
        if not np.all(docnos[at] > docnos[at + 1]):
            order = np.arange(n)
            pos, group = _tie_groups(tie)
            _sort_groups(order, pos, _docno_desc_keys(docnos[pos]) + [group])
    if np.any(block_q[1:] < block_q[:-1]):  # move whole queries into qid order
        by_q = np.argsort(block_q)
        moved = _ranges(block_start[by_q], np.diff(np.append(block_start, n))[by_q])
        order = moved if order is None else order[moved]
    return order


def _sorted_order(qids: np.ndarray, n_q: int, scores: np.ndarray, docnos: np.ndarray) -> np.ndarray:
    """:func:`_run_order` for any layout: an argsort of (qid, top bits of the score) keys,
    then an exact sort of each run of equal keys."""
    key = _packed(qids, n_q, _descending(scores))
    order = np.argsort(key)
    k = key[order]
    equal_next = k[1:] == k[:-1]
    if equal_next.any():  # equal key: same query and score, or scores differing in low bits
        pos, group = _tie_groups(equal_next)
        sub = order[pos]
        _sort_groups(order, pos, _docno_desc_keys(docnos[sub]) + [_descending(scores[sub]), group])
    return order


# ----------------------------------------------------------------------------- public API


def read_qrels(source: Source) -> Qrels:
    """Read relevance judgments.

    Args:
        source: a path to a qrels file (``qid iter docno rel`` lines; ``.gz`` allowed), a
            pytrec_eval-style dict ``{qid: {docno: rel}}``, an iterable of records with
            attributes ``query_id, doc_id, relevance`` (ir_measures' ``Qrel``), or a
            DataFrame with those columns.

    Raises:
        TrecFormatError: a line without exactly 4 fields, a rel that is not an integer, a
            document judged twice for a query, an empty, missing or unreadable file.

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
        TrecFormatError: a line with fewer than 6 fields, a score that is not a number, a
            document twice in a query (both lines named), an empty, missing or unreadable
            file.

    >>> r = read_run({"q1": {"a": 1.0, "b": 2.0, "c": 1.0}})
    >>> r.docnos.astype(str).tolist(), r.scores.tolist()
    (['b', 'c', 'a'], [2.0, 1.0, 1.0])
    """
    e = _entries(source, _RUN)
    key = _packed(e.qids, e.qid_names.size, _hash(e.docnos))
    key.sort()
    if np.any(key[1:] == key[:-1]):
        key = _packed(e.qids, e.qid_names.size, _hash(e.docnos))
        _raise_duplicate(e, key, np.argsort(key, kind="stable"), "")
    del key
    order = _run_order(e.qids, e.qid_names.size, e.values, e.docnos)
    offsets = _offsets(np.bincount(e.qids, minlength=e.qid_names.size))
    e.qids = None  # free memory as we go: these arrays are as long as the file
    docnos, e.docnos = (e.docnos if order is None else e.docnos[order]), None
    scores, e.values = (e.values if order is None else e.values[order]), None
    del order
    return Run(_decode(e.qid_names), offsets, docnos, scores, e.tag)


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
            f.write(b"".join([b"%s Q0 %s %d %r %s\n" % (q, d, i, x, tag_bytes)
                              for i, (d, x) in enumerate(docs, 1)]))
    return path


def _match(
    lens: np.ndarray, docnos: np.ndarray, rel_lens: np.ndarray, rel_docnos: np.ndarray
) -> np.ndarray:
    """For each run document, the index of the same docno among the judgments of its row,
    or -1. Row i has the next ``lens[i]`` documents and the next ``rel_lens[i]`` judgments.
    Rows are matched in groups of about 2**20 documents, to bound the temporary memory."""
    hits = np.full(docnos.size, -1, dtype=np.int64)
    ends, rel_ends = np.cumsum(lens), np.cumsum(rel_lens)
    lo = 0
    while lo < lens.size:
        doc_lo = int(ends[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, doc_lo + (1 << 20), side="right")))
        doc_hi = int(ends[hi - 1])
        rel_lo, rel_hi = (int(rel_ends[lo - 1]) if lo else 0), int(rel_ends[hi - 1])
        found = _match_rows(
            lens[lo:hi], docnos[doc_lo:doc_hi], rel_lens[lo:hi], rel_docnos[rel_lo:rel_hi]
        )
        hits[doc_lo:doc_hi] = np.where(found >= 0, found + rel_lo, -1)
        lo = hi
    return hits


def _match_rows(
    lens: np.ndarray, docnos: np.ndarray, rel_lens: np.ndarray, rel_docnos: np.ndarray
) -> np.ndarray:
    """:func:`_match` for a group of rows.

    The judgments of a row fall into ``2 ** b`` buckets (about two buckets per judgment) by
    the top bits of their docno hash; a document looks only in its own bucket, and a hit is
    confirmed on the bytes. :class:`Qrels` keeps judgments in (qid, hash) order, so each
    bucket is a range of the judgments.
    """
    hits = np.full(docnos.size, -1, dtype=np.int64)
    if rel_docnos.size == 0 or docnos.size == 0:
        return hits
    bits = np.clip(np.frexp(rel_lens)[1].astype(np.int64) + 1, 1, 40)  # bit_length(count) + 1
    base = _offsets(np.left_shift(1, bits))
    shift = (64 - bits).astype(np.uint64)

    def buckets(h: np.ndarray, per_row: np.ndarray) -> np.ndarray:
        top = h >> np.repeat(shift, per_row)
        return np.repeat(base[:-1], per_row) + top.view(np.int64)

    h_rel = _hash(rel_docnos)
    bucket_rel = buckets(h_rel, rel_lens)
    if np.any(bucket_rel[1:] < bucket_rel[:-1]):  # not in (row, hash) order: sort them
        order = np.argsort(bucket_rel, kind="stable")
        sub = _match_rows(lens, docnos, rel_lens, rel_docnos[order])
        return np.where(sub >= 0, order[np.maximum(sub, 0)], -1)
    start = _offsets(np.bincount(bucket_rel, minlength=int(base[-1])))
    h = _hash(docnos)
    bucket = buckets(h, lens)
    first, stop = start[bucket], start[bucket + 1]
    todo = np.flatnonzero(first < stop)
    at = first[todo]
    while todo.size:
        hit = h_rel[at] == h[todo]
        same = np.flatnonzero(hit)  # equal hashes: confirm on the bytes
        hit[same] = rel_docnos[at[same]] == docnos[todo[same]]
        hits[todo[hit]] = at[hit]
        more = ~hit & (at + 1 < stop[todo])
        todo, at = todo[more], at[more] + 1
    return hits


def _find(run: Run, qids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and number of the run's documents for each of ``qids`` (0, 0 when absent)."""
    if run.qids.size == 0:
        return np.zeros(qids.size, dtype=np.int64), np.zeros(qids.size, dtype=np.int64)
    index = {q: i for i, q in enumerate(run.qids.tolist())}
    at = np.array([index.get(q, -1) for q in qids.tolist()], dtype=np.int64)
    found = at >= 0
    lens = np.diff(run.offsets)
    return np.where(found, run.offsets[:-1][at], 0), np.where(found, lens[at], 0)


def _pad(values: np.ndarray, lens: np.ndarray, width: int, fill: Any = 0) -> np.ndarray:
    """``[rows, width]`` array with row i holding the next ``lens[i]`` values, then ``fill``."""
    if np.all(lens == width):
        return values.reshape(lens.size, width)
    out = np.full((lens.size, width), fill, dtype=values.dtype)
    out.reshape(-1)[_ranges(np.arange(lens.size) * width, lens)] = values
    return out


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
    if max_docs is not None and max_docs < 0:
        raise ValueError(f"max_docs must be >= 0, got {max_docs}")
    if complete:
        qids, rel_q = qrels.qids, np.arange(qrels.qids.size)
        run_starts, run_lens = _find(run, qids)
    else:
        qids, rel_q, run_q = np.intersect1d(
            qrels.qids, run.qids, assume_unique=True, return_indices=True
        )
        run_starts, run_lens = run.offsets[run_q], np.diff(run.offsets)[run_q]
    if max_docs is not None:
        run_lens = np.minimum(run_lens, max_docs)
    rel_lens = np.diff(qrels.offsets)[rel_q]
    rel_docnos = _take(qrels.docnos, qrels.offsets[rel_q], rel_lens)
    judgments = _take(qrels.rels, qrels.offsets[rel_q], rel_lens)
    docnos = _take(run.docnos, run_starts, run_lens)
    scores = _take(run.scores, run_starts, run_lens)

    hit = _match(run_lens, docnos, rel_lens, rel_docnos)
    pooled = hit >= 0
    labels = judgments[np.maximum(hit, 0)] if judgments.size else np.zeros(hit.size, np.int64)
    labels = np.where(pooled, labels, 0)
    judged = pooled & (labels >= 0)
    if judged_only:
        keep = np.flatnonzero(judged)
        docnos, scores, labels, pooled, judged = (
            x[keep] for x in (docnos, scores, labels, pooled, judged)
        )
        run_lens = np.bincount(np.repeat(np.arange(qids.size), run_lens)[keep], minlength=qids.size)
    n = max(1, int(run_lens.max(initial=0)))
    m = max(1, int(rel_lens.max(initial=0)))
    return Batch(
        qids=qids.astype(qrels.qids.dtype if qids.size else "U1"),
        docnos=_pad(docnos, run_lens, n, b""),
        scores=_pad(scores, run_lens, n, 0.0),
        labels=_pad(labels, run_lens, n, 0),
        judged=_pad(judged, run_lens, n, False),
        pooled=_pad(pooled, run_lens, n, False),
        where=_pad(np.ones(docnos.size, dtype=bool), run_lens, n, False),
        judgments=_pad(judgments, rel_lens, m, 0),
        judgments_where=_pad(np.ones(judgments.size, dtype=bool), rel_lens, m, False),
    )


def demo_paths() -> tuple[Path, Path]:
    """Paths of the small demo qrels and run shipped with the package.

    Synthetic (numpy seed 20240611): queries q1-q3 with 50-80 retrieved documents, graded
    rels 0-2 and some -1, relevant documents not retrieved, tied scores; q4 is only in the
    qrels (see ``complete=True``).

    >>> [p.name for p in demo_paths()]
    ['demo.qrels', 'demo.run']
    """
    here = Path(__file__).resolve().parent / "data"
    return here / "demo.qrels", here / "demo.run"
