#!/usr/bin/env python
"""Learning to rank with jaxrank: an MLP scorer trained on LightGBM's LambdaRank data.

For each loss, an MLP scorer is trained with optax (AdamW, cosine decay, 32
queries per step, dropout) on the 201 training queries of ``rank.train`` and
evaluated on the 50 queries of ``rank.test`` with jaxrank's exact nDCG@1/5/10.
Each document's 300 features are replaced by their empirical CDF over the
training documents (a quantile transform) and standardised; the MLP sees them
beside the same features standardised within the document's query
(600 -> 256 -> 128 -> 1, ReLU). The losses:

* soft-metric losses, ``1 - nDCG`` with the hard ranker swapped for a smooth one,
  through :func:`jaxrank.losses.metric_loss`: ``approx`` (pairwise-sigmoid
  approximate ranks), ``softrank`` (isotonic soft ranks), ``neuralsort``;
* the baselines of :mod:`jaxrank.losses`: ``softmax_cross_entropy`` (ListNet-like),
  ``pairwise_logistic`` (RankNet), ``lambda_loss`` (LambdaLoss), ``listmle``;

beside LightGBM's LambdaRank with the parameters of LightGBM's own example
(``examples/lambdarank/train.conf``), trained on the same queries.

Evaluation follows trec_eval's nDCG: linear gain, log2 discount, the ideal DCG
from the query's own labels (every judged document of this data set is in its
list, so the list is complete), 0 for a query without a relevant document, the
mean over all 50 test queries. Ties are scored with ``jaxrank.hard("expected")``
(the mean over the orders of each tie group), so that a
model which gives equal scores earns nothing from the order of the input.

Hyperparameters (``DEFAULTS`` and ``LOSS_DEFAULTS`` below) were chosen on a
validation split carved from the training queries (``--valid-fraction``); the
test queries were never used to choose anything. See ``docs/reports/letor.md``.

Usage::

    python examples/train_ltr.py                      # every loss, 5 seeds, + LightGBM
    python examples/train_ltr.py --quick              # seconds, for CI
    python examples/train_ltr.py --losses approx,listmle --seeds 3 --json out.json
    python examples/train_ltr.py --valid-fraction 0.25 --no-lightgbm  # on held-out TRAIN queries
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np
import optax

try:
    import jaxrank
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import jaxrank
from jaxrank.datasets import SvmlightData, pad_queries, read_svmlight

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "lambdarank"
CUTOFFS = (1, 5, 10)

SOFT_LOSSES = ("approx", "softrank", "neuralsort", "softsort")
BASELINE_LOSSES = ("softmax_cross_entropy", "pairwise_logistic", "lambda_loss", "listmle")
ALL_LOSSES = SOFT_LOSSES + BASELINE_LOSSES


# ----------------------------------------------------------------------------- data
@dataclasses.dataclass
class Split:
    """Padded queries: ``x[Q, n, d]``, ``y[Q, n]``, ``where[Q, n]``."""

    x: np.ndarray
    y: np.ndarray
    where: np.ndarray

    @property
    def num_queries(self) -> int:
        return self.x.shape[0]


@dataclasses.dataclass
class LTRData:
    train: Split
    test: Split
    valid: Optional[Split] = None


def _split(data, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The documents of the queries ``idx`` (flat arrays and their group sizes)."""
    starts = np.cumsum(data.group_sizes) - data.group_sizes
    rows = np.concatenate([np.arange(starts[q], starts[q] + data.group_sizes[q]) for q in idx])
    return data.features[rows], data.labels[rows], data.group_sizes[idx]


def load_lambdarank(
    data_dir=DEFAULT_DATA,
    *,
    valid_fraction: float = 0.0,
    split_seed: int = 0,
    transform: str = "quantile",
    raw: bool = False,
):
    """Reads ``rank.train`` / ``rank.test`` (+ ``.query``) into padded splits.

    With ``valid_fraction > 0`` a random ``valid_fraction`` of the TRAINING queries
    (``split_seed``) is held out as ``valid`` and removed from ``train``; the
    test queries are untouched. Features are standardised with the mean and
    standard deviation of the (remaining) training documents; with
    ``transform="quantile"`` each feature is first replaced by its empirical CDF
    over the training documents (ties at their mid-rank). Padding stays 0.

    With ``raw=True`` returns the untransformed flat ``(train, valid, test)``
    instead, each ``(features, labels, group_sizes)`` (``valid`` is ``None``
    without a split), for LightGBM.
    """
    data_dir = Path(data_dir)
    train = read_svmlight(data_dir / "rank.train", data_dir / "rank.train.query")
    test = read_svmlight(data_dir / "rank.test", data_dir / "rank.test.query", num_features=train.features.shape[1])
    tr, va = _hold_out(train, np.arange(train.group_sizes.size), valid_fraction, split_seed)
    te = (test.features, test.labels, test.group_sizes)
    return (tr, va, te) if raw else _prepare(tr, va, te, transform)


