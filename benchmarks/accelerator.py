"""One command for an accelerator: a correctness subset and every benchmark with a device meaning.

On whatever platform JAX sees (``jax.default_backend()``, ``jax.devices()``) it

1. runs a few correctness checks against references computed here in numpy (no network):
   nDCG@10, AP and P@10 against ``tests/brute.py``; the hard ranker's order against a
   stable ``numpy.argsort``; ``retrieval.search`` against an exact numpy top-k;
   alpha-nDCG against every order of a small list; a soft ranker's loss gradient finite.
   A failing check is a row saying FAIL with its error; the run goes on;
2. times, as the median of ``--repeats`` calls after a first call (compile time, reported
   apart), every ``jax.block_until_ready``-ed:

   * core metrics (nDCG@10, AP, P@(1,5,10)) beside ``lax.top_k`` / ``lax.sort`` of the same
     scores (the floors), and torchmetrics' retrieval nDCG@10 on the same device;
   * value + gradient of ``losses.metric_loss`` (nDCG) with each soft ranker, beside the
     value + gradient of a softmax cross-entropy (the cheapest listwise loss: the floor);
   * value + gradient of ``losses.retrieval_loss`` (in-batch lists and a 1M corpus) beside
     InfoNCE's, with XLA's memory of each program, and with 16 and 64 relevant documents a
     query beside the multi-positive softmax cross-entropy (the r axis);
   * ``jaxrank.evaluate`` end to end on generated TREC files (benchmarks/gen_trec.py);
   * ``retrieval.search`` at k = 10, 100, 1000 beside torch's ``topk(queries @ corpus.T)``
     on the same device (the collection of examples/dense_retrieval.py);
   * ``jaxrank.ndcg`` under ``jax.shard_map`` over every device beside a plain ``jit``;
   * ``jaxrank.compare`` on generated runs (benchmarks/bench_compare.py);

3. prints one markdown table (and writes it to ``--out``): platform, device, versions, date
   and load in the header; per row what, size, jaxrank's time, the peer or floor and its
   time, the ratio jaxrank / peer, and a status.

Peers (torch, torchmetrics) run in their own interpreter, as benchmarks/_machine.py asks,
and only when importable; otherwise their row says why not. Nothing is installed: from the
repository root,

    PYTHONPATH=. python benchmarks/accelerator.py                  # full sizes, meant for a GPU
    PYTHONPATH=. python benchmarks/accelerator.py --quick          # tiny sizes, well under a minute on CPU
    PYTHONPATH=. python benchmarks/accelerator.py --out table.md   # also write the table
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import itertools
import os
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path

# JAX takes 75% of a GPU's memory at start-up by default; the torch peers run in a process
# beside this one and need room on the same device.
os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")

import _machine  # noqa: E402
import bench_compare  # noqa: E402
import bench_retrieval  # noqa: E402
import gen_trec  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, PartitionSpec  # noqa: E402

import jaxrank  # noqa: E402
from jaxrank import losses, retrieval  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import brute  # noqa: E402  (plain-numpy references, independent of jaxrank)

PEERS = ("torch", "torchmetrics")


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Problem sizes of one mode."""

    core: tuple[int, int]  # [batch, n] of the core metrics and the sharding row
    soft: tuple[int, int]  # [batch, n] of the soft rankers' losses
    trec: tuple[int, int]  # queries x docs per query of the TREC files
    queries: int  # retrieval queries
    corpora: tuple[int, ...]  # retrieval corpus sizes
    dim: int
    compare: tuple[int, int, int, int]  # systems, queries, docs, resamples
    repeats: int
    retrieval: tuple[tuple[int, int], ...]  # queries x documents of the retrieval losses
    relevant: tuple[tuple[int, int, int], ...]  # queries x documents x relevant a query (the r axis)


FULL = Sizes(
    (1024, 1000),
    (256, 200),
    (500, 1000),
    1000,
    (300_000, 1_000_000),
    128,
    (5, 500, 100, 10_000),
    5,
    ((4096, 4096), (16384, 16384), (1024, 1_000_000)),
    ((4096, 4096, 16), (4096, 4096, 64), (45, 700, 16), (45, 700, 64)),
)
QUICK = Sizes((64, 100), (16, 20), (20, 50), 16, (2_000,), 32, (3, 20, 20, 1_000), 3, ((64, 64),), ((64, 64, 4),))
SEARCH_K = (10, 100, 1000)


