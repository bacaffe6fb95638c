"""Ranking losses in the shape of optax's: one value per list, masks, no reduction.

Every function takes ``scores[..., n]`` and ``labels[..., n]`` (graded
relevance), an optional validity mask ``where[..., n]``, and returns the loss
of each list, shape ``[...]``; averaging over lists (or weighting them) is left
to the caller, e.g. ``jnp.mean(ndcg_loss(scores, labels, where=mask))``.
Masked items never contribute and get zero gradient; a list without valid
items has loss 0 (or 1 for the metric losses, whose metric is 0 there).

The baselines also take ``segments[..., n]`` (integer ids: several lists packed
in one row, rax's convention; items interact only within their segment) and
``num_segments`` (``S``, default ``n``), and return then ``[..., S]``: one loss per
list, slot ``s`` holding the list of the ``s``-th smallest id, as the metrics do
(docs/segments.rst); each equals the loss of the same list padded apart. ``weights[..., n]`` weighs the
items where rax does (the label distribution of the softmax losses, the terms
of the others, the first item of each pair), and the pairwise losses take a
``lambdaweight=`` from :mod:`jaxrank.lambdaweights`.

*Metric losses* are ``1 - metric`` with a smooth ranker from
:mod:`jaxrank.ranking.smooth`: the same metric code as evaluation, relaxed by the ranker.
*Baselines* are the classic surrogate losses, written directly.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank import _checks, _lists, lambdaweights, metrics
from jaxrank.metrics import _common as _c
from jaxrank.ranking import Ranks
from jaxrank.ranking._backend import inverse_permutation
from jaxrank.ranking._ties import take
from jaxrank.ranking.pairwise import _PAIRS_PER_BLOCK, _PAIRS_PER_LIST, approx
from jaxrank.ranking.smooth import _masked_logsumexp

__all__ = [
    "ap_loss",
    "lambda_loss",
    "listmle",
    "metric_loss",
    "mrr_loss",
    "ndcg_loss",
    "pairwise_hinge",
    "pairwise_logistic",
    "pairwise_mse",
    "pairwise_qr",
    "pairwise_soft_zero_one",
    "pointwise_mse",
    "pointwise_sigmoid",
    "poly1_softmax",
    "softmax_cross_entropy",
    "unique_softmax",
]

_DEFAULT_RANKER = approx()


# Metric losses ------------------------------------------------------------------------
def metric_loss(
    scores, labels, *, metric: Callable = metrics.ndcg, ranker=_DEFAULT_RANKER, where=None, **metric_kwargs
) -> jax.Array:
    """``1 - metric(scores, labels, ranker=ranker, ...)`` per list.

    .. math:: \\ell(s, y) = 1 - M_{\\text{ranker}}(s, y)

    ``metric`` is any metric of :mod:`jaxrank.metrics` (or a callable with its
    signature); ``ranker`` a smooth ranker (default ``jaxrank.approx()``);
    ``metric_kwargs`` go to the metric (``k``, ``gain``, ``rel``, ...). A ranker (or
    precomputed :class:`jaxrank.ranking.Ranks`) that is not smooth, such as
    ``jaxrank.hard()``, is refused: its metric has no gradient in the scores, and the
    loss would train nothing.
    Minimising the loss maximises the metric, which is right for every
    higher-is-better metric; for fall-out, where lower is better, minimise the
    metric itself instead (``jaxrank.fallout(..., ranker=...)``), since
    ``1 - fallout`` would be maximised by ranking non-relevant items first.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 0, 1])
      >>> r = jaxrank.approx(0.01)
      >>> round(float(metric_loss(scores, labels, ranker=r)), 5)  # 1 - 1/log2(4)
      0.5
      >>> round(float(metric_loss(scores, labels, metric=jaxrank.precision, ranker=r, k=1)), 5)
      1.0
      >>> metric_loss(scores, labels, ranker=jaxrank.hard())
      Traceback (most recent call last):
      ...
      ValueError: metric_loss needs a smooth ranker, ...
    """
    _smooth_ranker(ranker)
    return 1 - metric(scores, labels, where=where, ranker=ranker, **metric_kwargs)


def _smooth_ranker(ranker) -> None:
    """Refuse a ranker, or precomputed Ranks, that says it is not smooth (``smooth`` False):
    the gradient of a metric through exact ranks is 0 wherever it exists."""
    if getattr(ranker, "smooth", True):
        return
    # Ranks hold arrays: name their kind, not their values
    given = f"precomputed {type(ranker).__name__}" if isinstance(ranker, Ranks) else repr(ranker)
    raise ValueError(
        f"metric_loss needs a smooth ranker, got {given}, whose ranks have no gradient in the scores "
        "(the loss's gradient would be 0 everywhere): use jaxrank.approx(), jaxrank.softrank(), "
        "jaxrank.neuralsort(), jaxrank.softsort(), or jaxrank.gumbel() around one of them; "
        "exact ranks are for evaluation (jaxrank.ndcg(scores, labels), ...)"
    )


def ndcg_loss(scores, labels, *, k=None, where=None, ranker=_DEFAULT_RANKER, **metric_kwargs) -> jax.Array:
    """Smooth nDCG loss: ``1 - ndcg(scores, labels, k=k, ranker=ranker)`` (ApproxNDCG
    with the default ``approx()`` ranker, Qin et al. 2010).

    .. math:: \\ell = 1 - \\frac{1}{IDCG@k} \\sum_i \\frac{G(y_i)\\, \\sigma((k + \\frac12 - r_i)/\\tau)}{\\log_2(1 + r_i)}

    (the cutoff factor only with ``k``). A list without positive labels has
    loss 1 and zero gradient.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> round(float(ndcg_loss(jnp.array([2.0, 1.0]), jnp.array([1, 0]), ranker=jaxrank.softrank(0.1))), 5)
      0.0
    """
    return metric_loss(scores, labels, metric=metrics.ndcg, ranker=ranker, where=where, k=k, **metric_kwargs)


def mrr_loss(scores, labels, *, k=None, where=None, ranker=_DEFAULT_RANKER, **metric_kwargs) -> jax.Array:
    """Smooth reciprocal-rank loss: ``1 - reciprocal_rank(...)`` with a smooth ranker.

    .. math:: \\ell = 1 - \\sum_{i: y_i \\ge rel} \\frac{1}{r_i}\\,
        P(\\text{no relevant item above } i)

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> round(float(mrr_loss(jnp.array([2.0, 1.0]), jnp.array([0, 1]), ranker=jaxrank.approx(0.01))), 5)
      0.5
    """
    return metric_loss(scores, labels, metric=metrics.reciprocal_rank, ranker=ranker, where=where, k=k, **metric_kwargs)


def ap_loss(scores, labels, *, k=None, where=None, ranker=_DEFAULT_RANKER, **metric_kwargs) -> jax.Array:
    """Smooth average-precision loss: ``1 - average_precision(...)`` with a smooth ranker.

    .. math:: \\ell = 1 - \\frac{1}{R} \\sum_{i: y_i \\ge rel}
        \\frac{1 + \\#\\{\\text{relevant above } i\\}}{r_i}

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> round(float(ap_loss(jnp.array([2.0, 1.0, 0.0]), jnp.array([1, 0, 1]), ranker=jaxrank.approx(0.01))), 5)
      0.16667
    """
    return metric_loss(
        scores, labels, metric=metrics.average_precision, ranker=ranker, where=where, k=k, **metric_kwargs
    )


# Baselines: shared pieces --------------------------------------------------------------------
def _log_softmax(lists: _lists.Lists) -> jax.Array:
    """Log-softmax of the scores over the valid items of each list (or segment)."""
    s = lists.scores
    if lists.same is None:
        return s - _masked_logsumexp(s, lists.valid, axis=-1)
    rows = jnp.broadcast_to(s[..., None, :], lists.same.shape)
    return s - _masked_logsumexp(rows, lists.same, axis=-1)[..., 0]


def _distribution(lists: _lists.Lists, values: jax.Array, empty: str = "zero") -> jax.Array:
    """``values`` divided by their sum over each list (or segment); where that sum is 0,
    0 (``empty="zero"``) or uniform over the valid items (``"uniform"``)."""
    values = jnp.where(lists.valid, values, 0)
    if lists.same is None:
        total = jnp.sum(values, axis=-1, keepdims=True)
    else:
        total = _lists.segment_sum(values, lists.same)
    p = values / jnp.where(total != 0, total, 1)
    if empty == "uniform":
        ones = lists.valid.astype(values.dtype)
        count = jnp.sum(ones, axis=-1, keepdims=True) if lists.same is None else _lists.segment_sum(ones, lists.same)
        p = jnp.where(total != 0, p, ones / jnp.maximum(count, 1))
    return p


def _label_mass(lists: _lists.Lists) -> jax.Array:
    """Weighted labels clipped at 0: the unnormalised target of the softmax losses."""
    y = jnp.maximum(lists.labels, 0)
    return y if lists.weights is None else y * lists.weights


def _cross_entropy(lists: _lists.Lists, p: jax.Array) -> jax.Array:
    """:math:`-\\sum_i p_i \\log \\mathrm{softmax}(s)_i` per list (segment). Without segments
    as :math:`\\mathrm{lse}(s) \\sum_i p_i - \\sum_i p_i s_i`: two reductions, no per-item
    log-softmax in the value or the gradient (docs/compat/rax.md: the speed)."""
    if lists.same is not None:
        return _lists.per_list(-p * _log_softmax(lists), lists)
    p = jnp.where(lists.valid, p, 0)
    lse = _masked_logsumexp(lists.scores, lists.valid, axis=-1)[..., 0]
    return lse * jnp.sum(p, axis=-1) - jnp.sum(p * lists.scores, axis=-1)


def _poly1(lists: _lists.Lists, ce: jax.Array, p: jax.Array, epsilon: float) -> jax.Array:
    """``ce + epsilon (1 - pt)``, ``pt`` the softmax probability of the target ``p``; 0 at
    the positions (segments) where ``ce`` holds no list."""
    pt = _lists.per_list(p * jnp.exp(_log_softmax(lists)), lists)
    return jnp.where(_lists.holds_list(lists), ce + epsilon * (1 - pt), 0)


def _unique_softmax_terms(lists: _lists.Lists, gain) -> jax.Array:
    """Per item, :math:`-g_i w_i \\log(e^{s_i} / (e^{s_i} + \\sum_{j: y_j < y_i} e^{s_j}))`."""
    s, y = lists.scores, lists.labels
    n = s.shape[-1]
    pairs = _lists.pair_mask(lists.valid) if lists.same is None else lists.same
    below = (y[..., None, :] < y[..., :, None]) | jnp.eye(n, dtype=bool)
    rows = jnp.broadcast_to(s[..., None, :], pairs.shape)
    log_p = s - _masked_logsumexp(rows, pairs & below, axis=-1)[..., 0]
    if lists.weights is not None:
        log_p = log_p * lists.weights
    if gain is not None:
        log_p = log_p * _c.gain_fn(gain)(lists.labels)
    return -log_p


def _listmle_terms(lists: _lists.Lists, key) -> jax.Array:
    """Per item, :math:`\\log \\sum_{q \\ge p_i} e^{s_{\\pi(q)}} - s_i`, ``p_i`` the item's
    position by label (descending; ties in input order, or in a random order drawn
    from ``key``), within its list or segment."""
    s, y, valid = lists.scores, lists.labels, lists.valid
    order = _lists.order(y, valid, key)
    if lists.same is not None:
        pos = inverse_permutation(order)
        later = lists.same & (pos[..., None, :] >= pos[..., :, None])
        rows = jnp.broadcast_to(s[..., None, :], later.shape)
        return _masked_logsumexp(rows, later, axis=-1)[..., 0] - s
    n = s.shape[-1]
    s_sorted = take(s, order)
    inside = jnp.arange(n) < jnp.sum(valid, axis=-1, keepdims=True)
    # Items past the valid prefix stand at the lowest finite value: they add
    # exp(-huge) = 0 to every suffix sum that contains a valid item.
    low = jnp.finfo(s.dtype).min / 2
    x = jnp.where(inside, s_sorted, low)
    suffix = lax.cumlogsumexp(x, axis=x.ndim - 1, reverse=True)
    terms_sorted = jnp.where(inside, suffix - x, 0)
    return take(terms_sorted, inverse_permutation(order))


# A pair loss maps (s_i - s_j, y_i - y_j) to (loss of the pair, whether the pair counts).
PairLoss = Callable[[jax.Array, jax.Array], tuple[jax.Array, jax.Array]]


def _pair_terms(
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
    return max(1, min(n, _PAIRS_PER_BLOCK // max(batch * n, 1), _PAIRS_PER_LIST // max(n, 1)))


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


def _pairwise_totals(
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
    totals = _pairwise_totals(scores, labels, where, segments, weights, pair_loss, lambdaweight, num_segments)
    if totals is not None:
        return totals[0]
    terms, _, lists = _pair_terms(scores, labels, where, segments, weights, pair_loss, lambdaweight, num_segments)
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


def _logistic(s_diff, y_diff):
    return _softplus(-s_diff), _higher_first(y_diff)


def _hinge(s_diff, y_diff):
    return jax.nn.relu(1 - s_diff), _higher_first(y_diff)


def _soft_zero_one(s_diff, y_diff):
    return jax.nn.sigmoid(-s_diff), _higher_first(y_diff)


def _mse(s_diff, y_diff):
    return jnp.square(s_diff - y_diff), jnp.ones(y_diff.shape, bool)


def _qr(tau: float, squared: bool) -> PairLoss:
    def loss(s_diff, y_diff):
        under, over = jax.nn.relu(y_diff - s_diff), jax.nn.relu(s_diff - y_diff)
        if squared:
            under, over = jnp.square(under), jnp.square(over)
        return tau * under + (1 - tau) * over, _higher_first(y_diff)

    return loss


def _pointwise_terms(lists: _lists.Lists, fn) -> jax.Array:
    terms = fn(lists.scores, lists.labels)
    return terms if lists.weights is None else terms * lists.weights


def _squared_error(s, y):
    return jnp.square(s - y)


def _sigmoid_cross_entropy(s, y):
    return jax.nn.softplus(s) - s * jnp.clip(y, 0, 1)


# Listwise baselines ------------------------------------------------------------------------
def softmax_cross_entropy(
    scores, labels, *, where=None, segments=None, num_segments: Optional[int] = None, weights=None
) -> jax.Array:
    """ListNet-style softmax cross-entropy against the label distribution.

    .. math:: \\ell = -\\sum_i p_i \\log \\frac{e^{s_i}}{\\sum_j e^{s_j}}, \\qquad
        p_i = \\frac{w_i \\max(y_i, 0)}{\\sum_j w_j \\max(y_j, 0)}

    over the valid items of each list (segment); 0 when no label is positive.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(softmax_cross_entropy(jnp.array([0.0, 0.0]), jnp.array([1, 0]))), 5)  # log 2
      0.69315
    """
    lists = _lists.prepare(scores, labels, where, segments, weights, num_segments)
    return _cross_entropy(lists, _distribution(lists, _label_mass(lists)))


def poly1_softmax(
    scores, labels, *, epsilon: float = 1.0, where=None, segments=None, num_segments: Optional[int] = None, weights=None
) -> jax.Array:
    """Poly-1 softmax loss (Leng et al., 2022): the softmax cross-entropy plus
    ``epsilon`` times one minus the softmax probability of the targets.

    .. math:: \\ell = \\text{CE}(s, p) + \\epsilon\\Big(1 - \\sum_i p_i
        \\frac{e^{s_i}}{\\sum_j e^{s_j}}\\Big)

    with ``p`` as in :func:`softmax_cross_entropy`; 0 when no label is positive.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(poly1_softmax(jnp.array([0.0, 0.0]), jnp.array([1, 0]))), 5)  # log 2 + 1/2
      1.19315
    """
    lists = _lists.prepare(scores, labels, where, segments, weights, num_segments)
    p = _distribution(lists, _label_mass(lists))
    loss = _poly1(lists, _cross_entropy(lists, p), p, epsilon)
    return jnp.where(_lists.per_list(p, lists) > 0, loss, 0)


def unique_softmax(
    scores,
    labels,
    *,
    where=None,
    segments=None,
    num_segments: Optional[int] = None,
    weights=None,
    gain: _c.Gain = "exp",
) -> jax.Array:
    """Unique softmax loss (Zhu & Klabjan, 2020): each item against the items of
    lower label only.

    .. math:: \\ell = -\\sum_i G(y_i)\\, w_i \\log \\frac{e^{s_i}}{e^{s_i} + \\sum_{j:\\ y_j < y_i} e^{s_j}}

    ``gain``: ``"exp"`` (:math:`2^y - 1`), ``"linear"``, a callable on labels, or None
    (:math:`G = 1`). O(n^2) per list.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(unique_softmax(jnp.array([0.0, 0.0]), jnp.array([1, 0]))), 5)  # log 2
      0.69315
    """
    lists = _lists.prepare(scores, labels, where, segments, weights, num_segments)
    return _lists.per_list(_unique_softmax_terms(lists, gain), lists)


def listmle(scores, labels, *, where=None, segments=None, num_segments: Optional[int] = None, key=None) -> jax.Array:
    """ListMLE (Xia et al., 2008): negative Plackett-Luce log-likelihood of the
    order of the labels.

    .. math:: \\ell = \\sum_{p=1}^{m} \\Big(\\log \\sum_{q \\ge p} e^{s_{\\pi(q)}} - s_{\\pi(p)}\\Big)

    :math:`\\pi` sorts the ``m`` valid items by label, descending (:func:`jaxrank.hard`);
    equal labels keep their input order, or, with a PRNG ``key``, a random order.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(listmle(jnp.array([0.0, 0.0]), jnp.array([1, 0]))), 5)  # log 2 + log 1
      0.69315
    """
    lists = _lists.prepare(scores, labels, where, segments, None, num_segments)
    return _lists.per_list(_listmle_terms(lists, key), lists)


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
    return _pairwise(scores, labels, where, segments, weights, _logistic, lambdaweight, num_segments)


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
    return _pairwise(scores, labels, where, segments, weights, _hinge, lambdaweight, num_segments)


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
    return _pairwise(scores, labels, where, segments, weights, _soft_zero_one, lambdaweight, num_segments)


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
    return _pairwise(scores, labels, where, segments, weights, _mse, lambdaweight, num_segments)


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
    return _pairwise(scores, labels, where, segments, weights, _qr(float(tau), squared), lambdaweight, num_segments)


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


# Pointwise baselines ------------------------------------------------------------------------
def pointwise_mse(
    scores, labels, *, where=None, segments=None, num_segments: Optional[int] = None, weights=None
) -> jax.Array:
    """Squared error of each score against its label, summed over the list.

    .. math:: \\ell = \\sum_i w_i (y_i - s_i)^2

    Example:
      >>> import jax.numpy as jnp
      >>> float(pointwise_mse(jnp.array([1.0, 0.0]), jnp.array([0, 2])))
      5.0
    """
    lists = _lists.prepare(scores, labels, where, segments, weights, num_segments)
    return _lists.per_list(_pointwise_terms(lists, _squared_error), lists)


def pointwise_sigmoid(
    scores, labels, *, where=None, segments=None, num_segments: Optional[int] = None, weights=None
) -> jax.Array:
    """Sigmoid (binary) cross-entropy of each score against its label clipped to [0, 1].

    .. math:: \\ell = -\\sum_i w_i \\big(y_i \\log \\sigma(s_i) + (1 - y_i) \\log(1 - \\sigma(s_i))\\big)

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(pointwise_sigmoid(jnp.array([0.0]), jnp.array([1]))), 5)  # log 2
      0.69315
    """
    lists = _lists.prepare(scores, labels, where, segments, weights, num_segments)
    return _lists.per_list(_pointwise_terms(lists, _sigmoid_cross_entropy), lists)