def load_fold(
    data_dir=DEFAULT_DATA,
    *,
    folds: int = 5,
    fold: int = 0,
    fold_seed: int = 0,
    valid_fraction: float = 0.0,
    split_seed: int = 0,
    transform: str = "quantile",
    raw: bool = False,
):
    """One fold of cross-validation over every query of the data set (``rank.train`` and
    ``rank.test`` pooled: 251 queries).

    The pooled queries are shuffled (``fold_seed``) and cut into ``folds`` parts of equal
    size (within one query); part ``fold`` is ``test``, the others are ``train``. With
    ``valid_fraction > 0`` a random part of those training queries (``split_seed``) is
    ``valid`` instead (a nested split: settings are chosen on it, never on ``test``).
    Features are transformed as in :func:`load_lambdarank`, with statistics of the
    training documents of the fold. ``raw=True``: the flat splits, for LightGBM.
    """
    if not 0 <= fold < folds:
        raise ValueError(f"fold must be in [0, {folds}), got {fold}")
    pool = _pooled(Path(data_dir))
    order = np.random.default_rng(fold_seed).permutation(pool.group_sizes.size)
    held_out = np.sort(np.array_split(order, folds)[fold])
    tr, va = _hold_out(pool, np.setdiff1d(order, held_out), valid_fraction, split_seed)
    te = _split(pool, held_out)
    return (tr, va, te) if raw else _prepare(tr, va, te, transform)


@functools.lru_cache(maxsize=2)
def _pooled(data_dir: Path) -> SvmlightData:
    """rank.train's queries followed by rank.test's (read once per process: every fold and
    recipe of a cross-validation splits the same arrays, which nothing writes to)."""
    train = read_svmlight(data_dir / "rank.train", data_dir / "rank.train.query")
    test = read_svmlight(data_dir / "rank.test", data_dir / "rank.test.query", num_features=train.features.shape[1])
    return SvmlightData(
        np.concatenate([train.features, test.features]),
        np.concatenate([train.labels, test.labels]),
        np.concatenate([train.group_sizes, test.group_sizes]),
        None,
    )


def _hold_out(data, queries: np.ndarray, fraction: float, seed: int):
    """``queries`` of ``data`` split into (train, valid): a random ``fraction`` (``seed``) is
    valid, ``None`` when the fraction rounds to no query."""
    order = np.random.default_rng(seed).permutation(queries.size)
    n_valid = int(round(fraction * queries.size))
    train_idx, valid_idx = np.sort(queries[order[n_valid:]]), np.sort(queries[order[:n_valid]])
    return _split(data, train_idx), (_split(data, valid_idx) if n_valid else None)


def _prepare(tr, va, te, transform: str) -> LTRData:
    """Padded splits with features transformed by statistics of the training documents."""
    if transform == "quantile":
        # Empirical CDF of each feature over the training documents (mid-rank of ties).
        columns = np.sort(tr[0], 0)

        def cdf(x):
            out = np.empty(x.shape, np.float64)
            for j in range(x.shape[1]):
                lo = np.searchsorted(columns[:, j], x[:, j], "left")
                hi = np.searchsorted(columns[:, j], x[:, j], "right")
                out[:, j] = (lo + hi) / (2.0 * columns.shape[0])
            return out

        transformed = cdf(tr[0])
    elif transform == "standard":
        cdf = None
        transformed = tr[0]
    else:
        raise ValueError(f"transform must be 'standard' or 'quantile', got {transform!r}")
    mean = transformed.mean(0)
    std = transformed.std(0)
    std = np.where(std > 0, std, 1.0)

    def pad(part):
        f = part[0] if cdf is None else cdf(part[0])
        x, y, where = pad_queries((f - mean) / std, part[1], part[2])
        return Split(np.where(where[..., None], x, 0).astype(np.float32), y, where)

    return LTRData(train=pad(tr), test=pad(te), valid=pad(va) if va is not None else None)


# ---------------------------------------------------------------------------- model
def init_mlp(key, sizes: Sequence[int], context: bool = False):
    """He-initialised dense layers ``[(w, b), ...]`` for ``sizes = (d, h1, ..., 1)``;
    ``context``: the second layer takes ``2 * h1`` inputs (see :func:`mlp`)."""
    params = []
    for i, (d_in, d_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        d_in = 2 * d_in if context and i == 1 else d_in
        key, sub = jax.random.split(key)
        w = jax.random.normal(sub, (d_in, d_out), jnp.float32) * math.sqrt(2.0 / d_in)
        params.append((w, jnp.zeros((d_out,), jnp.float32)))
    return params


def list_mean(h, where):
    """The mean of ``h[..., n, H]`` over the valid items of each list, ``[..., 1, H]``."""
    w = where[..., None].astype(h.dtype)
    return (h * w).sum(-2, keepdims=True) / jnp.maximum(w.sum(-2, keepdims=True), 1.0)


def query_normalize(x, where, eps: float = 1e-3):
    """Each feature standardised within its query: ``(x - mean_q) / (std_q + eps)``.

    Means and deviations over the valid documents of the list; padding stays 0.
    A list-level view of the features (how a document compares with the other
    candidates of the same query) that a pointwise MLP cannot compute itself.
    """
    mean = list_mean(x, where)
    var = list_mean(jnp.square(x - mean), where)
    return jnp.where(where[..., None], (x - mean) / (jnp.sqrt(var) + eps), 0.0)


def _dropout(x, rate: float, key):
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), 0.0)