@dataclasses.dataclass
class Row:
    """One line of the table; times in seconds, ``None`` where there is none."""

    what: str
    size: str
    jaxrank_s: float | None = None
    compile_s: float | None = None
    peer: str = ""
    peer_s: float | None = None
    status: str = "OK"


# ---------------------------------------------------------------- errors


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".replace("\n", " ").replace("|", "/")
    return text[:160]


def guarded(make_rows: Callable[[], list[Row]], what: str, size: str) -> list[Row]:
    """The rows of ``make_rows``, or one row saying ERROR with the exception: the table stays."""
    try:
        return make_rows()
    except Exception as error:  # noqa: BLE001 - any failure becomes a row, never the end of the run
        return [Row(what, size, status=f"ERROR {_short(error)}")]


# Torch code that runs in the peer's interpreter: the device JAX uses, and a wait for it.
_TORCH_SETUP = """
import numpy as np, torch
device = {device!r}
if device == "cuda" and not torch.cuda.is_available():
    raise RuntimeError("torch sees no CUDA device")
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
times = {{}}
def timed(name, fn, repeats):
    fn(); sync()  # warm-up
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter(); fn(); sync(); runs.append(time.perf_counter() - t0)
    times[name] = sorted(runs)[len(runs) // 2]
"""


def torch_device() -> str | None:
    """The torch device on JAX's platform, or None where torch has none for it."""
    return {"cpu": "cpu", "gpu": "cuda", "cuda": "cuda"}.get(jax.default_backend())


def peer_times(setup: str, stmt: str) -> dict[str, float]:
    """Median seconds per name that ``stmt`` (calls of ``timed``) records, in a fresh interpreter."""
    device = torch_device()
    if device is None:
        raise RuntimeError(f"torch has no device for platform {jax.default_backend()}")
    # One interpreter for every timing of a peer: importing torch is the slow part.
    result = _machine.time_in_subprocess(_TORCH_SETUP.format(device=device) + setup, stmt, repeats=1, value="times")
    return result["value"]


def with_peer(rows: list[Row], module: str, fetch: Callable[[], list[float]]) -> list[Row]:
    """``rows`` with the peer times ``fetch`` returns (one per row); where the peer cannot run
    or fails, the rows keep jaxrank's times and say why in their status."""
    why = peer_missing(module)
    if why:
        return [dataclasses.replace(r, status=why) for r in rows]
    try:
        times = fetch()
    except Exception as error:  # noqa: BLE001 - a failing peer is a status, jaxrank's times stay
        return [dataclasses.replace(r, status=f"peer ERROR {_short(error)}") for r in rows]
    return [dataclasses.replace(r, peer_s=t) for r, t in zip(rows, times)]


def peer_missing(module: str) -> str | None:
    """Why the peer ``module`` cannot run here, or None."""
    if importlib.util.find_spec(module) is None:
        return f"SKIP peer: {module} not importable"
    if torch_device() is None:
        return f"SKIP peer: no torch device for {jax.default_backend()}"
    return None


# ---------------------------------------------------------------- correctness


