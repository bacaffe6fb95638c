#!/usr/bin/env python
"""Training a dense retriever with Flax: a ``flax.nnx`` dual encoder, the retrieval loss,
hard negatives mined with :func:`jaxrank.retrieval.search`, evaluation streamed through
:func:`jaxrank.accumulator`.

Data: a collection in BEIR's layout (``--data DIR``: ``corpus.jsonl``, ``queries.jsonl``,
``qrels/<split>.tsv``), read by :func:`jaxrank.datasets.read_beir`; by default the Cranfield
collection (1400 aeronautics abstracts, 225 queries, graded qrels; ``tests/data/cranfield``,
origin in ``tests/data/README.md``), read by :func:`load_cranfield` into the same structure.
``benchmarks/beir_layout.py`` writes Cranfield and other public collections in BEIR's layout.
With ``qrels/train.tsv`` beside ``qrels/test.tsv`` (SciFact's split), the test queries are
``test.tsv``'s and the training queries ``train.tsv``'s, a fixed 40/165 of which validate;
otherwise the judged queries are split once, with a fixed seed, in Cranfield's proportions:
125 training, 40 validation and 60 test queries of its 225. A query's relevant documents are
those of score > 0; the score is their gain. On Cranfield they are those of grade 1-4 in
``cranqrel`` (Cleverdon's codes, 1 the most relevant), gain ``5 - code`` (4..1), and the 225
judgments of code ``-1`` are judged non-relevant (gain 0).

Model: one tower for queries and documents (a Siamese dual encoder). Each text (a
document's title and text) is its words and word bigrams, hashed (CRC-32) into ``2^bits``
buckets, whose embeddings are averaged, projected by a square matrix and L2-normalised; a
query's score for a document is the inner product. One tower, because with two towers
initialised apart a word in a query and the same word in a document start unrelated, and
125 training queries cannot teach that; with one, the untrained model is already a
(random-projection) bag-of-words matcher, and training reweights and relates its words.
Nothing is pretrained.

Training: each step takes ``--batch`` training queries (those with a relevant document); its
list of documents is every positive of those queries (the in-batch documents, relevant to
one query, negatives for the others) and ``--negatives`` hard negatives per query: the
current model's top documents for that query (``jaxrank.retrieval.search`` over the corpus)
that are not relevant to it, refreshed every ``--refresh`` steps. The loss is
:func:`jaxrank.losses.retrieval_loss` as an InfoNCE user calls it,
``retrieval_loss(q, D, positives, temperature=0.2)`` (``--temperature``) at its other
defaults, each query's positives and gains given by index
(:func:`jaxrank.positives`), averaged over the queries. Adam.

Evaluation: every ``--refresh`` steps the validation queries are searched (top 100 of the
corpus) and the model with the best validation nDCG@10 is kept; the test queries are
evaluated once, with that model. The retrieved ids are joined with the qrels
(:func:`jaxrank.retrieval.join`) and streamed, a chunk of queries at a time, through
:func:`jaxrank.accumulator`: nDCG@10 and R@100 with trec_eval's semantics (the ideal DCG
and the number of relevant documents from the qrels, retrieved or not;
``judgments=``). ``benchmarks/bench_retriever.py`` trains this encoder, and another, with
other losses on several collections (docs/reports/retriever.md).

Usage::

    python examples/train_retriever.py               # Cranfield, 300 steps, about 20 s on 2 cores
    python examples/train_retriever.py --quick       # 120 steps (the test's run)
    python examples/train_retriever.py --steps 800 --dim 128 --seed 1
    python examples/train_retriever.py --data beir-data/scifact   # any folder in BEIR's layout
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gzip
import re
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

try:
    import jaxrank
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import jaxrank
from jaxrank.datasets import Beir, read_beir
from jaxrank.retrieval import join, search

DEFAULT_DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "cranfield"
MEASURES = ("nDCG@10", "R@100")
SPLIT = (125, 40, 60)  # train, validation, test queries: Cranfield's; other collections in proportion
SPLIT_SEED = 0
DEPTH = 100  # documents retrieved per query for evaluation


# --- data -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Cranfield(Beir):
    """Cranfield as read, in the structure :func:`jaxrank.datasets.read_beir` returns.

    Document ``i`` is ``doc_ids[i] == str(i + 1)``, its text the ``.W`` field (which begins
    with the title: the titles are left empty). Query ``i`` is ``query_ids[i] == str(i + 1)``
    in ``cran.qry``'s order, the ordinal that ``cranqrel`` uses (not the ``.I`` number);
    ``qrels`` are ``{query id: {docno: gain}}``, gain ``5 - code`` for codes 1-4, 0 for -1.
    ``numbers``: the ``.I`` number of each query in ``cran.qry`` (001..365, with gaps), kept
    for reference only.
    """

    numbers: list[str] = dataclasses.field(default_factory=list)


def smart_records(path: Path) -> list[dict[str, str]]:
    """The ``.I``-delimited records of a SMART-format file (gzipped or not):
    ``{"I": id, "T": ..., "W": ...}``, each field's lines joined; a field is a line holding
    ``.X`` alone (X a capital letter)."""
    records: list[dict[str, str]] = []
    field = None
    opened = gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")
    with opened as f:  # universal newlines: some files are CRLF
        for line in f:
            line = line.rstrip("\n")
            if line.startswith(".I "):
                records.append({"I": line[3:].strip()})
                field = None
            elif re.fullmatch(r"\.[A-Z]\s*", line):
                field = line[1]
                records[-1][field] = ""
            elif field is not None:
                records[-1][field] += line + "\n"
    return records


def gain(code: int) -> int:
    """Cleverdon's relevance code (1 a complete answer .. 4 of minimum interest; -1 judged
    of no interest) as a gain: 4..1, and 0."""
    if code == -1:
        return 0
    if not 1 <= code <= 4:
        raise ValueError(f"cranqrel: unknown relevance code {code}")
    return 5 - code


def load_cranfield(data_dir: Path = DEFAULT_DATA) -> Cranfield:
    """Reads ``cran.all.1400.gz``, ``cran.qry.gz`` and ``cranqrel.gz`` from ``data_dir``.

    ``cran.qry`` numbers its 225 queries 001..365 with gaps, but ``cranqrel`` numbers them
    1..225 by their position in the file (the collection's well-known quirk; on the
    ``.I`` numbers, a query's relevant documents share a few times fewer words with it:
    tests/test_train_retriever.py). Queries are therefore named by position.
    """
    data_dir = Path(data_dir)
    docs = smart_records(data_dir / "cran.all.1400.gz")
    if [d["I"] for d in docs] != [str(i + 1) for i in range(len(docs))]:
        raise ValueError(f"{data_dir}: documents are not numbered 1..{len(docs)} in order")
    queries = smart_records(data_dir / "cran.qry.gz")
    qrels: dict[str, dict[str, int]] = {}
    with gzip.open(data_dir / "cranqrel.gz", "rt", encoding="ascii") as f:
        for line in f:
            if line.strip():
                qid, docno, code = line.split()
                qrels.setdefault(qid, {})[docno] = gain(int(code))
    if sorted(qrels, key=int) != [str(i + 1) for i in range(len(queries))]:
        raise ValueError(f"{data_dir}: cranqrel does not number the {len(queries)} queries 1..{len(queries)}")
    return Cranfield(
        doc_ids=[d["I"] for d in docs],
        titles=[""] * len(docs),
        texts=[d.get("W", "") for d in docs],
        query_ids=[str(i + 1) for i in range(len(queries))],
        queries=[q.get("W", "") for q in queries],
        qrels=qrels,
        numbers=[q["I"] for q in queries],
    )


def load_beir(folder: Path) -> tuple[Beir, Optional[np.ndarray]]:
    """A collection in BEIR's layout: ``qrels/test.tsv``'s queries and judgments, after
    ``qrels/train.tsv``'s when the folder has them. Returns it, and the positions of the test
    queries when there is a train split (None otherwise)."""
    test = read_beir(folder, "test")
    if not (Path(folder) / "qrels" / "train.tsv").is_file():
        return test, None
    train = read_beir(folder, "train")
    if set(train.query_ids) & set(test.query_ids):
        raise ValueError(f"{folder}: queries judged in both train.tsv and test.tsv")
    both = dataclasses.replace(
        test,
        query_ids=train.query_ids + test.query_ids,
        queries=train.queries + test.queries,
        qrels={**train.qrels, **test.qrels},
    )
    return both, np.arange(len(train.query_ids), len(both.query_ids))


def load(data_dir: Path) -> tuple[Beir, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The collection in ``data_dir`` (BEIR's layout, or Cranfield's files) and its fixed
    (train, validation, test) split of query positions: the collection's own test queries
    when it has a train split, else :func:`split_queries`'s."""
    data_dir = Path(data_dir)
    if not (data_dir / "corpus.jsonl").is_file():
        data = load_cranfield(data_dir)
        return data, split_queries(len(data.query_ids))
    data, test = load_beir(data_dir)
    if test is None:
        return data, split_queries(len(data.query_ids))
    pool = np.setdiff1d(np.arange(len(data.query_ids)), test)
    train, valid = split_queries(len(pool), proportions(len(pool), SPLIT[:2]))
    return data, (pool[train], pool[valid], test)


