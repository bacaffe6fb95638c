"""Any jaxrank loss as a custom objective of LightGBM or XGBoost (gradient-boosted trees).

A booster asks its objective, once per round, for the first and second derivative of the
loss in each document's prediction. :func:`gbdt_objective` turns the flat predictions and
the query groups of the training set into padded ``[Q, n]`` lists (the shape rounded up by
:func:`jaxrank.ranking.backend.bucket`, so that a few programs serve every round and data
set), differentiates the sum over the lists of the loss with one compiled ``jax.grad``, and
maps the gradient back to the documents, beside a positive curvature (see
:func:`gbdt_objective` for which, and why). Neither library is imported here: the objective
reads what the booster hands it (``Dataset.get_group()`` / ``get_label()`` of LightGBM,
``DMatrix.get_uint_info("group_ptr")`` / ``get_label()`` of XGBoost).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank import metrics
from jaxrank.losses._metric import metric_loss, ndcg_loss
from jaxrank.ranking import approx
from jaxrank.ranking.backend import bucket

_LIBRARIES = ("lightgbm", "xgboost")
_HESSIANS = ("gradient", "exact", "hutchinson", "constant")
# The objective chosen for trees on validation queries only (benchmarks/bench_gbdt.py, docs/training.md):
# metric_loss's own default ranker (softsort() when this was measured) trains below LambdaMART there.
TREE_RANKER = approx(1.0)
TREE_K = 10
TREE_HESSIAN = "hutchinson"


def tree_default(loss: Callable) -> Optional[Callable]:
    """The tree objective's loss when ``loss`` is smooth nDCG left at its default ranker and
    cutoff, else None.

    ``loss`` qualifies when it is :func:`jaxrank.losses.metric_loss` or
    :func:`jaxrank.losses.ndcg_loss`, or a ``functools.partial`` of either that gives
    neither ``ranker`` nor ``k`` (nor a metric other than nDCG); the answer is that loss with
    ``ranker=approx(1.0), k=10`` added.

    Example:
      >>> import functools, jaxrank
      >>> from jaxrank import losses
      >>> tree_default(functools.partial(losses.metric_loss, gain="exp")).keywords["k"]
      10
      >>> tree_default(functools.partial(losses.metric_loss, ranker=jaxrank.softsort())) is None
      True
    """
    func, keywords = loss, {}
    if isinstance(loss, functools.partial) and not loss.args:
        func, keywords = loss.func, dict(loss.keywords)
    if func not in (metric_loss, ndcg_loss) or "ranker" in keywords or "k" in keywords:
        return None
    if keywords.get("metric", metrics.ndcg) is not metrics.ndcg:
        return None
    return functools.partial(func, **keywords, ranker=TREE_RANKER, k=TREE_K)


def gbdt_objective(
    loss: Callable,
    *,
    library: str = "lightgbm",
    group=None,
    labels=None,
    hessian: Optional[str] = None,
    probes: int = 4,
    floor: float = 1e-3,
    normalize: bool = True,
    seed: int = 0,
) -> GBDTObjective:
    """A jaxrank loss as the custom objective of LightGBM's or XGBoost's booster.

    ``loss`` is any per-list loss ``loss(scores[Q, n], labels[Q, n], where=where[Q, n]) -> [Q]``
    (every function of :mod:`jaxrank.losses`, or ``functools.partial(metric_loss, ranker=...,
    k=10)``); the objective is the **sum over queries** of ``loss``, and its gradient in each
    document's prediction is ``jax.grad`` of that sum, exactly. Returned: a callable in the
    form each library calls, ``objective(preds, train_data) -> (grad, hess)``: LightGBM's
    ``params["objective"]`` of ``lightgbm.train`` (4.x), XGBoost's ``obj=`` of
    ``xgboost.train``. With ``group=`` (documents per query, in order) and ``labels=`` the
    objective needs nothing from the data set, and also takes the scikit-learn wrappers'
    form ``objective(y_true, y_pred)`` (``LGBMRanker(objective=...)``).

    **The Hessian.** A tree's leaf takes the Newton step ``-sum(g) / sum(h)`` over its
    documents, and splits are chosen by ``sum(g)^2 / sum(h)``; ``h`` must be positive (a
    leaf with ``sum(h) <= 0`` has no step), and should say how far the loss can be trusted
    along each document's score. The exact diagonal of a ranking loss's Hessian is neither
    positive nor cheap: the losses are not convex (a metric loss's curvature changes sign
    as items pass each other), and each list's diagonal costs ``n`` Hessian-vector products.
    ``hessian=`` chooses (None, the default: ``"gradient"``, or ``"hutchinson"`` for the tree
    default below):

    * ``"gradient"``: ``h = |g|``, LambdaMART's form. LambdaRank's Hessian of a
      document is ``sum_j |dNDCG_ij| rho_ij (1 - rho_ij)`` beside its gradient
      ``sum_j |dNDCG_ij| rho_ij``: the same weights, each pair damped by ``1 - rho_ij``, so
      ``|g|`` is its bound. Each leaf's step is then ``-sum(g) / sum(|g|)``, in ``[-1, 1]``:
      how unanimously its documents want to move, in units the learning rate sets, which
      keeps a loss's own scale (a temperature, a cutoff) out of the trees. Free: the
      gradient's own pass. On MQ2008's and the LambdaRank data's validation queries it trains
      level with ``"hutchinson"`` and ``"exact"`` and above ``"constant"`` (docs/training.md,
      ``benchmarks/bench_gbdt.py``).
    * ``"exact"``: ``|diag H|``, one Hessian-vector product per list position (``n``
      products, all lists at once); affordable for lists of tens of documents.
    * ``"hutchinson"``: ``|E[v * Hv]|`` over ``probes`` Rademacher vectors ``v`` (one
      product each; fresh ones each round, from ``seed``): an unbiased estimate of the
      diagonal before the absolute value, noisy by the off-diagonal terms.
    * ``"constant"``: ``h = 1``: plain gradient boosting, each leaf the mean ``-g``.

    Every ``h`` is at least ``floor`` times the mean ``h`` over the documents (a document at
    a stationary point of the loss, ``g = 0``, gets a small positive weight, and no leaf's
    step divides by 0). With ``normalize`` (default) ``g`` and ``h`` are both divided by the
    mean ``h`` of the round: a tree's leaf values ``-sum(g) / sum(h)`` and its choice of split
    do not change, but ``min_sum_hessian_in_leaf`` / ``min_child_weight`` and XGBoost's
    ``lambda`` then count documents (mean ``h`` = 1), as they do for the libraries' own
    ranking objectives. ``normalize=False`` returns the loss's own derivatives.

    **The tree default.** The loss matters more than the Hessian, and ``metric_loss``'s default
    ranker (``softsort()`` when it was measured; now ``laplace()``, chosen for its laws) trains trees
    below LambdaMART. So when
    ``loss`` is :func:`jaxrank.losses.metric_loss` or :func:`jaxrank.losses.ndcg_loss` left at
    its default ranker and cutoff (the function itself, or a ``functools.partial`` of it that
    gives neither ``ranker`` nor ``k`` nor another metric: :func:`tree_default`), the objective
    is the one chosen for trees on validation queries: ``metric_loss(..., ranker=approx(1.0),
    k=10)`` with ``hessian="hutchinson"`` unless ``hessian=`` is given (level with LightGBM's
    LambdaMART on its LambdaRank data, above it on MQ2008; docs/reports/letor.md has the numbers
    and the command). A ranker or ``k`` you give is kept as given; ``objective.loss`` is the
    loss used.

    Padding: the queries fall into length classes (:func:`lists`: powers of two, at least 8),
    each class one ``[bucket(Q_c), n_c]`` array filled by one NumPy scatter (padding adds
    nothing: the gradients do not depend on it), so a few compiled programs serve every round.

    Example:
      >>> import functools, numpy as np, jaxrank
      >>> from jaxrank import losses
      >>> objective = losses.gbdt_objective(
      ...     functools.partial(losses.metric_loss, ranker=jaxrank.approx()), group=[3, 2], labels=[2, 0, 1, 0, 1]
      ... )
      >>> g, h = objective(np.zeros(5), None)
      >>> bool(g[0] < 0 < g[1]), bool((h > 0).all())
      (True, True)
      >>> tree = losses.gbdt_objective(losses.metric_loss)  # the tree default
      >>> tree.loss.keywords["k"], tree.hessian
      (10, 'hutchinson')
    """
    if library not in _LIBRARIES:
        raise ValueError(f"library must be one of {_LIBRARIES}, got {library!r}")
    if not callable(loss):
        raise TypeError(f"loss must be a callable (scores, labels, where=...) -> [Q], got {loss!r}")
    default = tree_default(loss)
    if default is not None:
        loss, hessian = default, TREE_HESSIAN if hessian is None else hessian
    hessian = "gradient" if hessian is None else hessian
    if hessian not in _HESSIANS:
        raise ValueError(f"hessian must be one of {_HESSIANS}, got {hessian!r}")
    if probes < 1:
        raise ValueError(f"probes must be at least 1, got {probes}")
    if not 0 < floor < 1:
        raise ValueError(f"floor must be in (0, 1), got {floor}")
    return GBDTObjective(loss, library, group, labels, hessian, int(probes), float(floor), bool(normalize), seed)


class GBDTObjective:
    """What :func:`gbdt_objective` returns: ``objective(preds, train_data) -> (grad, hess)``.

    :meth:`derivatives` is the same computation from flat ``preds``, ``labels`` and group
    sizes; ``last_loss`` holds the sum over queries of the loss at the last call's
    predictions."""

    def __init__(self, loss, library, group, labels, hessian, probes, floor, normalize, seed):
        self.loss, self.library, self.hessian = loss, library, hessian
        self.probes, self.floor, self.normalize = probes, floor, normalize
        self.group = None if group is None else _sizes(group)
        self.labels = None if labels is None else np.asarray(labels, np.float32).reshape(-1)
        self.key = jax.random.key(seed)
        self.calls = 0
        self.last_loss = float("nan")
        self._program = _program(loss, hessian, probes)

    def __repr__(self) -> str:
        return f"gbdt_objective({self.loss!r}, library={self.library!r}, hessian={self.hessian!r})"

    def __call__(self, preds, train_data):
        if isinstance(train_data, np.ndarray) and self.group is not None:  # scikit-learn's (y_true, y_pred)
            labels, preds = preds, train_data
        else:
            labels = self.labels if self.labels is not None else _labels(train_data)
        sizes = self.group if self.group is not None else _groups(train_data, self.library)
        grad, hess = self.derivatives(preds, labels, sizes)
        shape = np.shape(preds)
        return grad.reshape(shape), hess.reshape(shape)

    def derivatives(self, preds, labels, sizes) -> tuple[np.ndarray, np.ndarray]:
        """``(grad, hess)`` per document (``float64[N]`` each) of the sum over the queries of
        ``sizes`` (documents per query, in order) of the loss at ``preds``."""
        preds = np.asarray(preds, np.float64).reshape(-1)
        labels = np.asarray(labels, np.float32).reshape(-1)
        sizes = _sizes(sizes)
        if not (preds.size == labels.size == int(sizes.sum())):
            raise ValueError(
                f"{preds.size} predictions, {labels.size} labels, groups of {int(sizes.sum())} documents: "
                "they must be the same number"
            )
        key = jax.random.fold_in(self.key, self.calls)
        self.calls += 1
        grad, hess = np.zeros(preds.size), np.zeros(preds.size)
        value = 0.0
        for docs, shape, rows, cols in lists(sizes):  # a few length classes, not one call per query
            scores, y, where = (np.zeros(shape, t) for t in (np.float32, np.float32, bool))
            scores[rows, cols], y[rows, cols], where[rows, cols] = preds[docs], labels[docs], True
            v, g, h = self._program(scores, y, where, jax.random.fold_in(key, shape[-1]))
            grad[docs], hess[docs] = np.asarray(g)[rows, cols], np.asarray(h)[rows, cols]
            value += float(v)
        self.last_loss = value
        mean = hess.mean() if hess.size else 1.0
        hess = np.maximum(hess, self.floor * (mean if mean > 0 else 1.0))
        if self.normalize and hess.size:
            scale = hess.mean()
            grad, hess = grad / scale, hess / scale
        return grad, hess


def lists(sizes, minimum: int = 8) -> list[tuple[np.ndarray, tuple[int, int], np.ndarray, np.ndarray]]:
    """Where each document of flat query groups ``sizes`` goes in padded lists.

    Queries fall into length classes (powers of two, at least ``minimum``: a list is padded to
    at most twice its length, and most losses cost ``O(n^2)`` per list, so a few long lists do
    not make every short one as costly); each class is one array ``[bucket(Q_c), n_c]``
    (:func:`jaxrank.ranking.backend.bucket`), so a few compiled programs serve every round.
    Returns, per class: the documents it holds (indices into the flat arrays, in order), its
    shape, and each of those documents' row and column. NumPy only, no loop over queries."""
    sizes = _sizes(sizes)
    starts = np.cumsum(sizes) - sizes
    width = np.left_shift(1, np.ceil(np.log2(np.maximum(sizes, 1))).astype(np.int64))
    width = np.maximum(width, minimum)
    out = []
    for n in np.unique(width[sizes > 0]):
        queries = np.flatnonzero((width == n) & (sizes > 0))
        counts = sizes[queries]
        rows = np.repeat(np.arange(queries.size), counts)
        first = np.cumsum(counts) - counts
        cols = np.arange(rows.size) - np.repeat(first, counts)
        docs = np.repeat(starts[queries], counts) + cols
        out.append((docs, (bucket(queries.size, minimum), int(n)), rows, cols))
    return out


