#!/usr/bin/env python
"""Writes public test collections in BEIR's layout, so that every collection the retriever
benchmark uses is read by the one loader, ``jaxrank.datasets.read_beir``.

BEIR's layout: ``corpus.jsonl`` (``{"_id", "title", "text"}`` a line), ``queries.jsonl``
(``{"_id", "text"}``) and ``qrels/<split>.tsv`` (the header ``query-id<TAB>corpus-id<TAB>score``,
then a judgment a line). A collection with a train/test split gets ``qrels/train.tsv`` and
``qrels/test.tsv``; one without gets all its judgments in ``qrels/test.tsv`` (as BEIR ships its
test-only collections), and ``benchmarks/bench_retriever.py`` cross-validates over its queries.
Only judged queries are written.

Sources (their origins, licences and sizes: docs/collections.md), by name:

* ``cranfield``: ``cran.all.1400.gz``, ``cran.qry.gz``, ``cranqrel.gz`` (``tests/data/cranfield``),
  read by ``examples/train_retriever.py``'s reader: queries named by position, Cleverdon's codes
  1..4 as scores 4..1, code -1 as 0; the title is left out (``.W`` begins with it).
* ``cisi``: Glasgow's ``CISI.ALL``, ``CISI.QRY``, ``CISI.REL`` (``qid docno 0 0.0`` lines, each a
  relevant document). Documents: title ``.T``, text ``.W``; queries: ``.T`` and ``.W``.
* ``med``: Glasgow's ``MED.ALL``, ``MED.QRY``, ``MED.REL`` (``qid 0 docno 1`` lines).
* ``cacm``: Glasgow's ``cacm.all`` (title ``.T``, text ``.W``: 1,587 of the 3,204 documents have
  no abstract), ``query.text`` (``.W``; a record without text is skipped), ``qrels.text``
  (``qid docno 0 0`` lines, queries zero-padded: ``01`` is query ``1``).
* ``npl``: Glasgow's ``doc-text``, ``query-text``, ``rlv-ass`` (records ended by a ``/`` line:
  the number, then the text, or the relevant documents' numbers).
* ``scifact``: allenai's SciFact release as Hugging Face's ``allenai/scifact`` dumps it to CSV,
  in ``scifact.zip`` (``corpus_train.csv``: ``doc_id, title, abstract`` with the abstract's
  sentences as a numpy array's text; ``claims_train.csv``, ``claims_validation.csv``: a row per
  claim and evidence document, with ``cited_doc_ids``). BEIR's split: a claim's cited abstracts
  are its relevant documents (score 1); the training claims are ``train``, the dev claims
  ``test``; the text of an abstract is its sentences joined by a space. When BEIR's own
  ``queries.jsonl``, ``train.tsv`` and ``test.tsv`` lie beside the zip, the queries and qrels
  built are checked to be theirs.
* ``nfcorpus``: BEIR's ``nfcorpus.zip`` (``nfcorpus/corpus.jsonl``, ``nfcorpus/queries.jsonl``,
  ``nfcorpus/qrels/{train,dev,test}.tsv``), NFCorpus in BEIR's layout already: documents' title
  and text, queries' text (their ``metadata`` is left out), each split's judgments with their
  grades as BEIR has them (``dev`` and ``test`` graded 1-2; ``train`` all 1). ``dev.tsv`` is
  written too; the benchmark does not read it (it validates on training queries, as for
  SciFact).

Usage::

    python benchmarks/beir_layout.py cisi raw/cisi beir-data/cisi
    python benchmarks/beir_layout.py scifact raw/scifact beir-data/scifact
    python benchmarks/beir_layout.py nfcorpus raw/nfcorpus beir-data/nfcorpus
"""

from __future__ import annotations

import argparse
import ast
import csv
import dataclasses
import hashlib
import io
import json
import re
import sys
import tokenize
import zipfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import train_retriever as tr  # noqa: E402

from jaxrank.datasets import read_beir  # noqa: E402
from jaxrank.trec import read_qrels  # noqa: E402

HEADER = "query-id\tcorpus-id\tscore\n"


@dataclasses.dataclass(frozen=True)
class Collection:
    """A collection to write: documents ``(id, title, text)``, queries ``(id, text)``, and
    each split's judgments ``(query id, document id, score)``."""

    docs: list[tuple[str, str, str]]
    queries: list[tuple[str, str]]
    qrels: dict[str, list[tuple[str, str, int]]]


def write(collection: Collection, out: Path) -> Path:
    """Writes ``collection`` in BEIR's layout under ``out`` (judged queries only) and reads
    it back with ``read_beir``, which checks every line."""
    judged = {q for rows in collection.qrels.values() for q, _, _ in rows}
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for i, title, text in collection.docs:
            f.write(json.dumps({"_id": i, "title": title, "text": text}) + "\n")
    with open(out / "queries.jsonl", "w", encoding="utf-8") as f:
        for i, text in collection.queries:
            if i in judged:
                f.write(json.dumps({"_id": i, "text": text}) + "\n")
    for split, rows in collection.qrels.items():
        (out / "qrels" / f"{split}.tsv").write_text(HEADER + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in rows))
    for split in collection.qrels:
        read_beir(out, split)
    return out