def mlp(
    params,
    x,
    where=None,
    *,
    dropout: float = 0.0,
    input_dropout: float = 0.0,
    layernorm: bool = False,
    context: bool = False,
    key=None,
):
    """Scores ``[..., n]`` for features ``[..., n, d]``; dropout on the hidden units (and on
    the inputs, ``input_dropout``) when ``key``. ``layernorm``: each hidden layer's
    pre-activations are standardised over its units (no learned scale or shift: the next
    layer's weights can absorb them, and the parameters keep their ``[(w, b), ...]`` form).
    ``context`` (needs ``where``): the first hidden layer's units are followed by their mean
    over the list's valid items (a DeepSets-style summary of the list), so the next layer
    sees each document beside the whole list; the second layer's inputs double."""
    if input_dropout > 0 and key is not None:
        key, sub = jax.random.split(key)
        x = _dropout(x, input_dropout, sub)
    for i, (w, b) in enumerate(params):
        x = x @ w + b
        if i < len(params) - 1:
            if layernorm:
                x = (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5)
            x = jax.nn.relu(x)
            if context and i == 0:
                x = jnp.concatenate([x, jnp.broadcast_to(list_mean(x, where), x.shape)], -1)
            if dropout > 0 and key is not None:
                key, sub = jax.random.split(key)
                x = _dropout(x, dropout, sub)
    return x[..., 0]


def score(
    params,
    x,
    where,
    *,
    query_norm: bool = False,
    dropout: float = 0.0,
    input_dropout: float = 0.0,
    input_noise: float = 0.0,
    layernorm: bool = False,
    context: bool = False,
    key=None,
):
    """The scorer: :func:`mlp` of the features, and of their :func:`query_normalize` view if asked.
    ``input_noise`` (when ``key``): Gaussian noise of that deviation is added to the valid
    documents' features first (data augmentation; the within-query view sees it too)."""
    if input_noise > 0 and key is not None:
        key, sub = jax.random.split(key)
        x = jnp.where(where[..., None], x + input_noise * jax.random.normal(sub, x.shape, x.dtype), 0.0)
    if query_norm:
        x = jnp.concatenate([x, query_normalize(x, where)], -1)
    return mlp(
        params, x, where, dropout=dropout, input_dropout=input_dropout, layernorm=layernorm, context=context, key=key
    )


# --------------------------------------------------------------------------- losses
def standardize_scores(scores, where, eps: float = 1e-6):
    """Each list's scores minus their mean over its valid items, divided by
    ``sqrt(variance + eps)``; padding stays 0. The soft ranker's temperature then acts on a
    fixed scale instead of on whatever spread the model's scores have reached. (``eps``
    inside the root: ``sqrt``'s gradient at a zero variance, a one-document list, is infinite.)"""
    mean = list_mean(scores[..., None], where)[..., 0]
    var = list_mean(jnp.square(scores - mean)[..., None], where)[..., 0]
    return jnp.where(where, (scores - mean) * jax.lax.rsqrt(var + eps), 0.0)


def make_loss(
    name: str,
    temperature: Optional[float] = None,
    gain: str = "linear",
    *,
    cutoff: Optional[int] = None,
    sinkhorn: int = 0,
    regularization: str = "l2",
    score_norm: bool = False,
    gumbel: int = 0,
    units: str = "score",
) -> Callable:
    """``loss(scores, labels, where, scale=1.0, key=None) -> [Q]`` from :mod:`jaxrank.losses`.

    ``approx`` / ``softrank`` / ``neuralsort`` / ``softsort``: ``1 - nDCG`` computed by
    :func:`jaxrank.losses.metric_loss` with that smooth ranker, whose first
    parameter (the temperature of ``approx``, ``neuralsort``, ``softsort``, the strength of
    ``softrank``) is ``temperature`` (the ranker's own default when ``None``),
    and the nDCG's ``gain`` (``"linear"`` as evaluated, or ``"exp"``, 2^y - 1,
    which weighs the top grades more), its cutoff ``k=cutoff`` (``None``: the
    whole list). ``sinkhorn`` iterations go to
    ``neuralsort``, ``regularization`` (``"l2"`` or ``"kl"``) to ``softrank``.
    ``score_norm``: the scores are first standardised per list (:func:`standardize_scores`).
    ``units``: the soft ranker's ``units=`` (``"score"``: temperatures in score units, as this
    protocol was tuned; ``"std"``: fractions of each list's spread; ``"bounded"``: the library's
    default, score units kept within a band of each list's spread).
    ``gumbel > 0`` (and a ``key``): the loss is the mean over that many Plackett-Luce
    samples, :func:`jaxrank.gumbel` around the soft ranker, fresh noise for each ``key``
    (the stochastic treatment of Bruch et al., 2020).
    The soft ranker sees ``scale * scores``: the rankers depend on the scores only
    through ``scores / temperature`` (approx's pairwise sigmoids, neuralsort's and softsort's logits,
    softrank's projection of ``scores / strength``), so ``scale`` divides the temperature
    by it, and can be a traced array (temperature annealing without recompiling; only
    the soft cutoff of ``cutoff=k`` keeps the base temperature).
    The others are the baselines of :mod:`jaxrank.losses` with their defaults; they ignore
    ``scale`` (they have no temperature).
    """
    from jaxrank import losses

    if name in SOFT_LOSSES:
        factory = getattr(jaxrank, name)
        options = {
            "neuralsort": dict(sinkhorn=sinkhorn),
            "softsort": dict(sinkhorn=sinkhorn),
            "softrank": dict(regularization=regularization),
        }
        # softrank's smoothing parameter is its regularization strength; approx, neuralsort
        # and softsort call theirs a temperature.
        args = () if temperature is None else (temperature,)
        ranker = factory(*args, units=units, **options.get(name, {}))

        def loss(scores, labels, where, scale=1.0, key=None):
            if score_norm:
                scores = standardize_scores(scores, where)
            sampled = ranker if gumbel <= 0 or key is None else jaxrank.gumbel(ranker, gumbel, key)
            return losses.metric_loss(
                scale * scores, labels, where=where, metric=jaxrank.ndcg, ranker=sampled, gain=gain, k=cutoff
            )

        return loss
    if name in BASELINE_LOSSES:
        fn = getattr(losses, name)
        return lambda scores, labels, where, scale=1.0, key=None: fn(scores, labels, where=where)
    raise ValueError(f"unknown loss {name!r}; choose from {', '.join(ALL_LOSSES)}")


