"""Reading and writing TREC qrels and runs, and the padded batches built from them."""

from __future__ import annotations

import collections
import dataclasses
import gzip
import importlib.util
from pathlib import Path
from typing import Optional

import numpy as np
import pytest

from jaxrank.trec import (
    Batch,
    TrecFormatError,
    _parse,
    demo_paths,
    files,
    read_qrels,
    read_run,
    to_batch,
    write_run,
)
from jaxrank.trec import (
    join as _join,
)

TREC_EVAL = Path(__file__).resolve().parent / "data" / "trec_eval"
ROOT = Path(__file__).resolve().parents[1]

QRELS = """\
1 0 a 1
1 0 b 0
1 0 c 2
1 0 z 1
2 0 a 0
2 0 d 1
3 0 x -1
3 0 y 1
"""

RUN = """\
1 Q0 a 1 0.5 tagA
1 Q0 b 2 0.9 tagA
1 Q0 c 3 0.5 tagA
1 Q0 e 4 0.1 tagA
2 Q0 d 1 3.0 tagA
3 Q0 x 1 2.0 tagA
3 Q0 w 2 1.0 tagA
3 Q0 y 3 0.0 tagA
4 Q0 a 1 1.0 tagB
"""


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def assert_same(a: object, b: object) -> None:
    """Two Qrels, Runs or Batches hold the same arrays (and tags)."""
    assert type(a) is type(b)
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.shape == y.shape and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


def simple_dicts(qrels_path: Path, run_path: Path) -> tuple[dict, dict]:
    """pytrec_eval dicts from a plain line-by-line reading, independent of jaxrank."""
    qrels: dict = {}
    for line in qrels_path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            q, _, d, r = line.split()
            qrels.setdefault(q, {})[d] = int(r)
    run: dict = {}
    for line in run_path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            q, _, d, _, s, *_ = line.split()
            run.setdefault(q, {})[d] = float(s)
    return qrels, run


def rows(batch: Batch) -> dict[str, list[str]]:
    return {q: [d.decode() for d in batch.docnos[i][batch.where[i]]] for i, q in enumerate(batch.qids)}


# ----------------------------------------------------------------------------- file format


def test_comments_and_blank_lines_are_ignored(tmp_path):
    noisy_qrels = "# header\n\n" + QRELS.replace("2 0 a 0\n", "2 0 a 0\n   \n  # indented\n")
    noisy_run = "#run\n" + RUN.replace("2 Q0 d", "\n\t\n# c o m m e n t\n2 Q0 d")
    expected = read_qrels(write(tmp_path, "q0", QRELS))
    assert_same(read_qrels(write(tmp_path, "q", noisy_qrels)), expected)
    assert_same(read_run(write(tmp_path, "r", noisy_run)), read_run(write(tmp_path, "r0", RUN)))


def test_a_comment_with_six_words_is_still_a_comment(tmp_path):
    text = RUN.replace("2 Q0 d", "# 1 Q0 a 1 9.9 x\n2 Q0 d")
    assert_same(read_run(write(tmp_path, "r", text)), read_run(write(tmp_path, "r0", RUN)))


def test_control_characters_other_than_whitespace_belong_to_fields(tmp_path):
    run = read_run(write(tmp_path, "r", b"1 Q0 a\x01b 1 1.0 t\n1 Q0 c\x1fd 2 0.5 t\n"))
    assert run.docnos.tolist() == [b"a\x01b", b"c\x1fd"]


def test_hash_inside_a_field_is_not_a_comment(tmp_path):
    qrels = read_qrels(write(tmp_path, "q", "1 0 CR#93 1\n1 0 d#2 0\n"))
    assert sorted(qrels.to_dict()["1"]) == ["CR#93", "d#2"]


def test_any_whitespace_separates_fields(tmp_path):
    spaced_qrels = QRELS.replace(" ", " \t  ").replace("\n", " \r\n")
    spaced_run = RUN.replace(" ", "\t\v\f ").rstrip("\n")  # and no final newline
    expected = read_qrels(write(tmp_path, "q0", QRELS))
    assert_same(read_qrels(write(tmp_path, "q", spaced_qrels)), expected)
    assert_same(read_run(write(tmp_path, "r", spaced_run)), read_run(write(tmp_path, "r0", RUN)))


def test_run_fields_after_the_tag_are_ignored(tmp_path):
    extra = RUN.replace("tagA\n", "tagA more junk\n")
    assert_same(read_run(write(tmp_path, "r", extra)), read_run(write(tmp_path, "r0", RUN)))


def test_run_tag_is_the_last_lines(tmp_path):
    assert read_run(write(tmp_path, "r", RUN)).tag == "tagB"


def test_scores_parse_exactly_as_floats(tmp_path):
    tokens = [
        "0.1",
        "16.1321",
        "-3.5",
        "+2",
        ".5",
        "7.",
        "1e-05",
        "-2.5E+3",
        "0.30000000000000004",
        "123456789012345678",
        "1.7976931348623157e308",
        "inf",
        "-inf",
        "12345678901234.5",
        "-0",
    ]
    text = "".join(f"q Q0 d{i} 0 {t} x\n" for i, t in enumerate(tokens))
    run = read_run(write(tmp_path, "r", text))
    got = dict(zip(run.docnos.astype(str).tolist(), run.scores.tolist()))
    assert got == {f"d{i}": float(t) for i, t in enumerate(tokens)}


