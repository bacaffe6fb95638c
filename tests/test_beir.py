"""BEIR's layout: its qrels read by jaxrank.evaluate and `jaxrank eval` as the same judgments in
trec_eval's format, and jaxrank.datasets.read_beir over a whole folder; every bad line is one
line naming the file and line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import jaxrank
from jaxrank.cli import main
from jaxrank.datasets import read_beir
from jaxrank.trec import TrecFormatError, _parse, read_qrels

TREC_EVAL = Path(__file__).resolve().parent / "data" / "trec_eval"
HEADER = "query-id\tcorpus-id\tscore\n"


def beir_lines(trec_qrels: Path) -> list[str]:
    """The judgments of a trec_eval qrels file as BEIR's lines (``qid<TAB>docno<TAB>rel``),
    last first: the reader must not depend on the order."""
    rows = [line.split() for line in trec_qrels.read_text().splitlines() if line.strip()]
    return [f"{q}\t{d}\t{r}\n" for q, _, d, r in reversed(rows)]


@pytest.fixture
def graded(tmp_path) -> tuple[str, str]:
    """trec_eval's graded qrels (0..4 and -1, 3681 judgments) as trec_eval's file and as BEIR's."""
    beir = tmp_path / "test.tsv"
    beir.write_text(HEADER + "".join(beir_lines(TREC_EVAL / "qrels.rel_level")))
    return str(TREC_EVAL / "qrels.rel_level"), str(beir)


def test_beir_qrels_give_the_numbers_of_the_same_judgments_in_trec_format(graded, monkeypatch):
    trec_path, beir_path = graded
    run = str(TREC_EVAL / "results.test")
    assert read_qrels(beir_path).to_dict() == read_qrels(trec_path).to_dict()
    measures = ["all_trec", "ndcg_cut.10", "recall.100"]
    want = jaxrank.evaluate(trec_path, run, measures, per_query=True)
    assert jaxrank.evaluate(beir_path, run, measures, per_query=True) == want
    assert len(want["per_query"]) == 3 and 0 < want["all"]["ndcg_cut_10"] < 1
    # read in small blocks: the header is line 1 of the first block only
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", 64)
    assert jaxrank.evaluate(beir_path, run, measures, per_query=True) == want


def test_beir_qrels_through_the_command_line_print_what_trec_qrels_print(graded, capsys, tmp_path):
    trec_path, beir_path = graded
    run = str(TREC_EVAL / "results.test")
    outputs = []
    zipped = tmp_path / "test.tsv.gz"
    zipped.write_bytes(gzip.compress(Path(beir_path).read_bytes()))
    for qrels in (trec_path, beir_path, str(zipped)):
        assert main(["eval", "-q", "-m", "all_trec", qrels, run]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0].count("\n") > 100 and outputs[1] == outputs[0] and outputs[2] == outputs[0]


BAD_QRELS = [
    ("q1\td1\t1\n", 1, "a BEIR qrels file starts with the header line"),
    (HEADER + "q1\td1\t1\nq1\td2\n", 3, "expected 3 fields (query-id corpus-id score"),
    (HEADER + "q1\td1\t1\tx\n", 2, "expected 3 fields"),
    (HEADER + "q1\td1\t1\nq2\td1\tyes\n", 3, "relevance is not an integer: 'yes'"),
    (HEADER + "q1\td1\t0.5\n", 2, "relevance is not an integer: '0.5'"),
    (HEADER + "q1\td1\t1\nq2\td1\t1\nq1\td1\t0\n", 4, "lines 2 and 4"),
    (HEADER, 1, "no data lines"),
]