# ------------------------------------------------------------------------- training
@dataclasses.dataclass
class Config:
    """Training settings of one loss (the defaults are the choices of docs/reports/letor.md)."""

    hidden: tuple = (256, 128)
    steps: int = 300
    lr: float = 3e-4  # peak of a cosine decay to 5% of it
    weight_decay: float = 1e-4  # AdamW's decoupled decay
    dropout: float = 0.5  # on the hidden units
    batch: int = 32  # queries per step; 0: every training query
    temperature: Optional[float] = None  # soft ranker: temperature (approx, neuralsort), strength (softrank)
    gain: str = "linear"  # gain of the soft nDCG in the loss ("linear" or "exp"); evaluation stays linear
    cutoff: Optional[int] = None  # k of the soft nDCG in the loss; None: the whole list
    sinkhorn: int = 0  # neuralsort: Sinkhorn normalisations of its relaxed permutation
    regularization: str = "l2"  # softrank: "l2" (Euclidean) or "kl" (entropic) projection
    ema: float = 0.0  # decay of the moving average of the weights that is evaluated; 0: the last weights
    anneal: float = 1.0  # soft losses: temperature goes geometrically from anneal * T (step 0) to T (last step)
    score_norm: bool = False  # soft losses: standardise each list's scores before the soft ranker
    units: str = "score"  # soft rankers' units= (docs/reports/letor.md was tuned in score units)
    warmup: float = 0.0  # fraction of the steps with a linear learning-rate warm-up from 0
    input_dropout: float = 0.0  # dropout on the MLP's input features
    layernorm: bool = False  # standardise each hidden layer's pre-activations over its units
    input_noise: float = 0.0  # deviation of Gaussian noise added to the (standardised) input features
    context: bool = False  # feed the list's mean of the first hidden layer to the second layer
    gumbel: int = 0  # soft losses: Plackett-Luce samples (jaxrank.gumbel) per list and step; 0: none
    query_norm: bool = True  # also feed each feature standardised within its query
    transform: str = "quantile"  # feature preprocessing: "quantile" or "standard"
    eval_every: int = 25

    def replace(self, **kw) -> Config:
        return dataclasses.replace(self, **{k: v for k, v in kw.items() if v is not None})


# Chosen on held-out TRAINING queries (benchmarks/bench_ltr.py tune; docs/reports/letor.md).
# The test queries chose nothing.
DEFAULTS = Config()
LOSS_DEFAULTS: dict[str, dict] = {
    "approx": dict(temperature=3.0),
    "softrank": dict(temperature=1.0),  # the strength of softrank's projection
    "neuralsort": dict(temperature=3.0),
    "softsort": dict(temperature=3.0),
    "softmax_cross_entropy": dict(lr=1e-3),
    "pairwise_logistic": dict(),
    "lambda_loss": dict(steps=100),
    "listmle": dict(lr=1e-3),
}


def config_for(loss: str, base: Config = DEFAULTS, **overrides) -> Config:
    return base.replace(**LOSS_DEFAULTS.get(loss, {})).replace(**overrides)


def evaluate(
    params, split: Split, query_norm: bool = False, layernorm: bool = False, context: bool = False
) -> np.ndarray:
    """Mean exact nDCG@(1, 5, 10) over the queries of ``split`` (trec_eval conventions).

    ``params`` of one model gives ``[3]``; params stacked over seeds (as returned
    by :func:`train`) give ``[seeds, 3]``.
    """
    stacked = params[0][0].ndim == 3
    fn = _evaluate_seeds if stacked else _evaluate
    return np.asarray(fn(params, split.x, split.y, split.where, query_norm, layernorm, context))


def _exact_ndcg(scores, y, where):
    """nDCG@(1, 5, 10) of each query, ``[Q, 3]``: trec_eval's conventions, ties averaged."""
    return jaxrank.ndcg(scores, y, k=CUTOFFS, where=where, ranker=jaxrank.hard("expected"))