def test_relevance_written_with_a_decimal_point_or_exponent_is_its_integer(tmp_path, monkeypatch):
    """trec_eval reads a relevance with ``atol``: these are the integers it reads them as."""
    tokens = {
        "1.0": 1,
        "2.00": 2,
        "-1.0": -1,
        "+3.": 3,
        ".0": 0,
        "-0.0": 0,
        "1e0": 1,
        "2.0E+0": 2,
        "7": 7,
        "-12.000": -12,
    }
    text = "".join(f"1 0 d{i} {t}\n" for i, t in enumerate(tokens))
    want = {f"d{i}": v for i, v in enumerate(tokens.values())}
    assert read_qrels(write(tmp_path, "q", text)).to_dict() == {"1": want}
    assert read_qrels({"1": {f"d{i}": t for i, t in enumerate(tokens)}}).to_dict() == {"1": want}
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", 16)  # one line a block: the row-by-row path too
    assert read_qrels(write(tmp_path, "q", text)).to_dict() == {"1": want}


def test_relevance_may_be_negative_and_is_kept(tmp_path):
    qrels = read_qrels(write(tmp_path, "q", "1 0 a -1\n1 0 b +2\n1 0 c 0\n1 0 d -12\n"))
    assert qrels.to_dict() == {"1": {"a": -1, "b": 2, "c": 0, "d": -12}}


def test_qids_sort_by_strcmp(tmp_path):
    text = "".join(f"{q} Q0 a 1 1 t\n" for q in ("9", "10", "2", "B", "a"))
    run = read_run(write(tmp_path, "r", text))
    assert run.qids.tolist() == ["10", "2", "9", "B", "a"]


def test_gzipped_files_are_read(tmp_path):
    path = tmp_path / "run.gz"
    with gzip.open(path, "wt") as f:
        f.write(RUN)
    assert_same(read_run(path), read_run(write(tmp_path, "r0", RUN)))


@pytest.mark.parametrize("block_bytes", [16, 37, 100])
def test_small_read_blocks_give_the_same_result(tmp_path, monkeypatch, block_bytes):
    # Lines longer than a block make the buffer grow.
    long_lines = "".join(f"5 Q0 {'D' * (100 * i)} 1 {i}.0 t\n" for i in range(1, 6))
    run_text = "# c\n" + RUN + long_lines + "\n" + RUN.replace("Q0 ", "Q0 x")
    qrels_text = QRELS + long_lines.replace("Q0", "0").replace(" 1 ", " ").replace(" t\n", "\n")
    qrels_text = "".join(line.rsplit(" ", 1)[0] + " 1\n" for line in qrels_text.splitlines())
    expected_run = read_run(write(tmp_path, "r", run_text))
    expected_qrels = read_qrels(write(tmp_path, "q", qrels_text))
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", block_bytes)
    assert_same(read_run(tmp_path / "r"), expected_run)
    assert_same(read_qrels(tmp_path / "q"), expected_qrels)


def reference_run(text: str) -> list[tuple[str, str, float]]:
    """(qid, docno, score) in trec_eval's order, by a plain line-by-line reading."""
    entries = []
    for line in text.splitlines():
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            entries.append((fields[0], fields[2], float(fields[4])))
    entries.sort(key=lambda e: e[1].encode(), reverse=True)  # docno descending, then stably:
    entries.sort(key=lambda e: -e[2])  # score descending
    entries.sort(key=lambda e: e[0].encode())  # qid ascending
    return entries


@pytest.mark.parametrize("seed", range(12))
def test_messy_random_files_read_like_a_plain_reader(tmp_path, monkeypatch, seed):
    rng = np.random.default_rng(seed)
    alphabet = list("abcXYZ019-_.#/")
    lines = []
    for q in rng.permutation(8)[: rng.integers(1, 8)]:
        n_docs = int(rng.integers(1, 40))
        names = {"".join(rng.choice(alphabet, size=rng.integers(1, 80))) for _ in range(n_docs)}
        scores = rng.choice([0.5, 1.0, 2.25, -3.0, 1e-7, 123456.125, 0.1], size=len(names))
        pairs = list(zip(sorted(names), scores))
        if seed % 2:  # ranked, as systems write runs (ties in any docno order)
            pairs.sort(key=lambda p: -p[1])
        for d, sc in pairs:
            sep = " " if rng.random() < 0.7 else str(rng.choice([" \t", "\t", "   "]))
            text = f"{sep.join([str(q), 'Q0', d, '0', repr(float(sc)), 'tag'])}"
            lines.append(text + (" extra" if rng.random() < 0.1 else ""))
            if rng.random() < 0.1:
                lines.append(str(rng.choice(["", "   ", "# note", "  # note 1 2 3 4 5"])))
    if seed % 3 == 0:
        rng.shuffle(lines)
    text = "\n".join(lines) + ("\n" if rng.random() < 0.5 else "")
    expected = reference_run(text)
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", int(rng.choice([32, 100, 1 << 22])))
    run = read_run(write(tmp_path, "r", text))
    got = [
        (q, d.decode(), sc)
        for q, s in zip(run.qids.tolist(), range(len(run)))
        for d, sc in zip(
            run.docnos[run.offsets[s] : run.offsets[s + 1]].tolist(),
            run.scores[run.offsets[s] : run.offsets[s + 1]].tolist(),
        )
    ]
    assert got == expected


