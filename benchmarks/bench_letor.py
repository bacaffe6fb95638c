#!/usr/bin/env python
"""Every ranking loss on the same model: LETOR 4.0's MQ2008 and LightGBM's LambdaRank data.

One plain recipe for every loss: a one-hidden-layer MLP (``--hidden`` ReLU units, He
initialisation; ``examples/train_ltr.py``'s ``init_mlp`` and ``mlp``) on quantile-transformed,
standardised features (``train_ltr``'s preprocessing, statistics of the training documents),
Adam at a constant ``--lr``, ``--steps`` full-batch steps, ``--seeds`` models (one per seed,
all trained in one compiled program under ``vmap``; 64 units and 400 steps by default: on 2
CPU cores the whole table takes about an hour). The training lists are cut into length buckets
(8, 16, 32, ... documents) and each loss runs per bucket, weighted so that the result is the
loss of the whole batch (:func:`bucketed`): MQ2008's lists have a median of 8 documents and at
most 121, and padding every list to 121 made the pairwise and sorting losses 17 times dearer. Every ``--eval-every`` steps the exact
validation nDCG@10 is computed; each seed keeps the weights of its best validation step, and
those are the weights judged on the held-out queries. The held-out queries choose nothing.

Splits (every query is judged exactly once):

* **MQ2008** (``--mq2008``, LETOR 4.0 Fold1's ``train.txt``, ``vali.txt``, ``test.txt``): the
  five query blocks S1..S5 are rebuilt from Fold1 (qids sorted and contiguous; S1-S3 are
  ``train.txt`` in qid order, 157 queries each, S4 is ``vali.txt``, S5 ``test.txt``); fold
  ``i`` (1..5) trains on S_i, S_i+1, S_i+2, chooses the step on S_i+3 and judges S_i+4
  (indices mod 5): LETOR's own five folds.
* **LambdaRank** (``--lambdarank``, LightGBM's example data, 251 queries): 5-fold
  cross-validation as ``benchmarks/bench_defaults.py --cv 5`` (``train_ltr.load_fold``,
  fold seed 0), a quarter of each fold's training queries held out (split seed 0) to choose
  the step.

Rows (``--losses``; the names in ``ROWS``): jaxrank's ``losses.metric_loss`` with no ranker
(its default) and with each default ranker; ``softmax_cross_entropy``, ``listmle``,
``lambda_loss``, ``pairwise_logistic`` with LambdaRank's weights (``lambdaweights.dcg``),
each the mean over the lists; rax 0.4's ``softmax_loss``, ``listmle_loss``,
``pairwise_logistic_loss(lambdaweight_fn=dcg_lambdaweight)`` and ApproxNDCG
(``jaxrank.compat.rax.approx_t12n(ndcg_metric)``: rax's own t12n fails on this jax), each as
rax reduces it (``reduce_fn=jnp.mean``); NeuralNDCG, ListNet and PiRank as their reference
code computes them (``benchmarks/_peer_losses.py``); LightGBM ``lambdarank`` and XGBoost
``rank:ndcg`` / ``rank:pairwise`` with their documented example parameters, and once more
with the setting and number of trees chosen on the validation block from a small grid.
Each loss gets the library's defaults: nothing is tuned per loss.

Scores: exact nDCG@1, 3, 5, 10 of each judged query, ``jaxrank.ndcg`` with
``hard("expected")`` ties (the mean over the orders of each tie group), linear gain, log2
discount: trec_eval's conventions, where a query without a relevant document scores 0 and
counts; the mean over every judged query (per query, the mean over the seeds). Beside it for
MQ2008, nDCG@10 as LETOR's own ``Eval-Score-4.0.pl`` computes it (:func:`letor_ndcg`). Each
row's paired difference of per-query nDCG@10 to the best other row, with a 95% bootstrap
interval (percentile, 10,000 resamples) and a two-sided randomization test's p-value
(``jaxrank.stats``).

    python benchmarks/bench_letor.py                                  # both data sets, every row
    python benchmarks/bench_letor.py --data mq2008 --losses default softsort lightgbm
    python benchmarks/bench_letor.py --quick                          # seconds: the test's path
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax import lax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import _machine  # noqa: E402
import _peer_losses  # noqa: E402
import _peers  # noqa: E402
import train_ltr  # noqa: E402

import jaxrank  # noqa: E402
from jaxrank import lambdaweights, losses  # noqa: E402
from jaxrank.compat import rax as compat_rax  # noqa: E402
from jaxrank.datasets import SvmlightData, read_svmlight  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
CUTOFFS = (1, 3, 5, 10)
#: LETOR 4.0's blocks: Fold1's train.txt holds S1-S3, 157 queries each.
LETOR_TRAIN_BLOCKS = 3
QUICK = dict(steps=4, eval_every=2, hidden=8, queries=4, trees=4)


# ----------------------------------------------------------------------------- rows


def _mean_over_lists(per_list: Callable) -> Callable:
    """``(scores, labels, where) -> [Q]`` to the mean over the lists that hold a document
    (the batch's padding lists count nothing)."""

    def objective(scores, labels, where):
        values = per_list(scores, labels, where)
        real = where.any(-1)
        return jnp.sum(jnp.where(real, values, 0.0)) / jnp.maximum(jnp.sum(real), 1)

    return objective


def _metric(ranker):
    if ranker is None:
        return _mean_over_lists(lambda s, y, w: losses.metric_loss(s, y, where=w))
    return _mean_over_lists(lambda s, y, w: losses.metric_loss(s, y, where=w, ranker=ranker))


def _jaxrank(name: str, **options):
    fn = getattr(losses, name)
    return _mean_over_lists(lambda s, y, w: fn(s, y, where=w, **options))


def _rax_loss(name: str, **options):
    def objective(s, y, w):
        rax = _peers.rax()
        extra = {k: getattr(rax, v) for k, v in options.items()}
        return getattr(rax, name)(s, y, where=w, **extra)

    return objective


def _approx_ndcg(s, y, w):
    return compat_rax.approx_t12n(compat_rax.ndcg_metric)(s, y, where=w)


def _lists(labels, where):
    """What a mean over the lists divides by: the lists that hold a document."""
    return jnp.sum(where.any(-1)).astype(jnp.float32)


def _lists_with_relevant(labels, where):
    """NeuralNDCG's: the lists whose ideal DCG is positive."""
    return jnp.sum(jnp.any(where & (labels > 0), -1)).astype(jnp.float32)


def _pairs(labels, where):
    """rax's pairwise losses' mean: over the pairs of valid items ``i, j`` with ``y_i > y_j``."""
    valid = where[..., :, None] & where[..., None, :]
    return jnp.sum(valid & (labels[..., :, None] > labels[..., None, :])).astype(jnp.float32)


@dataclasses.dataclass(frozen=True)
class Row:
    label: str  # the call, as the table shows it
    objective: Optional[Callable] = None  # MLP rows: (scores, labels, where) -> one number
    weight: Callable = _lists  # what the objective's reduction divides by (see build_program)
    length_scaled: bool = False  # the objective grows with the padded list length (see bucketed)
    gbdt: Optional[str] = None  # GBDT rows: "lightgbm" / "rank:ndcg" / "rank:pairwise"
    grid: bool = False


def _default_ranker():
    return losses.metric_loss.__kwdefaults__["ranker"]


ROWS: dict[str, Row] = {
    "default": Row(f"jaxrank `metric_loss(s, y, where=w)` (default ranker {_default_ranker()!r})", _metric(None)),
    "approx": Row("jaxrank `metric_loss(..., ranker=approx())`", _metric(jaxrank.approx())),
    "softrank": Row("jaxrank `metric_loss(..., ranker=softrank())`", _metric(jaxrank.softrank())),
    "neuralsort": Row("jaxrank `metric_loss(..., ranker=neuralsort())`", _metric(jaxrank.neuralsort())),
    "softsort": Row("jaxrank `metric_loss(..., ranker=softsort())`", _metric(jaxrank.softsort())),
    "laplace": Row("jaxrank `metric_loss(..., ranker=laplace())`", _metric(jaxrank.laplace())),
    "softmax_cross_entropy": Row("jaxrank `softmax_cross_entropy`", _jaxrank("softmax_cross_entropy")),
    "listmle": Row("jaxrank `listmle`", _jaxrank("listmle")),
    "lambda_loss": Row("jaxrank `lambda_loss`", _jaxrank("lambda_loss")),
    "lambdarank": Row(
        "jaxrank `pairwise_logistic(lambdaweight=lambdaweights.dcg)`",
        _jaxrank("pairwise_logistic", lambdaweight=lambdaweights.dcg),
    ),
    "rax_softmax": Row("rax `softmax_loss`", _rax_loss("softmax_loss")),
    "rax_listmle": Row("rax `listmle_loss`", _rax_loss("listmle_loss")),
    "rax_lambdarank": Row(
        "rax `pairwise_logistic_loss(lambdaweight_fn=dcg_lambdaweight)`",
        _rax_loss("pairwise_logistic_loss", lambdaweight_fn="dcg_lambdaweight"),
        _pairs,
        length_scaled=True,
    ),
    "rax_approx_ndcg": Row("rax ApproxNDCG `approx_t12n(ndcg_metric)` (jaxrank.compat.rax)", _approx_ndcg),
    "neural_ndcg": Row("NeuralNDCG (allRank's `neuralNDCG` defaults)", _peer_losses.neural_ndcg, _lists_with_relevant),
    "listnet": Row("ListNet (allRank's `listNet`)", _peer_losses.listnet),
    "pirank": Row("PiRank (`pirank_simple_loss` defaults)", _peer_losses.pirank, _peer_losses.pirank_weight),
    "lightgbm": Row("LightGBM `lambdarank`, its example's parameters", gbdt="lightgbm"),
    "xgb_ndcg": Row("XGBoost `rank:ndcg`, its tutorial's parameters", gbdt="rank:ndcg"),
    "xgb_pairwise": Row("XGBoost `rank:pairwise`, its tutorial's parameters", gbdt="rank:pairwise"),
    "lightgbm_grid": Row("LightGBM `lambdarank`, grid chosen on validation", gbdt="lightgbm", grid=True),
    "xgb_ndcg_grid": Row("XGBoost `rank:ndcg`, grid chosen on validation", gbdt="rank:ndcg", grid=True),
    "xgb_pairwise_grid": Row("XGBoost `rank:pairwise`, grid chosen on validation", gbdt="rank:pairwise", grid=True),
}


# ------------------------------------------------------------------------------ GBDT
#: XGBoost's learning-to-rank tutorial (doc/tutorials/learning_to_rank.rst): "train a simple
#: ranking model without tuning"; the same for rank:pairwise with that objective.
XGB_EXAMPLE = dict(tree_method="hist", lambdarank_num_pair_per_sample=8, lambdarank_pair_method="topk")
#: Grids (8 settings each); the number of trees (25, 50, ..., 500) is chosen with the setting.
LGB_GRID = [
    dict(learning_rate=lr, num_leaves=leaves, min_child_samples=child)
    for lr in (0.05, 0.1)
    for leaves in (7, 31)
    for child in (10, 50)
]
XGB_GRID = [
    dict(learning_rate=lr, max_depth=depth, lambdarank_pair_method=pairs)
    for lr in (0.05, 0.3)
    for depth in (3, 6)
    for pairs in ("topk", "mean")
]
TREES = tuple(range(25, 501, 25))


def _fit_gbdt(kind: str, params: dict, train, seed: int):
    features, labels, sizes = train
    if kind == "lightgbm":
        import lightgbm

        model = lightgbm.LGBMRanker(
            **{**train_ltr.LIGHTGBM_PARAMS, **params, "random_state": seed, "n_jobs": 1, "verbose": -1}
        )
        model.fit(features, labels.astype(np.int32), group=sizes)
        return lambda x, trees=None: model.predict(x, num_iteration=trees)
    import xgboost

    model = xgboost.XGBRanker(**{**XGB_EXAMPLE, **params, "objective": kind, "random_state": seed, "n_jobs": 1})
    model.fit(features, labels, qid=np.repeat(np.arange(len(sizes)), sizes))
    return lambda x, trees=None: model.predict(x, iteration_range=(0, trees or 0))


def _padded(predictions: np.ndarray, sizes, shape) -> np.ndarray:
    out = np.zeros(shape, np.float32)
    rows = np.repeat(np.arange(len(sizes)), sizes)
    cols = np.concatenate([np.arange(s) for s in sizes])
    out[rows, cols] = predictions
    return out


# ------------------------------------------------------------------------------ data
@dataclasses.dataclass
class Fold:
    raw: tuple  # flat (features, labels, group_sizes) of train, valid, test
    data: train_ltr.LTRData  # padded, transformed


def bucket_lengths(n: int) -> tuple[int, ...]:
    """Padded list lengths of the training buckets: 8, 16, 32, ... below ``n``, then ``n``. A
    list goes to the first bucket it fits; the losses run bucket by bucket, so that a few long
    lists do not pad every list to their length (MQ2008: median 8 documents, at most 121)."""
    lengths = [8]
    while lengths[-1] < n:
        lengths.append(min(2 * lengths[-1], n))
    return tuple(v for v in lengths if v < n) + (n,)


@dataclasses.dataclass
class Dataset:
    name: str
    folds: list
    n: int  # list length of the padded validation and test splits
    buckets: tuple  # ((list length, lists), ...) of the training buckets, the same for every fold
    q_eval: int  # validation and test lists
    docs: int  # training documents

    def train_arrays(self, fold: Fold):
        """The training documents, flat (the MLP scores real documents only), and per bucket the
        list and position of each document there (elsewhere past the last list: dropped), the
        labels and the mask."""
        split = fold.data.train
        q, p = np.nonzero(split.where)
        x = np.zeros((self.docs, split.x.shape[-1]), np.float32)
        x[: q.size] = split.x[q, p]
        sizes = split.where.sum(-1)
        which = np.searchsorted([length for length, _ in self.buckets], sizes)
        parts = []
        for b, (length, lists) in enumerate(self.buckets):
            members = np.nonzero(which == b)[0]
            slot = np.full(split.where.shape[0], lists, np.int32)
            slot[members] = np.arange(members.size)
            qi = np.full(self.docs, lists, np.int32)
            pi = np.zeros(self.docs, np.int32)
            qi[: q.size], pi[: q.size] = slot[q], p
            y = np.zeros((lists, length), np.float32)
            where = np.zeros((lists, length), bool)
            width = min(length, split.y.shape[1])
            y[: members.size, :width] = split.y[members, :width]
            where[: members.size, :width] = split.where[members, :width]
            parts.append((qi, pi, y, where))
        return x, tuple(parts)

    def eval_arrays(self, split):
        """A validation or test split padded to ``[q_eval, n]``."""
        x = np.zeros((self.q_eval, self.n, split.x.shape[-1]), np.float32)
        x[: split.x.shape[0], : split.x.shape[1]] = split.x
        y = np.zeros((self.q_eval, self.n), np.float32)
        where = np.zeros((self.q_eval, self.n), bool)
        y[: split.y.shape[0], : split.y.shape[1]] = split.y
        where[: split.where.shape[0], : split.where.shape[1]] = split.where
        return x, y, where


def _take(data, idx) -> tuple:
    return train_ltr._split(data, np.asarray(idx))


def letor_blocks(folder: Path) -> tuple[SvmlightData, list[np.ndarray]]:
    """MQ2008's queries (Fold1's three files, pooled in qid order) and LETOR's five blocks
    S1..S5 as query indices: train.txt cut into 3 blocks of equal size (qid order), then
    vali.txt, then test.txt."""
    parts = [read_svmlight(folder / f"{name}.txt") for name in ("train", "vali", "test")]
    d = max(p.features.shape[1] for p in parts)
    parts = [read_svmlight(folder / f"{name}.txt", num_features=d) for name in ("train", "vali", "test")]
    qids = np.concatenate([p.qids for p in parts])
    if np.any(np.diff(qids.astype(np.int64)) <= 0):
        raise ValueError(f"{folder}: qids are not sorted and distinct across train, vali, test")
    pool = SvmlightData(
        np.concatenate([p.features for p in parts]),
        np.concatenate([p.labels for p in parts]),
        np.concatenate([p.group_sizes for p in parts]),
        qids,
    )
    n_train, n_vali = parts[0].group_sizes.size, parts[1].group_sizes.size
    blocks = np.array_split(np.arange(n_train), LETOR_TRAIN_BLOCKS)
    blocks.append(np.arange(n_train, n_train + n_vali))
    blocks.append(np.arange(n_train + n_vali, qids.size))
    return pool, blocks


def letor_fold(blocks: list, fold: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LETOR's fold ``fold`` (1..5): train on S_f, S_f+1, S_f+2, validate on S_f+3, test on
    S_f+4 (mod 5); Fold1 is train S1-S3, vali S4, test S5."""
    b = [blocks[(fold - 1 + i) % 5] for i in range(5)]
    return np.concatenate(b[:3]), b[3], b[4]


def _first(split: tuple, queries: int) -> tuple:
    features, labels, sizes = split
    docs = int(np.sum(sizes[:queries]))
    return features[:docs], labels[:docs], sizes[:queries]


def load(name: str, folder: Path, quick: bool) -> Dataset:
    raws = []
    if name == "mq2008":
        pool, blocks = letor_blocks(folder)
        for fold in range(1, 6):
            raws.append(tuple(_take(pool, idx) for idx in letor_fold(blocks, fold)))
    else:
        split = dict(folds=5, fold_seed=0, valid_fraction=0.25, split_seed=0, raw=True)
        raws = [train_ltr.load_fold(folder, fold=f, **split) for f in range(5)]
    if quick:
        raws = [tuple(_first(s, QUICK["queries"] * (3 if i == 0 else 1)) for i, s in enumerate(r)) for r in raws]
    folds = [Fold(r, train_ltr._prepare(*r, "quantile")) for r in raws]
    n = int(max(max(s[2].max() for s in r) for r in raws))
    lengths = bucket_lengths(n)
    counts = [np.bincount(np.searchsorted(lengths, r[0][2]), minlength=len(lengths)) for r in raws]
    return Dataset(
        name=name,
        folds=folds,
        n=n,
        buckets=tuple((length, max(int(c[b]) for c in counts)) for b, length in enumerate(lengths)),
        q_eval=max(max(len(r[1][2]), len(r[2][2])) for r in raws),
        docs=max(int(r[0][2].sum()) for r in raws),
    )


# ------------------------------------------------------------------------- evaluation
def ndcg_table(scores, labels, where):
    """Exact nDCG@(1, 3, 5, 10) of each list, ``[Q, 4]`` (``hard("expected")`` ties)."""
    return jaxrank.ndcg(scores, labels, k=CUTOFFS, where=where, ranker=jaxrank.hard("expected"))


_ndcg_batch = jax.jit(jax.vmap(ndcg_table, in_axes=(0, None, None)))

#: Eval-Score-4.0.pl's gains of MQ2008's grades (``%hsNdcgRelScore``).
LETOR_GAINS = {0: 0.0, 1: 1.0, 2: 3.0}


def letor_ndcg(scores, labels, k: int = 10) -> float:
    """nDCG@k of one query as LETOR 4.0's ``Eval-Score-4.0.pl`` computes it: documents in file
    order, sorted by descending score (a stable sort: ties keep file order); gains 0, 1, 3 for
    grades 0, 1, 2; discount 1 at positions 1 and 2, ``1 / log2(p)`` at position p > 2; 0 for a
    query without a relevant document (it counts in the mean); and 0 for a query of fewer than
    k documents (the script computes NDCG only up to the list's length and averages the
    missing entries as 0)."""
    labels = np.asarray(labels).astype(int)
    if labels.size < k:
        return 0.0
    gains = np.array([LETOR_GAINS[g] for g in labels])
    discount = 1.0 / np.log2(np.maximum(np.arange(1, k + 1), 2))
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    ideal = np.sum(np.sort(gains)[::-1][:k] * discount)
    return float(np.sum(gains[order][:k] * discount) / ideal) if ideal > 0 else 0.0


def letor_table(scores: np.ndarray, labels: np.ndarray, where: np.ndarray, k: int = 10) -> np.ndarray:
    """:func:`letor_ndcg` of each list of ``scores[S, Q, n]``, mean over ``S``: ``[Q]``."""
    out = np.zeros(scores.shape[:2])
    for s in range(scores.shape[0]):
        for q in range(scores.shape[1]):
            m = where[q]
            if m.any():
                out[s, q] = letor_ndcg(scores[s, q][m], labels[q][m], k)
    return out.mean(0)


# -------------------------------------------------------------------------- training
def bucketed(objective: Callable, weight: Callable, flat, buckets, length_scaled: bool = False):
    """``objective`` of every length bucket of the scores ``flat[D]`` of the training documents,
    the mean weighted by each bucket's ``weight`` (see :func:`build_program`). ``length_scaled``:
    the objective scales with the padded list length (rax's DCG lambdaweights are multiplied by
    it), so each bucket's is rescaled to the length of the longest bucket, the whole batch's."""
    total = weights = 0.0
    longest = buckets[-1][2].shape[-1]
    for qi, pi, y, where in buckets:
        scores = jnp.zeros(where.shape, flat.dtype).at[qi, pi].set(flat, mode="drop")
        w = weight(y, where)
        scale = longest / where.shape[-1] if length_scaled else 1.0
        total += jnp.where(w > 0, objective(scores, y, where), 0.0) * (w * scale)
        weights += w
    return total / jnp.maximum(weights, 1e-30)


def build_program(
    objective: Callable, weight: Callable, *, steps: int, every: int, hidden: int, lr: float, length_scaled=False
):
    """One compiled program: train one MLP per seed (``vmap``), keep each seed's weights of
    its best validation nDCG@10 (checked every ``every`` steps), judge them on the test lists.
    Arguments: ``seeds[S]``, the training arrays (:meth:`Dataset.train_arrays`), the validation
    and test arrays (:meth:`Dataset.eval_arrays`); the same shapes for every fold of a data set.

    The training loss is ``objective`` of each length bucket, weighted by ``weight(labels,
    where)`` of the bucket: with the weight the loss's own reduction divides by (the lists for
    a mean over lists, the pairs for a mean over pairs, ...), the weighted mean is the loss of
    the whole batch at once (``tests/test_bench_letor.py`` checks it for each kind of reduction).
    PiRank is the exception: its padding joins its relaxed sort (as in its reference code, which
    pads every list to ``list_size=100``), so its value depends a little on the padded length."""
    optimizer = optax.adam(lr)
    blocks = max(steps // every, 1)

    def mean_ndcg10(params, split):
        x, y, where = split
        values = ndcg_table(train_ltr.mlp(params, x), y, where)[:, -1]
        real = where.any(-1)
        return jnp.sum(jnp.where(real, values, 0.0)) / jnp.maximum(jnp.sum(real), 1)

    def one(seed, train, valid, test):
        x, buckets = train

        def loss(params):
            return bucketed(objective, weight, train_ltr.mlp(params, x), buckets, length_scaled)

        def step(carry, _):
            params, state = carry
            grads = jax.grad(loss)(params)
            updates, state = optimizer.update(grads, state, params)
            return (optax.apply_updates(params, updates), state), None

        def block(carry, i):
            params, state, best, best_value, best_step = carry
            (params, state), _ = lax.scan(step, (params, state), None, length=every)
            value = mean_ndcg10(params, valid)
            better = value > best_value  # NaN never is: a diverged model keeps its last good weights
            best = jax.tree.map(lambda new, old: jnp.where(better, new, old), params, best)
            return (
                params,
                state,
                best,
                jnp.where(better, value, best_value),
                jnp.where(better, (i + 1) * every, best_step),
            ), value

        params = train_ltr.init_mlp(jax.random.PRNGKey(seed), (x.shape[-1], hidden, 1))
        init = (params, optimizer.init(params), params, jnp.asarray(-jnp.inf), jnp.asarray(0))
        (params, _, best, best_value, best_step), curve = lax.scan(block, init, jnp.arange(blocks))
        tx, ty, tw = test
        scores = jnp.where(tw, train_ltr.mlp(best, tx), 0.0)
        return dict(
            test=ndcg_table(scores, ty, tw),
            scores=scores,
            valid=best_value,
            step=best_step,
            curve=curve,
            final_loss=loss(params),
        )

    return jax.jit(jax.vmap(one, in_axes=(0, None, None, None)))


@dataclasses.dataclass
class Result:
    """One row over every fold: per judged query (mean over seeds) nDCG@(1, 3, 5, 10), ``[Q, 4]``;
    LETOR's nDCG@10 ``[Q]`` (MQ2008); the validation nDCG@10 of the chosen step (mean over
    folds and seeds); the chosen steps (or GBDT settings); seconds."""

    test: np.ndarray
    letor: Optional[np.ndarray]
    valid: float
    chosen: list
    seconds: float
    finite: bool = True


def run_mlp(row: Row, ds: Dataset, seeds, *, steps, every, hidden, lr, letor: bool) -> Result:
    start = time.perf_counter()
    program = build_program(
        row.objective, row.weight, length_scaled=row.length_scaled, steps=steps, every=every, hidden=hidden, lr=lr
    )
    tests, letors, valids, chosen, finite = [], [], [], [], True
    for fold in ds.folds:
        valid, test = ds.eval_arrays(fold.data.valid), ds.eval_arrays(fold.data.test)
        out = jax.device_get(program(jnp.asarray(seeds), ds.train_arrays(fold), valid, test))
        real = fold.data.test.num_queries
        tests.append(np.mean(out["test"], 0)[:real])
        if letor:
            letors.append(letor_table(out["scores"], test[1], test[2])[:real])
        valids.append(out["valid"] * fold.data.valid.num_queries)
        chosen.extend(int(s) for s in out["step"])
        finite &= bool(np.all(np.isfinite(out["final_loss"])))
    n_valid = sum(f.data.valid.num_queries for f in ds.folds)
    return Result(
        test=np.concatenate(tests),
        letor=np.concatenate(letors) if letor else None,
        valid=float(np.sum(valids) / (n_valid * len(seeds))),
        chosen=chosen,
        seconds=time.perf_counter() - start,
        finite=finite,
    )


def run_gbdt(row: Row, ds: Dataset, seeds, *, letor: bool, quick: bool) -> Result:
    start = time.perf_counter()
    if row.grid:
        grid = LGB_GRID if row.gbdt == "lightgbm" else XGB_GRID
        trees = TREES
        if quick:
            grid, trees = grid[:2], (2, QUICK["trees"])
    tests, letors, valids, chosen = [], [], [], []
    for fold in ds.folds:
        tr, va, te = fold.raw
        v_x, v_y, v_w = ds.eval_arrays(fold.data.valid)
        t_x, t_y, t_w = ds.eval_arrays(fold.data.test)
        if row.grid:  # the setting and number of trees with the best validation nDCG@10 (seed 0)
            best = (-1.0, None, None)
            for params in grid:
                predict = _fit_gbdt(row.gbdt, {**params, "n_estimators": max(trees)}, tr, seeds[0])
                scores = np.stack([_padded(predict(va[0], t), va[2], v_w.shape) for t in trees])
                values = np.asarray(_ndcg_batch(scores, v_y, v_w))[:, : len(va[2]), -1].mean(1)
                i = int(np.argmax(values))
                if values[i] > best[0]:
                    best = (float(values[i]), params, trees[i])
            params = {**best[1], "n_estimators": best[2]}
            chosen.append(params)
        else:
            params = {"n_estimators": QUICK["trees"]} if quick else {}
        predictors = [_fit_gbdt(row.gbdt, params, tr, s) for s in seeds]
        scores = np.stack([_padded(p(te[0]), te[2], t_w.shape) for p in predictors])
        real = len(te[2])
        tests.append(np.asarray(_ndcg_batch(scores, t_y, t_w)).mean(0)[:real])
        if letor:
            letors.append(letor_table(scores, t_y, t_w)[:real])
        v_scores = np.stack([_padded(p(va[0]), va[2], v_w.shape) for p in predictors])
        valids.append(np.asarray(_ndcg_batch(v_scores, v_y, v_w))[:, : len(va[2]), -1].mean(0))
    return Result(
        test=np.concatenate(tests),
        letor=np.concatenate(letors) if letor else None,
        valid=float(np.mean(np.concatenate(valids))),
        chosen=chosen,
        seconds=time.perf_counter() - start,
    )


# ----------------------------------------------------------------------------- table
def difference(values, reference) -> tuple[float, float, float, float]:
    """``values - reference`` over the same queries: mean, 95% bootstrap interval (percentile,
    10,000 resamples), two-sided randomization p-value (as benchmarks/bench_defaults.py)."""
    diff = jnp.asarray(values - reference)
    low, high = jaxrank.stats.bootstrap_ci(diff, key=jax.random.key(0))
    _, pvalue = jaxrank.stats.randomization_test(jnp.asarray(values), jnp.asarray(reference), key=jax.random.key(1))
    return float(jnp.mean(diff)), float(low), float(high), float(pvalue)


def _chosen(result: Result, row: Row) -> str:
    if row.gbdt is None:
        return f"{int(np.median(result.chosen))}"
    if not result.chosen:
        return "example's"
    trees = [c["n_estimators"] for c in result.chosen]
    return f"{int(np.median(trees))} trees"


def table(ds: Dataset, results: dict, letor: bool) -> str:
    names = list(results)
    means = {k: float(np.mean(r.test[:, -1])) for k, r in results.items()}
    order = sorted(names, key=lambda k: -means[k])
    head = "| rank | loss | " + " | ".join(f"nDCG@{k}" for k in CUTOFFS)
    head += " | LETOR nDCG@10 |" if letor else " |"
    head += " valid nDCG@10 | - best other, nDCG@10 [95% CI] p | step / trees (median) | s |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for k in names:
        r = results[k]
        others = [o for o in names if o != k]
        if others:
            best = max(others, key=lambda o: means[o])
            mean, low, high, p = difference(r.test[:, -1], results[best].test[:, -1])
            paired = f"{mean:+.4f} [{low:+.4f}, {high:+.4f}] p {p:.3f} (vs `{best}`)"
        else:
            paired = ""
        cells = [f"{order.index(k) + 1}", f"`{k}`: {ROWS[k].label}" + ("" if r.finite else " (diverged)")]
        cells += [f"{v:.4f}" for v in r.test.mean(0)]
        if letor:
            cells.append(f"{np.mean(r.letor):.4f}")
        cells += [f"{r.valid:.4f}", paired, _chosen(r, ROWS[k]), f"{r.seconds:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def versus(results: dict, name: str) -> str:
    """``name``'s row minus every other row, nDCG@10 over the same queries (interval and p as
    :func:`difference`), other rows by mean, best first."""
    if name not in results:
        return f"(no row {name!r} in these results)"
    lines = [f"| `{name}` - row | nDCG@10 difference [95% CI] | p |", "|---|---|---|"]
    others = sorted((k for k in results if k != name), key=lambda k: -float(np.mean(results[k].test[:, -1])))
    for k in others:
        mean, low, high, p = difference(results[name].test[:, -1], results[k].test[:, -1])
        lines.append(f"| `{k}` | {mean:+.4f} [{low:+.4f}, {high:+.4f}] | {p:.3f} |")
    return "\n".join(lines)


def describe(ds: Dataset) -> str:
    labels = [np.concatenate([f.raw[2][1]]) for f in ds.folds]
    sizes = np.concatenate([f.raw[2][2] for f in ds.folds])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    y = np.concatenate(labels)
    no_rel = int(sum(1 for s, m in zip(starts, sizes) if not np.any(y[s : s + m] > 0)))
    short = int(np.sum(sizes < 10))
    return (
        f"{sizes.size} judged queries ({len(ds.folds)} folds, each judged once), {int(sizes.sum())} documents; "
        f"{no_rel} judged queries have no relevant document: they score 0 and count in every mean "
        f"(trec_eval's and jaxrank's convention; LETOR's Eval-Score-4.0.pl also scores them 0 and counts them); "
        f"{short} have fewer than 10 documents (LETOR's script scores their nDCG@10 0, trec_eval/jaxrank "
        "over the documents there are)."
    )


# ------------------------------------------------------------------------------ main
def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", choices=("mq2008", "lambdarank", "both"), default="both")
    p.add_argument("--losses", nargs="+", help="rows (default: all), from: " + " ".join(ROWS))
    p.add_argument(
        "--rankers",
        nargs="+",
        metavar="EXPR",
        help="more rows: metric_loss with ranker=EXPR, e.g. 'jaxrank.laplace(0.25)'",
    )
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--eval-every", type=int, default=10)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--quick", action="store_true", help="tiny: a few queries per block, a few steps and trees")
    p.add_argument("--mq2008", type=Path, default=SHARED / "mq2008", help="folder of LETOR 4.0 MQ2008 Fold1")
    p.add_argument("--lambdarank", type=Path, default=SHARED / "lambdarank", help="LightGBM's example data")
    p.add_argument("--json", type=Path, help="write per-query results here (after every row)")
    p.add_argument("--from-json", type=Path, nargs="+", help="print the tables of earlier runs' --json, run nothing")
    p.add_argument("--versus", metavar="ROW", help="also print this row's paired difference to every other row")
    args = p.parse_args(argv)
    if args.from_json:
        return reprint(args)
    if args.losses is None:  # every row, unless only rankers were given
        args.losses = [] if args.rankers else list(ROWS)
    for expr in args.rankers or ():  # rows of metric_loss with a ranker given on the command line
        ROWS[expr] = Row(f"jaxrank `metric_loss(..., ranker={expr})`", _metric(eval(expr, {"jaxrank": jaxrank})))
        args.losses.append(expr)
    unknown = [k for k in args.losses if k not in ROWS]
    if unknown:
        p.error(f"unknown rows {unknown}; choose from {' '.join(ROWS)}")
    if args.quick:
        args.steps, args.eval_every, args.hidden = QUICK["steps"], QUICK["eval_every"], QUICK["hidden"]
    seeds = list(range(args.seeds))
    start = time.perf_counter()
    run = _machine.start(
        peers=("optax", "rax", "lightgbm", "xgboost"),
        extra={"backend": jax.default_backend(), "seeds": seeds, "steps": args.steps, "eval_every": args.eval_every},
    )
    print(run.header())
    print(
        f"# recipe: MLP {args.hidden} ReLU units (He init), quantile-transformed standardised features, Adam lr "
        f"{args.lr}, {args.steps} full-batch steps, the step of best validation nDCG@10 (every "
        f"{args.eval_every}) judged"
    )
    sets = ["mq2008", "lambdarank"] if args.data == "both" else [args.data]
    out: dict = {"command": run.command, "data": {}}
    for name in sets:
        ds = load(name, args.mq2008 if name == "mq2008" else args.lambdarank, args.quick)
        letor = name == "mq2008"
        results: dict = {}
        trained: dict = {}
        for key in args.losses:
            row = ROWS[key]
            ranker = getattr(jaxrank, key, None) if key in ("approx", "softrank", "neuralsort", "softsort") else None
            same = "default" if ranker is not None and repr(_default_ranker()) == repr(ranker()) else key
            if same in trained:  # metric_loss's default is this ranker: the same model
                results[key] = trained[same]
            elif row.gbdt is None:
                opts = dict(steps=args.steps, every=args.eval_every, hidden=args.hidden, lr=args.lr, letor=letor)
                results[key] = run_mlp(row, ds, seeds, **opts)
            else:
                results[key] = run_gbdt(row, ds, seeds, letor=letor, quick=args.quick)
            trained[key] = results[key]
            _record(out, name, results, args.json)
            r = results[key]
            print(
                f"{name} {key}: nDCG@10 {np.mean(r.test[:, -1]):.4f} valid {r.valid:.4f} {r.seconds:.0f} s",
                file=sys.stderr,
                flush=True,
            )
        print(f"\n## {name}: {describe(ds)}\n")
        print(table(ds, results, letor), flush=True)
        if args.versus:
            print(f"\n{versus(results, args.versus)}", flush=True)
    print()
    print(f"# wall time {math.ceil(time.perf_counter() - start)} s")
    print(run.finish())
    return out


def reprint(args) -> dict:
    """The tables of saved results (``--json`` of one or more runs, their rows merged per data
    set; a later file's row replaces an earlier one's)."""
    data: dict = {}
    for path in args.from_json:
        for name, rows in json.loads(path.read_text())["data"].items():
            data.setdefault(name, {}).update(rows)
    for name, rows in data.items():
        ds = load(name, args.mq2008 if name == "mq2008" else args.lambdarank, args.quick)
        results = {
            k: Result(
                test=np.asarray(r["test"]),
                letor=None if r["letor"] is None else np.asarray(r["letor"]),
                valid=r["valid"],
                chosen=r["chosen"],
                seconds=r["seconds"],
                finite=r["finite"],
            )
            for k, r in rows.items()
        }
        print(f"\n## {name}: {describe(ds)}\n")
        print(table(ds, results, name == "mq2008"))
        if args.versus:
            print(f"\n{versus(results, args.versus)}")
    return {"data": data}


def _record(out: dict, name: str, results: dict, path: Optional[Path]) -> None:
    """Each row's per-query results into ``out`` (and ``path``, rewritten after every row, so
    that a long run that stops keeps what it finished)."""
    out["data"][name] = {
        k: dict(
            test=r.test.tolist(),
            letor=None if r.letor is None else r.letor.tolist(),
            valid=r.valid,
            chosen=r.chosen,
            seconds=r.seconds,
            finite=r.finite,
        )
        for k, r in results.items()
    }
    if path is not None:
        path.write_text(json.dumps(out))


if __name__ == "__main__":
    main()