def _evaluate_one(params, x, y, where, query_norm, layernorm, context):
    scores = score(params, x, where, query_norm=query_norm, layernorm=layernorm, context=context)
    return jaxrank.aggregate(_exact_ndcg(scores, y, where))


_evaluate = jax.jit(_evaluate_one, static_argnums=(4, 5, 6))
_exact_ndcg_jit = jax.jit(_exact_ndcg)
_evaluate_seeds = jax.jit(jax.vmap(_evaluate_one, (0, None, None, None, None, None, None)), static_argnums=(4, 5, 6))


def train(
    loss_fn: Callable,
    data: LTRData,
    cfg: Config,
    seeds: Sequence[int] = (0,),
    *,
    eval_split: Optional[Split] = None,
    progress=None,
):
    """Trains one MLP per seed, all seeds at once (``vmap``); returns ``(params, history)``.

    ``params`` are stacked over seeds (leading axis). ``history`` =
    ``{"step": [...], "ndcg@10": [[...] per seed]}``: nDCG@10 on ``eval_split``
    (default: test) at step 0 and every ``cfg.eval_every`` steps. ``progress``
    (a tqdm bar) is advanced by the number of steps done.

    Each step draws ``cfg.batch`` training queries at random (without
    replacement), applies dropout to the hidden units, and takes an AdamW step
    with a cosine-decayed learning rate (after a linear warm-up over the first
    ``cfg.warmup`` of the steps, if any). With ``cfg.anneal != 1`` the soft ranker's
    temperature goes geometrically from ``cfg.anneal`` times its value at step 0 to its
    value at the last step (``loss_fn``'s ``scale``). With ``cfg.ema > 0`` the returned and
    evaluated weights are an exponential moving average of the weights after
    each step (:func:`optax.ema`, debiased), not the last ones.
    """
    eval_split = data.test if eval_split is None else eval_split
    train_split = data.train
    x = jnp.asarray(train_split.x)
    y = jnp.asarray(train_split.y, jnp.float32)
    where = jnp.asarray(train_split.where)
    q = train_split.num_queries
    batch = q if cfg.batch <= 0 or cfg.batch >= q else cfg.batch
    sizes = (x.shape[-1] * (2 if cfg.query_norm else 1), *cfg.hidden, 1)
    if cfg.warmup > 0:
        schedule = optax.warmup_cosine_decay_schedule(
            0.0, cfg.lr, max(int(round(cfg.warmup * cfg.steps)), 1), max(cfg.steps, 1), end_value=0.05 * cfg.lr
        )
    else:
        schedule = optax.cosine_decay_schedule(cfg.lr, max(cfg.steps, 1), alpha=0.05)
    optimizer = optax.adamw(schedule, weight_decay=cfg.weight_decay)
    averager = weight_average(cfg.ema)

    def init(seed):
        params = init_mlp(jax.random.fold_in(jax.random.PRNGKey(seed), 0), sizes, cfg.context)
        return params, (optimizer.init(params), averager.init(params))

    def objective(params, key, scale, x, y, where):
        pick_key, drop_key = jax.random.split(key)
        noise_key = jax.random.fold_in(key, 2)  # leaves the other two streams as they were
        if batch < q:
            idx = jax.random.choice(pick_key, q, (batch,), replace=False)
            x, y, where = x[idx], y[idx], where[idx]
        scores = score(
            params,
            x,
            where,
            query_norm=cfg.query_norm,
            dropout=cfg.dropout,
            input_dropout=cfg.input_dropout,
            input_noise=cfg.input_noise,
            layernorm=cfg.layernorm,
            context=cfg.context,
            key=drop_key,
        )
        return jnp.mean(loss_fn(scores, y, where, scale, noise_key))

    def temperature_scale(step):
        """1 / (the temperature's factor at ``step``): anneal**-1 at step 0, 1 at the last step."""
        progress = step / max(cfg.steps - 1, 1)
        return jnp.asarray(cfg.anneal, jnp.float32) ** (progress - 1.0)

    def chunk(params, state, keys, step_ids, x, y, where):
        """``len(keys)`` training steps; returns ``(params, state, averaged params, losses)``."""

        def step(carry, inputs):
            params, (opt_state, avg_state) = carry
            key, step_id = inputs
            scale = temperature_scale(step_id) if cfg.anneal != 1 else 1.0
            value, grads = jax.value_and_grad(objective)(params, key, scale, x, y, where)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            _, avg_state = averager.update(params, avg_state)
            return (params, (opt_state, avg_state)), value

        (params, state), values = jax.lax.scan(step, (params, state), (keys, step_ids))
        return params, state, averager.result(params, state[1]), values

    run_chunk = jax.jit(jax.vmap(chunk, (0, 0, 0, None, None, None, None)))
    seeds = list(seeds)
    params, state = jax.vmap(init)(jnp.asarray(seeds))
    evaluated = params  # the weights that are scored: the average when cfg.ema > 0
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), 1))(jnp.asarray(seeds))

    def ndcg10():
        return evaluate(evaluated, eval_split, cfg.query_norm, cfg.layernorm, cfg.context)[:, -1]

    history = {"step": [0], "ndcg@10": [ndcg10()]}
    done = 0
    while done < cfg.steps:
        n = min(cfg.eval_every, cfg.steps - done)
        split = jax.vmap(lambda k: jax.random.split(k, n + 1))(keys)
        keys, step_keys = split[:, 0], split[:, 1:]
        step_ids = jnp.arange(done, done + n, dtype=jnp.float32)
        params, state, evaluated, values = run_chunk(params, state, step_keys, step_ids, x, y, where)
        values = np.asarray(values)
        if not np.isfinite(values).all():
            raise FloatingPointError(f"the training loss became non-finite before step {done + n}")
        done += n
        history["step"].append(done)
        history["ndcg@10"].append(ndcg10())
        if progress is not None:
            progress.update(n)
            progress.set_postfix(loss=f"{values[:, -1].mean():.4f}", ndcg10=f"{history['ndcg@10'][-1].mean():.4f}")
    history["ndcg@10"] = np.stack(history["ndcg@10"], 1).tolist()  # [seeds][evals]
    return evaluated, history


