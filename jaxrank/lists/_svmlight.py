"""Learning-to-rank data sets: svmlight / LETOR files to padded ``[query, doc, feature]`` arrays.

Only numpy is needed here: the arrays this module returns go straight into
:func:`jaxrank.ndcg` and the losses of :mod:`jaxrank.losses` (``scores``,
``labels`` and ``where`` of shape ``[queries, docs]``).

Two layouts of the svmlight format are read (the one used by LETOR, MSLR-WEB,
Yahoo! LTR and LightGBM's examples)::

    2 qid:10 1:0.5 3:1.25 # optional comment
    0 qid:10 2:0.75
    1 qid:11 1:0.1

or, without ``qid:``, with a separate *query file* that lists how many
consecutive documents belong to each query, one count per line, in file order
(LightGBM's ``rank.train`` / ``rank.train.query``)::

    2
    1

Feature indices are 1-based (column ``j`` of the result is feature ``j + 1``)
unless ``zero_based=True``; absent features are 0.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple, Optional

import numpy as np

__all__ = ["SvmlightData", "read_svmlight", "pad_queries"]


class SvmlightData(NamedTuple):
    """What :func:`read_svmlight` returns (a named tuple: unpack it or use the fields).

    Attributes:
      features: ``float32[num_docs, num_features]``, dense; absent features are 0.
      labels: ``float32[num_docs]``, the relevance grade of each document.
      group_sizes: ``int64[num_queries]``, documents per query, in file order.
      qids: ``int64[num_queries]``, the ``qid`` of each query, or ``0, 1, ...``
        when the groups come from a query file.
    """

    features: np.ndarray
    labels: np.ndarray
    group_sizes: np.ndarray
    qids: np.ndarray


def _fail(path, lineno: int, message: str) -> ValueError:
    return ValueError(f"{os.fspath(path)}, line {lineno}: {message}")


def read_svmlight(
    path,
    query_path=None,
    num_features: Optional[int] = None,
    *,
    zero_based: bool = False,
) -> SvmlightData:
    """Reads a svmlight / LETOR ranking file into dense arrays.

    Each non-blank line is ``label [qid:Q] idx:val idx:val ... [# comment]``.
    The documents of one query must be consecutive. Query groups come from the
    ``qid:`` fields, or, when ``query_path`` is given, from that file (one
    document count per line, in file order; ``qid:`` fields are then ignored).
    A file with neither is one query holding every document.

    Args:
      path: the svmlight file.
      query_path: optional query file (document counts per query, in order).
      num_features: number of feature columns; default: the largest index seen.
        An index beyond it is an error.
      zero_based: whether feature indices start at 0 (default: at 1, as in
        LETOR and svmlight).

    Returns:
      :class:`SvmlightData` ``(features, labels, group_sizes, qids)``.

    Raises:
      ValueError: on a malformed line (naming the file and the 1-based line
        number), on a query whose documents are not consecutive, on a qid given
        for some lines only, or on a query file that does not match the data.

    Example:
      >>> import pathlib, tempfile
      >>> d = pathlib.Path(tempfile.mkdtemp())
      >>> _ = (d / "toy.txt").write_text("2 qid:7 1:0.5 3:2\\n0 qid:7 2:1\\n1 qid:9 3:4\\n")
      >>> data = read_svmlight(d / "toy.txt")
      >>> data.features.tolist()
      [[0.5, 0.0, 2.0], [0.0, 1.0, 0.0], [0.0, 0.0, 4.0]]
      >>> data.labels.tolist(), data.group_sizes.tolist(), data.qids.tolist()
      ([2.0, 0.0, 1.0], [2, 1], [7, 9])
    """
    if num_features is not None and (isinstance(num_features, bool) or int(num_features) < 0):
        raise ValueError(f"num_features must be a non-negative integer, got {num_features!r}")
    offset = 0 if zero_based else 1
    labels: list[float] = []
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    line_qids: list[Optional[int]] = []
    line_numbers: list[int] = []
    max_col = -1
    with open(path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            tokens = line.split()
            try:
                label = float(tokens[0])
            except ValueError:
                raise _fail(path, lineno, f"label {tokens[0]!r} is not a number") from None
            if not np.isfinite(label):
                raise _fail(path, lineno, f"label {tokens[0]!r} is not finite")
            rest = tokens[1:]
            qid = None
            if rest and rest[0].startswith("qid:"):
                try:
                    qid = int(rest[0][4:])
                except ValueError:
                    raise _fail(path, lineno, f"qid {rest[0][4:]!r} is not an integer") from None
                rest = rest[1:]
            idx = np.empty(len(rest), np.int64)
            val = np.empty(len(rest), np.float64)
            for j, tok in enumerate(rest):
                key, sep, value = tok.partition(":")
                if not sep:
                    raise _fail(path, lineno, f"expected idx:value, got {tok!r}")
                if key == "qid":
                    raise _fail(path, lineno, "qid: must come right after the label")
                try:
                    idx[j] = int(key)
                    val[j] = float(value)
                except ValueError:
                    raise _fail(path, lineno, f"expected idx:value, got {tok!r}") from None
                if not np.isfinite(val[j]):
                    raise _fail(path, lineno, f"feature value {value!r} is not finite")
            col = idx - offset
            if col.size:
                if col.min() < 0:
                    bad = int(idx[col.argmin()])
                    hint = "" if zero_based else " (indices are 1-based; pass zero_based=True)"
                    raise _fail(path, lineno, f"feature index {bad} is out of range{hint}")
                if num_features is not None and col.max() >= num_features:
                    raise _fail(
                        path,
                        lineno,
                        f"feature index {int(idx[col.argmax()])} exceeds num_features={num_features}",
                    )
                if np.unique(col).size != col.size:
                    raise _fail(path, lineno, "a feature index is repeated")
                max_col = max(max_col, int(col.max()))
            labels.append(label)
            rows.append(np.full(col.size, len(labels) - 1, np.int64))
            cols.append(col)
            vals.append(val)
            line_qids.append(qid)
            line_numbers.append(lineno)

    n = len(labels)
    d = (max_col + 1) if num_features is None else int(num_features)
    features = np.zeros((n, d), np.float32)
    if n:
        features[np.concatenate(rows), np.concatenate(cols)] = np.concatenate(vals)
    label_array = np.asarray(labels, np.float32)

    if query_path is not None:
        group_sizes = _read_query_file(query_path)
        if group_sizes.sum() != n:
            raise ValueError(
                f"{os.fspath(query_path)}: the query file counts {int(group_sizes.sum())} "
                f"documents but {os.fspath(path)} has {n}"
            )
        qids = np.arange(group_sizes.size, dtype=np.int64)
    else:
        group_sizes, qids = _groups_from_qids(path, line_qids, line_numbers)
    return SvmlightData(features, label_array, group_sizes, qids)


def _read_query_file(query_path) -> np.ndarray:
    sizes = []
    with open(query_path, encoding="utf-8") as f:
        for lineno, raw in enumerate(f, start=1):
            line = raw.strip()
            if not line:
                continue
            try:
                size = int(line)
            except ValueError:
                raise _fail(query_path, lineno, f"expected a document count, got {line!r}") from None
            if size <= 0:
                raise _fail(query_path, lineno, f"a query must have at least one document, got {size}")
            sizes.append(size)
    return np.asarray(sizes, np.int64)


def _groups_from_qids(path, line_qids, line_numbers):
    n = len(line_qids)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    have = [q is not None for q in line_qids]
    if not any(have):
        return np.asarray([n], np.int64), np.zeros(1, np.int64)
    if not all(have):
        first_missing = line_numbers[have.index(False)]
        raise _fail(path, first_missing, "qid: missing here but present on other lines")
    sizes: list[int] = []
    qids: list[int] = []
    seen: set[int] = set()
    for q, lineno in zip(line_qids, line_numbers):
        if qids and q == qids[-1]:
            sizes[-1] += 1
            continue
        if q in seen:
            raise _fail(path, lineno, f"the documents of qid {q} are not consecutive")
        seen.add(q)
        qids.append(q)
        sizes.append(1)
    return np.asarray(sizes, np.int64), np.asarray(qids, np.int64)


def pad_queries(
    features,
    labels,
    group_sizes: Sequence[int],
    max_docs: Optional[int] = None,
):
    """Cuts a flat document table into padded per-query lists.

    Args:
      features: ``[num_docs, num_features]``, documents grouped by query.
      labels: ``[num_docs]``.
      group_sizes: documents per query, in order; they must sum to ``num_docs``.
      max_docs: list length ``n``; default: the largest group. A query with more
        documents keeps its first ``max_docs`` (in file order) and drops the rest.

    Returns:
      ``(x, y, where)``: ``x`` ``float32[Q, n, d]``, ``y`` ``[Q, n]`` (the dtype of
      ``labels``), and ``where`` ``bool[Q, n]``, true for real documents. Padding
      has features 0 and label 0.

    Example:
      >>> import numpy as np
      >>> x, y, where = pad_queries(np.eye(3), np.array([2, 0, 1]), [2, 1])
      >>> x.shape, y.tolist(), where.tolist()
      ((2, 2, 3), [[2, 0], [1, 0]], [[True, True], [True, False]])
    """
    features = np.asarray(features)
    labels = np.asarray(labels)
    sizes = np.asarray(group_sizes, np.int64).reshape(-1)
    if features.ndim != 2:
        raise ValueError(f"features must be [num_docs, num_features], got shape {features.shape}")
    if labels.shape != features.shape[:1]:
        raise ValueError(f"labels must have shape ({features.shape[0]},), got {labels.shape}")
    if (sizes < 0).any():
        raise ValueError("group_sizes must be non-negative")
    if sizes.sum() != features.shape[0]:
        raise ValueError(f"group_sizes sum to {int(sizes.sum())} but there are {features.shape[0]} documents")
    if max_docs is None:
        n = int(sizes.max()) if sizes.size else 0
    else:
        if isinstance(max_docs, bool) or int(max_docs) <= 0:
            raise ValueError(f"max_docs must be a positive integer, got {max_docs!r}")
        n = int(max_docs)
    q, d = sizes.size, features.shape[1]
    starts = np.cumsum(sizes) - sizes
    keep = np.minimum(sizes, n)
    position = np.arange(n)
    where = position[None, :] < keep[:, None]
    source = (starts[:, None] + position[None, :])[where]
    x = np.zeros((q, n, d), np.float32)
    y = np.zeros((q, n), labels.dtype)
    x[where] = features[source]
    y[where] = labels[source]
    return x, y, where
