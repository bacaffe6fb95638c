"""The byte level of the TREC readers: blocks of a file split into tokens and fields with
numpy operations on their bytes (no Python code per line), decimal numbers parsed from the
bytes, and hashing of docnos and qids. :mod:`jaxrank.trec.files` builds on it.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import io
import os
import re
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any

import numpy as np

from jaxrank._npsort import argsort_high_bits, index_bits

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


# ----------------------------------------------------------------------------- array helpers


def _decode(a: np.ndarray) -> np.ndarray:
    """Bytes array -> str array (UTF-8; undecodable bytes survive as surrogates)."""
    text = [x.decode("utf-8", "surrogateescape") for x in a.ravel().tolist()]
    return np.array(text, dtype=str if text else "U1").reshape(a.shape)


def _encode(values: Iterable[Any]) -> np.ndarray:
    """Strings (or anything ``str()`` takes) -> bytes array, width a multiple of 8."""
    raw = [(v if isinstance(v, str) else str(v)).encode("utf-8", "surrogateescape") for v in values]
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


def _atol(token: bytes) -> int:
    """What C's ``atol`` (trec_eval's reading of a relevance) makes of a token: its leading
    ``[+-]digits``, 0 when there are none."""
    digits = re.match(rb"[+-]?[0-9]*", token).group()  # type: ignore[union-attr]
    return int(digits) if digits.lstrip(b"+-") else 0


def _one_int(token: bytes) -> int | None:
    """A relevance: a number whose value is an integer that trec_eval's ``atol`` also reads
    from it (``1``, ``+2``, ``1.0``, ``-1.00``, ``1e0``); None for any other token (``0.5``,
    ``1e1``, which ``atol`` reads as 1, ``yes``)."""
    if b"_" in token:  # Decimal accepts "1_0"; C does not
        return None
    try:
        value = Decimal(token.decode("ascii"))
    except (UnicodeDecodeError, InvalidOperation):
        return None
    if not value.is_finite() or value.adjusted() > 18 or value != value.to_integral_value():
        return None
    v = int(value)
    return v if v == _atol(token) and -(2**63) <= v < 2**63 else None


def _rel_error(token: bytes) -> str:
    """Why a relevance token is refused, with what trec_eval would have read."""
    text = token.decode(errors="replace")
    return f"relevance is not an integer: {text!r} (trec_eval would read only its leading integer, {_atol(token)})"


_POW10 = 10 ** np.arange(19, dtype=np.int64)


def _parse_decimals(right: np.ndarray, lens: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
    ok &= n_digits <= _MAX_DIGITS
    digit *= ~nondigit  # the dot counts as a 0 digit
    whole = digit[:, 0].astype(np.int64)
    for j in range(1, w):  # Horner's rule on columns (no BLAS: its threads cost more here)
        whole *= 10
        whole += digit[:, j]
    whole[~ok] = 0
    if n_dots.any():
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
    docno_field: int = 2
    header: bool = False  # line 1 is a header, not an entry (BEIR's qrels)

    def count_error(self, got: int) -> str:
        return f"expected {self.n_fields} fields ({self.fmt}), got {got}"

    @property
    def value_error(self) -> str:
        return "score is not a number" if self.kind == "run" else "relevance is not an integer"


_RUN = _Spec("run", 6, False, 4, "qid Q0 docno rank score tag")
_QRELS = _Spec("qrels", 4, True, 3, "qid iter docno rel")
# BEIR's qrels/<split>.tsv: a header line, then query-id, corpus-id, score (tab-separated).
_BEIR_QRELS = _Spec("qrels", 3, True, 2, "query-id corpus-id score, under BEIR's header", docno_field=1, header=True)
_BEIR_HEADER = [b"query-id", b"corpus-id", b"score"]

_SPACE = np.zeros(256, dtype=bool)
_SPACE[[9, 10, 11, 12, 13, 32]] = True  # C isspace() in the C locale
_KEEP_LOW = np.array([(1 << (8 * i)) - 1 for i in range(9)], dtype=np.uint64)
_ZEROS = np.uint64(0x3030303030303030)  # eight '0' characters


@dataclasses.dataclass(frozen=True)
class _Text:
    """A block of whole lines: ``buf[_PAD:_PAD + n]``, with _PAD spare bytes on each side."""

    buf: np.ndarray
    n: int
    first_line: int  # 1-based number of the block's first line

    @property
    def body(self) -> np.ndarray:
        return self.buf[_PAD : _PAD + self.n]

    @functools.cached_property
    def newlines(self) -> np.ndarray:
        """Offsets of the newlines, from the block's start (found by the parsing thread)."""
        return np.flatnonzero(self.body == 10)

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
    spec: _Spec  # how the block was read (a qrels file's layout is told by its first line)


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