class WeightAverage(NamedTuple):
    """An optional moving average of the weights: ``init(params) -> state``,
    ``update(params, state) -> (_, state)`` after each step (optax's convention),
    ``result(params, state) -> the weights to evaluate``."""

    init: Callable
    update: Callable
    result: Callable


def weight_average(decay: float) -> WeightAverage:
    """The debiased exponential moving average of the weights (:func:`optax.ema`) for
    ``0 < decay < 1``; for ``decay == 0``, no average (the last weights, an empty state).

    Debiasing (dividing by ``1 - decay**t``) makes the average start from the
    first trained weights rather than from zero or the random initialisation,
    which matters when ``1 / (1 - decay)`` is not small against the number of steps.
    """
    if decay == 0:
        return WeightAverage(lambda params: (), lambda params, state: (None, state), lambda params, state: params)
    if not 0 < decay < 1:
        raise ValueError(f"ema must be 0 (off) or in (0, 1), got {decay}")
    ema = optax.ema(decay, debias=True)

    def result(params, state):
        return optax.tree.bias_correction(state.ema, decay, state.count)

    return WeightAverage(ema.init, ema.update, result)


# ------------------------------------------------------------------------- LightGBM
LIGHTGBM_PARAMS = dict(
    # LightGBM's examples/lambdarank/train.conf, as LGBMRanker arguments:
    objective="lambdarank",
    n_estimators=100,  # num_trees = 100
    learning_rate=0.1,  # learning_rate = 0.1
    num_leaves=31,  # num_leaves = 31
    min_child_samples=50,  # min_data_in_leaf = 50
    min_child_weight=5.0,  # min_sum_hessian_in_leaf = 5.0
    max_bin=255,  # max_bin = 255
    colsample_bytree=1.0,  # feature_fraction = 1.0
    subsample=0.9,  # bagging_fraction = 0.9
    subsample_freq=1,  # bagging_freq = 1
)


def run_lightgbm(
    data_dir,
    seed: int,
    *,
    valid_fraction: float = 0.0,
    split_seed: int = 0,
    bagging: bool = True,
    n_estimators: Optional[int] = None,
) -> np.ndarray:
    """LightGBM's LambdaRank (``LIGHTGBM_PARAMS``); returns nDCG@(1, 5, 10) by jaxrank.

    Evaluated on test, or on the validation split when ``valid_fraction > 0``.
    ``bagging=False`` sets ``subsample=1.0`` (no row sampling, seed-independent).
    """
    tr, va, te = load_lambdarank(data_dir, valid_fraction=valid_fraction, split_seed=split_seed, raw=True)
    target = va if valid_fraction > 0 else te
    per_query = lightgbm_per_query(tr, target, seed, bagging=bagging, n_estimators=n_estimators)
    return np.asarray(jaxrank.aggregate(per_query))


def lightgbm_per_query(
    train_split, target, seed: int, *, bagging: bool = True, n_estimators: Optional[int] = None
) -> np.ndarray:
    """LightGBM's LambdaRank (``LIGHTGBM_PARAMS``) fitted on the flat ``train_split``
    ``(features, labels, group_sizes)``; exact nDCG@(1, 5, 10) of each query of ``target``
    (flat too), ``[Q, 3]``, by jaxrank with ``hard("expected")``."""
    import lightgbm

    params = dict(LIGHTGBM_PARAMS, random_state=seed, n_jobs=1, verbose=-1)
    if not bagging:
        params.update(subsample=1.0, subsample_freq=0)
    if n_estimators is not None:
        params["n_estimators"] = n_estimators
    model = lightgbm.LGBMRanker(**params)
    model.fit(train_split[0], train_split[1].astype(np.int32), group=train_split[2])
    features, labels, sizes = target
    x, y, where = pad_queries(features, labels, sizes)
    padded = np.zeros(where.shape, np.float32)
    padded[where] = model.predict(features)
    return np.asarray(_exact_ndcg_jit(padded, y, where))


