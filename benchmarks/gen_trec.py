"""Synthetic TREC run and qrels files for benchmarks and tests.

Both generators are vectorised (numpy only) so that a 5,000-query x 1,000-document run
(5M lines, ~200 MB) is written in a few seconds. The files look like real ones: numeric
qids written in numeric order (which is *not* trec_eval's string order), TREC-like docnos
of varying length, scores with 4 decimals (so ties occur), ranks 1..n, a run tag.

    python benchmarks/gen_trec.py OUT_DIR [N_QUERIES] [N_DOCS] [N_JUDGED]

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> path = generate_run(d / "r.run", n_queries=2, n_docs=3, seed=0)
    >>> len((d / "r.run").read_text().splitlines())
    6
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

__all__ = ["generate_run", "generate_qrels"]

_strings = getattr(np, "strings", np.char)  # numpy >= 2 has np.strings; 1.x only np.char

# A prime larger than any per-query index used below: the docs of a query are
# (a * i + b) mod _POOL for i = 0, 1, ..., which are distinct for distinct i.
_POOL = 1_000_003


def _docnos(qidx: np.ndarray, i: np.ndarray, n_queries: int, seed: int) -> np.ndarray:
    """Docno bytes for the ``i``-th pool document of query ``qidx`` (distinct per query)."""
    rng = np.random.default_rng([seed, 7919])
    a = rng.integers(1, _POOL, size=n_queries)
    b = rng.integers(0, _POOL, size=n_queries)
    ids = (a[qidx] * i + b[qidx]) % _POOL
    # Two collections with different docno styles and lengths ("FT93-123", "WSJ9012-000123").
    prefix = np.where(ids % 2 == 0, b"FT93-", b"WSJ9012-").astype("S8")
    return _strings.add(prefix, ids.astype("S7"))


def _write_lines(path: Path, columns: list[np.ndarray]) -> Path:
    """Join byte-string columns with spaces, one line per row, and write them."""
    line = columns[0]
    for col in columns[1:]:
        line = _strings.add(_strings.add(line, b" "), col)
    with open(path, "wb") as f:
        step = 500_000
        for lo in range(0, line.size, step):
            f.write(b"\n".join(line[lo : lo + step].tolist()))
            f.write(b"\n")
    return path


def _qid_bytes(n_queries: int) -> np.ndarray:
    return (np.arange(n_queries) + 1).astype("S12")


def generate_run(
    path: str | os.PathLike[str],
    n_queries: int,
    n_docs: int,
    seed: int = 0,
    *,
    tag: str = "synthetic",
    pool_seed: int | None = None,
) -> Path:
    """Write a TREC run (``qid Q0 docno rank score tag``) with ``n_docs`` docs per query.

    Lines are grouped by query, in numeric qid order, and by descending score within a query
    (as most systems write them). Scores have 4 decimals, so a run of 1,000 docs has ties.
    The documents are the first ``n_docs`` of each query's pool of seed ``seed``; with
    ``pool_seed``, ``n_docs`` drawn at random (by ``seed``) among the first ``2 n_docs`` of
    the pool of seed ``pool_seed``: several runs of one qrels (``generate_qrels(...,
    seed=pool_seed)``, which judges among those) then retrieve different documents.
    """
    path = Path(path)
    rng = np.random.default_rng(seed)
    qidx = np.repeat(np.arange(n_queries), n_docs)
    i = np.tile(np.arange(n_docs), n_queries)
    if pool_seed is not None:
        i = np.argsort(rng.random((n_queries, 2 * n_docs)), axis=1)[:, :n_docs].ravel()
    scores = np.round(rng.normal(10.0, 2.0, size=(n_queries, n_docs)), 4)
    scores = -np.sort(-scores, axis=1)
    ranks = (i + 1).astype("S7")
    # Fixed 4-decimal formatting without a per-line Python call.
    units = np.rint(scores.ravel() * 10_000).astype(np.int64)  # in 1e-4
    sign = np.where(units < 0, b"-", b"").astype("S1")
    units = np.abs(units)
    frac = _strings.zfill((units % 10_000).astype("S4"), 4)
    score_txt = _strings.add(_strings.add(sign, (units // 10_000).astype("S12")), b".")
    score_txt = _strings.add(score_txt, frac)
    n = qidx.size
    columns = [
        _qid_bytes(n_queries)[qidx],
        np.full(n, b"Q0", dtype="S2"),
        _docnos(qidx, i, n_queries, seed if pool_seed is None else pool_seed),
        ranks,
        score_txt,
        np.full(n, tag.encode(), dtype=f"S{max(1, len(tag.encode()))}"),
    ]
    return _write_lines(path, columns)


def generate_qrels(
    path: str | os.PathLike[str],
    n_queries: int,
    n_judged: int,
    seed: int = 0,
    *,
    n_docs: int = 1000,
    levels: tuple[float, ...] = (0.6, 0.25, 0.1, 0.05),
    unjudged: float = 0.0,
) -> Path:
    """Write qrels (``qid 0 docno rel``) matching :func:`generate_run` with the same seed.

    Each query gets ``n_judged`` distinct docs, drawn at random among the run's ``n_docs``
    retrieved docs and ``n_docs`` docs it did not retrieve, so about half of the judged docs
    are retrieved and recall-type measures see unretrieved relevant docs. ``levels[g]`` is the
    probability of grade ``g``; a fraction ``unjudged`` of the entries gets rel -1 (in the
    pool but unjudged). Lines are in random order, as the worst case for a reader.
    """
    if not 0 < n_judged <= 2 * n_docs:
        raise ValueError(f"n_judged must be in 1..{2 * n_docs}, got {n_judged}")
    path = Path(path)
    rng = np.random.default_rng([seed, 1])
    pick = np.argsort(rng.random((n_queries, 2 * n_docs)), axis=1)[:, :n_judged]
    qidx = np.repeat(np.arange(n_queries), n_judged)
    i = pick.ravel()
    p = np.asarray(levels, dtype=float)
    rels = rng.choice(len(p), size=qidx.size, p=p / p.sum())
    rels[rng.random(qidx.size) < unjudged] = -1
    perm = rng.permutation(qidx.size)
    qidx, i, rels = qidx[perm], i[perm], rels[perm]
    columns = [
        _qid_bytes(n_queries)[qidx],
        np.full(qidx.size, b"0", dtype="S1"),
        _docnos(qidx, i, n_queries, seed),
        rels.astype("S3"),
    ]
    return _write_lines(path, columns)


def main(argv: list[str]) -> None:
    out = Path(argv[0])
    n_queries = int(argv[1]) if len(argv) > 1 else 5000
    n_docs = int(argv[2]) if len(argv) > 2 else 1000
    n_judged = int(argv[3]) if len(argv) > 3 else 300
    out.mkdir(parents=True, exist_ok=True)
    print(generate_run(out / "bench.run", n_queries, n_docs, seed=0))
    print(generate_qrels(out / "bench.qrels", n_queries, n_judged, seed=0, n_docs=n_docs))


if __name__ == "__main__":
    main(sys.argv[1:])