@pytest.mark.parametrize("kept_bits", [0, 2, 7])
def test_hash_collisions_change_nothing_that_is_read_or_matched(tmp_path, monkeypatch, kept_bits):
    # Hashes only propose groups and matches. With all but the top kept_bits of every hash
    # dropped, qids and docnos collide all the time: every step must confirm on the bytes.
    rng = np.random.default_rng(kept_bits)
    qrels_lines, run_lines = [QRELS], [RUN]
    for q in range(5, 25):
        docs = [f"d{rng.integers(0, 10 ** rng.integers(1, 12))}-{i}" for i in range(int(rng.integers(1, 40)))]
        run_lines += [f"{q} Q0 {d} 0 {rng.choice([1.0, 0.5, 0.25])} t\n" for d in docs]
        qrels_lines += [f"{q} 0 {d} {rng.integers(-1, 3)}\n" for d in docs if rng.random() < 0.5]
        qrels_lines += [f"{q} 0 extra{j} 1\n" for j in range(int(rng.integers(0, 5)))]
    q_path = write(tmp_path, "q", "".join(qrels_lines))
    r_path = write(tmp_path, "r", "".join(run_lines))
    expected = (read_qrels(q_path), read_run(r_path))
    expected_batch = to_batch(*expected, complete=True)
    real = _parse._hash
    mask = np.uint64(((1 << kept_bits) - 1) << (64 - kept_bits)) if kept_bits else np.uint64(0)
    for module in (_parse, _join, files):  # every module that hashes
        monkeypatch.setattr(module, "_hash", lambda strings: real(strings) & mask)
    got = (read_qrels(q_path), read_run(r_path))
    assert got[0].to_dict() == expected[0].to_dict()  # its order within a query follows the hash
    assert_same(got[1], expected[1])
    batch = to_batch(*got, complete=True)
    for f in dataclasses.fields(batch):
        x, y = getattr(batch, f.name), getattr(expected_batch, f.name)
        if f.name.startswith("judgments"):  # in the qrels' order
            x, y = np.sort(x, axis=1), np.sort(y, axis=1)
        assert np.array_equal(x, y), f.name
    with pytest.raises(TrecFormatError, match="twice"):
        read_run(write(tmp_path, "d", "".join(run_lines) + "1 Q0 c 9 0.7 t\n"))
    with pytest.raises(TrecFormatError, match="twice"):
        read_qrels(write(tmp_path, "dq", "".join(qrels_lines) + "2 0 d 0\n"))


# ----------------------------------------------------------------------------- ordering


def test_ties_break_by_docno_descending_bytes(tmp_path):
    text = "q Q0 a 1 1.0 t\nq Q0 B 2 1.0 t\nq Q0 b 3 1.0 t\nq Q0 c 4 2.0 t\n"
    run = read_run(write(tmp_path, "r", text))
    assert run.docnos.astype(str).tolist() == ["c", "b", "a", "B"]


def test_tie_order_agrees_with_pytrec_eval():
    import pytrec_eval

    qrels = {"q": {"a": 1, "b": 0, "B": 0}}
    run = {"q": {"a": 1.0, "b": 1.0, "B": 1.0}}
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"P_1", "recip_rank"}).evaluate(run)["q"]
    batch = to_batch(read_qrels(qrels), read_run(run))
    first_relevant = int(np.argmax(batch.labels[0] >= 1)) + 1
    assert rows(batch)["q"] == ["b", "a", "B"]
    assert expected["recip_rank"] == 1 / first_relevant == 0.5
    assert expected["P_1"] == float(batch.labels[0, 0] >= 1) == 0.0


def test_ranked_files_with_ties_and_numeric_qid_order_are_reordered(tmp_path):
    # Queries in numeric order, each ranked, ties written in ascending docno order.
    text = "".join(
        f"{q} Q0 {d} {i} {s} t\n"
        for q in ("2", "10", "1")
        for i, (d, s) in enumerate([("z", 3.0), ("a", 2.0), ("b", 2.0), ("c", 2.0), ("y", 1.0)])
    )
    run = read_run(write(tmp_path, "r", text))
    assert run.qids.tolist() == ["1", "10", "2"]
    assert run.docnos.astype(str).tolist() == ["z", "c", "b", "a", "y"] * 3
    shuffled = "".join(sorted(text.splitlines(keepends=True)))  # not ranked: the general path
    assert_same(read_run(write(tmp_path, "r2", shuffled)), run)


def test_rank_field_and_line_order_do_not_matter(tmp_path):
    lines = RUN.splitlines(keepends=True)
    shuffled = "".join(lines[::-1]).replace(" 1 ", " 99 ")
    expected = dataclasses.replace(read_run(write(tmp_path, "r0", RUN)), tag="tagA")
    assert_same(read_run(write(tmp_path, "r", shuffled)), expected)


def test_ranking_matches_pytrec_eval_on_a_tied_random_run(tmp_path):
    import pytrec_eval

    rng = np.random.default_rng(3)
    qrels, run = {}, {}
    for q in range(30):
        docs = [f"d{rng.integers(1000)}" for _ in range(60)]
        run[str(q)] = {d: float(rng.integers(0, 5)) for d in docs}  # many ties
        qrels[str(q)] = {d: int(rng.integers(-1, 3)) for d in docs[::2] + ["unretrieved"]}
    measures = {"P_5", "P_10", "recip_rank", "num_rel_ret", "num_ret"}
    expected = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    batch = to_batch(read_qrels(qrels), read_run(run))
    relevant = batch.labels >= 1
    for i, q in enumerate(batch.qids.tolist()):
        first = np.flatnonzero(relevant[i])
        assert expected[q]["recip_rank"] == pytest.approx(1 / (first[0] + 1) if first.size else 0)
        assert expected[q]["P_5"] == pytest.approx(relevant[i, :5].sum() / 5)
        assert expected[q]["P_10"] == pytest.approx(relevant[i, :10].sum() / 10)
        assert expected[q]["num_rel_ret"] == relevant[i].sum()
        assert expected[q]["num_ret"] == batch.where[i].sum()


