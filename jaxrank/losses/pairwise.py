"""Pairwise baselines over every pair of a list, in row blocks, and the pair losses they share.

Internal API (other jaxrank packages use it, e.g. :mod:`jaxrank.compat.rax`): ``PairLoss``,
``logistic``, ``hinge``, ``soft_zero_one``, ``mse`` and ``qr``, each mapping
``(s_i - s_j, y_i - y_j)`` to the loss of the pair and whether it counts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks
from jaxrank.losses import lambdaweights
from jaxrank.losses import lists as _lists
from jaxrank.metrics import common as _c
from jaxrank.ranking.pairwise import PAIRS_PER_BLOCK, PAIRS_PER_LIST

# A pair loss maps (s_i - s_j, y_i - y_j) to (loss of the pair, whether the pair counts).
PairLoss = Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def pair_terms(
    scores, labels, where, segments, weights, pair_loss: PairLoss, lambdaweight, num_segments=None
) -> tuple[jax.Array, jax.Array, _lists.Lists]:
    """``[..., n, n]`` pair losses (0 where the pair does not count) and the pairs that count:
    every pair at once, for a ``lambdaweight`` of the ``[..., n, n]`` kind only and for
    rax's unreduced pairs; the losses go through :func:`_pair_totals` otherwise."""
    lists = _lists.prepare(scores, labels, where, segments, weights, num_segments)
    s, y = lists.scores, lists.labels
    loss, counts = pair_loss(s[..., :, None] - s[..., None, :], y[..., :, None] - y[..., None, :])
    counts = counts & (_lists.pair_mask(lists.valid) if lists.same is None else lists.same)
    if lists.weights is not None:
        loss = loss * lists.weights[..., :, None]
    if lambdaweight is not None:
        lw = lambdaweight(scores, labels, where=where, segments=segments, weights=weights)
        loss = loss * jnp.asarray(lw).reshape(counts.shape)
    return jnp.where(counts, loss, 0), counts, lists


