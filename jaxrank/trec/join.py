"""Ordering and matching of TREC entries: runs into trec_eval's order (qid, score
descending, docno descending), duplicate detection, the matching of run documents with
the qrels of their query, and padding into ``[rows, width]`` arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxrank.trec._parse import TrecFormatError, _Entries, _hash, _words


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


def ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
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
    return a[ranges(starts, lens)]


def _offsets(counts: np.ndarray) -> np.ndarray:
    out = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


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
                (second, first)
                for second in members[x + 1 :]
                if e.qids[first] == e.qids[second] and e.docnos[first] == e.docnos[second]
            ]
    if not pairs:
        return
    second, first = min(pairs)
    l1, l2 = e.line_of(first), e.line_of(second)
    lines = "" if l1 is None else f" (lines {l1} and {l2})"
    raise TrecFormatError(
        e.name,
        l2,
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


def run_order(qids: np.ndarray, n_q: int, scores: np.ndarray, docnos: np.ndarray) -> np.ndarray | None:
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
        moved = ranges(block_start[by_q], np.diff(np.append(block_start, n))[by_q])
        order = moved if order is None else order[moved]
    return order


def _sorted_order(qids: np.ndarray, n_q: int, scores: np.ndarray, docnos: np.ndarray) -> np.ndarray:
    """:func:`run_order` for any layout: an argsort of (qid, top bits of the score) keys,
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


def _match(
    lens: np.ndarray,
    docnos: np.ndarray,
    rel_lens: np.ndarray,
    rel_docnos: np.ndarray,
    hashes: np.ndarray | None = None,
) -> np.ndarray:
    """For each run document, the index of the same docno among the judgments of its row,
    or -1. Row i has the next ``lens[i]`` documents and the next ``rel_lens[i]`` judgments.
    ``hashes``: the ``_hash`` of ``docnos``, when known. Rows are matched in groups of about
    2**20 documents, to bound the temporary memory."""
    hits = np.full(docnos.size, -1, dtype=np.int64)
    ends, rel_ends = np.cumsum(lens), np.cumsum(rel_lens)
    lo = 0
    while lo < lens.size:
        doc_lo = int(ends[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, doc_lo + (1 << 20), side="right")))
        doc_hi = int(ends[hi - 1])
        rel_lo, rel_hi = (int(rel_ends[lo - 1]) if lo else 0), int(rel_ends[hi - 1])
        h = None if hashes is None else hashes[doc_lo:doc_hi]
        found = _match_rows(lens[lo:hi], docnos[doc_lo:doc_hi], rel_lens[lo:hi], rel_docnos[rel_lo:rel_hi], h)
        hits[doc_lo:doc_hi] = np.where(found >= 0, found + rel_lo, -1)
        lo = hi
    return hits


def _match_rows(
    lens: np.ndarray,
    docnos: np.ndarray,
    rel_lens: np.ndarray,
    rel_docnos: np.ndarray,
    h: np.ndarray | None = None,
) -> np.ndarray:
    """:func:`_match` for a group of rows (``h``: the hashes of ``docnos``, when known).

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
        sub = _match_rows(lens, docnos, rel_lens, rel_docnos[order], h)
        return np.where(sub >= 0, order[np.maximum(sub, 0)], -1)
    start = _offsets(np.bincount(bucket_rel, minlength=int(base[-1])))
    h = _hash(docnos) if h is None else h
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


def _pad(values: np.ndarray, lens: np.ndarray, width: int, fill: Any = 0) -> np.ndarray:
    """``[rows, width]`` array with row i holding the next ``lens[i]`` values, then ``fill``."""
    if np.all(lens == width):
        return values.reshape(lens.size, width)
    out = np.full((lens.size, width), fill, dtype=values.dtype)
    out.reshape(-1)[ranges(np.arange(lens.size) * width, lens)] = values
    return out