# ----------------------------------------------------------------------------- batches


@pytest.fixture
def small(tmp_path):
    return read_qrels(write(tmp_path, "q", QRELS)), read_run(write(tmp_path, "r", RUN))


def test_batch_holds_trec_eval_order_labels_and_padding(small):
    batch = to_batch(*small)
    assert batch.qids.tolist() == ["1", "2", "3"]  # 4 is not in the qrels: dropped
    assert rows(batch) == {"1": ["b", "c", "a", "e"], "2": ["d"], "3": ["x", "w", "y"]}
    assert batch.labels.tolist() == [[0, 2, 1, 0], [1, 0, 0, 0], [-1, 0, 1, 0]]
    assert batch.judged.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 1, 0]]
    assert batch.pooled.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0], [1, 0, 1, 0]]
    assert batch.where.sum(axis=1).tolist() == [4, 1, 3]
    assert batch.docnos[1, 1] == b"" and batch.scores[1, 1] == 0.0
    assert batch.scores[0].tolist() == [0.9, 0.5, 0.5, 0.1]
    assert batch.scores.dtype == np.float64 and batch.labels.dtype == np.int64


def test_judgments_hold_every_qrels_entry_retrieved_or_not(small):
    batch = to_batch(*small)
    judged = [sorted(batch.judgments[i][batch.judgments_where[i]].tolist()) for i in range(3)]
    assert judged == [[0, 1, 1, 2], [0, 1], [-1, 1]]
    assert batch.judgments.shape == (3, 4) and batch.judgments.dtype == np.int64


def test_complete_adds_qrels_queries_missing_from_the_run(tmp_path, small):
    qrels = read_qrels(write(tmp_path, "q2", QRELS + "0 0 k 1\n"))
    batch = to_batch(qrels, small[1], complete=True)
    assert batch.qids.tolist() == ["0", "1", "2", "3"]
    assert batch.where.sum(axis=1).tolist() == [0, 4, 1, 3]
    assert batch.judgments_where.sum(axis=1).tolist() == [1, 4, 2, 2]
    assert to_batch(qrels, small[1]).qids.tolist() == ["1", "2", "3"]


def test_max_docs_keeps_the_first_documents_in_trec_eval_order(small):
    batch = to_batch(*small, max_docs=2)
    assert rows(batch) == {"1": ["b", "c"], "2": ["d"], "3": ["x", "w"]}
    assert batch.scores.shape == (3, 2)
    assert to_batch(*small, max_docs=0).where.shape == (3, 1)


def test_judged_only_drops_documents_not_judged(small):
    batch = to_batch(*small, judged_only=True)
    # e is not in the qrels, w neither, x has a negative rel: trec_eval -J drops all three.
    assert rows(batch) == {"1": ["b", "c", "a"], "2": ["d"], "3": ["y"]}
    assert batch.judged[batch.where].all()


def test_judged_only_agrees_with_pytrec_eval():
    import pytrec_eval

    qrels_dict, run_dict = simple_dicts(TREC_EVAL / "qrels.test", TREC_EVAL / "results.test")
    measures = {"num_ret", "num_rel_ret", "P_10", "recip_rank"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels_dict, measures, judged_docs_only_flag=True)
    expected = evaluator.evaluate(run_dict)
    batch = to_batch(read_qrels(qrels_dict), read_run(run_dict), judged_only=True)
    relevant = batch.labels >= 1
    for i, q in enumerate(batch.qids.tolist()):
        assert expected[q]["num_ret"] == batch.where[i].sum() < 500
        assert expected[q]["num_rel_ret"] == relevant[i].sum()
        assert expected[q]["P_10"] == pytest.approx(relevant[i, :10].sum() / 10)
        assert expected[q]["recip_rank"] == pytest.approx(1 / (np.argmax(relevant[i]) + 1))


def test_judged_only_applies_after_max_docs_as_in_trec_eval(small):
    batch = to_batch(*small, max_docs=2, judged_only=True)
    assert rows(batch) == {"1": ["b", "c"], "2": ["d"], "3": []}


def test_batch_shapes_are_never_zero_width(tmp_path):
    qrels = read_qrels(write(tmp_path, "q", "1 0 a 1\n"))
    run = read_run(write(tmp_path, "r", "2 Q0 a 1 1 t\n"))
    batch = to_batch(qrels, run)
    assert batch.qids.size == 0 and batch.scores.shape == (0, 1) and batch.judgments.shape == (0, 1)
    assert to_batch(qrels, run, complete=True).scores.shape == (1, 1)


def test_arrays_are_read_only(small):
    batch = to_batch(*small)
    with pytest.raises(ValueError):
        batch.scores[0, 0] = 1.0
    with pytest.raises(ValueError):
        small[1].scores[0] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        small[0].rels = None


# ----------------------------------------------------------------------------- other inputs


