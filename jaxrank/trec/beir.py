"""BEIR's file layout: a collection as the benchmarks of dense retrieval ship it.

A folder holds ``corpus.jsonl`` (one JSON object a line: ``_id``, ``title``, ``text``),
``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv`` (a header line
``query-id<TAB>corpus-id<TAB>score``, then one judgment a line). The qrels are read by
:func:`jaxrank.trec.read_qrels`, which knows them by their header, as ``jaxrank.evaluate``
and ``jaxrank eval`` read them; the two JSON Lines files are read here.

Every malformed line is a :class:`~jaxrank.trec.TrecFormatError` whose message is one line,
``file:line: what is wrong``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Union

from jaxrank.trec.files import TrecFormatError, read_qrels

__all__ = ["Beir", "read_beir"]


@dataclasses.dataclass(frozen=True)
class Beir:
    """One split of a BEIR collection, as :func:`read_beir` returns it.

    Attributes:
      doc_ids, titles, texts: the corpus, in the order of ``corpus.jsonl`` (a missing
        title is ``""``).
      query_ids, queries: the queries judged in the split, in the order of
        ``queries.jsonl``.
      qrels: the split's judgments, ``{query id: {doc id: score}}`` (what
        ``jaxrank.evaluate`` takes).
    """

    doc_ids: list[str]
    titles: list[str]
    texts: list[str]
    query_ids: list[str]
    queries: list[str]
    qrels: dict[str, dict[str, int]]

    def documents(self) -> list[str]:
        """Each document's title and text joined by a space, as BEIR's dense models read them."""
        return [f"{title} {text}" if title else text for title, text in zip(self.titles, self.texts)]


def _records(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSON Lines file."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise TrecFormatError(str(path), None, f"cannot open file: {e.strerror or e}") from None
    with f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise TrecFormatError(str(path), number, f"not UTF-8 (byte {e.start + 1})") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise TrecFormatError(str(path), number, f"not JSON: {e.msg} (column {e.colno})") from None
            if not isinstance(record, dict):
                raise TrecFormatError(str(path), number, f"expected a JSON object, got {type(record).__name__}")
            yield number, record


def _text(record: dict, key: str, path: Path, number: int, default: Union[str, None] = None) -> str:
    """``record[key]`` as a string: ids may be JSON numbers; a missing key (or null) is
    ``default``, or an error when there is none."""
    value = record.get(key)
    if value is None:
        if default is None:
            raise TrecFormatError(str(path), number, f"no {key!r} field")
        return default
    if key == "_id" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise TrecFormatError(str(path), number, f"{key!r} is not a string: {value!r}")
    if key == "_id" and not value.strip():
        raise TrecFormatError(str(path), number, "'_id' is empty")
    return value


def _read_jsonl(path: Path, fields: dict[str, Union[str, None]]) -> tuple[list[str], dict[str, list[str]]]:
    """The ids and ``fields`` (name -> default, None when required) of every record; an id
    given twice names both lines."""
    ids: list[str] = []
    columns: dict[str, list[str]] = {k: [] for k in fields}
    first: dict[str, int] = {}
    for number, record in _records(path):
        key = _text(record, "_id", path, number)
        if key in first:
            raise TrecFormatError(
                str(path), number, f"'_id' {key!r} is given twice, on lines {first[key]} and {number}"
            )
        first[key] = number
        ids.append(key)
        for name, default in fields.items():
            columns[name].append(_text(record, name, path, number, default))
    if not ids:
        raise TrecFormatError(str(path), None, "no records")
    return ids, columns


def _line_naming(path: Path, field: int, value: str) -> Union[int, None]:
    """The first line of a qrels file whose ``field`` is ``value`` (for a message)."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            words = raw.decode("utf-8", "replace").split()
            if len(words) > field and words[field] == value:
                return number
    return None


def read_beir(folder: Union[str, os.PathLike], split: str = "test") -> Beir:
    """Reads one split of a collection in BEIR's layout.

    Args:
      folder: holds ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``.
      split: the qrels file's name: ``"train"``, ``"dev"``, ``"test"``, ...

    Returns:
      A :class:`Beir`: the whole corpus, the queries judged in the split and their qrels.

    Raises:
      TrecFormatError: a missing file; a line of ``corpus.jsonl`` or ``queries.jsonl`` that
        is not a JSON object, lacks ``_id`` (or ``text``), gives an ``_id`` already given,
        or a field that is not a string; a bad qrels line (:func:`read_qrels`'s errors); a
        judgment naming a query or document the other files lack. Each names the file and
        line.

    >>> import json, pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> (folder / "qrels").mkdir()
    >>> lines = [{"_id": "d1", "title": "Cats", "text": "Cats purr."}, {"_id": "d2", "text": "Dogs bark."}]
    >>> _ = (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\\n" for d in lines))
    >>> _ = (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "purring"}\\n{"_id": "q2", "text": "?"}\\n')
    >>> _ = (folder / "qrels" / "test.tsv").write_text("query-id\\tcorpus-id\\tscore\\nq1\\td1\\t1\\n")
    >>> data = read_beir(folder, "test")
    >>> data.doc_ids, data.documents(), data.query_ids, data.queries, data.qrels
    (['d1', 'd2'], ['Cats Cats purr.', 'Dogs bark.'], ['q1'], ['purring'], {'q1': {'d1': 1}})
    """
    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    if not qrels_path.is_file():
        raise TrecFormatError(str(qrels_path), None, "no such file (BEIR's layout: qrels/<split>.tsv)")
    doc_ids, corpus = _read_jsonl(folder / "corpus.jsonl", {"title": "", "text": None})
    query_ids, queries = _read_jsonl(folder / "queries.jsonl", {"text": None})
    qrels = read_qrels(qrels_path).to_dict()
    known_docs, known_queries = set(doc_ids), set(query_ids)
    for qid, judged in qrels.items():
        if qid not in known_queries:
            line = _line_naming(qrels_path, 0, qid)
            raise TrecFormatError(str(qrels_path), line, f"query-id {qid!r} is not in queries.jsonl")
        for doc in judged:
            if doc not in known_docs:
                line = _line_naming(qrels_path, 1, doc)
                raise TrecFormatError(str(qrels_path), line, f"corpus-id {doc!r} is not in corpus.jsonl")
    kept = [i for i, q in enumerate(query_ids) if q in qrels]
    return Beir(
        doc_ids,
        corpus["title"],
        corpus["text"],
        [query_ids[i] for i in kept],
        [queries["text"][i] for i in kept],
        qrels,
    )