def _batch(rng: np.random.Generator, b: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((b, n)).astype(np.float32), rng.integers(0, 5, (b, n)).astype(np.int32)


def check_metrics() -> None:
    """nDCG@10, AP and P@10 against tests/brute.py, distinct scores (so one order)."""
    scores, labels = _batch(np.random.default_rng(1), 8, 30)
    got = jax.jit(
        lambda s, y: {
            "ndcg": jaxrank.ndcg(s, y, k=10),
            "average_precision": jaxrank.average_precision(s, y),
            "precision": jaxrank.precision(s, y, k=10),
        }
    )(scores, labels)
    for name, values in got.items():
        k = None if name == "average_precision" else 10
        want = [brute.reference(name, y[np.argsort(-s)], k=k) for s, y in zip(scores, labels)]
        np.testing.assert_allclose(np.asarray(values), want, rtol=1e-5, atol=1e-6, err_msg=name)


def check_hard_ranks() -> None:
    """The hard ranker's order, whole and top-10, against a stable numpy argsort (ties by index):
    short lists; long ones (4000 items) of tied scores; and long ones with NaN scores and a
    padding mask, whose top-10 goes through the keyed path (NaN below every number, padding
    below NaN)."""
    rng = np.random.default_rng(2)
    ranker = jaxrank.hard()
    scores = np.round(rng.standard_normal((16, 50)), 1).astype(np.float32)  # many ties
    want = np.argsort(-scores, axis=-1, kind="stable")
    whole, top = jax.jit(lambda s: (ranker(s).order, ranker(s, depth=10).order))(scores)
    np.testing.assert_array_equal(np.asarray(whole), want)
    # depth is a lower bound: the ranker may keep more positions than asked
    np.testing.assert_array_equal(np.asarray(top)[:, :10], want[:, :10])
    # long lists of tied scores, none zero: lax.top_k on the scores themselves
    scores = (np.round(rng.standard_normal((32, 4000)), 1) + 10).astype(np.float32)
    top = jax.jit(lambda s: ranker(s, depth=10).order)(scores)
    want = np.argsort(-scores, axis=-1, kind="stable")
    np.testing.assert_array_equal(np.asarray(top)[:, :10], want[:, :10], err_msg="long lists, ties")
    scores = np.round(rng.standard_normal((32, 4000)), 1).astype(np.float32)
    scores[rng.random(scores.shape) < 0.3] = np.nan
    where = np.arange(4000) < rng.integers(5, 4000, (32, 1))
    tier = np.where(~where, 2, np.where(np.isnan(scores), 1, 0))
    want = np.lexsort((-np.nan_to_num(scores, nan=0.0), tier), axis=-1)  # stable: ties by index
    top = jax.jit(lambda s, w: ranker(s, where=w, depth=10).order)(scores, where)
    np.testing.assert_array_equal(np.asarray(top)[:, :10], want[:, :10], err_msg="long lists, NaN, padding")


def check_search() -> None:
    """retrieval.search (float32 products) against numpy's exact top-k: the same scores, and
    every returned id scores the returned score (ids may differ only between equal scores).
    k = 10 over 100,000 documents in blocks of 8192 goes through the screened epochs, whose
    merges are long rows of a short top-k (where XLA:GPU once ranked a NaN filler first)."""
    rng = np.random.default_rng(3)
    for k, nq, nd, block in ((100, 8, 5000, None), (10, 256, 100_000, 8192)):
        queries = rng.standard_normal((nq, 16)).astype(np.float32)
        corpus = rng.standard_normal((nd, 16)).astype(np.float32)
        exact = queries @ corpus.T
        want = -np.sort(-exact, axis=-1)[:, :k]
        scores, ids = retrieval.search(
            jnp.asarray(queries), jnp.asarray(corpus), k, block_size=block, precision="highest"
        )
        scores, ids = np.asarray(scores), np.asarray(ids)
        np.testing.assert_allclose(scores, want, rtol=1e-5, atol=1e-5, err_msg=f"k={k}")
        np.testing.assert_allclose(np.take_along_axis(exact, ids, axis=-1), scores, rtol=1e-5, atol=1e-5)
        assert all(len(set(row)) == len(row) for row in ids), "repeated ids"


def _alpha_dcg(items: list[np.ndarray], k: int, alpha: float) -> float:
    seen = np.zeros(items[0].shape)
    total = 0.0
    for p, item in enumerate(items[:k]):
        total += float(np.sum(item * (1 - alpha) ** seen)) / np.log2(p + 2)
        seen = seen + item
    return total


def check_alpha_ndcg() -> None:
    """alpha-nDCG@4 against its definition, the ideal found by trying every order; lists of
    one item per subtopic plus redundant copies, where ndeval's greedy ideal is the best."""
    rng = np.random.default_rng(4)
    labels = np.stack([np.concatenate([e, e[:2]]) for e in (np.eye(3)[rng.permutation(3)] for _ in range(6))])
    scores = rng.standard_normal(labels.shape[:2]).astype(np.float32)
    got = np.asarray(jax.jit(lambda s, y: jaxrank.alpha_ndcg(s, y, k=4, alpha=0.5))(scores, labels))
    for value, s, y in zip(got, scores, labels):
        best = max(_alpha_dcg([y[i] for i in p], 4, 0.5) for p in itertools.permutations(range(len(y))))
        want = _alpha_dcg([y[i] for i in np.argsort(-s)], 4, 0.5) / best
        np.testing.assert_allclose(value, want, rtol=1e-5)


def check_soft_gradient() -> None:
    """softrank's metric_loss gradient: finite everywhere, not all zero."""
    scores, labels = _batch(np.random.default_rng(5), 8, 40)
    loss = jax.jit(jax.grad(lambda s: jnp.mean(losses.metric_loss(s, labels, ranker=jaxrank.softrank()))))
    grad = np.asarray(loss(jnp.asarray(scores)))
    assert np.all(np.isfinite(grad)), "non-finite gradient"
    assert np.any(grad != 0), "zero gradient"


def check_positives() -> None:
    """Labels given as positives (softsort at the relevant items, approx without a cutoff)
    against the dense labels they stand for: values and gradients, tied scores, a mask."""
    rng = np.random.default_rng(6)
    scores = jnp.asarray(np.round(rng.standard_normal((8, 3000)), 1), jnp.float32)
    where = jnp.asarray(rng.random((8, 3000)) < 0.9)
    pos = jaxrank.positives(rng.integers(-1, 3000, (8, 4)), rng.integers(1, 4, (8, 4)))
    for ranker, k in ((jaxrank.softsort(), 10), (jaxrank.approx(), None)):
        for labels in (pos, pos.dense(3000)):
            fn = jax.jit(jax.value_and_grad(lambda s, y: jaxrank.ndcg(s, y, k=k, where=where, ranker=ranker).sum()))
            if labels is pos:
                value, grad = fn(scores, labels)
            else:
                want_value, want_grad = fn(scores, labels)
        np.testing.assert_allclose(float(value), float(want_value), rtol=1e-5)
        scale = float(jnp.max(jnp.abs(want_grad)))
        np.testing.assert_allclose(np.asarray(grad) / scale, np.asarray(want_grad) / scale, atol=1e-5)


CHECKS = {
    "nDCG@10, AP, P@10 vs numpy brute force": (check_metrics, "[8, 30]"),
    "hard ranks vs numpy stable argsort": (check_hard_ranks, "[16, 50], ties; [32, 4000], ties, NaN, padding"),
    "retrieval.search vs numpy exact top-k": (check_search, "k=100: 8 x 5000 x 16; k=10: 256 x 100000 x 16"),
    "alpha_ndcg@4 vs every order": (check_alpha_ndcg, "[6, 5, 3]"),
    "softrank metric_loss gradient finite": (check_soft_gradient, "[8, 40]"),
    "positives vs dense labels, values and gradients": (check_positives, "[8, 3000], ties, mask"),
}


def correctness_rows() -> list[Row]:
    rows = []
    for what, (check, size) in CHECKS.items():
        try:
            check()
            status = "PASS"
        except Exception as error:  # noqa: BLE001 - a failing check is a row, the run goes on
            status = f"FAIL {_short(error)}"
        rows.append(Row(f"check: {what}", size, status=status))
    return rows


# ---------------------------------------------------------------- benchmarks


_top_k = jax.jit(lambda s: lax.top_k(s, 10))
_sort = jax.jit(lambda s: lax.sort(s, dimension=-1))


def _ndcg10(s: jax.Array, y: jax.Array) -> jax.Array:
    return jaxrank.ndcg(s, y, k=10)


# One compiled nDCG@10 for every row that times it at the same shape (compiling is most of --quick).
_ndcg10_jit = jax.jit(_ndcg10)


def core_rows(sizes: Sizes) -> list[Row]:
    """Core metrics beside the top-k / full sort of the same scores (floors)."""
    b, n = sizes.core
    scores, labels = (jnp.asarray(a) for a in _batch(np.random.default_rng(0), b, n))
    size = f"[{b}, {n}]"
    floors = {
        "lax.top_k(10)": _machine.time_compiled(lambda: _top_k(scores), sizes.repeats),
        "lax.sort": _machine.time_compiled(lambda: _sort(scores), sizes.repeats),
    }
    metrics = {
        "ndcg@10": (_ndcg10_jit, "lax.top_k(10)"),
        "map (AP, no cutoff)": (jax.jit(lambda s, y: jaxrank.average_precision(s, y)), "lax.sort"),
        "precision@(1,5,10)": (jax.jit(lambda s, y: jaxrank.precision(s, y, k=(1, 5, 10))), "lax.top_k(10)"),
    }
    rows = []
    for name, (fn, floor) in metrics.items():
        run_s, compile_s = _machine.time_compiled(lambda fn=fn: fn(scores, labels), sizes.repeats)
        rows.append(Row(f"core: {name}", size, run_s, compile_s, f"floor {floor}", floors[floor][0]))
    return rows


def torchmetrics_rows(sizes: Sizes) -> list[Row]:
    """jaxrank.ndcg@10 beside torchmetrics' retrieval nDCG@10 (a loop over queries, as its
    functional form takes one query) on the same device."""
    b, n = sizes.core
    scores, labels = _batch(np.random.default_rng(0), b, n)
    run_s, compile_s = _machine.time_compiled(
        lambda: _ndcg10_jit(jnp.asarray(scores), jnp.asarray(labels)), sizes.repeats
    )
    row = Row("core: ndcg@10 vs torchmetrics", f"[{b}, {n}]", run_s, compile_s, "torchmetrics retrieval_normalized_dcg")

    def fetch() -> list[float]:
        with tempfile.TemporaryDirectory() as tmp:
            np.save(f"{tmp}/s.npy", scores)
            np.save(f"{tmp}/y.npy", labels)
            setup = f"""
from torchmetrics.functional.retrieval import retrieval_normalized_dcg
ts = torch.from_numpy(np.load({tmp + "/s.npy"!r})).to(device)
ty = torch.from_numpy(np.load({tmp + "/y.npy"!r})).to(device)
"""
            calls = f"[retrieval_normalized_dcg(ts[i], ty[i], top_k=10) for i in range({b})]"
            return [peer_times(setup, f"timed('ndcg', lambda: {calls}, {sizes.repeats})")["ndcg"]]

    return with_peer([row], "torchmetrics", fetch)


def soft_rows(sizes: Sizes) -> list[Row]:
    """Value + gradient of metric_loss (nDCG) with each soft ranker, beside a softmax
    cross-entropy's (the floor of a listwise loss)."""
    b, n = sizes.soft
    scores, labels = (jnp.asarray(a) for a in _batch(np.random.default_rng(0), b, n))
    labels = labels.astype(jnp.float32)

    def softmax_ce(s: jax.Array, y: jax.Array) -> jax.Array:
        return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(s), -1))

    # labels are arguments, as in training: closed over, XLA sorts them at compile time
    floor = _vg(softmax_ce)
    floor_s, _ = _machine.time_compiled(lambda: floor(scores, labels), sizes.repeats)
    rankers = {
        "approx": jaxrank.approx(),
        "softrank": jaxrank.softrank(),
        "neuralsort": jaxrank.neuralsort(),
        "softsort": jaxrank.softsort(),
    }
    rows = []
    for name, ranker in rankers.items():
        fn = _vg(lambda s, y, ranker=ranker: jnp.mean(losses.metric_loss(s, y, ranker=ranker)))
        run_s, compile_s = _machine.time_compiled(lambda fn=fn: fn(scores, labels), sizes.repeats)
        rows.append(
            Row(
                f"soft: metric_loss {name} value+grad", f"[{b}, {n}]", run_s, compile_s, "floor softmax CE v+g", floor_s
            )
        )
    return rows