# -------------------------------------------------------------------------- driver
def run(
    losses: Sequence[str] = ALL_LOSSES,
    seeds: Sequence[int] = tuple(range(5)),
    *,
    data_dir=DEFAULT_DATA,
    valid_fraction: float = 0.0,
    split_seed: int = 0,
    lightgbm: bool = True,
    overrides: Optional[dict] = None,
    base: Config = DEFAULTS,
    progress: bool = True,
) -> dict:
    """Trains every loss over every seed; returns a JSON-ready dict of results.

    ``progress``: a tqdm bar per loss (needs ``tqdm``).
    """
    if progress:
        from tqdm.auto import tqdm
    else:
        tqdm = None

    overrides = overrides or {}
    cache: dict = {}

    def data_for(transform):
        if transform not in cache:
            cache[transform] = load_lambdarank(
                data_dir, valid_fraction=valid_fraction, split_seed=split_seed, transform=transform
            )
        return cache[transform]

    results: dict = {
        "evaluated_on": "valid (held-out training queries)" if valid_fraction > 0 else "test",
        "valid_fraction": valid_fraction,
        "split_seed": split_seed,
        "seeds": list(seeds),
        "cutoffs": list(CUTOFFS),
        "losses": {},
    }
    for name in losses:
        cfg = config_for(name, base, **overrides)
        loss_fn = make_loss(
            name,
            cfg.temperature,
            cfg.gain,
            cutoff=cfg.cutoff,
            sinkhorn=cfg.sinkhorn,
            regularization=cfg.regularization,
            score_norm=cfg.score_norm,
            gumbel=cfg.gumbel,
            units=cfg.units,
        )
        data = data_for(cfg.transform)
        eval_split = data.valid if valid_fraction > 0 else data.test
        bar = (
            None
            if tqdm is None
            else tqdm(total=cfg.steps, desc=f"{name} x{len(seeds)} seeds", leave=True, dynamic_ncols=True)
        )
        start = time.perf_counter()
        params, history = train(loss_fn, data, cfg, seeds, eval_split=eval_split, progress=bar)
        if bar is not None:
            bar.close()
        runs = evaluate(params, eval_split, cfg.query_norm, cfg.layernorm, cfg.context).tolist()
        results["losses"][name] = {
            "config": dataclasses.asdict(cfg),
            "per_seed": runs,
            "mean": np.mean(runs, 0).tolist(),
            "std": np.std(runs, 0, ddof=1).tolist() if len(runs) > 1 else [0.0] * len(CUTOFFS),
            "history": history,
            "seconds": time.perf_counter() - start,
        }
    if lightgbm:
        for label, bagging in (("lightgbm_lambdarank", True), ("lightgbm_lambdarank_nobagging", False)):
            try:
                start = time.perf_counter()
                runs = [
                    run_lightgbm(
                        data_dir, s, valid_fraction=valid_fraction, split_seed=split_seed, bagging=bagging
                    ).tolist()
                    for s in seeds
                ]
            except ImportError:
                print("lightgbm is not installed: skipping the LambdaRank baseline", file=sys.stderr)
                break
            results["losses"][label] = {
                "config": dict(LIGHTGBM_PARAMS, **({} if bagging else dict(subsample=1.0, subsample_freq=0))),
                "per_seed": runs,
                "mean": np.mean(runs, 0).tolist(),
                "std": np.std(runs, 0, ddof=1).tolist() if len(runs) > 1 else [0.0] * len(CUTOFFS),
                "seconds": time.perf_counter() - start,
            }
    return results


def markdown_table(results: dict) -> str:
    """Mean ± standard deviation (over seeds, ddof=1) of nDCG@k per loss, best nDCG@10 in bold."""
    head = "| loss | " + " | ".join(f"nDCG@{k}" for k in results["cutoffs"]) + " |"
    rows = [head, "|" + "---|" * (len(results["cutoffs"]) + 1)]
    best = max(results["losses"], key=lambda n: results["losses"][n]["mean"][-1])
    for name, r in results["losses"].items():
        cells = [f"{m:.4f} ± {s:.4f}" for m, s in zip(r["mean"], r["std"])]
        if name == best:
            cells[-1] = f"**{cells[-1]}**"
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    n = len(results["seeds"])
    rows.append("")
    rows.append(
        f"{results['evaluated_on']}; mean ± std over {n} seed{'s' * (n != 1)} "
        f"({', '.join(map(str, results['seeds']))})."
    )
    return "\n".join(rows)