def _row_blocks(batch: int, n: int) -> int:
    """Rows per block of the pairwise kernel: as many as keep a block's pair terms within
    the bounds of :func:`jaxrank.approx`'s kernel (for the batch, and for one list)."""
    return max(1, min(n, PAIRS_PER_BLOCK // max(batch * n, 1), PAIRS_PER_LIST // max(n, 1)))


def _pair_row_sums(pair_loss: PairLoss, pair_weight, lists: _lists.Lists, items, derivative: bool):
    """Per item ``i``, sums over the items ``j`` of the pairs that count (both valid, one
    segment, ``pair_loss`` says so), with :math:`\\ell_{ij}` = ``pair_loss(s_i - s_j, y_i - y_j)``
    times the lambdaweight :math:`\\lambda_{ij}` (``pair_weight(items_i, items_j)``, 1 without):

    - :math:`V_i = \\sum_j \\ell_{ij}` and :math:`N_i = \\#\\{j\\}`;
    - with ``derivative``, :math:`R_i = \\sum_j \\partial \\ell_{ij} / \\partial s_i` and the column sums
      :math:`C_i = \\sum_j w_j\\, \\partial \\ell_{ji} / \\partial s_j` (so that
      :math:`\\partial \\sum_{ij} w_i \\ell_{ij} / \\partial s_k = w_k R_k - C_k`).

    Rows go ``_row_blocks`` at a time through a ``lax.scan``: O(batch * n * block) memory,
    never the ``n^2`` pairs; the derivative comes from the same pass as the value (one
    evaluation of the pair loss per pair, where reverse-mode autodiff would store every
    pair or evaluate each twice).
    """
    shape = lists.scores.shape
    n = shape[-1]

    def flat(a):
        return a.reshape(-1, n)

    s, y, valid = flat(lists.scores), flat(lists.labels), flat(lists.valid)
    w = jnp.ones_like(s) if lists.weights is None else flat(lists.weights)
    group = None if lists.slots is None else flat(lists.slots.slot)
    items = jax.tree_util.tree_map(flat, items)
    batch = s.shape[0]
    if batch == 0 or n == 0:
        return (jnp.zeros(shape, s.dtype),) * (4 if derivative else 2)
    block = _row_blocks(batch, n)
    nblocks = -(-n // block)

    def in_blocks(a):
        a = jnp.pad(a, ((0, 0), (0, nblocks * block - n)))  # padded rows are invalid
        return a.reshape(batch, nblocks, block).transpose(1, 0, 2)

    def rows(a):
        return a[:, :, None]

    def cols(a):
        return a[:, None, :]

    def body(col_sums, xs):
        s_r, y_r, valid_r, w_r, group_r, items_r = xs
        x, dy = rows(s_r) - cols(s), rows(y_r) - cols(y)
        if derivative:
            # d/ds_i of every pair term beside its value, from one evaluation
            (loss, counted), (dloss, _) = jax.jvp(lambda a: pair_loss(a, dy), (x,), (jnp.ones_like(x),))
        else:
            loss, counted = pair_loss(x, dy)
        counted = counted & rows(valid_r) & cols(valid)
        if group is not None:
            counted = counted & (rows(group_r) == cols(group))
        lw = None
        if pair_weight is not None:
            lw = pair_weight(jax.tree_util.tree_map(rows, items_r), jax.tree_util.tree_map(cols, items))

        def masked_sum(t, axis):
            t = t if lw is None else t * lw
            return jnp.sum(jnp.where(counted, t, 0), axis=axis)

        out = (masked_sum(loss, -1), jnp.sum(counted, axis=-1, dtype=s.dtype))
        if derivative:
            out += (masked_sum(dloss, -1),)
            # d/ds_j of the pair (i, j) is -d/ds_i: column j collects w_i dloss_ij (subtracted)
            col_sums = col_sums + masked_sum(rows(w_r) * dloss, 1)
        return col_sums, out

    blocked = (s, y, valid, w, group, items)
    xs = jax.tree_util.tree_map(in_blocks, blocked)
    col_sums, sums = lax.scan(body, jnp.zeros_like(s), xs)

    def unblocked(a):
        return a.transpose(1, 0, 2).reshape(batch, nblocks * block)[:, :n].reshape(shape)

    out = tuple(unblocked(a) for a in sums)
    return out + (col_sums.reshape(shape),) if derivative else out


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _pair_totals(pair_loss: PairLoss, pair_weight, lists: _lists.Lists, items) -> tuple[jax.Array, jax.Array]:
    """Per list (segment slot), :math:`\\sum_{ij} w_i \\lambda_{ij} \\ell_{ij}` over the pairs
    that count, and their number (:func:`_pair_row_sums`). Differentiable in the scores and
    weights of ``lists``; its labels and the lambdaweight's ``items`` carry no gradient."""
    values, counts = _pair_row_sums(pair_loss, pair_weight, lists, items, derivative=False)
    w = 1 if lists.weights is None else lists.weights
    return _lists.per_list(w * values, lists), _lists.per_list(counts, lists)


@_pair_totals.defjvp
def _pair_totals_jvp(pair_loss, pair_weight, primals, tangents):
    lists, items = primals
    dlists, _ = tangents
    values, counts, row, col = _pair_row_sums(pair_loss, pair_weight, lists, items, derivative=True)
    w = 1 if lists.weights is None else lists.weights
    totals, counts = _lists.per_list(w * values, lists), _lists.per_list(counts, lists)
    # d/ds_k of the list's sum: w_k R_k (k first in its pairs) - C_k (k second)
    d = dlists.scores * (w * row - col)
    if lists.weights is not None:
        d = d + dlists.weights * values
    return (totals, counts), (_lists.per_list(d, lists), jnp.zeros_like(counts))


def pairwise_totals(
    scores, labels, where, segments, weights, pair_loss: PairLoss, lambdaweight, num_segments
) -> Optional[tuple[jax.Array, jax.Array]]:
    """Per list, the pairwise loss and the number of pairs that count, in row blocks; None
    where ``lambdaweight`` gives only ``[..., n, n]`` (no :func:`jaxrank.lambdaweights.pair_weight`)."""
    form = None if lambdaweight is None else lambdaweights.pair_weight(lambdaweight)
    if lambdaweight is not None and form is None:
        return None
    lists = _lists.prepare(scores, labels, where, segments, weights, num_segments)
    lists = lists._replace(labels=lax.stop_gradient(lists.labels))
    if form is None:
        return _pair_totals(pair_loss, None, lists, None)
    weight = form(scores, labels, where=where, segments=segments, weights=weights)
    return _pair_totals(pair_loss, weight.pair, lists, lax.stop_gradient(weight.items))


def _pairwise(scores, labels, where, segments, weights, pair_loss: PairLoss, lambdaweight, num_segments) -> jax.Array:
    totals = pairwise_totals(scores, labels, where, segments, weights, pair_loss, lambdaweight, num_segments)
    if totals is not None:
        return totals[0]
    terms, _, lists = pair_terms(scores, labels, where, segments, weights, pair_loss, lambdaweight, num_segments)
    return _lists.per_list(jnp.sum(terms, axis=-1), lists)


def _higher_first(y_diff):
    return y_diff > 0


@jax.custom_jvp
def _softplus(x):
    """``log(1 + e^x)``, with a derivative that reuses the forward's ``e^{-|x|}``: 2
    transcendentals per pair for value and gradient where ``jax.nn.softplus`` takes 3
    (the pairwise losses are bound by them; benchmarks/bench_losses.py)."""
    return jax.nn.relu(x) + jnp.log1p(jnp.exp(-jnp.abs(x)))


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    e = jnp.exp(-jnp.abs(x))
    sigmoid = jnp.where(x >= 0, 1, e) / (1 + e)
    return jax.nn.relu(x) + jnp.log1p(e), sigmoid * dx


def logistic(s_diff, y_diff):
    return _softplus(-s_diff), _higher_first(y_diff)


def hinge(s_diff, y_diff):
    return jax.nn.relu(1 - s_diff), _higher_first(y_diff)


def soft_zero_one(s_diff, y_diff):
    return jax.nn.sigmoid(-s_diff), _higher_first(y_diff)


def mse(s_diff, y_diff):
    return jnp.square(s_diff - y_diff), jnp.ones(y_diff.shape, bool)


def qr(tau: float, squared: bool) -> PairLoss:
    def loss(s_diff, y_diff):
        under, over = jax.nn.relu(y_diff - s_diff), jax.nn.relu(s_diff - y_diff)
        if squared:
            under, over = jnp.square(under), jnp.square(over)
        return tau * under + (1 - tau) * over, _higher_first(y_diff)

    return loss


# Pairwise baselines ------------------------------------------------------------------------
_PAIRWISE_DOC = """

    Summed over the pairs ``(i, j)`` of valid items (of one segment){pairs}, each
    pair's loss multiplied by ``weights[i]`` and by ``lambdaweight(scores, labels,
    where=, segments=, weights=)[..., i, j]`` (see :mod:`jaxrank.lambdaweights`, whose
    weights carry no gradient). O(n^2) per list.
"""


def pairwise_logistic(
    scores, labels, *, where=None, segments=None, num_segments: Optional[int] = None, weights=None, lambdaweight=None
) -> jax.Array:
    """RankNet pairwise logistic loss (Burges et al., 2005).

    .. math:: \\ell = \\sum_{i, j:\\ y_i > y_j} \\log\\big(1 + e^{-(s_i - s_j)}\\big)

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(pairwise_logistic(jnp.array([1.0, 0.0]), jnp.array([0, 1]))), 5)  # log(1 + e)
      1.31326
    """
    return _pairwise(scores, labels, where, segments, weights, logistic, lambdaweight, num_segments)


def pairwise_hinge(
    scores, labels, *, where=None, segments=None, num_segments: Optional[int] = None, weights=None, lambdaweight=None
) -> jax.Array:
    """Pairwise hinge loss (RankSVM).

    .. math:: \\ell = \\sum_{i, j:\\ y_i > y_j} \\max\\big(0, 1 - (s_i - s_j)\\big)

    Example:
      >>> import jax.numpy as jnp
      >>> float(pairwise_hinge(jnp.array([1.0, 0.5]), jnp.array([0, 1])))
      1.5
    """
    return _pairwise(scores, labels, where, segments, weights, hinge, lambdaweight, num_segments)


def pairwise_soft_zero_one(
    scores, labels, *, where=None, segments=None, num_segments: Optional[int] = None, weights=None, lambdaweight=None
) -> jax.Array:
    """Pairwise soft zero-one loss: the sigmoid of each misordering.

    .. math:: \\ell = \\sum_{i, j:\\ y_i > y_j} \\sigma\\big(-(s_i - s_j)\\big)

    Example:
      >>> import jax.numpy as jnp
      >>> float(pairwise_soft_zero_one(jnp.array([0.0, 0.0]), jnp.array([0, 1])))
      0.5
    """
    return _pairwise(scores, labels, where, segments, weights, soft_zero_one, lambdaweight, num_segments)


def pairwise_mse(
    scores, labels, *, where=None, segments=None, num_segments: Optional[int] = None, weights=None, lambdaweight=None
) -> jax.Array:
    """Pairwise squared error between score and label differences, over every
    ordered pair (each unordered pair twice; equal labels included).

    .. math:: \\ell = \\sum_{i, j} \\big((y_i - y_j) - (s_i - s_j)\\big)^2

    Example:
      >>> import jax.numpy as jnp
      >>> float(pairwise_mse(jnp.array([0.0, 0.0]), jnp.array([0, 1])))  # 1 + 1
      2.0
    """
    return _pairwise(scores, labels, where, segments, weights, mse, lambdaweight, num_segments)


def pairwise_qr(
    scores,
    labels,
    *,
    tau: float = 0.5,
    squared: bool = False,
    where=None,
    segments=None,
    num_segments: Optional[int] = None,
    weights=None,
    lambdaweight=None,
) -> jax.Array:
    """Pairwise quantile-regression loss: the pinball loss of the score difference
    at quantile ``tau`` in (0, 1] of the label difference (squared hinges with ``squared``).

    .. math:: \\ell = \\sum_{i, j:\\ y_i > y_j} \\tau \\max(0, \\Delta y_{ij} - \\Delta s_{ij})
        + (1 - \\tau) \\max(0, \\Delta s_{ij} - \\Delta y_{ij})

    Example:
      >>> import jax.numpy as jnp
      >>> float(pairwise_qr(jnp.array([0.0, 0.0]), jnp.array([0, 1]), tau=0.25))  # 0.25 * 1
      0.25
    """
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not 0 < tau <= 1:
        raise ValueError(f"tau must be in (0, 1], got {tau!r}")
    _checks.boolean(squared, "squared")
    return _pairwise(scores, labels, where, segments, weights, qr(float(tau), squared), lambdaweight, num_segments)


for _f, _pairs_text in (
    (pairwise_logistic, " with ``y_i > y_j``"),
    (pairwise_hinge, " with ``y_i > y_j``"),
    (pairwise_soft_zero_one, " with ``y_i > y_j``"),
    (pairwise_mse, ""),
    (pairwise_qr, " with ``y_i > y_j``"),
):
    _head, _example = _f.__doc__.split("\n\n    Example:")
    _f.__doc__ = _head + _PAIRWISE_DOC.format(pairs=_pairs_text) + "\n    Example:" + _example


def lambda_loss(
    scores,
    labels,
    *,
    where=None,
    segments=None,
    num_segments: Optional[int] = None,
    mu: float = 10.0,
    gain: _c.Gain = "exp",
) -> jax.Array:
    """LambdaLoss with the NDCG-Loss2++ weights (Wang et al., 2018).

    .. math::
        \\ell = -\\sum_{i, j:\\ y_i > y_j} (\\rho_{ij} + \\mu\\, \\delta_{ij})\\,
            |G_i - G_j| \\log_2 \\sigma(s_i - s_j), \\\\
        \\rho_{ij} = \\Big|\\frac{1}{D_{r_i}} - \\frac{1}{D_{r_j}}\\Big|, \\quad
        \\delta_{ij} = \\Big|\\frac{1}{D_{|r_i - r_j|}} - \\frac{1}{D_{|r_i - r_j| + 1}}\\Big|,

    with :math:`D_r = \\log_2(1 + r)`, :math:`r_i` the current rank of item
    ``i`` (by score, ties by index, no gradient), and
    :math:`G_i = (2^{y_i} - 1) / IDCG` (``gain="exp"``) or :math:`y_i / IDCG`
    (``gain="linear"``), IDCG the ideal DCG of the list. :math:`\\rho |G_i - G_j|` is the
    LambdaRank :math:`|\\Delta NDCG|` weight (:func:`jaxrank.lambdaweights.dcg`),
    :math:`\\delta |G_i - G_j|` the NDCG-Loss2 weight (:func:`jaxrank.lambdaweights.dcg2`);
    ``mu`` balances them: this is :func:`pairwise_logistic` in base 2 with their sum as
    ``lambdaweight``. 0 when no label is positive. O(n^2) per list.

    Example:
      >>> import jax.numpy as jnp
      >>> # r = (1, 2), G = (1, 0), rho = delta = 1 - 1/log2(3):
      >>> # loss = 2 (1 - 1/log2 3) log2(1 + e^-1)
      >>> round(float(lambda_loss(jnp.array([1.0, 0.0]), jnp.array([1, 0]), mu=1.0)), 4)
      0.3336
    """
    _c.gain_fn(gain)  # fail early on a bad gain

    def weight(scores, labels, **kwargs):
        rho = lambdaweights.dcg(scores, labels, gain=gain, **kwargs)
        return rho + mu * lambdaweights.dcg2(scores, labels, gain=gain, **kwargs)

    def form(scores, labels, **kwargs) -> lambdaweights.PairWeight:
        rho = lambdaweights.dcg.pair_weight(scores, labels, gain=gain, **kwargs)
        delta = lambdaweights.dcg2.pair_weight(scores, labels, gain=gain, **kwargs)
        return lambdaweights.PairWeight(rho.items, lambda row, col: rho.pair(row, col) + mu * delta.pair(row, col))

    weight.pair_weight = form  # both weights read the same gains and positions
    loss = pairwise_logistic(
        scores, labels, where=where, segments=segments, num_segments=num_segments, lambdaweight=weight
    )
    return loss / jnp.log(2.0)