def retrieval_rows(sizes: Sizes, n_queries: int, n_docs: int) -> list[Row]:
    """Value + gradient (both embeddings) of losses.retrieval_loss, default (soft nDCG@10),
    approx without a cutoff and the log of the rank (``log=True`` with reciprocal rank at
    ``bound(1.0, top=10)``, the fine-tuning recipe), beside InfoNCE (log-softmax of the scores over 0.05 at each
    query's positive: optax's softmax_cross_entropy_with_integer_labels, written here).
    One positive per query; the status gives XLA's memory of each program (arguments +
    outputs + temporaries)."""
    rng = np.random.default_rng(0)

    def unit(x):
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    docs = unit(rng.standard_normal((n_docs, sizes.dim))).astype(np.float32)
    pos = np.arange(n_queries) if n_queries == n_docs else rng.integers(0, n_docs, n_queries)
    queries = unit(docs[pos] + 0.5 * unit(rng.standard_normal((n_queries, sizes.dim)))).astype(np.float32)
    q, d, pos = jnp.asarray(queries), jnp.asarray(docs), jnp.asarray(pos, jnp.int32)

    def infonce(q, d, p):
        logp = jax.nn.log_softmax(q @ d.T / 0.05, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, p[:, None], axis=-1))

    variants = {
        "infonce": infonce,
        "default": lambda q, d, p: losses.retrieval_loss(q, d, p[:, None]).mean(),
        "approx, no cutoff": lambda q, d, p: losses.retrieval_loss(
            q, d, p[:, None], ranker=jaxrank.approx(), k=None
        ).mean(),
        "log of the rank": lambda q, d, p: losses.retrieval_loss(
            q, d, p[:, None], ranker=jaxrank.bound(1.0, top=10), metric=jaxrank.reciprocal_rank, log=True
        ).mean(),
    }
    size = f"{n_queries} q x {n_docs} docs x {sizes.dim}"
    timed = {}
    for name, loss in variants.items():
        fn = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        compiled = fn.lower(q, d, pos).compile()
        memory = compiled.memory_analysis()
        mb = (
            None
            if memory is None
            else (memory.argument_size_in_bytes + memory.output_size_in_bytes + memory.temp_size_in_bytes) / 2**20
        )
        run_s, compile_s = _machine.time_compiled(lambda c=compiled: c(q, d, pos), sizes.repeats)
        timed[name] = (run_s, compile_s, mb)
    floor_s, _, floor_mb = timed.pop("infonce")
    return [
        Row(
            f"retrieval: retrieval_loss {name} value+grad",
            size,
            run_s,
            compile_s,
            "floor InfoNCE v+g",
            floor_s,
            f"OK (XLA memory {mb:.1f} MB, InfoNCE's {floor_mb:.1f} MB)" if mb is not None else "OK",
        )
        for name, (run_s, compile_s, mb) in timed.items()
    ]