def _space_mask(body: np.ndarray, n_newlines: int) -> tuple[np.ndarray, bool]:
    """C ``isspace`` of each byte, and whether the block holds a control character other than
    whitespace (0-8, 14-31, NUL among them). ``<= 32`` is the same as ``isspace`` unless it
    does (C counts those as part of a token): counting is cheaper."""
    others = np.count_nonzero(body < 32) - n_newlines
    for c in (9, 13, 11, 12):  # tab, CR, VT, FF
        if others == 0:
            break
        others -= np.count_nonzero(body == c)
    return (body <= 32, False) if others == 0 else (_SPACE[body], True)


def _tokens(text: _Text) -> tuple[np.ndarray, np.ndarray, bool]:
    """Start and end offsets of the whitespace-separated tokens of a block, and whether it
    holds a control character other than whitespace (see :func:`_space_mask`)."""
    # From the byte before the block (a space): each token then adds one edge where it starts
    # and one where it ends, and edge i of the extended array is offset i of the block.
    space, control = _space_mask(text.buf[_PAD - 1 : _PAD + text.n], text.newlines.size)
    edges = np.flatnonzero(space[1:] != space[:-1])
    return edges[0::2], edges[1::2], control


def _line_tokens(starts: np.ndarray, newlines: np.ndarray, n_fields: int) -> tuple[np.ndarray | slice, np.ndarray]:
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


def _field(starts: np.ndarray, ends: np.ndarray, first: np.ndarray | slice, f: int) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(first, slice):
        s, e = starts[first.start + f :: first.step], ends[first.start + f :: first.step]
    else:
        s, e = starts[first + f], ends[first + f]
    return s, e - s