def _clean(text: str) -> str:
    """Whitespace runs (line breaks of the fixed-width originals) as one space."""
    return " ".join(text.split())


def _smart_docs(path: Path, title: bool = True) -> list[tuple[str, str, str]]:
    return [(r["I"], _clean(r.get("T", "")) if title else "", _clean(r.get("W", ""))) for r in tr.smart_records(path)]


def _smart_queries(path: Path) -> list[tuple[str, str]]:
    """Queries of a SMART file: ``.T`` and ``.W`` joined; a record without text is skipped."""
    out = []
    for r in tr.smart_records(path):
        text = _clean(r.get("T", "") + " " + r.get("W", ""))
        if text:
            out.append((str(int(r["I"])), text))
    return out


def _pairs(path: Path, q: int, d: int) -> list[tuple[str, str, int]]:
    """Binary judgments from whitespace-separated columns ``q`` (query) and ``d`` (document):
    every line names a relevant document."""
    rows = [line.split() for line in path.read_text().splitlines() if line.strip()]
    return [(str(int(r[q])), str(int(r[d])), 1) for r in rows]


def cranfield(src: Path) -> Collection:
    data = tr.load_cranfield(src)
    rows = [(q, d, g) for q in data.query_ids for d, g in data.qrels[q].items()]
    return Collection(
        list(zip(data.doc_ids, data.titles, data.texts)), list(zip(data.query_ids, data.queries)), {"test": rows}
    )


def cisi(src: Path) -> Collection:
    return Collection(
        _smart_docs(src / "CISI.ALL"), _smart_queries(src / "CISI.QRY"), {"test": _pairs(src / "CISI.REL", 0, 1)}
    )


def med(src: Path) -> Collection:
    return Collection(
        _smart_docs(src / "MED.ALL"), _smart_queries(src / "MED.QRY"), {"test": _pairs(src / "MED.REL", 0, 2)}
    )


def cacm(src: Path) -> Collection:
    return Collection(
        _smart_docs(src / "cacm.all"), _smart_queries(src / "query.text"), {"test": _pairs(src / "qrels.text", 0, 1)}
    )


def _slash_records(path: Path) -> list[list[str]]:
    """NPL's records: lines up to one holding ``/`` alone; each record's lines, stripped."""
    records, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() == "/":
            records.append(current)
            current = []
        elif line.strip():
            current.append(line.strip())
    return records


def npl(src: Path) -> Collection:
    docs = [(r[0], "", _clean(" ".join(r[1:]))) for r in _slash_records(src / "doc-text")]
    queries = [(r[0], _clean(" ".join(r[1:]))) for r in _slash_records(src / "query-text")]
    rows = [(r[0], d, 1) for r in _slash_records(src / "rlv-ass") for line in r[1:] for d in line.split()]
    return Collection(docs, queries, {"test": rows})


def _sentences(array_text: str) -> list[str]:
    """The strings of a numpy array's text (``['a' 'b']``, elements on several lines)."""
    tokens = tokenize.generate_tokens(io.StringIO(array_text).readline)
    return [ast.literal_eval(t.string) for t in tokens if t.type == tokenize.STRING]


def _csv(archive: zipfile.ZipFile, name: str) -> list[dict[str, str]]:
    csv.field_size_limit(1 << 30)
    return list(csv.DictReader(io.TextIOWrapper(archive.open(name), encoding="utf-8", newline="")))


def _claims(rows: Iterable[dict[str, str]]) -> tuple[dict[str, str], list[tuple[str, str, int]]]:
    """Claims ``{id: text}`` and their cited documents as judgments (score 1), by claim id."""
    texts: dict[str, str] = {}
    cited: dict[str, list[str]] = {}
    for row in rows:
        texts[row["id"]] = row["claim"]
        docs = cited.setdefault(row["id"], [])
        for d in re.findall(r"\d+", row["cited_doc_ids"]):
            if d not in docs:  # a claim's row per evidence document repeats its cited ones
                docs.append(d)
    order = sorted(texts, key=int)
    return {i: texts[i] for i in order}, [(i, d, 1) for i in order for d in cited[i]]


def scifact(src: Path) -> Collection:
    with zipfile.ZipFile(src / "scifact.zip") as archive:
        corpus = _csv(archive, "corpus_train.csv")
        train_claims, train = _claims(_csv(archive, "claims_train.csv"))
        dev_claims, test = _claims(_csv(archive, "claims_validation.csv"))
    docs = [(r["doc_id"], r["title"], " ".join(_sentences(r["abstract"]))) for r in corpus]
    claims = sorted({**train_claims, **dev_claims}.items(), key=lambda kv: int(kv[0]))
    collection = Collection(docs, claims, {"train": train, "test": test})
    _check_against_beir(collection, src)
    return collection