def relevant_rows(sizes: Sizes, n_queries: int, n_docs: int, relevant: int) -> list[Row]:
    """Value + gradient of losses.retrieval_loss's default with ``relevant`` relevant
    documents a query, beside the multi-positive softmax cross-entropy (the scores over 0.05
    against the uniform target over the relevant documents: one list a query, the floor
    with several positives; benchmarks/bench_retrieval_loss.py's ``softmax`` row)."""
    rng = np.random.default_rng(0)

    def unit(x):
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    docs = unit(rng.standard_normal((n_docs, sizes.dim))).astype(np.float32)
    positives = np.stack([rng.choice(n_docs, relevant, replace=False) for _ in range(n_queries)])
    queries = unit(unit(docs[positives].mean(1)) + 0.5 * unit(rng.standard_normal((n_queries, sizes.dim))))
    q, d = jnp.asarray(queries.astype(np.float32)), jnp.asarray(docs)
    p = jnp.asarray(positives, jnp.int32)

    def softmax(q, d, p):
        target = jnp.zeros((n_queries, n_docs)).at[jnp.arange(n_queries)[:, None], p].set(1.0 / relevant)
        return -jnp.mean(jnp.sum(target * jax.nn.log_softmax(q @ d.T / 0.05, axis=-1), axis=-1))

    timed = {}
    for name, loss in {"softmax": softmax, "default": lambda q, d, p: losses.retrieval_loss(q, d, p).mean()}.items():
        compiled = jax.jit(jax.value_and_grad(loss, argnums=(0, 1))).lower(q, d, p).compile()
        timed[name] = _machine.time_compiled(lambda c=compiled: c(q, d, p), sizes.repeats)
    run_s, compile_s = timed["default"]
    size = f"{n_queries} q x {n_docs} docs x {sizes.dim}, r = {relevant}"
    return [
        Row(
            f"retrieval: retrieval_loss default, {relevant} relevant a query, value+grad",
            size,
            run_s,
            compile_s,
            "multi-positive softmax CE v+g",
            timed["softmax"][0],
        )
    ]