def proportions(n: int, parts: Sequence[int] = SPLIT) -> tuple[int, ...]:
    """``n`` cut in the proportions of ``parts`` (rounded; the first part takes the rest)."""
    rest = [round(n * p / sum(parts)) for p in parts[1:]]
    return (n - sum(rest), *rest)


def split_queries(n: int, sizes: Optional[Sequence[int]] = None, seed: int = SPLIT_SEED) -> tuple[np.ndarray, ...]:
    """A fixed random split of query positions ``0..n-1`` into parts of ``sizes`` (sorted;
    by default Cranfield's proportions, :data:`SPLIT`)."""
    sizes = proportions(n) if sizes is None else tuple(sizes)
    if sum(sizes) != n:
        raise ValueError(f"split sizes {sizes} must add up to the {n} queries")
    order = np.random.default_rng(seed).permutation(n)
    bounds = np.cumsum((0,) + sizes)
    return tuple(np.sort(order[a:b]) for a, b in zip(bounds[:-1], bounds[1:]))


def featurize(texts: Sequence[str], bits: int, length: int) -> np.ndarray:
    """Hashed words and word bigrams of each text, ``int32[n, length]``, 0 pads.

    Buckets are ``1 .. 2^bits - 1`` (CRC-32, the same in every process; Python's ``hash``
    is salted per process). A text longer than ``length`` features keeps its first
    ``(length + 1) // 2`` words and their bigrams.
    """
    out = np.zeros((len(texts), length), np.int32)
    buckets = (1 << bits) - 1
    for i, text in enumerate(texts):
        words = re.findall(r"[a-z0-9]+", text.lower())[: (length + 1) // 2]
        feats = words + [f"{a} {b}" for a, b in zip(words, words[1:])]
        ids = [zlib.crc32(f.encode()) % buckets + 1 for f in feats[:length]]
        out[i, : len(ids)] = ids
    return out


@dataclasses.dataclass(frozen=True)
class Judged:
    """Padded qrels of some queries for :func:`jaxrank.retrieval.join`: ``ids[Q, m]``
    (0-based document rows, ascending; -1 pads), ``gains[Q, m]``, ``m`` the most judgments of
    any query of the collection (one compiled evaluation for any set of its queries). In row
    order, the arrays do not depend on the order in which the qrels were read."""

    ids: np.ndarray
    gains: np.ndarray

    @classmethod
    def of(cls, data: Beir, queries: np.ndarray) -> Judged:
        row = {d: i for i, d in enumerate(data.doc_ids)}
        judged = [data.qrels[data.query_ids[q]] for q in queries]
        m = max(len(r) for r in data.qrels.values())
        ids, gains = np.full((len(judged), m), -1, np.int32), np.zeros((len(judged), m), np.int32)
        for i, r in enumerate(judged):
            rows, grades = zip(*sorted((row[d], g) for d, g in r.items()))
            ids[i, : len(r)], gains[i, : len(r)] = rows, grades
        return cls(ids, gains)

    def positives(self) -> list[np.ndarray]:
        """Each query's relevant rows (gain > 0), most relevant first."""
        out = []
        for ids, gains in zip(self.ids, self.gains):
            keep = gains > 0
            order = np.argsort(-gains[keep], kind="stable")
            out.append(np.stack([ids[keep][order], gains[keep][order]]))
        return out


# --- model ------------------------------------------------------------------------------
class Encoder(nnx.Module):
    """``ids[..., L] -> unit vectors [..., dim]``: mean of hashed-feature embeddings, a
    square projection, L2 normalisation. One instance encodes queries and documents."""

    def __init__(self, bits: int, dim: int, *, rngs: nnx.Rngs) -> None:
        self.embed = nnx.Embed(1 << bits, dim, embedding_init=nnx.initializers.normal(1.0), rngs=rngs)
        # No bias: a shared offset would make every pair of texts alike.
        self.proj = nnx.Linear(dim, dim, use_bias=False, kernel_init=nnx.initializers.orthogonal(), rngs=rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        mask = (ids > 0).astype(jnp.float32)
        weights = mask / jnp.maximum(mask.sum(-1, keepdims=True), 1.0)
        # The mean as a contraction: XLA:CPU differentiates it twice as fast as a masked sum.
        out = self.proj(jnp.einsum("...l,...ld->...d", weights, self.embed(ids)))
        # An empty text (two documents have none) stays the zero vector: score 0 with everything.
        return out * jax.lax.rsqrt(jnp.sum(out * out, -1, keepdims=True) + 1e-12)


@nnx.jit
def _encode(model: Encoder, ids: jax.Array) -> jax.Array:
    return model(ids)


def encode(model: Encoder, ids: np.ndarray, chunk: int = 256) -> jax.Array:
    """Embeddings of ``ids[n, L]`` a chunk at a time (padded: one compiled shape)."""
    n = ids.shape[0]
    pad = -n % chunk
    ids = np.concatenate([ids, np.zeros((pad, ids.shape[1]), ids.dtype)])
    return jnp.concatenate([_encode(model, ids[i : i + chunk]) for i in range(0, len(ids), chunk)])[:n]


# --- training ---------------------------------------------------------------------------
@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Batch:
    """One step's lists: ``queries[B, Lq]`` and ``docs[M, Ld]`` (token ids; padding rows are
    0), ``positives[B, R]`` (indices into the M documents, -1 pads), ``gains[B, R]``,
    ``doc_where[M]`` (the real documents); which they are: ``query_rows[B]`` (rows of the
    trainer's queries), ``doc_rows[M]`` (corpus rows, -1 pads); ``teacher[B, M]``, a frozen
    teacher's scores of the lists (0 on padding), when the trainer has a teacher."""

    queries: np.ndarray
    docs: np.ndarray
    positives: np.ndarray
    gains: np.ndarray
    doc_where: np.ndarray
    query_rows: np.ndarray
    doc_rows: np.ndarray
    teacher: Optional[np.ndarray] = None


#: ``loss(query_embeddings[B, d], doc_embeddings[M, d], positives[B, R], gains[B, R],
#: doc_where[M], *loss_args) -> scalar``.
LossFn = Callable[..., jax.Array]


def retrieval_loss(
    q: jax.Array, d: jax.Array, positives: jax.Array, gains: jax.Array, doc_where: jax.Array, temperature=None
):
    """Mean over queries of ``losses.retrieval_loss`` at its defaults, at InfoNCE's
    ``temperature`` when given (None: the one the lists' top gaps set)."""
    pos = jaxrank.positives(positives, gains)
    return jaxrank.losses.retrieval_loss(q, d, pos, where=doc_where, temperature=temperature).mean()


def _temperature(text: str) -> Optional[float]:
    if text == "top":
        return None
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive or 'top', got {text!r}")
    return value


@dataclasses.dataclass
class Trainer:
    """Batches of training queries with their positives and mined hard negatives.

    ``capacity`` (M) bounds any batch's documents: the ``batch`` largest positive counts of
    the collection's queries plus ``batch * negatives``, at most the corpus (a batch's
    documents are distinct: NFCorpus's 16 largest counts add up to 15,219 of its 3,633
    documents), so every step has one shape and compiles once, whichever queries train.
    ``teacher``: a frozen encoder's embeddings of every query and of the corpus
    (``[Q_all, d]``, ``[N, d]``); each batch then carries its scores of the batch's lists.
    """

    data: Beir
    queries: np.ndarray  # positions of the training queries
    query_ids: np.ndarray  # [Q, Lq] token ids of the training queries
    doc_ids: np.ndarray  # [N, Ld] token ids of the corpus
    batch: int
    negatives: int
    teacher: Optional[tuple[np.ndarray, np.ndarray]] = None

    def __post_init__(self) -> None:
        self.pos = Judged.of(self.data, self.queries).positives()
        every = Judged.of(self.data, np.arange(len(self.data.query_ids)))
        counts = (every.gains > 0).sum(1)
        self.width = int(counts.max())  # R
        bound = int(np.sort(counts)[-self.batch :].sum()) + self.batch * self.negatives
        self.capacity = min(bound, len(self.doc_ids))
        self.hard = np.zeros((len(self.queries), self.negatives), np.int64)

    def mine(self, model: Encoder, corpus: Optional[jax.Array] = None) -> None:
        """Each training query's top ``negatives`` documents under ``model`` that are not
        relevant to it (``search`` for ``negatives + R``, the relevant ones dropped)."""
        corpus = encode(model, self.doc_ids) if corpus is None else corpus
        _, top = search(encode(model, self.query_ids), corpus, k=self.negatives + self.width)
        top = np.asarray(top)
        for i, p in enumerate(self.pos):
            row = top[i][~np.isin(top[i], p[0])]
            self.hard[i] = row[: self.negatives]

    def sample(self, rng: np.random.Generator) -> Batch:
        """``batch`` distinct training queries; their documents are the union of their
        positives and hard negatives, so a document relevant to two of them is one row,
        a positive of each."""
        chosen = rng.choice(len(self.queries), self.batch, replace=False)
        docs = np.unique(np.concatenate([self.pos[i][0] for i in chosen] + [self.hard[chosen].ravel()]))
        rows = np.full(self.capacity, -1, np.int64)
        rows[: docs.size] = docs
        doc_where = rows >= 0
        positives = np.full((self.batch, self.width), -1, np.int32)
        gains = np.zeros((self.batch, self.width), np.int32)
        for b, i in enumerate(chosen):
            ids, g = self.pos[i]
            positives[b, : ids.size] = np.searchsorted(docs, ids)
            gains[b, : ids.size] = g
        doc_tokens = np.where(doc_where[:, None], self.doc_ids[np.maximum(rows, 0)], 0)
        teacher = None
        if self.teacher is not None:
            query_emb, doc_emb = self.teacher
            teacher = (query_emb[self.queries[chosen]] @ doc_emb[np.maximum(rows, 0)].T) * doc_where
        return Batch(self.query_ids[chosen], doc_tokens, positives, gains, doc_where, chosen, rows, teacher)


@nnx.jit(static_argnames="loss_fn")
def train_step(
    model: Encoder, optimizer: nnx.Optimizer, batch: Batch, loss_fn: LossFn, loss_args: tuple = ()
) -> jax.Array:
    """One Adam step on ``loss_fn`` of the batch's embeddings; ``loss_args`` (traced: a
    temperature) follow its five arguments, so that changing them does not recompile; the
    teacher's scores, when the batch has them, come as ``teacher=``."""

    def loss(m: Encoder) -> jax.Array:
        # Queries and documents through one call: on XLA:CPU two embedding lookups of one
        # table differentiate three times slower than one.
        length = batch.docs.shape[-1]
        queries = jnp.pad(batch.queries, ((0, 0), (0, length - batch.queries.shape[-1])))
        both = m(jnp.concatenate([queries, batch.docs]))
        n = batch.queries.shape[0]
        teacher = {} if batch.teacher is None else {"teacher": batch.teacher}
        return loss_fn(both[:n], both[n:], batch.positives, batch.gains, batch.doc_where, *loss_args, **teacher)

    value, grads = nnx.value_and_grad(loss)(model)
    optimizer.update(model, grads)
    return value


# --- evaluation -------------------------------------------------------------------------
ACC = jaxrank.accumulator(MEASURES)


@jax.jit
def _eval_chunk(state, q, corpus, judged_ids, judged_gains, query_where):
    scores, ids = search(q, corpus, k=DEPTH)
    labels, _ = join(ids, judged_ids, judged_gains)
    return ACC.update(
        state,
        scores,
        labels,
        where=ids >= 0,
        judgments=judged_gains,
        judgments_where=judged_ids >= 0,
        query_where=query_where,
    )


def evaluate(
    model: Encoder, query_ids: np.ndarray, judged: Judged, corpus: jax.Array, chunk: int = 32
) -> dict[str, float]:
    """nDCG@10 and R@100 of the queries ``query_ids`` (trec_eval's), the corpus searched
    for each, streamed through the accumulator ``chunk`` queries at a time (the last chunk
    padded with rows marked ``query_where=False``: one compiled shape)."""
    q = np.asarray(encode(model, query_ids))
    state = ACC.init()
    for start in range(0, q.shape[0], chunk):
        rows = np.arange(start, start + chunk)
        real = rows < q.shape[0]
        rows = np.where(real, rows, 0)
        state = _eval_chunk(state, q[rows], corpus, judged.ids[rows], judged.gains[rows], real)
    return {name: float(v) for name, v in ACC.compute(state).items()}


@functools.cache
def adam(lr: float) -> optax.GradientTransformation:
    """One optax transformation per learning rate: the optimizer holds it as a static part of
    the compiled step, compared by identity, so a new one would compile the step again."""
    return optax.adam(lr)


@dataclasses.dataclass
class Result:
    """What :func:`train` returns: the model of the best validation nDCG@10 (``best``), its
    step, and each evaluation ``(step, validation nDCG@10)``; the training losses."""

    best: Encoder
    best_step: int
    history: list[tuple[int, float]]
    losses: list[float]
    seconds: float


def train(
    data: Beir,
    splits: tuple[np.ndarray, np.ndarray, np.ndarray],
    *,
    loss_fn: LossFn = retrieval_loss,
    loss_args: tuple = (),
    steps: int = 300,
    batch: int = 16,
    negatives: int = 8,
    refresh: int = 25,
    lr: float = 1e-2,
    bits: int = 16,
    dim: int = 64,
    doc_length: int = 256,
    seed: int = 0,
    tokens: Optional[tuple[np.ndarray, np.ndarray]] = None,
    model_type: Callable[..., nnx.Module] = Encoder,
    teacher: Optional[tuple[np.ndarray, np.ndarray]] = None,
) -> Result:
    """Trains a ``model_type(bits, dim, rngs=...)`` (an :class:`Encoder`) on the training
    queries of ``splits`` that have a relevant document, with ``loss_fn`` (its extra
    arguments ``loss_args``).

    Every ``refresh`` steps (and before the first), the corpus is encoded once: the
    validation queries are evaluated on it and the hard negatives mined from it. The model
    of the best validation nDCG@10 is kept (the earliest on a tie). ``tokens``: the
    featurized ``(queries, docs)``, when the caller already has them. ``teacher``: a frozen
    encoder's embeddings of every query and document, whose scores of each batch's lists reach
    ``loss_fn`` as ``teacher=`` (:class:`Trainer`).
    """
    start = time.perf_counter()
    train_q, valid_q, _ = splits
    train_q = train_q[(Judged.of(data, train_q).gains > 0).any(1)]
    if len(train_q) < batch:
        raise ValueError(f"{len(train_q)} training queries with a relevant document: fewer than a batch of {batch}")
    query_tokens, doc_tokens = tokens if tokens is not None else featurize_all(data, bits, doc_length)
    trainer = Trainer(data, train_q, query_tokens[train_q], doc_tokens, batch, negatives, teacher)
    valid = Judged.of(data, valid_q)
    model = model_type(bits, dim, rngs=nnx.Rngs(seed))
    optimizer = nnx.Optimizer(model, adam(lr), wrt=nnx.Param)
    rng = np.random.default_rng(seed)
    history: list[tuple[int, float]] = []
    losses: list[float] = []
    best, best_step, best_value = nnx.clone(model), 0, -np.inf
    for step in range(steps + 1):
        if step % refresh == 0 or step == steps:
            corpus = encode(model, doc_tokens)
            value = evaluate(model, query_tokens[valid_q], valid, corpus)["nDCG@10"]
            history.append((step, value))
            if value > best_value:
                best, best_step, best_value = nnx.clone(model), step, value
            if step == steps:
                break
            trainer.mine(model, corpus)
        losses.append(float(train_step(model, optimizer, trainer.sample(rng), loss_fn, loss_args)))
    return Result(best, best_step, history, losses, time.perf_counter() - start)


def train_with(
    args: argparse.Namespace,
    data: Beir,
    splits: tuple[np.ndarray, np.ndarray, np.ndarray],
    tokens: tuple[np.ndarray, np.ndarray],
    **model,
) -> Result:
    """:func:`train` with the options this script and ``finetune_encoder.py`` share
    (``--steps``, ``--batch``, ``--negatives``, ``--refresh``, ``--lr``, ``--doc-length``,
    ``--seed``); ``model``: train's other keywords (``bits``, ``dim``, ``model_type``, ...)."""
    return train(
        data,
        splits,
        steps=args.steps,
        batch=args.batch,
        negatives=args.negatives,
        refresh=args.refresh,
        lr=args.lr,
        doc_length=args.doc_length,
        seed=args.seed,
        tokens=tokens,
        **model,
    )


def report(
    args: argparse.Namespace,
    title: str,
    data: Beir,
    splits: tuple[np.ndarray, np.ndarray, np.ndarray],
    tokens: tuple[np.ndarray, np.ndarray],
    result: Result,
    start: nnx.Module,
    *,
    loss: str,
    labels: tuple[str, str],
    model: str = "",
) -> tuple[dict[str, float], dict[str, float]]:
    """Measures ``start`` (the model before training) and ``result.best`` on the test
    queries (``splits[2]``) and prints the run: a line on the collection (``title``), the
    ``model``'s name if given, and the training; the validation history; ``loss``; the test
    table, its two rows named ``labels``. Returns the two models' measures."""
    test_q = splits[2]
    test = Judged.of(data, test_q)
    before = evaluate(start, tokens[0][test_q], test, encode(start, tokens[1]))
    after = evaluate(result.best, tokens[0][test_q], test, encode(result.best, tokens[1]))

    sizes = "/".join(str(len(s)) for s in splits)
    print(
        f"{title}: {len(data.doc_ids)} documents, queries {sizes} (train/validation/test); "
        + (f"{model}; " if model else "")
        + f"{args.steps} steps of {args.batch} queries, loss {result.losses[0]:.4f} -> {result.losses[-1]:.4f}; "
        f"{result.seconds:.1f} s"
    )
    print("validation nDCG@10 by step: " + ", ".join(f"{s}: {v:.4f}" for s, v in result.history))
    print(f"loss: {loss}")
    print("| test (trec_eval) | " + " | ".join(MEASURES) + " |")
    print("|---|" + "---:|" * len(MEASURES))
    for label, values in zip(labels, (before, after)):
        print(f"| {label} | " + " | ".join(f"{values[m]:.4f}" for m in MEASURES) + " |")
    return before, after


def featurize_all(data: Beir, bits: int, doc_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of every query (``[Q, min(128, doc_length)]``: a step pads the queries to
    the documents' length) and document (title and text, ``[N, doc_length]``)."""
    return featurize(data.queries, bits, min(128, doc_length)), featurize(data.documents(), bits, doc_length)


def main(argv: Optional[Sequence[str]] = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16, help="training queries per step")
    p.add_argument("--negatives", type=int, default=8, help="mined hard negatives per query")
    p.add_argument("--refresh", type=int, default=25, help="steps between mining (and validation)")
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--bits", type=int, default=16, help="2^bits hash buckets")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--doc-length", type=int, default=256, help="hashed features kept per document")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help="a folder in BEIR's layout (corpus.jsonl, queries.jsonl, qrels/test.tsv [, qrels/train.tsv]), "
        "or with Cranfield's cran.all.1400.gz, cran.qry.gz, cranqrel.gz (the default)",
    )
    p.add_argument(
        "--temperature",
        type=_temperature,
        default=0.2,
        help="retrieval_loss's temperature, as InfoNCE's (score units; 0.2: the benchmark's choice on "
        "validation queries), or 'top': the one each list's top gaps set",
    )
    p.add_argument("--quick", action="store_true", help="120 steps (the test's run)")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.refresh = 120, 40
    sizes = (args.steps, args.batch, args.negatives, args.refresh, args.dim, args.doc_length)
    if min(sizes) < 1 or not 4 <= args.bits <= 24:
        p.error("--steps, --batch, --negatives, --refresh, --dim, --doc-length must be positive; --bits in 4..24")
    data_dir = Path(args.data)
    cranfield = ("cran.all.1400.gz", "cran.qry.gz", "cranqrel.gz")
    if not (data_dir / "corpus.jsonl").is_file() and not all((data_dir / f).is_file() for f in cranfield):
        p.error(f"--data {data_dir}: neither BEIR's layout (corpus.jsonl) nor Cranfield's {', '.join(cranfield)}")

    data, splits = load(data_dir)
    tokens = featurize_all(data, args.bits, args.doc_length)
    loss_args = () if args.temperature is None else (args.temperature,)
    result = train_with(args, data, splits, tokens, bits=args.bits, dim=args.dim, loss_args=loss_args)
    untrained = Encoder(args.bits, args.dim, rngs=nnx.Rngs(args.seed))
    initial, final = report(
        args,
        data_dir.name,
        data,
        splits,
        tokens,
        result,
        untrained,
        loss=f"losses.retrieval_loss(q, D, positives, temperature={args.temperature}) at its other defaults",
        labels=("untrained encoder", f"step {result.best_step} (best validation)"),
    )
    return {
        "initial": initial,
        "final": final,
        "result": result,
        "data": data,
        "splits": splits,
        "tokens": tokens,
    }


if __name__ == "__main__":
    main()
