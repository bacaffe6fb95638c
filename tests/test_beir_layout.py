"""benchmarks/beir_layout.py: each public collection's original files, written by hand here in
their formats, become BEIR's layout that jaxrank.datasets.read_beir reads back."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import beir_layout  # noqa: E402

from jaxrank.datasets import read_beir  # noqa: E402


def convert(name: str, src: Path, out: Path, split: str = "test"):
    beir_layout.write(beir_layout.CONVERTERS[name](src), out)
    return read_beir(out, split)


def test_smart_files_with_crlf_fields_and_rel_columns(tmp_path):
    src = tmp_path / "cisi"
    src.mkdir()
    all_ = ".I 1\r\n.T\r\nDewey Classification\r\n.A\r\nComaromi, J.P.\r\n.W\r\n   The present study\r\nis a history.\r\n.X\r\n1\t5\t1\r\n.I 2\r\n.T\r\nIndexing\r\n.W\r\nOn indexes.\r\n"
    (src / "CISI.ALL").write_bytes(all_.encode())
    qry = ".I 1\r\n.W\r\nWhat problems\r\nof titles?\r\n.I 2\r\n.T\r\nA paper\r\n.A\r\nX, Y.\r\n.W\r\nAbout libraries.\r\n.I 3\r\n.W\r\nUnjudged.\r\n"
    (src / "CISI.QRY").write_bytes(qry.encode())
    (src / "CISI.REL").write_bytes(
        b"     1      2\t0\t0.000000\r\n     2      1\t0\t0.000000\r\n     2      2\t0\t0.000000\r\n"
    )
    data = convert("cisi", src, tmp_path / "out")
    assert data.doc_ids == ["1", "2"] and data.titles == ["Dewey Classification", "Indexing"]
    assert data.texts == ["The present study is a history.", "On indexes."]
    assert data.query_ids == ["1", "2"] and data.queries == ["What problems of titles?", "A paper About libraries."]
    assert data.qrels == {"1": {"2": 1}, "2": {"1": 1, "2": 1}}


def test_med_cacm_and_npl_judgment_layouts(tmp_path):
    med = tmp_path / "med"
    med.mkdir()
    (med / "MED.ALL").write_text(".I 1\n.W\nfetal plasma glucose .\n.I 2\n.W\nlens proteins .\n")
    (med / "MED.QRY").write_text(".I 1\n.W\n the crystalline lens.\n")
    (med / "MED.REL").write_text("1 0 2 1\n")
    data = convert("med", med, tmp_path / "med-out")
    assert data.titles == ["", ""] and data.queries == ["the crystalline lens."] and data.qrels == {"1": {"2": 1}}

    cacm = tmp_path / "cacm"
    cacm.mkdir()
    (cacm / "cacm.all").write_text(
        ".I 1\n.T\nAlgebraic Language\n.B\nCACM 1958\n.I 2\n.T\nRoots\n.W\nBy subtraction.\n.N\nx\n"
    )
    (cacm / "query.text").write_text(".I 1\n.W\n TSS articles?\n.N\n 1. R. A.\n\n.I 0\n")  # a record with no text
    (cacm / "qrels.text").write_text("01 2  0 0\n01 1  0 0")  # no final newline
    data = convert("cacm", cacm, tmp_path / "cacm-out")
    assert data.texts == ["", "By subtraction."] and data.titles == ["Algebraic Language", "Roots"]
    assert data.query_ids == ["1"] and data.qrels == {"1": {"1": 1, "2": 1}}

    npl = tmp_path / "npl"
    npl.mkdir()
    (npl / "doc-text").write_text("1\ncompact memories  a\ndigital store\n   /\n3\nan analogue computer\n   /\n")
    (npl / "query-text").write_text("1\nMEASUREMENT OF DIELECTRIC\n/\n2\nUNJUDGED\n/\n")
    (npl / "rlv-ass").write_text("1\n    1     3\n   /\n")
    data = convert("npl", npl, tmp_path / "npl-out")
    assert data.doc_ids == ["1", "3"] and data.texts == ["compact memories a digital store", "an analogue computer"]
    assert data.query_ids == ["1"] and data.qrels == {"1": {"1": 1, "3": 1}}


CORPUS = (
    "doc_id,title,abstract,structured\n"
    '4983,Cerebral white matter.,"[\'Alterations of the architecture.\'\n \'A line scan, it\\\'s ""MRI"".\']",False\n'  # CSV doubles a quote
    "5836,MDS.,\"['Myelodysplastic syndromes.']\",False\n"
    "7912,ID elements.,\"['Short elements.']\",False\n"
)
TRAIN = (
    "id,claim,evidence_doc_id,evidence_label,evidence_sentences,cited_doc_ids\n"
    "0,Biomaterials lack properties.,,,[],[4983]\n"
    "2,PrP positivity.,5836,CONTRADICT,[0],[5836 7912]\n"
    "2,PrP positivity.,7912,SUPPORT,[0],[5836 7912]\n"
)
DEV = "id,claim,evidence_doc_id,evidence_label,evidence_sentences,cited_doc_ids\n1,Biomaterials show properties.,,,[],[ 4983]\n"


def scifact_source(folder: Path) -> Path:
    folder.mkdir()
    with zipfile.ZipFile(folder / "scifact.zip", "w") as z:
        z.writestr("corpus_train.csv", CORPUS)
        z.writestr("claims_train.csv", TRAIN)
        z.writestr("claims_validation.csv", DEV)
    return folder


def test_scifact_from_allenais_release_in_beirs_split(tmp_path):
    src = scifact_source(tmp_path / "raw")
    test = convert("scifact", src, tmp_path / "scifact", "test")
    train = read_beir(tmp_path / "scifact", "train")
    assert test.doc_ids == ["4983", "5836", "7912"] and test.titles[0] == "Cerebral white matter."
    assert test.texts[0] == 'Alterations of the architecture. A line scan, it\'s "MRI".'
    assert test.query_ids == ["1"] and test.qrels == {"1": {"4983": 1}}
    # a claim's rows, one per evidence document, give its cited documents once each
    assert train.query_ids == ["0", "2"] and train.qrels == {"0": {"4983": 1}, "2": {"5836": 1, "7912": 1}}
    assert (tmp_path / "scifact" / "qrels" / "train.tsv").read_text().count("\n") == 4


def test_scifact_is_checked_against_beirs_files_beside_the_release(tmp_path, capsys):
    src = scifact_source(tmp_path / "raw")
    queries = [("0", "Biomaterials lack properties."), ("1", "Biomaterials show properties."), ("2", "PrP positivity.")]
    (src / "queries.jsonl").write_text(
        "".join(f'{{"_id": "{i}", "text": "{t}", "metadata": {{}}}}\n' for i, t in queries)
    )
    header = "query-id\tcorpus-id\tscore\n"
    (src / "test.tsv").write_text(header + "1\t4983\t1\n")
    (src / "train.tsv").write_text(header + "2\t7912\t1\n0\t4983\t1\n2\t5836\t1\n")
    beir_layout.scifact(src)
    assert "3 queries: equal" in capsys.readouterr().out
    (src / "test.tsv").write_text(header + "1\t5836\t1\n")
    with pytest.raises(ValueError, match="test.tsv: BEIR's qrels differ"):
        beir_layout.scifact(src)


def test_nfcorpus_from_beirs_zip_keeps_grades_and_splits(tmp_path, capsys):
    src = tmp_path / "raw"
    src.mkdir()
    header = "query-id\tcorpus-id\tscore\r\n"  # BEIR's nfcorpus.zip ends its qrels lines with CRLF
    with zipfile.ZipFile(src / "nfcorpus.zip", "w") as z:
        z.writestr(
            "nfcorpus/corpus.jsonl",
            '{"_id": "MED-10", "title": "Statin Use", "text": "Recent studies \\u2013 statins."}\n'
            '{"_id": "MED-14", "title": "Statins", "text": "A cohort.", "metadata": {"url": "x"}}\n'
            '{"_id": "MED-118", "title": "Alkylphenols", "text": "Endocrine disruptors."}\n',
        )
        z.writestr(
            "nfcorpus/queries.jsonl",
            "".join(
                f'{{"_id": "{i}", "text": "{t}", "metadata": {{"url": "http://nutritionfacts.org/{i}"}}}}\n'
                for i, t in [
                    ("PLAIN-2", "Do Cholesterol Statin Drugs Cause Breast Cancer?"),
                    ("PLAIN-3", "Breast Cancer"),
                    ("PLAIN-1", "Why Deep Fried Foods May Cause Cancer"),
                ]
            ),
        )
        z.writestr("nfcorpus/qrels/train.tsv", header + "PLAIN-3\tMED-14\t1\r\nPLAIN-3\tMED-118\t1\r\n")
        z.writestr("nfcorpus/qrels/dev.tsv", header + "PLAIN-1\tMED-118\t1\r\n")
        z.writestr("nfcorpus/qrels/test.tsv", header + "PLAIN-2\tMED-14\t2\r\nPLAIN-2\tMED-10\t1\r\n")
    test = convert("nfcorpus", src, tmp_path / "nfcorpus")
    assert "not BEIR's a89dba18a62ef92f7d323ec890a0d38d" in capsys.readouterr().out
    assert test.doc_ids == ["MED-10", "MED-14", "MED-118"] and test.titles[1] == "Statins"
    assert test.texts[0] == "Recent studies \u2013 statins."
    assert test.query_ids == ["PLAIN-2"] and test.queries == ["Do Cholesterol Statin Drugs Cause Breast Cancer?"]
    assert test.qrels == {"PLAIN-2": {"MED-14": 2, "MED-10": 1}}  # the grades, as BEIR has them
    assert read_beir(tmp_path / "nfcorpus", "train").qrels == {"PLAIN-3": {"MED-14": 1, "MED-118": 1}}
    assert read_beir(tmp_path / "nfcorpus", "dev").query_ids == ["PLAIN-1"]
    # the benchmark's loader (examples/train_retriever.py's): train.tsv's queries, then test.tsv's (not dev.tsv's)
    data, (train, valid, test_rows) = beir_layout.tr.load(tmp_path / "nfcorpus")
    assert data.query_ids == ["PLAIN-3", "PLAIN-2"] and list(test_rows) == [1]
    assert data.qrels["PLAIN-2"] == {"MED-14": 2, "MED-10": 1}