def _vg(loss: Callable[[jax.Array, jax.Array], jax.Array]) -> Callable[[jax.Array, jax.Array], tuple]:
    return jax.jit(jax.value_and_grad(loss))


def trec_rows(sizes: Sizes) -> list[Row]:
    """jaxrank.evaluate end to end (read, join, every default measure) on generated files."""
    queries, docs = sizes.trec
    with tempfile.TemporaryDirectory() as tmp:
        run = gen_trec.generate_run(Path(tmp) / "run", queries, docs)
        qrels = gen_trec.generate_qrels(Path(tmp) / "qrels", queries, min(100, 2 * docs), n_docs=docs)
        run_s, compile_s = _machine.time_compiled(lambda: jaxrank.evaluate(str(qrels), str(run)), sizes.repeats)
    return [Row("trec: evaluate end to end", f"{queries} q x {docs} docs", run_s, compile_s, "", None)]


def _time_search(folder: str, sizes: Sizes, docs: int) -> list[Row]:
    queries, corpus = (jax.device_put(np.load(f"{folder}/{name}.npy")) for name in ("queries", "corpus"))
    size = f"{sizes.queries} q x {docs} x {sizes.dim}"
    rows = []
    for k in SEARCH_K:
        run_s, compile_s = _machine.time_compiled(lambda k=k: retrieval.search(queries, corpus, k), sizes.repeats)
        rows.append(Row(f"search: retrieval.search k={k}", size, run_s, compile_s, "torch topk(q @ c.T)"))
    return rows