def _parse_block(text: _Text, spec: _Spec, name: str) -> _Block:
    """The entries of one block of lines. Raises for its first malformed line."""
    body = text.body
    starts, ends, control = _tokens(text)
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
    if control and np.count_nonzero(body == 0):  # C strings end at a NUL: trec_eval cannot read it either
        k = int(np.searchsorted(text.newlines, np.argmax(body == 0)))
        if error is None or k < error[0]:
            error = (k, "NUL byte in the line")
    if error is not None:  # parse the lines before it: one of them may fail first
        data[error[0] :] = False
    if spec.header and text.first_line == 1:
        data[0] = False
    lines = _Lines(text.first_line, None)
    if not data.all():
        keep = np.flatnonzero(data)
        lines = _Lines(text.first_line, text.first_line + keep)
        if isinstance(first, slice):
            first = np.arange(first.start, first.stop, first.step)
        first = first[keep]

    qids = _as_bytes(_left_words(text, *_field(starts, ends, first, 0)))
    docnos = _as_bytes(_left_words(text, *_field(starts, ends, first, spec.docno_field)))
    s, lens = _field(starts, ends, first, spec.value_field)
    width = min(4, max(1, -(-int(lens.max()) // 8))) if lens.size else 1
    values, ok = _parse_decimals(_right_bytes(text, s + lens, lens, width), lens, body[s])
    if spec.kind == "qrels":  # "1.0" is 1; "0.5" goes to _one_int, which refuses it
        ok &= values == np.trunc(values)  # exact: at most 14 digits tell an integer apart
        values = values.astype(np.int64)
    if not ok.all():  # exponents, inf, nan, 15+ digits: exactly, by Python, row by row
        rows = np.flatnonzero(~ok)
        tokens = _as_bytes(_left_words(text, s[rows], lens[rows])).tolist()
        convert = _one_float if spec.kind == "run" else _one_int
        converted = [convert(t) for t in tokens]
        if None in converted:
            i = converted.index(None)
            reason = (
                _rel_error(tokens[i])
                if spec.kind == "qrels"
                else f"{spec.value_error}: {tokens[i].decode(errors='replace')!r}"
            )
            raise TrecFormatError(name, lines(int(rows[i])), reason)
        values[rows] = converted
    if error is not None:
        raise TrecFormatError(name, text.first_line + error[0], error[1])
    tag = None
    if spec.kind == "run" and counts.size:
        t, lens_t = _field(starts, ends, first, 5)
        if t.size:
            tag = body[t[-1] : t[-1] + lens_t[-1]].tobytes()
    return _Block(lines, qids, docnos, values, tag, spec)


def _layout(spec: _Spec, text: _Text, name: str) -> _Spec:
    """How to read a qrels file, from its first line (``text`` is its first block): BEIR's
    qrels under their header ``query-id corpus-id score``, else trec_eval's. A ``.tsv`` file
    of three fields without that header is refused: BEIR's layout without its header line."""
    if spec is not _QRELS:
        return spec
    first = text.body[: text.newlines[0]].tobytes().split()
    if first == _BEIR_HEADER:
        return _BEIR_QRELS
    if len(first) == 3 and name.endswith((".tsv", ".tsv.gz")):
        got = " ".join(w.decode(errors="replace") for w in first)
        reason = f"a BEIR qrels file starts with the header line query-id<TAB>corpus-id<TAB>score, got {got!r}"
        raise TrecFormatError(name, 1, reason)
    return spec


STDIN = "-"  # the file name that means standard input (trec_eval 10 reads a run so)


class _Unclosed(io.RawIOBase):
    """Standard input's bytes, left open when the reader closes (a second ``-`` then reads
    what is left: nothing)."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:  # type: ignore[override]
        return self._raw.readinto(b)


def read_whole(path: Path) -> bytes:
    """A whole (small) input file's bytes; ``-`` is standard input. Raises
    :class:`TrecFormatError` when it cannot be read."""
    name = "<stdin>" if str(path) == STDIN else str(path)
    if path.is_dir():
        raise TrecFormatError(name, None, "is a directory, not a file")
    try:
        if str(path) == STDIN:
            return sys.stdin.buffer.read()
        return path.read_bytes()
    except OSError as e:
        raise TrecFormatError(name, None, f"cannot open file: {e.strerror or e}") from None


def _open(path: Path) -> IO[bytes]:
    if str(path) == STDIN:
        return _Unclosed(sys.stdin.buffer)  # type: ignore[return-value]
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def _new_buffer(size: int, carry: bytes | bytearray) -> bytearray:
    buf = bytearray(_PAD + size + _PAD)
    buf[:_PAD] = b" " * _PAD  # _tokens reads the byte before the block as a space
    buf[_PAD : _PAD + len(carry)] = carry
    return buf


def _texts(path: Path, name: str) -> Iterator[_Text]:
    """Read ``path`` in blocks of whole lines, each in its own buffer. A missing final
    newline is added. Only the last newline of each read is looked for here (and the lines
    counted, by ``bytes`` methods); the parsing threads find the others."""
    try:
        f = _open(path)
    except OSError as e:
        raise TrecFormatError(name, None, f"cannot open file: {e.strerror or e}") from None
    size = _BLOCK_BYTES
    buf = _new_buffer(size, b"")
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
                    yield _Text(np.frombuffer(buf, dtype=np.uint8), have + 1, line)
                return
            have += got
            last = buf.rfind(b"\n", _PAD, _PAD + have)
            if last < 0:
                if have == size:  # a line longer than the buffer: grow it
                    size *= 2
                    buf = _new_buffer(size, buf[_PAD : _PAD + have])
                continue
            n = last - _PAD + 1
            yield _Text(np.frombuffer(buf, dtype=np.uint8), n, line)
            line += buf.count(b"\n", _PAD, _PAD + n)
            size = max(_BLOCK_BYTES, 2 * (have - n))  # room to read after the carried bytes
            buf, have = _new_buffer(size, buf[_PAD + n : _PAD + have]), have - n


def _blocks(path: Path, spec: _Spec) -> Iterator[_Block]:
    """Parsed blocks of the file, in order; two threads parse while the file is read (numpy
    releases the GIL in the heavy operations)."""
    name = "<stdin>" if str(path) == STDIN else str(path)
    with ThreadPoolExecutor(max_workers=_THREADS) as pool:
        pending: deque[Future[_Block]] = deque()
        try:
            for text in _texts(path, name):
                if text.first_line == 1:
                    spec = _layout(spec, text, name)
                pending.append(pool.submit(_parse_block, text, spec, name))
                if len(pending) > _THREADS:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


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