def test_dicts_records_and_dataframes_give_the_same_batch_as_files(tmp_path, small):
    import ir_measures
    from ir_measures.util import Qrel, ScoredDoc

    qrels_dict, run_dict = simple_dicts(tmp_path / "q", tmp_path / "r")
    qrels_records = [Qrel(q, d, r) for q, docs in qrels_dict.items() for d, r in docs.items()]
    run_records = [ScoredDoc(q, d, s) for q, docs in run_dict.items() for d, s in docs.items()]
    expected = to_batch(*small)
    assert_same(to_batch(read_qrels(qrels_dict), read_run(run_dict)), expected)
    assert_same(to_batch(read_qrels(qrels_records), read_run(run_records)), expected)
    assert_same(
        to_batch(
            read_qrels(ir_measures.read_trec_qrels(str(tmp_path / "q"))),
            read_run(ir_measures.read_trec_run(str(tmp_path / "r"))),
        ),
        expected,
    )
    import pandas as pd

    qrels_df, run_df = pd.DataFrame(qrels_records), pd.DataFrame(run_records)
    assert_same(to_batch(read_qrels(qrels_df), read_run(run_df)), expected)


def test_to_dict_gives_back_pytrec_eval_dicts(tmp_path, small):
    qrels_dict, run_dict = simple_dicts(tmp_path / "q", tmp_path / "r")
    assert small[0].to_dict() == qrels_dict
    assert small[1].to_dict() == run_dict


def test_write_run_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.normal(size=40), [0.1 + 0.2, 1e-300, -0.0, 5.0, 5.0, 123456.789]])
    run = read_run({str(q): {f"d{q}-{i}": float(s) for i, s in enumerate(scores)} for q in (7, 10)})
    path = write_run(run, tmp_path / "out.run", tag="mine")
    back = read_run(path)
    assert_same(dataclasses.replace(back, tag=run.tag), run)
    assert back.tag == "mine"
    first = path.read_text().splitlines()[0].split()
    assert first[0] == "10" and first[1] == "Q0" and first[3] == "1" and first[5] == "mine"
    ranks = [int(line.split()[3]) for line in path.read_text().splitlines()]
    assert ranks == list(range(1, 47)) * 2


def test_write_run_rejects_a_tag_with_spaces(tmp_path, small):
    with pytest.raises(ValueError):
        write_run(small[1], tmp_path / "x", tag="two words")


# ----------------------------------------------------------------------------- errors


ERRORS = [
    ("run.txt", "run", "1 Q0 a 1 x t\n1 Q0 b 2 0.5\n", 1, "score is not a number"),
    ("run.txt", "run", "1 Q0 a 1 1 t\n1 Q0 b 2 z t\n1 Q0 \x00 2 1 t\n", 2, "score is not a number"),
    ("run.txt", "run", "1 Q0 a 1 1 t\n1 Q0 \x00 2 1 t\n1 Q0 c 3\n", 2, "NUL"),
    ("run.txt", "run", "1 Q0 a 1 1.0 t\n\n1 Q0 b 2 0.5\n", 3, "expected 6 fields"),
    ("run.txt", "run", "# c\n1 Q0 a 1 high t\n", 2, "score is not a number"),
    ("run.txt", "run", "1 Q0 a 1 1_0 t\n", 1, "score is not a number"),
    ("run.txt", "run", "1 Q0 a 1 1 t\n1 Q0 b 2 1 t\n# x\n1 Q0 a 3 0 t\n", 4, "lines 1 and 4"),
    ("qrels.txt", "qrels", "1 0 a 1\n1 0 b\n", 2, "expected 4 fields"),
    ("qrels.txt", "qrels", "1 0 a 1\n1 0 b 1 extra\n", 2, "expected 4 fields"),
    ("qrels.txt", "qrels", "1 0 a 1.5\n", 1, "relevance is not an integer"),
    ("qrels.txt", "qrels", "1 0 a yes\n", 1, "relevance is not an integer"),
    (
        "qrels.txt",
        "qrels",
        "1 0 a 1\n1 0 b 0.5\n",
        2,
        "not an integer: '0.5' (trec_eval would read only its leading integer, 0)",
    ),
    (
        "qrels.txt",
        "qrels",
        "1 0 a 1e1\n",
        1,
        "not an integer: '1e1' (trec_eval would read only its leading integer, 1)",
    ),
    ("qrels.txt", "qrels", "1 0 a 10e-1\n", 1, "leading integer, 10)"),
    ("qrels.txt", "qrels", "1 0 a 1.00000000000000000001\n", 1, "relevance is not an integer"),
    ("qrels.txt", "qrels", "1 0 a -2.5\n", 1, "leading integer, -2)"),
    ("run.txt", "run", "1 Q0 a 1 1 t\n1 Q0 b 2 -inf t\n1 Q0 c 3 nan t\n1 Q0 d 4 NaN t\n", 3, "score is NaN"),
    ("qrels.txt", "qrels", "1 0 a 1\n2 0 a 1\n\n1 0 a 0\n", 4, "lines 1 and 4"),
    ("qrels.txt", "qrels", "1 0 a\x00 1\n", 1, "NUL"),
    ("run.txt", "run", "", 1, "no data lines"),
    ("run.txt", "run", "# only a comment\n\n", 1, "no data lines"),
    ("qrels.txt", "qrels", "", 1, "no data lines"),
]


