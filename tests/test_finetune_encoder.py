"""examples/finetune_encoder.py: the quick run (a tiny random-weight encoder of
examples/sentence_encoder.py's code, a WordPiece vocabulary built from Cranfield) fine-tunes
with the default retrieval loss and ends above where it started, measured by trec_eval's
numbers through the accumulator."""

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import finetune_encoder as fe  # noqa: E402
import train_retriever as tr  # noqa: E402


def test_tiny_tokenizer_is_bert_shaped():
    tok = fe.tiny_tokenizer(["Boundary layers in hypersonic flow.", "Shock waves and boundary layers."], 60, 8)
    ids = tok.encode("boundary layers of shock waves in a hypersonic flow").ids
    assert tok.token_to_id("[PAD]") == 0 and len(ids) == 8
    assert ids[0] == tok.token_to_id("[CLS]") and ids[-1] == tok.token_to_id("[SEP]")
    data, _ = tr.load(tr.DEFAULT_DATA)
    queries, docs = fe.token_arrays(tok, data, 5, 8)
    assert queries.shape == (225, 5) and docs.shape == (1400, 8) and docs.dtype == np.int32
    assert (docs[:, 0] == tok.token_to_id("[CLS]")).all()


def test_tiny_tokenizer_is_the_same_every_time():
    # tokenizers' own WordPiece trainer gave another vocabulary on each call (its hash maps'
    # order), and with it another quick run, sometimes one whose R@100 fell
    data, _ = tr.load(tr.DEFAULT_DATA)
    texts = data.documents() + data.queries
    first, second = (fe.tiny_tokenizer(texts, fe.TINY.vocab_size, 64).get_vocab() for _ in range(2))
    assert first == second and len(first) == fe.TINY.vocab_size
    tokens = fe.tiny_tokenizer(texts, fe.TINY.vocab_size, 16).encode("boundary layerxq").tokens
    assert tokens == ["[CLS]", "boundary", "layer", "##x", "##q", "[SEP]"]  # frequent words whole, the rest in pieces


def test_quick_run_learns(capsys):
    out = fe.main(["--quick"])
    printed = capsys.readouterr().out
    assert "| before |" in printed and "nothing else passed" in printed
    result = out["result"]
    assert [s for s, _ in result.history] == [0, 10, 20, 30] and np.isfinite(result.losses).all()
    assert result.losses[-1] < result.losses[0]
    for m in tr.MEASURES:
        assert 0 <= out["before"][m] <= 1 and 0 <= out["after"][m] <= 1
    assert out["after"]["nDCG@10"] > out["before"]["nDCG@10"]
    assert out["after"]["R@100"] > out["before"]["R@100"]