def search_rows(sizes: Sizes, docs: int) -> list[Row]:
    """retrieval.search at every k beside torch's topk of the full score matrix."""
    with tempfile.TemporaryDirectory() as tmp:
        # examples/dense_retrieval.py's collection, as benchmarks/bench_retrieval.py writes it
        collection = types.SimpleNamespace(queries=sizes.queries, dim=sizes.dim, seed=0)
        bench_retrieval._write_collection(tmp, docs, collection)
        # the device copies are freed when _time_search returns, before torch needs the room
        rows = _time_search(tmp, sizes, docs)

        def fetch() -> list[float]:
            setup = f"""
q = torch.from_numpy(np.load({tmp + "/queries.npy"!r})).to(device)
c = torch.from_numpy(np.load({tmp + "/corpus.npy"!r})).to(device)
"""
            stmt = "\n".join(f"timed({k}, lambda: torch.topk(q @ c.T, {k}), {sizes.repeats})" for k in SEARCH_K)
            times = peer_times(setup, stmt)
            return [times[str(k)] for k in SEARCH_K]  # JSON turned the keys into strings

        return with_peer(rows, "torch", fetch)


def sharding_rows(sizes: Sizes) -> list[Row]:
    """jaxrank.ndcg@10 under shard_map over every device (batch split) beside a plain jit."""
    devices = jax.devices()
    b, n = sizes.core
    b -= b % len(devices)  # the batch must split evenly
    scores, labels = (jnp.asarray(a) for a in _batch(np.random.default_rng(0), b, n))
    mesh = Mesh(devices, ("d",))

    spec = PartitionSpec("d")
    sharded = jax.jit(jax.shard_map(_ndcg10, mesh=mesh, in_specs=(spec, spec), out_specs=spec))
    plain = _ndcg10_jit
    run_s, compile_s = _machine.time_compiled(lambda: sharded(scores, labels), sizes.repeats)
    plain_s, _ = _machine.time_compiled(lambda: plain(scores, labels), sizes.repeats)
    same = np.allclose(np.asarray(sharded(scores, labels)), np.asarray(plain(scores, labels)), atol=1e-6)
    status = ("OK" if same else "FAIL values differ from jit's") + f" ({len(devices)} device{'s' * (len(devices) > 1)})"
    return [
        Row(
            "sharding: ndcg@10 under shard_map", f"[{b}, {n}]", run_s, compile_s, "plain jit, 1 device", plain_s, status
        )
    ]