def _check_against_beir(collection: Collection, src: Path) -> None:
    """When BEIR's ``queries.jsonl`` and ``{train,test}.tsv`` are in ``src``: the claims and
    judgments built equal theirs (raises otherwise)."""
    if (src / "queries.jsonl").is_file():
        with open(src / "queries.jsonl", encoding="utf-8") as f:
            theirs = {(r := json.loads(line))["_id"]: r["text"] for line in f if line.strip()}
        if theirs != dict(collection.queries):
            raise ValueError(f"{src}/queries.jsonl: BEIR's queries differ from the claims built")
        print(f"  {len(theirs)} queries: equal to BEIR's queries.jsonl")
    for split, rows in collection.qrels.items():
        if (src / f"{split}.tsv").is_file():
            ours: dict[str, dict[str, int]] = {}
            for q, d, s in rows:
                ours.setdefault(q, {})[d] = s
            if read_qrels(src / f"{split}.tsv").to_dict() != ours:
                raise ValueError(f"{src}/{split}.tsv: BEIR's qrels differ from the judgments built")
            print(f"  {split}: {len(rows)} judgments, equal to BEIR's {split}.tsv")


NFCORPUS_MD5 = "a89dba18a62ef92f7d323ec890a0d38d"  # BEIR's published checksum of nfcorpus.zip


def _jsonl(archive: zipfile.ZipFile, name: str) -> list[dict]:
    with archive.open(name) as f:
        return [json.loads(line) for line in io.TextIOWrapper(f, encoding="utf-8") if line.strip()]


def _beir_qrels(archive: zipfile.ZipFile, name: str) -> list[tuple[str, str, int]]:
    """A BEIR ``qrels/<split>.tsv`` in ``archive``: its judgments in file order, grades kept."""
    lines = archive.read(name).decode("utf-8").splitlines()
    if not lines or lines[0].split("\t")[:2] != ["query-id", "corpus-id"]:
        raise ValueError(f"{name}: no BEIR qrels header")
    return [(q, d, int(s)) for q, d, s in (line.split("\t") for line in lines[1:] if line.strip())]


def nfcorpus(src: Path) -> Collection:
    path = src / "nfcorpus.zip"
    digest = hashlib.md5(path.read_bytes()).hexdigest()
    print(f"  nfcorpus.zip: MD5 {digest}" + (" (BEIR's)" if digest == NFCORPUS_MD5 else f", not BEIR's {NFCORPUS_MD5}"))
    with zipfile.ZipFile(path) as archive:
        docs = [(r["_id"], r["title"], r["text"]) for r in _jsonl(archive, "nfcorpus/corpus.jsonl")]
        queries = [(r["_id"], r["text"]) for r in _jsonl(archive, "nfcorpus/queries.jsonl")]
        qrels = {s: _beir_qrels(archive, f"nfcorpus/qrels/{s}.tsv") for s in ("train", "dev", "test")}
    return Collection(docs, queries, qrels)


CONVERTERS: dict[str, Callable[[Path], Collection]] = {
    "cranfield": cranfield,
    "cisi": cisi,
    "med": med,
    "cacm": cacm,
    "npl": npl,
    "scifact": scifact,
    "nfcorpus": nfcorpus,
}


def as_beir(folder: Path, scratch: Path) -> Path:
    """``folder`` when it is in BEIR's layout; Cranfield's files (``tests/data/cranfield``)
    written in it under ``scratch`` otherwise."""
    if (folder / "corpus.jsonl").is_file():
        return folder
    if (folder / "cran.all.1400.gz").is_file():
        return write(cranfield(folder), scratch / folder.name)
    raise FileNotFoundError(f"{folder}: neither BEIR's layout (corpus.jsonl) nor Cranfield's files")


def main(argv: Optional[Sequence[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("name", choices=sorted(CONVERTERS))
    p.add_argument("source", type=Path, help="the folder holding the collection's original files")
    p.add_argument("out", type=Path, help="the folder to write (BEIR's layout)")
    args = p.parse_args(argv)
    collection = CONVERTERS[args.name](args.source)
    write(collection, args.out)
    for split, rows in collection.qrels.items():
        judged = {q for q, _, _ in rows}
        relevant = sum(s > 0 for _, _, s in rows)
        grades = sorted({s for _, _, s in rows if s > 0})
        graded = "".join(f", {sum(s == g for _, _, s in rows)} at {g}" for g in grades) if len(grades) > 1 else ""
        print(
            f"{args.name} {split}: {len(collection.docs)} documents, {len(judged)} queries, "
            f"{len(rows)} judgments ({relevant} relevant{graded}) -> {args.out}"
        )


if __name__ == "__main__":
    main()