def plot_history(results: dict, ax=None):
    """Mean nDCG@10 over training steps per loss (band: ± std over seeds); LightGBM as a line."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5))
    for name, r in results["losses"].items():
        if "history" in r:
            steps = np.asarray(r["history"]["step"])
            curves = np.asarray(r["history"]["ndcg@10"])
            mean, std = curves.mean(0), curves.std(0)
            (line,) = ax.plot(steps, mean, label=name)
            ax.fill_between(steps, mean - std, mean + std, color=line.get_color(), alpha=0.15)
        else:
            ax.axhline(
                r["mean"][-1],
                linestyle="--",
                color="black" if "nobagging" not in name else "gray",
                label=f"{name} (100 trees)",
            )
    ax.set_xlabel("training step")
    ax.set_ylabel(f"{results['evaluated_on'].split()[0]} nDCG@10")
    ax.set_title("MLP on LightGBM's lambdarank data")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return ax


QUICK = dict(steps=40, eval_every=20, hidden=(64, 32))


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", default=str(DEFAULT_DATA), help="folder with rank.train(.query), rank.test(.query)")
    p.add_argument("--losses", default=",".join(ALL_LOSSES), help="comma-separated, from: " + ", ".join(ALL_LOSSES))
    p.add_argument("--seeds", type=int, help="number of seeds 0, 1, ... (default 5; 1 with --quick)")
    p.add_argument("--steps", type=int, help="training steps (default: per loss, see LOSS_DEFAULTS)")
    p.add_argument("--eval-every", type=int, help="record nDCG@10 every N steps")
    p.add_argument("--lr", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--dropout", type=float)
    p.add_argument("--batch", type=int, help="queries per step (0: all)")
    p.add_argument("--temperature", type=float, help="soft ranker temperature")
    p.add_argument("--gain", choices=("linear", "exp"), help="gain of the soft nDCG in the soft-metric losses")
    p.add_argument("--cutoff", type=int, help="soft-metric losses: k of the soft nDCG (default: whole list)")
    p.add_argument("--sinkhorn", type=int, help="neuralsort: Sinkhorn iterations")
    p.add_argument("--regularization", choices=("l2", "kl"), help="softrank: projection")
    p.add_argument(
        "--ema", type=float, help="evaluate a moving average of the weights with this decay (e.g. 0.99; 0: off)"
    )
    p.add_argument(
        "--anneal", type=float, help="soft losses: start at this multiple of the temperature, decay geometrically to it"
    )
    p.add_argument(
        "--score-norm", choices=("on", "off"), help="soft losses: standardise each list's scores before the soft ranker"
    )
    p.add_argument(
        "--units",
        choices=("score", "std", "bounded"),
        help="soft rankers' units= (default score: the tuned protocol; bounded: the library default)",
    )
    p.add_argument("--warmup", type=float, help="fraction of the steps with a linear learning-rate warm-up")
    p.add_argument("--input-dropout", type=float, help="dropout rate on the MLP's input features")
    p.add_argument("--layernorm", choices=("on", "off"), help="LayerNorm (no affine) before each hidden ReLU")
    p.add_argument("--gumbel", type=int, help="soft losses: Plackett-Luce samples per list and step")
    p.add_argument("--input-noise", type=float, help="deviation of Gaussian noise added to the input features")
    p.add_argument(
        "--context", choices=("on", "off"), help="feed the list's mean of the first hidden layer to the second layer"
    )
    p.add_argument("--hidden", help="hidden sizes, e.g. 256,128")
    p.add_argument("--transform", choices=("quantile", "standard"), help="feature preprocessing")
    p.add_argument("--query-norm", choices=("on", "off"), help="also feed features standardised within their query")
    p.add_argument(
        "--valid-fraction",
        type=float,
        default=0.0,
        help="hold out this fraction of TRAIN queries and evaluate there instead of on test",
    )
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--no-lightgbm", action="store_true")
    p.add_argument("--quick", action="store_true", help="tiny setting (CI): 1 seed, 40 steps, small MLP")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--json", metavar="OUT", help="write the results here")
    p.add_argument("--plot", metavar="PNG", help="save the nDCG@10 curves here")
    args = p.parse_args(argv)

    overrides = dict(
        steps=args.steps,
        eval_every=args.eval_every,
        lr=args.lr,
        weight_decay=args.weight_decay,
        dropout=args.dropout,
        batch=args.batch,
        temperature=args.temperature,
        gain=args.gain,
        ema=args.ema,
        transform=args.transform,
        cutoff=args.cutoff,
        sinkhorn=args.sinkhorn,
        regularization=args.regularization,
        query_norm=None if args.query_norm is None else args.query_norm == "on",
        anneal=args.anneal,
        warmup=args.warmup,
        units=args.units,
        input_dropout=args.input_dropout,
        score_norm=None if args.score_norm is None else args.score_norm == "on",
        layernorm=None if args.layernorm is None else args.layernorm == "on",
        input_noise=args.input_noise,
        gumbel=args.gumbel,
        context=None if args.context is None else args.context == "on",
        hidden=tuple(int(h) for h in args.hidden.split(",")) if args.hidden else None,
    )
    seeds = tuple(range(args.seeds if args.seeds is not None else (1 if args.quick else 5)))
    if args.quick:
        overrides = {**QUICK, **{k: v for k, v in overrides.items() if v is not None}}
    losses = [s.strip() for s in args.losses.split(",") if s.strip()]
    for name in losses:
        if name not in ALL_LOSSES:
            p.error(f"unknown loss {name!r}; choose from {', '.join(ALL_LOSSES)}")
    results = run(
        losses,
        seeds,
        data_dir=args.data,
        valid_fraction=args.valid_fraction,
        split_seed=args.split_seed,
        lightgbm=not args.no_lightgbm,
        overrides=overrides,
        progress=not args.no_progress,
    )
    results["command"] = " ".join(["python", "examples/train_ltr.py", *(argv if argv is not None else sys.argv[1:])])
    print(markdown_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        ax = plot_history(results)
        ax.figure.savefig(args.plot, dpi=120, bbox_inches="tight")
    return results


if __name__ == "__main__":
    main()