def compare_rows(sizes: Sizes) -> list[Row]:
    """jaxrank.compare (map, ndcg_cut.10; randomization test, every pair) end to end."""
    systems, queries, docs, resamples = sizes.compare
    with tempfile.TemporaryDirectory() as tmp:
        qrels, runs = bench_compare.make_files(Path(tmp), systems, queries, docs)
        runs = {name: str(path) for name, path in runs.items()}
        run_s, compile_s = _machine.time_compiled(
            lambda: jaxrank.compare(str(qrels), runs, ["map", "ndcg_cut.10"], n_resamples=resamples).to_records(),
            sizes.repeats,
        )
    size = f"{systems} runs x {queries} q x {docs} docs, {resamples} resamples"
    return [Row("compare: randomization test", size, run_s, compile_s, "", None)]


# ---------------------------------------------------------------- table


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value * 1e3:.2f} ms" if value < 1 else f"{value:.2f} s"


def _ratio(row: Row) -> str:
    if row.jaxrank_s is None or not row.peer_s:
        return ""
    return f"{row.jaxrank_s / row.peer_s:.2f}"


def header_lines(run: _machine.Run) -> list[str]:
    devices = jax.devices()
    m = run.machine
    versions = {"jaxrank": f"{jaxrank.__version__} ({_git_commit()})", **run.versions}
    settings = "".join(f"; {k}: {v}" for k, v in run.extra.items())
    return [
        f"- command: `{run.command}`, {run.started}",
        f"- platform: {jax.default_backend()}, {len(devices)} x {devices[0].device_kind}{settings}",
        f"- host: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['ram_gib']} GiB RAM, {m['os']}",
        "- versions: python " + m["python"] + ", " + ", ".join(f"{k} {v}" for k, v in versions.items()),
        "- load average before (1, 5, 15 min): " + " ".join(f"{v:.2f}" for v in run.load_before),
    ]


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    except OSError:
        return "no git"
    return f"git {out.stdout.strip()}" if out.returncode == 0 else "no git checkout"


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| what | size | jaxrank | compile | peer / floor | peer time | ratio | status |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [r.what, r.size, _seconds(r.jaxrank_s), _seconds(r.compile_s), r.peer, _seconds(r.peer_s)]
        lines.append("| " + " | ".join([*cells, _ratio(r), r.status]) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the tests' mode)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    run = _machine.start(peers=PEERS, extra={"mode": "quick" if args.quick else "full"})
    header = header_lines(run)
    print("\n".join(header), flush=True)
    rows = correctness_rows()
    b, n = sizes.core
    sections = [
        (lambda: core_rows(sizes), "core: metrics", f"[{b}, {n}]"),
        (lambda: torchmetrics_rows(sizes), "core: ndcg@10 vs torchmetrics", f"[{b}, {n}]"),
        (lambda: soft_rows(sizes), "soft: metric_loss", str(list(sizes.soft))),
        *(
            (lambda q=q, m=m: retrieval_rows(sizes, q, m), "retrieval: retrieval_loss", f"{q} q x {m} docs")
            for q, m in sizes.retrieval
        ),
        *(
            (
                lambda q=q, m=m, r=r: relevant_rows(sizes, q, m, r),
                "retrieval: retrieval_loss",
                f"{q} q x {m} docs, r {r}",
            )
            for q, m, r in sizes.relevant
        ),
        (lambda: trec_rows(sizes), "trec: evaluate end to end", str(sizes.trec)),
        *((lambda d=d: search_rows(sizes, d), "search: retrieval.search", f"{d} docs") for d in sizes.corpora),
        (lambda: sharding_rows(sizes), "sharding: ndcg@10 under shard_map", f"[{b}, {n}]"),
        (lambda: compare_rows(sizes), "compare: randomization test", str(sizes.compare)),
    ]
    for make_rows, what, size in sections:
        new = guarded(make_rows, what, size)
        print("\n".join(table(new)[2:]), file=sys.stderr, flush=True)  # progress: a full run takes minutes
        rows += new
    lines = header + [
        f"- times: median of {sizes.repeats} calls after the first; compile: the first call minus it; "
        "ratio: jaxrank / peer (below 1: jaxrank faster)",
        "",
        *table(rows),
        "",
        "- " + run.finish().removeprefix("# "),
    ]
    text = "\n".join(lines) + "\n"
    print("\n" + "\n".join(lines[len(header) :]))
    if args.out:
        args.out.write_text(text)
    return 1 if any(r.status.startswith(("FAIL", "ERROR", "peer ERROR")) for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