@pytest.mark.parametrize("name, kind, text, line, words", ERRORS)
def test_malformed_input_names_the_file_and_line(tmp_path, name, kind, text, line, words):
    path = write(tmp_path, name, text)
    with pytest.raises(TrecFormatError) as info:
        (read_run if kind == "run" else read_qrels)(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ") and words in message
    assert "\n" not in message and info.value.line == line
    assert isinstance(info.value, ValueError)


def test_errors_in_later_blocks_have_the_right_line_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", 64)
    good = "".join(f"{q} Q0 d{i} {i} {i}.5 t\n" for q in range(5) for i in range(20))
    path = write(tmp_path, "big.run", "# head\n" + good + "3 Q0 d7 1 1.0 t\n")
    with pytest.raises(TrecFormatError, match=r"big.run:102: .*'d7'.*'3'.*lines 69 and 102"):
        read_run(path)
    path = write(tmp_path, "bad.run", good + "1 Q0 x 1 oops t\n")
    with pytest.raises(TrecFormatError, match=r"bad.run:101: score is not a number: 'oops'"):
        read_run(path)


def test_missing_file_is_a_trec_format_error(tmp_path):
    with pytest.raises(TrecFormatError, match=r"nope.run: cannot open file"):
        read_run(tmp_path / "nope.run")
    with pytest.raises(TrecFormatError, match="directory"):
        read_qrels(tmp_path)


def test_bad_python_inputs_raise_clear_errors():
    with pytest.raises(TrecFormatError, match=r"<dict>: score is not a number: 'x'"):
        read_run({"q": {"d": "x"}})
    with pytest.raises(TrecFormatError, match=r"<dict>: relevance is not an integer: 0.5"):
        read_qrels({"q": {"d": 0.5}})
    with pytest.raises(TrecFormatError, match=r"<dict>: relevance is not an integer: '1.5'"):
        read_qrels({"q": {"d": "1.5"}})
    with pytest.raises(TrecFormatError, match=r"<dict>: score is NaN"):
        read_run({"q": {"d": 1.0, "e": float("nan")}})
    record = collections.namedtuple("ScoredDoc", "query_id doc_id score")
    with pytest.raises(TrecFormatError, match=r"<records>:2: expected query_id"):
        read_run([record("q", "d", 1.0), 3])
    with pytest.raises(TrecFormatError, match=r"<records>:2: score is NaN"):
        read_run([record("q", "d", 1.0), record("q", "e", "nan")])
    with pytest.raises(TypeError):
        read_run(3.5)


# ----------------------------------------------------------------------------- reference data


def per_query(out_file: Path, measure: str) -> dict[str, float]:
    values = {}
    for line in out_file.read_text().splitlines():
        name, qid, value = line.split()
        if name == measure and qid != "all":
            values[qid] = float(value)
    return values


def counts(batch: Batch) -> dict[str, dict[str, int]]:
    relevant = (batch.judgments >= 1) & batch.judgments_where
    return {
        "num_ret": dict(zip(batch.qids.tolist(), batch.where.sum(axis=1).tolist())),
        "num_rel": dict(zip(batch.qids.tolist(), relevant.sum(axis=1).tolist())),
        "num_rel_ret": dict(zip(batch.qids.tolist(), (batch.labels >= 1).sum(axis=1).tolist())),
    }


@pytest.mark.parametrize("qrels_name", ["qrels.test", "qrels.rel_level"])
@pytest.mark.parametrize("run_name", ["results.test", "results.trunc"])
def test_reference_files_count_like_pytrec_eval(qrels_name, run_name):
    import pytrec_eval

    qrels_dict, run_dict = simple_dicts(TREC_EVAL / qrels_name, TREC_EVAL / run_name)
    measures = {"num_ret", "num_rel", "num_rel_ret", "recip_rank", "P_10", "P_100"}
    expected = pytrec_eval.RelevanceEvaluator(qrels_dict, measures).evaluate(run_dict)
    batch = to_batch(read_qrels(TREC_EVAL / qrels_name), read_run(TREC_EVAL / run_name))
    got = counts(batch)
    relevant = batch.labels >= 1
    assert sorted(expected) == batch.qids.tolist()
    for i, q in enumerate(batch.qids.tolist()):
        for m in ("num_ret", "num_rel", "num_rel_ret"):
            assert got[m][q] == expected[q][m], (q, m)
        first = np.flatnonzero(relevant[i])
        assert expected[q]["recip_rank"] == pytest.approx(1 / (first[0] + 1) if first.size else 0)
        assert expected[q]["P_10"] == pytest.approx(relevant[i, :10].sum() / 10)
        assert expected[q]["P_100"] == pytest.approx(relevant[i, :100].sum() / 100)


@pytest.mark.parametrize(
    "out_name, run_name, options",
    [
        ("out.test.aq", "results.test", {}),
        ("out.test.aqc", "results.trunc", {"complete": True}),
        ("out.test.aqcM", "results.trunc", {"complete": True, "max_docs": 100}),
    ],
)
def test_reference_files_count_and_rank_like_trec_eval_output(out_name, run_name, options):
    qrels, run = read_qrels(TREC_EVAL / "qrels.test"), read_run(TREC_EVAL / run_name)
    batch = to_batch(qrels, run, **options)
    got = counts(batch)
    for measure in ("num_ret", "num_rel", "num_rel_ret"):
        assert got[measure] == per_query(TREC_EVAL / out_name, measure), measure
    # Measures that depend on the order of the documents, as trec_eval printed them.
    relevant = batch.labels >= 1
    first = np.where(relevant.any(axis=1), np.argmax(relevant, axis=1) + 1, np.inf)
    printed = {"recip_rank": dict(zip(batch.qids.tolist(), 1 / first))}
    for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000):
        printed[f"P_{k}"] = dict(zip(batch.qids.tolist(), relevant[:, :k].sum(axis=1) / k))
    for measure, values in printed.items():
        expected = per_query(TREC_EVAL / out_name, measure)
        assert {q: f"{v:.4f}" for q, v in values.items()} == {q: f"{v:.4f}" for q, v in expected.items()}


