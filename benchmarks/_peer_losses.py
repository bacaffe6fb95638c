"""Published ranking losses that have no JAX package, written from their reference code.

Each takes a padded batch, ``scores[Q, n]``, ``labels[Q, n]`` (graded, >= 0) and
``where[Q, n]`` (True for real documents, padding at the end of each list as the reference
code pads), and returns the one number its reference code returns for that batch (its own
reduction over the lists), so that a benchmark trains each loss as its users do.

* :func:`neural_ndcg`: NeuralNDCG (Pobrotyn & Bialobrzeski, 2021), allRank's
  ``allrank/models/losses/neuralNDCG.py::neuralNDCG`` with its defaults: temperature 1,
  ``powered_relevancies=True`` (gain ``2^y - 1``), ``k=None`` (the whole list),
  ``stochastic=False``; NeuralSort's relaxed permutation (``deterministic_neural_sort``, with
  allRank's masking), made doubly stochastic by Sinkhorn scaling (``sinkhorn_scaling``:
  columns then rows, at most 50 rounds, stopped once every row and column sum of the batch
  is within 1e-6 of 1), applied to the gains; minus the mean nDCG over the lists that have
  a relevant document.
* :func:`listnet`: ListNet's top-one cross-entropy (Cao et al., 2007) as allRank's
  ``listNet.py::listNet``: the softmax of the labels against the softmax of the scores
  (``eps`` 1e-10 added to the predicted probabilities), the mean over the lists (a list
  without a relevant document trains toward the uniform distribution).
* :func:`pirank`: PiRank (Swezey et al., 2021) as ``pirank_simple.py::pirank_simple_loss``
  of github.com/ermongroup/pirank with its flags' defaults: NeuralSort temperature
  ``tau=5``, the straight-through estimator on (``ste=True``: the forward pass sorts with
  ``taustar=1e-10``, the gradient is the relaxed one's), ``ndcg_k=15``; gain ``2^y - 1``,
  discount ``1 / ln(1 + position)``; ``1 - sum(DCG) / sum(ideal DCG)`` over the lists of the
  batch (a ratio of sums, as the reference code has it). Padding gets the list's smallest
  score minus 1e-6 and label 0, as the reference code does (it takes the minimum over the
  padded list; here over the real documents, which the padding then trails the same way).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

#: allRank's ``DEFAULT_EPS``.
ALLRANK_EPS = 1e-10


def neuralsort_allrank(scores, where, temperature: float):
    """allRank's ``deterministic_neural_sort``: ``P[..., j, i]``, the weight of item ``i`` at
    position ``j``; rows and columns of padding are set as allRank sets them (a real row is a
    softmax over the real items; padding rows spread over the padding columns)."""
    n = scores.shape[-1]
    pad = ~where
    s = jnp.where(pad, -1e8, scores)
    a = jnp.abs(s[..., :, None] - s[..., None, :])
    a = jnp.where(pad[..., :, None] | pad[..., None, :], 0.0, a)
    b = a.sum(-1)  # B[i, j] = sum_k A[i, k], whatever j
    m = where.sum(-1, keepdims=True)  # real items per list
    j = jnp.arange(1, n + 1)
    scaling = jnp.where(j <= m, m + 1 - 2 * j, 0).astype(scores.dtype)  # [..., n] over positions
    s0 = jnp.where(pad, 0.0, scores)
    # (C - B)^T: row j (position), column i (item)
    p_max = s0[..., None, :] * scaling[..., :, None] - b[..., None, :]
    rows, cols = pad[..., :, None], pad[..., None, :]
    p_max = jnp.where(rows | cols, -jnp.inf, p_max)
    p_max = jnp.where(rows & cols, 1.0, p_max)
    return jax.nn.softmax(p_max / temperature, axis=-1)


def sinkhorn_allrank(mat, where, tol: float = 1e-6, max_iter: int = 50):
    """allRank's ``sinkhorn_scaling``: columns, then rows, normalised (sums clamped at 1e-10)
    until every row and column sum of the whole batch is within ``tol`` of 1, at most
    ``max_iter`` rounds; a fixed number of rounds whose updates stop once converged, so that
    it differentiates as the loop that breaks."""
    pad = ~where
    rows, cols = pad[..., :, None], pad[..., None, :]
    mat = jnp.where(rows | cols, 0.0, mat)
    mat = jnp.where(rows & cols, 1.0, mat)

    def converged(m):
        return (jnp.max(jnp.abs(m.sum(-1) - 1.0)) < tol) & (jnp.max(jnp.abs(m.sum(-2) - 1.0)) < tol)

    def body(carry, _):
        m, done = carry
        new = m / jnp.maximum(m.sum(-2, keepdims=True), ALLRANK_EPS)
        new = new / jnp.maximum(new.sum(-1, keepdims=True), ALLRANK_EPS)
        m = jnp.where(done, m, new)
        return (m, done | converged(m)), None

    (mat, _), _ = lax.scan(body, (mat, jnp.asarray(False)), None, length=max_iter)
    return jnp.where(rows | cols, 0.0, mat)


def _ideal_dcg(labels, where, k: int, powered: bool):
    """The ideal DCG@k of each list (allRank's ``dcg(y_true, y_true, ats=[k])``): gains
    ``2^y - 1`` (``powered``) or ``y``, discount ``1 / log2(1 + position)``, padding gain 0."""
    n = labels.shape[-1]
    y = jnp.where(where, labels, 0.0)
    gains = jnp.exp2(y) - 1.0 if powered else y
    ideal = -jnp.sort(-gains, axis=-1)
    return jnp.sum((ideal / jnp.log2(jnp.arange(n) + 2.0))[..., :k], -1)


def neural_ndcg(
    scores,
    labels,
    where,
    *,
    temperature: float = 1.0,
    powered_relevancies: bool = True,
    k=None,
    max_iter: int = 50,
    tol: float = 1e-6,
):
    """allRank's ``neuralNDCG`` (deterministic): minus the mean relaxed nDCG over the lists
    whose ideal DCG is positive; 0 when there is none."""
    labels = jnp.asarray(labels, scores.dtype)
    n = scores.shape[-1]
    k = n if k is None else k
    p_hat = neuralsort_allrank(scores, where, temperature)
    p_hat = sinkhorn_allrank(p_hat, where, tol=tol, max_iter=max_iter)
    y = jnp.where(where, labels, 0.0)
    gains = jnp.exp2(y) - 1.0 if powered_relevancies else y
    sorted_gains = jnp.einsum("...ji,...i->...j", p_hat, gains)
    discounts = 1.0 / jnp.log2(jnp.arange(n) + 2.0)
    dcg = jnp.sum((sorted_gains * discounts)[..., :k], -1)
    idcg = _ideal_dcg(labels, where, k, powered_relevancies)
    has_ideal = idcg != 0
    ndcg = jnp.where(has_ideal, dcg / (idcg + ALLRANK_EPS), 0.0)
    count = jnp.sum(has_ideal)
    return jnp.where(count > 0, -jnp.sum(ndcg) / jnp.maximum(count, 1), 0.0)


def listnet(scores, labels, where, *, eps: float = ALLRANK_EPS):
    """allRank's ``listNet``: mean over the (non-empty) lists of
    ``-sum softmax(labels) * log(softmax(scores) + eps)``."""
    labels = jnp.asarray(labels, scores.dtype)
    nonempty = where.any(-1, keepdims=True)
    valid = where | ~nonempty  # an empty list (batch padding) computes on zeros, then counts nothing
    preds = jax.nn.softmax(jnp.where(valid, scores, -jnp.inf), axis=-1)
    target = jax.nn.softmax(jnp.where(valid, labels, -jnp.inf), axis=-1)
    per_list = -jnp.sum(jnp.where(valid, target * jnp.log(preds + eps), 0.0), -1)
    nonempty = nonempty[..., 0]
    return jnp.sum(jnp.where(nonempty, per_list, 0.0)) / jnp.maximum(jnp.sum(nonempty), 1)


def neuralsort_tf(s, tau: float):
    """NeuralSort as ``neuralsort/tf/util.py::neuralsort`` (no masking): row ``j`` (position),
    column ``i`` (item), ``softmax_i(((n + 1 - 2j) s_i - sum_k |s_i - s_k|) / tau)``."""
    n = s.shape[-1]
    b = jnp.abs(s[..., :, None] - s[..., None, :]).sum(-1)
    scaling = (n + 1 - 2 * jnp.arange(1, n + 1)).astype(s.dtype)
    z = s[..., None, :] * scaling[:, None] - b[..., None, :]
    # at taustar = 1e-10 the logits span ~1e11: XLA's fused exp gives NaN that far below the row's
    # maximum, so they stop at e^-80 (below float32's smallest normal number relative to 1)
    z = jnp.maximum((z - lax.stop_gradient(jnp.max(z, -1, keepdims=True))) / tau, -80.0)
    return jax.nn.softmax(z, axis=-1)


def pirank(scores, labels, where, *, tau: float = 5.0, taustar: float = 1e-10, ndcg_k: int = 15, ste: bool = True):
    """``pirank_simple_loss``: ``1 - sum_lists DCG@k / (1e-10 + sum_lists idealDCG@k)``, the DCG of
    the NeuralSort-relaxed order (straight-through: hard forward, relaxed gradient, with ``ste``)."""
    labels = jnp.where(where, jnp.asarray(labels, scores.dtype), 0.0)
    low = jnp.min(jnp.where(where, scores, jnp.inf), -1, keepdims=True)
    low = jnp.where(jnp.isfinite(low), low, 0.0)
    logits = jnp.where(where, scores, low - 1e-6)
    n = scores.shape[-1]
    if ste:
        backward = neuralsort_tf(logits, tau)
        forward = neuralsort_tf(logits, taustar)
        p_hat = backward + lax.stop_gradient(forward - backward)
    else:
        p_hat = neuralsort_tf(logits, tau)
    powers = jnp.exp2(labels) - 1.0
    sorted_powers = jnp.einsum("...ji,...i->...j", p_hat, powers)
    denominator = jnp.log(jnp.arange(1, n + 1, dtype=scores.dtype) + 1.0)
    dcg = jnp.sum((sorted_powers / denominator)[..., :ndcg_k], -1)
    p_true = lax.stop_gradient(neuralsort_tf(labels, 1e-10))
    ideal_labels = jnp.einsum("...ji,...i->...j", p_true, labels)
    ideal = jnp.sum(((jnp.exp2(ideal_labels) - 1.0) / (1e-10 + denominator))[..., :ndcg_k], -1)
    return 1.0 - jnp.sum(dcg) / (1e-10 + jnp.sum(ideal))


def pirank_weight(labels, where, *, ndcg_k: int = 15):
    """The denominator of :func:`pirank`'s ratio: the summed ideal DCG@k of the lists (gain
    ``2^y - 1``, discount ``1 / ln(1 + position)``). Over several batches of lists, the mean of
    their losses weighted by it is the loss of all the lists at once."""
    n = labels.shape[-1]
    gains = jnp.where(where, jnp.exp2(jnp.asarray(labels, jnp.float32)) - 1.0, 0.0)
    ideal = -jnp.sort(-gains, axis=-1)
    return jnp.sum((ideal / (1e-10 + jnp.log(jnp.arange(1, n + 1) + 1.0)))[..., :ndcg_k])