@pytest.mark.parametrize("text, line, words", BAD_QRELS)
def test_a_bad_beir_qrels_line_is_one_line_naming_file_and_line(tmp_path, capsys, text, line, words):
    path = tmp_path / "test.tsv"
    path.write_text(text)
    for read in (read_qrels, lambda p: jaxrank.evaluate(p, {"q1": {"d1": 1.0}}, ["ndcg_cut.10"])):
        with pytest.raises(TrecFormatError) as info:
            read(str(path))
        assert str(info.value).startswith(f"{path}:{line}: ") and words in str(info.value)
        assert "\n" not in str(info.value)
    run = tmp_path / "a.run"
    run.write_text("q1 Q0 d1 1 1.0 t\n")
    assert main(["eval", str(path), str(run)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"jaxrank: {path}:{line}: ") and words in err


def test_three_fields_without_the_header_are_trec_format_errors_outside_tsv_files(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q1\td1\t1\n")
    with pytest.raises(TrecFormatError, match=r"qrels.txt:1: expected 4 fields \(qid iter docno rel\), got 3"):
        read_qrels(path)
    path.write_text("q1 0 d1 1\n")  # trec_eval's qrels stay what they were, whatever the name
    tsv = tmp_path / "qrels.tsv"
    tsv.write_text("q1\t0\td1\t1\n")
    assert read_qrels(tsv).to_dict() == read_qrels(path).to_dict() == {"q1": {"d1": 1}}


# --------------------------------------------------------------------------- read_beir


def write_beir(folder: Path, corpus=None, queries=None, qrels=None, split="test") -> Path:
    """A small collection in BEIR's layout; each file's text can be replaced."""
    docs = [
        {"_id": "d1", "title": "Cats", "text": "Cats purr.", "metadata": {}},
        {"_id": "d2", "text": "Dogs bark."},
        {"_id": "d3", "title": "", "text": "Cows moo."},
    ]
    qs = [{"_id": "q1", "text": "purring"}, {"_id": "q2", "text": "barking"}, {"_id": "q3", "text": "mooing"}]
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(corpus if corpus is not None else "".join(json.dumps(d) + "\n" for d in docs))
    (folder / "queries.jsonl").write_text(queries if queries is not None else "".join(json.dumps(q) + "\n" for q in qs))
    default = HEADER + "q3\td3\t2\nq1\td1\t1\nq1\td2\t0\n"
    (folder / "qrels" / f"{split}.tsv").write_text(qrels if qrels is not None else default)
    return folder


def test_read_beir_gives_the_corpus_and_the_queries_judged_in_the_split(tmp_path):
    folder = write_beir(tmp_path)
    (folder / "qrels" / "train.tsv").write_text(HEADER + "q2\td2\t1\n")
    test = read_beir(folder, "test")
    assert test.doc_ids == ["d1", "d2", "d3"]
    assert test.titles == ["Cats", "", ""] and test.texts == ["Cats purr.", "Dogs bark.", "Cows moo."]
    assert test.documents() == ["Cats Cats purr.", "Dogs bark.", "Cows moo."]
    # the split's queries in the order of queries.jsonl, not of the qrels
    assert test.query_ids == ["q1", "q3"] and test.queries == ["purring", "mooing"]
    assert test.qrels == {"q1": {"d1": 1, "d2": 0}, "q3": {"d3": 2}}
    train = read_beir(folder, "train")
    assert train.query_ids == ["q2"] and train.qrels == {"q2": {"d2": 1}} and train.doc_ids == test.doc_ids
    # its qrels are what jaxrank.evaluate reads from the file
    run = {"q1": {"d2": 2.0, "d1": 1.0}, "q3": {"d3": 1.0}}
    assert jaxrank.evaluate(test.qrels, run, ["ndcg_cut.10"]) == jaxrank.evaluate(
        str(folder / "qrels" / "test.tsv"), run, ["ndcg_cut.10"]
    )


def test_ids_given_as_json_numbers_are_strings_and_blank_lines_are_skipped(tmp_path):
    folder = write_beir(
        tmp_path,
        corpus='{"_id": 7, "text": "seven"}\n\n{"_id": "8", "text": "eight", "title": null}\n',
        queries='{"_id": 1, "text": "one"}\n',
        qrels=HEADER + "1\t7\t1\n1\t8\t0\n",
    )
    data = read_beir(folder)
    assert data.doc_ids == ["7", "8"] and data.titles == ["", ""] and data.query_ids == ["1"]


BAD_FILES = [
    ("corpus", '{"_id": "d1", "text": "a"}\n{"_id": "d2", "text": "b"\n', "corpus.jsonl", 2, "not JSON"),
    ("corpus", '{"_id": "d1", "text": "a"}\n["d2", "b"]\n', "corpus.jsonl", 2, "expected a JSON object, got list"),
    ("corpus", '{"_id": "d1", "text": "a"}\n\n{"text": "b"}\n', "corpus.jsonl", 3, "no '_id' field"),
    ("corpus", '{"_id": "d1", "text": "a"}\n{"_id": "d1", "text": "b"}\n', "corpus.jsonl", 2, "on lines 1 and 2"),
    ("corpus", '{"_id": "d1"}\n', "corpus.jsonl", 1, "no 'text' field"),
    ("corpus", '{"_id": "d1", "text": "a", "title": 3}\n', "corpus.jsonl", 1, "'title' is not a string: 3"),
    ("corpus", '{"_id": "", "text": "a"}\n', "corpus.jsonl", 1, "'_id' is empty"),
    ("corpus", '{"_id": true, "text": "a"}\n', "corpus.jsonl", 1, "'_id' is not a string: True"),
    ("queries", '{"_id": "q1", "text": "a"}\n{"_id": "q3"}\n', "queries.jsonl", 2, "no 'text' field"),
    ("queries", '{"_id": "q1", "text": "\\u00e9"}\n{"_id": "q2", "text": "\xe9"}\n', "queries.jsonl", 2, "not UTF-8"),
    ("qrels", HEADER + "q1\td1\t1\nq9\td1\t1\n", "qrels/test.tsv", 3, "query-id 'q9' is not in queries.jsonl"),
    ("qrels", HEADER + "q1\td1\t1\nq1\td9\t1\n", "qrels/test.tsv", 3, "corpus-id 'd9' is not in corpus.jsonl"),
    ("qrels", HEADER + "q1\td1\t1\nq1\td2\n", "qrels/test.tsv", 3, "expected 3 fields"),
    ("qrels", "q1\td1\t1\n", "qrels/test.tsv", 1, "header line"),
]


@pytest.mark.parametrize("which, text, name, line, words", BAD_FILES)
def test_a_bad_line_of_a_beir_folder_is_one_line_naming_file_and_line(tmp_path, which, text, name, line, words):
    folder = write_beir(tmp_path, **{which: text})
    if "\xe9" in text:  # a byte that is not UTF-8
        (folder / "queries.jsonl").write_bytes(text.encode("latin-1"))
    with pytest.raises(TrecFormatError) as info:
        read_beir(folder, "test")
    message = str(info.value)
    assert message.startswith(f"{folder / name}:{line}: ") and words in message and "\n" not in message


def test_missing_files_are_named(tmp_path):
    folder = write_beir(tmp_path)
    with pytest.raises(TrecFormatError, match=r"qrels/dev.tsv: no such file"):
        read_beir(folder, "dev")
    (folder / "queries.jsonl").unlink()
    with pytest.raises(TrecFormatError, match=r"queries.jsonl: cannot open file"):
        read_beir(folder, "test")
    (folder / "corpus.jsonl").write_text("\n")
    with pytest.raises(TrecFormatError, match=r"corpus.jsonl: no records"):
        read_beir(folder, "test")