def test_qrels_with_comments_read_like_qrels_test():
    plain = read_qrels(TREC_EVAL / "qrels.test").to_dict()
    commented = read_qrels(TREC_EVAL / "qrels.test.with-comments").to_dict()
    # The commented copy also renames one docno, to show '#' inside a field is no comment.
    assert commented["301"].pop("CR#93E-1860") == plain["301"].pop("CR93E-1860")
    assert commented == plain


def test_reference_run_keeps_its_tag_and_size():
    run = read_run(TREC_EVAL / "results.trunc")
    assert run.tag == "STANDARD" and len(run) == 2 and run.docnos.size == 584
    assert np.all(np.diff(run.scores[: run.offsets[1]]) <= 0)


# ----------------------------------------------------------------------------- generated data


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_trec", ROOT / "benchmarks" / "gen_trec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_evaluate_like_pytrec_eval(tmp_path):
    import pytrec_eval

    gen = load_generator()
    run_path = gen.generate_run(tmp_path / "g.run", n_queries=40, n_docs=150, seed=1)
    qrels_path = gen.generate_qrels(tmp_path / "g.qrels", 40, 60, seed=1, n_docs=150, unjudged=0.1)
    qrels_dict, run_dict = simple_dicts(qrels_path, run_path)
    measures = {"num_ret", "num_rel", "num_rel_ret", "recip_rank", "P_20"}
    expected = pytrec_eval.RelevanceEvaluator(qrels_dict, measures).evaluate(run_dict)
    batch = to_batch(read_qrels(qrels_path), read_run(run_path))
    got = counts(batch)
    relevant = batch.labels >= 1
    assert len(batch.qids) == 40 and batch.scores.shape == (40, 150)
    for i, q in enumerate(batch.qids.tolist()):
        assert got["num_rel_ret"][q] == expected[q]["num_rel_ret"] > 0
        assert got["num_rel"][q] == expected[q]["num_rel"]
        assert expected[q]["P_20"] == pytest.approx(relevant[i, :20].sum() / 20)
        first = np.flatnonzero(relevant[i])
        assert expected[q]["recip_rank"] == pytest.approx(1 / (first[0] + 1))


def test_demo_files_ship_with_the_package():
    qrels_path, run_path = demo_paths()
    qrels, run = read_qrels(qrels_path), read_run(run_path)
    assert qrels.qids.tolist() == ["q1", "q2", "q3", "q4"]
    assert run.qids.tolist() == ["q1", "q2", "q3"]
    batch = to_batch(qrels, run, complete=True)
    assert batch.where.sum(axis=1).tolist() == [60, 80, 50, 0]
    assert (batch.labels < 0).any() and (batch.labels >= 2).any()


# ----------------------------------------------------------------------------- runs in parts


def _parts_text(rng: np.random.Generator) -> str:
    lines = []
    for q in rng.permutation(40):
        for i in range(int(rng.integers(1, 30))):
            lines.append(f"q{q} Q0 d{rng.integers(10**6)}x{i} {i} {rng.integers(-3, 4) / 2} t{q}\n")
    return "".join(lines)


@pytest.mark.parametrize("part_lines, block_bytes", [(1, 64), (7, 100), (50, 1000), (10**6, 1 << 22)])
def test_run_parts_together_are_the_run(tmp_path, monkeypatch, part_lines, block_bytes):
    path = write(tmp_path, "r", _parts_text(np.random.default_rng(part_lines)))
    whole = read_run(path)
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(files, "_PART_LINES", part_lines)
    parts = list(files._run_parts(path))
    assert len(parts) == 1 if part_lines == 10**6 else 10 < len(parts) <= 40
    order = np.argsort(np.concatenate([p.qids for p in parts]))
    joined = collections.ChainMap(*[p.to_dict() for p in parts])
    assert dict(joined) == whole.to_dict() and parts[-1].tag == whole.tag
    for p in parts:  # each part holds the whole of its queries, in trec_eval's order
        for q, s in files._per_query(p.qids, p.offsets):
            i = int(np.flatnonzero(whole.qids == q)[0])
            assert p.docnos[s].tolist() == whole.docnos[whole.offsets[i] : whole.offsets[i + 1]].tolist()
    assert order.size == len(whole)


def test_run_parts_refuse_a_scattered_query_and_evaluate_reads_it_whole(tmp_path, monkeypatch):
    text = _parts_text(np.random.default_rng(3))
    lines = text.splitlines(keepends=True)
    scattered = "".join(lines[1:] + lines[:1])  # the first query's first line moved to the end
    path = write(tmp_path, "r", scattered)
    qrels = {f"q{q}": {f"d{d}x{i}": 1 for d in range(3) for i in range(3)} for q in range(40)}
    monkeypatch.setattr(files, "_PART_LINES", 10)
    with pytest.raises(files._Scattered):
        list(files._run_parts(path))
    from jaxrank.trec.evaluate import report

    want = report(qrels, read_run(path), ["all_trec"]).to_trec(per_query=True)
    assert report(qrels, path, ["all_trec"]).to_trec(per_query=True) == want