def _program(loss, hessian: str, probes: int):
    """The compiled derivatives of ``loss``: one per loss (and Hessian), shared by every
    objective made of the same loss object (LightGBM's and XGBoost's, say)."""
    try:
        return _cached_program(loss, hessian, probes)
    except TypeError:  # an unhashable loss: its own program
        return jax.jit(functools.partial(_derivatives, loss, hessian, probes))


@functools.lru_cache(maxsize=64)
def _cached_program(loss, hessian: str, probes: int):
    return jax.jit(functools.partial(_derivatives, loss, hessian, probes))


def _derivatives(loss, hessian, probes, scores, labels, where, key):
    real = jnp.any(where, axis=-1)

    def total(s):
        return jnp.sum(jnp.where(real, loss(s, labels, where=where), 0.0))

    value, grad = jax.value_and_grad(total)(scores)
    grad = jnp.where(where, grad, 0.0)
    if hessian == "gradient":
        hess = jnp.abs(grad)
    elif hessian == "constant":
        hess = jnp.ones_like(grad)
    else:
        grad_total = jax.grad(total)

        def hvp(v):  # reverse over reverse: also through rankers with a custom_vjp (softrank)
            return jax.grad(lambda s: jnp.vdot(grad_total(s), v))(scores)

        if hessian == "exact":  # column j of every list's Hessian at once: H e_j, its j-th entry
            n = scores.shape[-1]

            def column(j):
                return hvp(jnp.broadcast_to(jnp.arange(n) == j, scores.shape).astype(scores.dtype))[:, j]

            hess = jnp.abs(lax.map(column, jnp.arange(n)).T)
        else:  # Hutchinson: E[v * Hv] = diag H for Rademacher v
            v = jax.random.rademacher(key, (probes,) + scores.shape, scores.dtype)
            hess = jnp.abs(jnp.mean(v * lax.map(hvp, v), axis=0))
    return value, grad, jnp.where(where, hess, 0.0)


def _sizes(group) -> np.ndarray:
    sizes = np.asarray(group, np.int64).reshape(-1)
    if (sizes < 0).any():
        raise ValueError("group sizes must be non-negative")
    return sizes


def _labels(data) -> np.ndarray:
    if data is None or not hasattr(data, "get_label"):
        raise ValueError("no labels: pass labels= and group=, or call the objective with the booster's data set")
    return np.asarray(data.get_label(), np.float32)


def _groups(data, library: str) -> np.ndarray:
    """Documents per query of LightGBM's ``Dataset`` (``get_group()``) or XGBoost's
    ``DMatrix`` (``group_ptr``, the first document of each query and the end)."""
    if library == "lightgbm":
        sizes = data.get_group() if hasattr(data, "get_group") else None
        if sizes is None:
            raise ValueError("the LightGBM Dataset has no query groups: give it group= (or pass group= here)")
        return _sizes(sizes)
    if not hasattr(data, "get_uint_info"):
        raise ValueError("an XGBoost objective is called with a DMatrix (or pass group= here)")
    ptr = np.asarray(data.get_uint_info("group_ptr"), np.int64)
    if ptr.size < 2:
        raise ValueError("the DMatrix has no query groups: give it qid= or group= (or pass group= here)")
    return np.diff(ptr)