PART_ERRORS = [  # (lines, line named, words): the whole-file reader's precedence
    (["q1 Q0 a 1 1 t", "q1 Q0 a 2 0 t", "q2 Q0 b 1 1 t", "q3 Q0 c 1 x t"], 4, "score is not a number"),
    (["q1 Q0 a 1 1 t", "q1 Q0 a 2 0 t", "q2 Q0 b 1 1 t", "q3 Q0 c 1 nan t"], 4, "score is NaN"),
    (["q1 Q0 a 1 1 t", "q2 Q0 b 1 nan t", "q3 Q0 c 1 nan t", "q3 Q0 c 2 1 t"], 2, "score is NaN"),
    (["q1 Q0 a 1 1 t", "q2 Q0 b 1 1 t", "q2 Q0 b 2 1 t", "q3 Q0 c 1 1 t", "q3 Q0 c 1 1 t"], 3, "lines 2 and 3"),
]


@pytest.mark.parametrize("lines, line, words", PART_ERRORS)
def test_run_parts_raise_what_read_run_raises(tmp_path, monkeypatch, lines, line, words):
    path = write(tmp_path, "r", "\n".join(lines) + "\n")
    with pytest.raises(TrecFormatError) as whole:
        read_run(path)
    monkeypatch.setattr(files, "_PART_LINES", 1)
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", 16)
    with pytest.raises(TrecFormatError) as parts:
        list(files._run_parts(path))
    assert str(parts.value) == str(whole.value)
    assert whole.value.line == line and words in str(whole.value)


# ----------------------------------------------------------------------------- evaluation while reading


def _stream_case(rng: np.random.Generator, queries: int, depth: int, deeper: Optional[int] = None):
    run, qrels = [], {}
    for at, q in enumerate(rng.permutation(queries)):  # not the qrels' order
        n = deeper if (deeper is not None and at == queries - 3) else depth
        docs = [f"d{rng.integers(3 * depth)}x{i}" for i in range(n)]
        run += [f"q{q:03d} Q0 {d} {i} {rng.integers(-3, 4) / 2} t\n" for i, d in enumerate(docs)]
        judged = docs[::3] if at >= 20 else []  # the first 20 queries: no retrieved document judged
        qrels[f"q{q:03d}"] = {d: int(rng.integers(0, 3)) for d in judged + [f"extra{q}"]}
    return qrels, "".join(run)


@pytest.mark.parametrize(
    "deeper, judged_only",
    [(None, False), (None, True), (60, False)],
    ids=["stream", "stream-judged-only", "a-deeper-query-stops-the-stream"],
)
def test_evaluating_parts_while_reading_equals_evaluating_after(tmp_path, monkeypatch, deeper, judged_only):
    """``jaxrank eval`` evaluates whole slices of queries while the next part of the run is read
    (evaluate._Stream); the values and their order are those of the evaluation after reading."""
    from jaxrank import cli
    from jaxrank.measures import engine

    evaluate = importlib.import_module("jaxrank.trec.evaluate")  # the module, not the function

    qrels, text = _stream_case(np.random.default_rng(0), queries=70, depth=20, deeper=deeper)
    path = write(tmp_path, "r", text)
    monkeypatch.setattr(files, "_PART_LINES", 50)  # parts of 2-3 queries
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", 1000)
    monkeypatch.setattr(engine, "_CELLS_PER_CALL", 8 * 32)  # slices of 8 queries
    monkeypatch.setattr(cli, "_PEEK_BYTES", 2000)  # the guess sees the first queries, not the deeper one
    streamed = []
    finish = evaluate._Stream.finish
    monkeypatch.setattr(evaluate._Stream, "finish", lambda self: streamed.append(finish(self)) or streamed[-1])
    measures = ["all_trec", "P.5,10", "ndcg_cut.5", "success.1"]
    want = evaluate.report(qrels, read_run(path), measures, judged_only=judged_only).to_trec(per_query=True)
    got = evaluate.report(
        qrels,
        path,
        measures,
        judged_only=judged_only,
        before_run=lambda plan, q: cli._speculate(plan, q, path, max_docs=None),
    )
    assert got.to_trec(per_query=True) == want
    assert len(streamed) == 1 and (streamed[0] is None) == (deeper is not None)


def test_an_error_in_a_later_part_stops_the_stream_and_is_raised(tmp_path, monkeypatch):
    from jaxrank import cli
    from jaxrank.measures import engine

    evaluate = importlib.import_module("jaxrank.trec.evaluate")  # the module, not the function

    qrels, text = _stream_case(np.random.default_rng(1), queries=40, depth=20)
    path = write(tmp_path, "r", text + "q999 Q0 dz 1 nan t\n")
    monkeypatch.setattr(files, "_PART_LINES", 50)
    monkeypatch.setattr(_parse, "_BLOCK_BYTES", 1000)
    monkeypatch.setattr(engine, "_CELLS_PER_CALL", 8 * 32)
    # no executable of an earlier test: it could be reused at more rows than the 40 queries,
    # and then no slice would be under way when the error comes
    monkeypatch.setattr(engine, "_EXECUTABLES", collections.OrderedDict())
    stopped = []
    stop = evaluate._Stream.stop
    monkeypatch.setattr(evaluate._Stream, "stop", lambda self: stopped.append(self.jobs[:]) or stop(self))
    with pytest.raises(TrecFormatError, match="score is NaN") as error:
        evaluate.report(
            qrels,
            path,
            ["all_trec"],
            before_run=lambda plan, q: cli._speculate(plan, q, path, max_docs=None),
        )
    assert error.value.line == 801
    assert len(stopped) == 1 and stopped[0]  # slices were under way when the error came
