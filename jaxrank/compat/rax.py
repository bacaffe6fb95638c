"""rax 0.4 over jaxrank: its 11 losses, 7 metrics, 3 lambdaweights, 4 transformations
and its rank helpers.

Switch by changing the import: ``import rax`` becomes
``from jaxrank.compat import rax``. Names, keywords, defaults and reductions are
rax's: ``reduce_fn`` (default :func:`jax.numpy.mean`) over the items, pairs or lists
rax reduces over, ``None`` for the unreduced values in rax's shapes (pairwise losses
``[..., n * n]``; with ``segments``, ``[..., n]`` holding each segment's value at its
first valid item). The computations are :mod:`jaxrank.losses`',
:mod:`jaxrank.lambdaweights`' and :mod:`jaxrank.metrics`'; exact ranks come from
:func:`jaxrank.hard`, approximate ones from :func:`jaxrank.ranking.pairwise_ranks` (the
kernel of :func:`jaxrank.approx`), and a metric evaluates the ranks of its ``rank_fn``
with the weights of its ``cutoff_fn`` through :func:`jaxrank.ranking.given`. Where this
module differs from rax: docs/compat/rax.md.

Example:
  >>> import jax.numpy as jnp
  >>> from jaxrank.compat import rax
  >>> scores, labels = jnp.array([2.0, 1.0, 3.0]), jnp.array([2.0, 0.0, 1.0])
  >>> round(float(rax.ndcg_metric(scores, labels)), 5)
  0.79671
  >>> round(float(rax.approx_t12n(rax.ndcg_metric)(scores, labels)), 5)
  -0.74059
"""

from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from typing import Optional

import jax
import jax.numpy as jnp

from jaxrank import metrics as jaxrank_metrics
from jaxrank.losses import lambdaweights, listwise, pairwise, pointwise
from jaxrank.losses import lists as _lists
from jaxrank.losses.pairwise import hinge, logistic, mse, qr, soft_zero_one
from jaxrank.ranking import given, pairwise_ranks
from jaxrank.ranking.backend import divide

__all__ = [
    "ap_metric",
    "approx_t12n",
    "bound_t12n",
    "dcg_metric",
    "ndcg_metric",
    "mrr_metric",
    "opa_metric",
    "precision_metric",
    "recall_metric",
    "dcg2_lambdaweight",
    "dcg_lambdaweight",
    "gumbel_t12n",
    "labeldiff_lambdaweight",
    "listmle_loss",
    "pairwise_hinge_loss",
    "pairwise_logistic_loss",
    "pairwise_mse_loss",
    "pairwise_qr_loss",
    "pairwise_soft_zero_one_loss",
    "pointwise_mse_loss",
    "pointwise_sigmoid_loss",
    "poly1_softmax_loss",
    "segment_t12n",
    "softmax_loss",
    "unique_softmax_loss",
    "utils",
]

Array = jax.Array
ReduceFn = Callable[..., Array]


def default_gain_fn(label: Array) -> Array:
    """rax's default gain, :math:`2^y - 1` (negative labels not clipped)."""
    return jnp.power(2.0, label) - 1.0


def default_discount_fn(rank: Array) -> Array:
    """rax's default discount, :math:`1 / \\log_2(1 + r)`."""
    return 1.0 / jnp.log2(rank + 1)


# Helpers of rax.utils ---------------------------------------------------------------------------
def safe_reduce(a: Array, where: Optional[Array] = None, reduce_fn: Optional[ReduceFn] = None) -> Array:
    """``reduce_fn(a, where=where)``; a masked mean over nothing is 0 (unless ``a``
    holds NaN); without ``reduce_fn``, ``a`` with 0 where ``where`` is false."""
    out = reduce_fn(a, where=where) if reduce_fn is not None else a
    if reduce_fn is jnp.mean:
        out = jnp.where(jnp.isnan(out) & ~jnp.any(jnp.isnan(a)), 0.0, out)
    if reduce_fn is None and where is not None:
        out = jnp.where(where, out, 0.0)
    return out


def compute_pairs(a: Array, op: Callable[[Array, Array], Array]) -> Array:
    """``op(a[..., i], a[..., j])`` for every pair, flattened to ``[..., n * n]``."""
    out = op(jnp.expand_dims(a, -1), jnp.expand_dims(a, -2))
    out = jnp.broadcast_to(out, jnp.broadcast_shapes(out.shape, a.shape[:-1] + (a.shape[-1],) * 2))
    return out.reshape(out.shape[:-2] + (-1,))


def normalize_probabilities(
    unscaled_probabilities: Array, *, where: Optional[Array] = None, segments: Optional[Array] = None, axis: int = -1
) -> Array:
    """Scale to sum to 1 over the valid items of each list (segment) along ``axis``;
    uniform over the valid items where they sum to 0 (over all items where none is valid)."""
    x = jnp.moveaxis(jnp.asarray(unscaled_probabilities), axis, -1)
    where = None if where is None else jnp.moveaxis(jnp.asarray(where), axis, -1)
    segments = None if segments is None else jnp.moveaxis(jnp.asarray(segments), axis, -1)
    x = x.astype(jnp.promote_types(x.dtype, jnp.float32))
    lists = _lists.prepare(x, x, where, segments)
    values, ones = lists.labels, lists.valid.astype(lists.labels.dtype)  # x, 0 where not valid

    def total(v):  # per item, the sum over the valid items of its list (segment)
        return jnp.sum(v, axis=-1, keepdims=True) if lists.same is None else _lists.segment_sum(v, lists.same)

    # divided exactly: XLA turns x / total into x * (1 / total), one ulp off (5 / 12: 0.41666669)
    mass = total(values)
    p = jnp.where(mass != 0, divide(values, jnp.where(mass != 0, mass, 1)), divide(ones, jnp.maximum(total(ones), 1)))
    if where is not None:
        # A list (segment) without a valid item: uniform over all of its items.
        seg = jnp.zeros(x.shape, jnp.int32) if segments is None else segments
        same = seg[..., :, None] == seg[..., None, :]
        none_valid = ~jnp.any(same & lists.valid[..., None, :], axis=-1)
        p = jnp.where(none_valid, divide(1.0, jnp.sum(same, axis=-1).astype(p.dtype)), p)
    return jnp.moveaxis(p.astype(x.dtype), -1, axis)


def ranks(
    scores: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    axis: int = -1,
    key: Optional[Array] = None,
) -> Array:
    """Exact 1-based ranks (:func:`jaxrank.hard`: by score, ties in input order or,
    with ``key``, random), valid items first, within each segment. No gradient."""
    scores = jnp.moveaxis(jnp.asarray(scores), axis, -1)
    if segments is not None and axis not in (-1, scores.ndim - 1):
        raise ValueError(f"only axis=-1 is supported when segments are set, but given axis={axis}.")
    valid = _lists.prepare(scores, scores, None if where is None else jnp.moveaxis(jnp.asarray(where), axis, -1)).valid
    if segments is None:
        pos = _lists.positions(scores, valid, key=key)
    else:
        pos = _segment_positions(scores, valid, segments, key)
    return jnp.moveaxis(pos.astype(jnp.int32), -1, axis)


def _segment_positions(scores, valid, segments, key) -> Array:
    """1-based positions within each segment, every item of the segment counted (the
    invalid ones after the valid ones), as rax's ``ranks``."""
    pos = (_lists.positions(scores, valid, key=key)).astype(jnp.int32)
    seg = jnp.asarray(segments)
    same = seg[..., :, None] == seg[..., None, :]
    return jnp.sum(same & (pos[..., None, :] <= pos[..., :, None]), axis=-1)


def approx_ranks(
    scores: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    key: Optional[Array] = None,
    step_fn: Callable[[Array], Array] = jax.nn.sigmoid,
) -> Array:
    """Approximate ranks, :func:`jaxrank.ranking.pairwise_ranks`:
    :math:`r_i = 1 + \\sum_{j \\ne i} \\text{step}(s_j - s_i)` over the valid items (of the
    segment); 1 on invalid items, as rax. ``key`` is unused."""
    del key
    scores = jnp.asarray(scores)
    r = pairwise_ranks(scores, where, step=step_fn, segments=segments).astype(scores.dtype)
    return r if where is None else jnp.where(jnp.asarray(where, bool), r, jnp.ones((), r.dtype))


def cutoff(a: Array, n: Optional[int] = None, where: Optional[Array] = None, segments: Optional[Array] = None) -> Array:
    """1.0 on the ``n`` largest valid values of ``a`` (of each segment), else 0.0."""
    if n is None:
        return jnp.ones_like(a)
    out = ranks(a, where=where, segments=segments) <= n
    if where is not None:
        out &= where
    return jnp.float32(out)


def approx_cutoff(
    a: Array,
    n: Optional[int] = None,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    step_fn: Callable[[Array], Array] = jax.nn.sigmoid,
) -> Array:
    """rax's soft top-``n`` selection: :math:`\text{step}(a_i - c)` with :math:`c` the
    midpoint of the ``n``-th and ``(n + 1)``-th largest valid values of ``a`` (of the
    segment; held constant in the gradient); 1 where the list (segment) has at most ``n``
    valid items, 0 on invalid items. ``step_fn`` is any function (rax's ``bound_t12n``
    passes ``1 - relu(1 - x)``)."""
    if n is None:
        return jnp.ones_like(a)
    if n == 0:
        return jnp.zeros_like(a)
    a = jnp.asarray(a)
    at = ranks(a, where=where, segments=segments)
    boundary = jnp.where((at == n) | (at == n + 1), a, 0)
    valid = jnp.ones(a.shape, jnp.int32) if where is None else jnp.asarray(where).astype(jnp.int32)
    if segments is None:
        middle = jnp.sum(boundary, axis=-1, keepdims=True) / 2.0
        count = jnp.sum(valid, axis=-1, keepdims=True)
    else:
        seg = jnp.asarray(segments)
        same = seg[..., :, None] == seg[..., None, :]
        middle = jnp.sum(jnp.where(same, boundary[..., None, :], 0), axis=-1) / 2.0
        count = jnp.sum(jnp.where(same, valid[..., None, :], 0), axis=-1)
    out = step_fn(a - jax.lax.stop_gradient(middle))
    out = jnp.where(count > n, out, jnp.ones_like(out))
    return out if where is None else jnp.where(where, out, jnp.zeros_like(out))


utils = types.SimpleNamespace(
    approx_cutoff=approx_cutoff,
    approx_ranks=approx_ranks,
    compute_pairs=compute_pairs,
    cutoff=cutoff,
    normalize_probabilities=normalize_probabilities,
    ranks=ranks,
    safe_reduce=safe_reduce,
)


# Losses ---------------------------------------------------------------------------------------
def _rax_layout(values: Array, lists: _lists.Lists) -> Array:
    """Per-list values in rax's layout: ``[...]``, or with segments ``[..., n]``, each
    list's value at its first valid item (jaxrank's ``[..., S]`` slots, gathered)."""
    if lists.slots is None:
        return values
    per_item = jnp.take_along_axis(values, jnp.maximum(lists.slots.slot, 0), axis=-1)
    return jnp.where(_lists.first_of_segment(lists.same), per_item, 0)


def _list_mask(lists: _lists.Lists, where) -> Optional[Array]:
    """What rax reduces a listwise loss over: the lists with a valid item, or the first
    valid item of each segment."""
    if lists.same is not None:
        return _lists.first_of_segment(lists.same)
    return None if where is None else jnp.any(lists.valid, axis=-1)


def _identity_label_fn(a, where):
    return a


def softmax_loss(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    weights: Optional[Array] = None,
    label_fn: Callable[..., Array] = _identity_label_fn,
    reduce_fn: Optional[ReduceFn] = jnp.mean,
) -> Array:
    """rax's softmax loss: :math:`-\\sum_i \\text{label\\_fn}(w y)_i \\log \\text{softmax}(s)_i`
    (labels as given, not normalised, unless ``label_fn`` does)."""
    lists = _lists.prepare(scores, labels, where, segments, weights)
    mass = lists.labels if lists.weights is None else lists.labels * lists.weights
    values = _rax_layout(listwise.cross_entropy(lists, label_fn(mass, where=where)), lists)
    return safe_reduce(values, _list_mask(lists, where), reduce_fn)


def poly1_softmax_loss(
    scores: Array,
    labels: Array,
    *,
    epsilon: float = 1.0,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    weights: Optional[Array] = None,
    reduce_fn: Optional[ReduceFn] = jnp.mean,
) -> Array:
    """rax's poly-1 softmax loss: :func:`softmax_loss` plus ``epsilon`` times one minus the
    softmax probability of the normalised labels (uniform where they sum to 0)."""
    lists = _lists.prepare(scores, labels, where, segments, weights)
    mass = lists.labels if lists.weights is None else lists.labels * lists.weights
    ce = listwise.cross_entropy(lists, mass)
    values = _rax_layout(listwise.poly1(lists, ce, listwise.distribution(lists, mass, empty="uniform"), epsilon), lists)
    return safe_reduce(values, _list_mask(lists, where), reduce_fn)


def unique_softmax_loss(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    weights: Optional[Array] = None,
    gain_fn: Optional[Callable[[Array], Array]] = default_gain_fn,
    reduce_fn: ReduceFn = jnp.mean,
) -> Array:
    """rax's unique softmax loss (:func:`jaxrank.losses.unique_softmax` with ``gain_fn``)."""
    lists = _lists.prepare(scores, labels, where, segments, weights)
    values = _rax_layout(_lists.per_list(listwise.unique_softmax_terms(lists, gain_fn), lists), lists)
    return safe_reduce(values, _list_mask(lists, where), reduce_fn)


def listmle_loss(
    scores: Array,
    labels: Array,
    *,
    key: Optional[Array] = None,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    reduce_fn: Optional[ReduceFn] = jnp.mean,
) -> Array:
    """rax's ListMLE loss (:func:`jaxrank.losses.listmle`; ``key`` breaks label ties at random)."""
    lists = _lists.prepare(scores, labels, where, segments)
    values = _rax_layout(_lists.per_list(listwise.listmle_terms(lists, key), lists), lists)
    return safe_reduce(values, _list_mask(lists, where), reduce_fn)


def _pairwise_loss(scores, labels, pair_loss, where, segments, weights, lambdaweight_fn, reduce_fn) -> Array:
    if reduce_fn is jnp.mean or reduce_fn is jnp.sum:
        # rax's mean over the counted pairs from per-list sums made in row blocks: never
        # every pair at once (unless lambdaweight_fn gives only [..., n * n])
        totals = pairwise.pairwise_totals(scores, labels, where, segments, weights, pair_loss, lambdaweight_fn, None)
        if totals is not None:
            total, count = jnp.sum(totals[0]), jnp.sum(totals[1])
            if reduce_fn is jnp.sum:
                return total
            return jnp.where(count > 0, total / jnp.maximum(count, 1), 0.0)
    terms, counts, _ = pairwise.pair_terms(scores, labels, where, segments, weights, pair_loss, lambdaweight_fn)
    flat = terms.shape[:-2] + (-1,)
    return safe_reduce(terms.reshape(flat), counts.reshape(flat), reduce_fn)


def _pairwise_signature(pair_loss, doc: str):
    def loss(
        scores: Array,
        labels: Array,
        *,
        where: Optional[Array] = None,
        segments: Optional[Array] = None,
        weights: Optional[Array] = None,
        lambdaweight_fn: Optional[Callable[..., Array]] = None,
        reduce_fn: Optional[ReduceFn] = jnp.mean,
    ) -> Array:
        return _pairwise_loss(scores, labels, pair_loss, where, segments, weights, lambdaweight_fn, reduce_fn)

    loss.__doc__ = doc
    return loss


pairwise_hinge_loss = _pairwise_signature(hinge, "rax's pairwise hinge loss (:func:`jaxrank.losses.pairwise_hinge`).")
pairwise_hinge_loss.__name__ = pairwise_hinge_loss.__qualname__ = "pairwise_hinge_loss"
pairwise_logistic_loss = _pairwise_signature(
    logistic, "rax's pairwise logistic loss (:func:`jaxrank.losses.pairwise_logistic`)."
)
pairwise_logistic_loss.__name__ = pairwise_logistic_loss.__qualname__ = "pairwise_logistic_loss"
pairwise_soft_zero_one_loss = _pairwise_signature(
    soft_zero_one, "rax's pairwise soft zero-one loss (:func:`jaxrank.losses.pairwise_soft_zero_one`)."
)
pairwise_soft_zero_one_loss.__name__ = pairwise_soft_zero_one_loss.__qualname__ = "pairwise_soft_zero_one_loss"
pairwise_mse_loss = _pairwise_signature(mse, "rax's pairwise squared error (:func:`jaxrank.losses.pairwise_mse`).")
pairwise_mse_loss.__name__ = pairwise_mse_loss.__qualname__ = "pairwise_mse_loss"


def pairwise_qr_loss(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    weights: Optional[Array] = None,
    tau: float = 0.5,
    squared: bool = False,
    lambdaweight_fn: Optional[Callable[..., Array]] = None,
    reduce_fn: Optional[ReduceFn] = jnp.mean,
) -> Array:
    """rax's pairwise quantile-regression loss (:func:`jaxrank.losses.pairwise_qr`)."""
    if not (tau > 0.0 and tau <= 1.0):
        raise ValueError(f"tau should be in the range of (0.0, 1.0], but {tau} is given.")
    return _pairwise_loss(scores, labels, qr(tau, squared), where, segments, weights, lambdaweight_fn, reduce_fn)


def _pointwise_loss(scores, labels, fn, where, weights, reduce_fn) -> Array:
    lists = _lists.prepare(scores, labels, where, None, weights)
    return safe_reduce(pointwise.pointwise_terms(lists, fn), where, reduce_fn)


def pointwise_mse_loss(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    weights: Optional[Array] = None,
    reduce_fn: Optional[ReduceFn] = jnp.mean,
) -> Array:
    """rax's pointwise squared error, per item (``segments`` unused)."""
    del segments
    return _pointwise_loss(scores, labels, pointwise.squared_error, where, weights, reduce_fn)


def pointwise_sigmoid_loss(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    weights: Optional[Array] = None,
    reduce_fn: Optional[ReduceFn] = jnp.mean,
) -> Array:
    """rax's sigmoid cross-entropy, per item, labels clipped to [0, 1] (``segments`` unused)."""
    del segments
    return _pointwise_loss(scores, labels, pointwise.sigmoid_cross_entropy, where, weights, reduce_fn)


# Lambdaweights --------------------------------------------------------------------------------
def _flat_pairs(x: Array) -> Array:
    return x.reshape(x.shape[:-2] + (-1,))


def labeldiff_lambdaweight(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    weights: Optional[Array] = None,
) -> Array:
    """:math:`|y_i - y_j|`, ``[..., n * n]`` (:func:`jaxrank.lambdaweights.labeldiff`)."""
    if jnp.shape(scores)[-1] == 0:
        return _empty_pairs(scores)
    return _flat_pairs(lambdaweights.labeldiff(scores, labels, where=where, segments=segments, weights=weights))


def _list_size_scaled(fn, scores, kwargs) -> Array:
    # rax scales its DCG lambdaweights by the (padded) list size "to avoid too small values".
    if jnp.shape(scores)[-1] == 0:  # an empty list has no pairs: rax's empty array
        return _empty_pairs(scores)
    return _flat_pairs(fn(scores, **kwargs)) * jnp.shape(scores)[-1]


def _empty_pairs(scores) -> Array:
    """The pairs of empty lists, ``[..., 0]``, in the dtype of the weights of other lists."""
    scores = jnp.asarray(scores)
    dtype = jnp.promote_types(jnp.promote_types(scores.dtype, jnp.float32), jnp.result_type(float))
    return jnp.zeros(scores.shape[:-1] + (0,), dtype)


def _rax_form(lambdaweight):
    """The :class:`jaxrank.lambdaweights.PairWeight` form of rax's DCG lambdaweight over
    ``lambdaweight``: rax's keywords and defaults, times the list size."""

    def form(scores, labels, *, normalize=False, gain_fn=default_gain_fn, discount_fn=default_discount_fn, **kwargs):
        kwargs.update(normalize=normalize, gain=gain_fn, discount=discount_fn)
        return lambdaweight.pair_weight(scores, labels, **kwargs).scaled(jnp.shape(scores)[-1])

    return form


def dcg_lambdaweight(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    weights: Optional[Array] = None,
    topn: Optional[int] = None,
    normalize: bool = False,
    gain_fn: Callable[[Array], Array] = default_gain_fn,
    discount_fn: Callable[[Array], Array] = default_discount_fn,
) -> Array:
    """rax's DCG lambdaweights: :func:`jaxrank.lambdaweights.dcg` times the list size."""
    kwargs = dict(where=where, segments=segments, weights=weights, topn=topn, normalize=normalize)
    kwargs.update(labels=labels, gain=gain_fn, discount=discount_fn)
    return _list_size_scaled(lambdaweights.dcg, scores, kwargs)


def dcg2_lambdaweight(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    weights: Optional[Array] = None,
    topn: Optional[int] = None,
    normalize: bool = False,
    gain_fn: Callable[[Array], Array] = default_gain_fn,
    discount_fn: Callable[[Array], Array] = default_discount_fn,
    light_discount: bool = False,
) -> Array:
    """rax's LambdaLoss lambdaweights: :func:`jaxrank.lambdaweights.dcg2` times the list size."""
    kwargs = dict(where=where, segments=segments, weights=weights, topn=topn, normalize=normalize)
    kwargs.update(labels=labels, gain=gain_fn, discount=discount_fn, light_discount=light_discount)
    return _list_size_scaled(lambdaweights.dcg2, scores, kwargs)


# The pairwise losses build these weights a block of rows at a time (jaxrank.lambdaweights.pair_weight).
labeldiff_lambdaweight.pair_weight = lambdaweights.labeldiff.pair_weight
dcg_lambdaweight.pair_weight = _rax_form(lambdaweights.dcg)
dcg2_lambdaweight.pair_weight = _rax_form(lambdaweights.dcg2)


# Metrics --------------------------------------------------------------------------------------
def _retrieved(scores: Array, ranks_: Array, where, segments, topn, cutoff_fn, exact: bool) -> Array:
    """rax's retrieved items: valid, not scored ``-inf``, and inside ``cutoff_fn``'s top
    ``topn`` of ``-ranks``. A ``cutoff_fn`` that takes ``where=`` (rax's and this module's
    ``cutoff`` and ``approx_cutoff`` do) is given it, so that masked items take no place in
    the cutoff (rax passes none: its approximate ranks put masked items at rank 1, where
    they crowd valid items out of a top ``n``). ``exact``: ``ranks_`` are :func:`ranks`'
    positions (within each segment)."""
    out = (~jnp.isneginf(scores)).astype(ranks_.dtype)
    if where is not None:
        out = jnp.where(where, out, 0)
    if cutoff_fn is cutoff and exact:
        # exact positions within each segment: rax's cutoff is r <= n, no ranking of them
        cut = jnp.ones_like(ranks_) if topn is None else (ranks_ <= topn).astype(ranks_.dtype)
        return out * cut
    kwargs = dict(segments=segments, n=topn)
    if where is not None and _accepts(cutoff_fn, where=where):
        kwargs["where"] = where
    # where, not a product: bound_t12n's cutoff of an item ranked inf (scored -inf) is -inf
    return jnp.where(out > 0, out * cutoff_fn(-ranks_, **kwargs), 0)


def _ranked_metric(
    metric, scores, labels, where, segments, topn, key, rank_fn, cutoff_fn, reduce_fn, floor=False, **kwargs
):
    """``metric`` (a :mod:`jaxrank.metrics` function) over ``rank_fn``'s ranks, each item
    counted as much as it is retrieved (:func:`jaxrank.ranking.given`; at least 0 with
    ``floor``), in rax's layout and reduction."""
    scores, labels = jnp.asarray(scores), jnp.asarray(labels)
    r = jnp.asarray(rank_fn(scores, where=where, segments=segments, key=key))
    r = r.astype(jnp.promote_types(r.dtype, jnp.float32))
    # the default rank_fn gives exact positions, valid items first: no second sort of them
    exact = rank_fn is ranks
    present = _retrieved(scores, r, where, segments, topn, cutoff_fn, exact)
    if floor:
        present = jnp.maximum(present, 0)
    lists = _lists.prepare(scores, labels, where, segments)
    # The given ranker ignores the scores: finite stand-ins keep the metric's input checks.
    values = metric(
        jnp.zeros(scores.shape, r.dtype),
        labels,
        where=where,
        segments=segments,
        ranker=given(r, present, exact=exact and segments is None),
        **kwargs,
    )
    return safe_reduce(_rax_layout(values, lists), _list_mask(lists, where), reduce_fn)


def _ranked_metric_signature(metric, doc: str, floor: bool = False):
    def metric_fn(
        scores: Array,
        labels: Array,
        *,
        where: Optional[Array] = None,
        segments: Optional[Array] = None,
        topn: Optional[int] = None,
        key: Optional[Array] = None,
        rank_fn: Callable[..., Array] = ranks,
        cutoff_fn: Callable[..., Array] = cutoff,
        reduce_fn: Optional[ReduceFn] = jnp.mean,
    ) -> Array:
        return _ranked_metric(
            metric, scores, labels, where, segments, topn, key, rank_fn, cutoff_fn, reduce_fn, floor=floor
        )

    metric_fn.__doc__ = doc
    return metric_fn


mrr_metric = _ranked_metric_signature(
    jaxrank_metrics.reciprocal_rank,
    "rax's mean reciprocal rank (:func:`jaxrank.reciprocal_rank`): :math:`c / r` of the first relevant "
    "(label >= 1) item, :math:`c` how much it is retrieved, floored at 0. rax takes the largest "
    ":math:`c_i / r_i` over the relevant items, and 0: the same for any cutoff that decreases with the rank "
    "(``cutoff``, ``approx_cutoff``; ``bound_t12n``'s goes below 0).",
    floor=True,
)
mrr_metric.__name__ = mrr_metric.__qualname__ = "mrr_metric"
recall_metric = _ranked_metric_signature(
    jaxrank_metrics.recall,
    "rax's recall (:func:`jaxrank.recall`): relevant retrieved items over the relevant items of the list.",
)
recall_metric.__name__ = recall_metric.__qualname__ = "recall_metric"
precision_metric = _ranked_metric_signature(
    jaxrank_metrics.precision,
    "rax's precision (:func:`jaxrank.precision` without ``k``): relevant retrieved items over retrieved items.",
)
precision_metric.__name__ = precision_metric.__qualname__ = "precision_metric"
ap_metric = _ranked_metric_signature(
    jaxrank_metrics.average_precision,
    "rax's average precision (:func:`jaxrank.average_precision`), over the relevant items of the list.",
)
ap_metric.__name__ = ap_metric.__qualname__ = "ap_metric"


def opa_metric(
    scores: Array, labels: Array, *, where: Optional[Array] = None, reduce_fn: Optional[ReduceFn] = jnp.mean
) -> Array:
    """rax's ordered pair accuracy (:func:`jaxrank.ordered_pair_accuracy`; tied scores
    are wrongly ordered)."""
    lists = _lists.prepare(scores, labels, where)
    values = jaxrank_metrics.ordered_pair_accuracy(scores, labels, where=where)
    return safe_reduce(values, _list_mask(lists, where), reduce_fn)


def dcg_metric(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    topn: Optional[int] = None,
    weights: Optional[Array] = None,
    key: Optional[Array] = None,
    gain_fn: Callable[[Array], Array] = default_gain_fn,
    discount_fn: Callable[[Array], Array] = default_discount_fn,
    rank_fn: Callable[..., Array] = ranks,
    cutoff_fn: Callable[..., Array] = cutoff,
    reduce_fn: Optional[ReduceFn] = jnp.mean,
) -> Array:
    """rax's DCG (:func:`jaxrank.dcg`): :math:`\\sum_i c_i w_i \\text{gain}(y_i) \\text{discount}(r_i)`,
    :math:`c_i` whether item ``i`` is retrieved (in the top ``topn``)."""
    kwargs = dict(gain=gain_fn, discount=discount_fn, weights=weights)
    return _ranked_metric(
        jaxrank_metrics.dcg, scores, labels, where, segments, topn, key, rank_fn, cutoff_fn, reduce_fn, **kwargs
    )


def ndcg_metric(
    scores: Array,
    labels: Array,
    *,
    where: Optional[Array] = None,
    segments: Optional[Array] = None,
    topn: Optional[int] = None,
    weights: Optional[Array] = None,
    key: Optional[Array] = None,
    gain_fn: Callable[[Array], Array] = default_gain_fn,
    discount_fn: Callable[[Array], Array] = default_discount_fn,
    rank_fn: Callable[..., Array] = ranks,
    cutoff_fn: Callable[..., Array] = cutoff,
    reduce_fn: Optional[ReduceFn] = jnp.mean,
) -> Array:
    """rax's nDCG (:func:`jaxrank.ndcg`): :func:`dcg_metric` over the DCG of the items
    ordered by :math:`w_i \\text{gain}(y_i)` (exact ranks, top ``topn``); 0 where that is 0."""
    weights = jnp.ones(jnp.shape(scores), jnp.float32) if weights is None else weights
    kwargs = dict(k=topn or None, gain=gain_fn, discount=discount_fn, weights=weights)
    return _ranked_metric(
        jaxrank_metrics.ndcg, scores, labels, where, segments, topn, key, rank_fn, cutoff_fn, reduce_fn, **kwargs
    )


# Transformations ------------------------------------------------------------------------------
def _accepts(fn, **kwargs) -> bool:
    try:
        inspect.signature(fn).bind_partial(**kwargs)
        return True
    except (TypeError, ValueError):  # ValueError: a callable without a signature
        return False


def _with_keyword(fn, name: str, new):
    """``new`` with the signature of ``fn`` plus keyword ``name`` (default None)."""
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.name != name and p.kind != p.VAR_KEYWORD]
    params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None))
    params += [p for p in sig.parameters.values() if p.kind == p.VAR_KEYWORD]
    wrapped = functools.wraps(fn)(new)
    wrapped.__signature__ = sig.replace(parameters=params)
    return wrapped


def _with_hooks(metric_fn, rank_step, cutoff_step, prefix: str):
    """``-metric_fn`` with ``rank_fn`` and ``cutoff_fn`` (where it takes them) set to
    :func:`approx_ranks` and :func:`approx_cutoff` with these step functions."""
    parameters = inspect.signature(metric_fn).parameters
    hooks = {}
    if "rank_fn" in parameters:
        hooks["rank_fn"] = functools.partial(approx_ranks, step_fn=rank_step)
    if "cutoff_fn" in parameters:
        hooks["cutoff_fn"] = functools.partial(approx_cutoff, step_fn=cutoff_step)

    @functools.wraps(metric_fn)
    def metric_loss(scores, labels, **kwargs):
        return -metric_fn(scores, labels, **{**hooks, **kwargs})

    metric_loss.__name__ = metric_loss.__qualname__ = f"{prefix}_{_fun_name(metric_fn)}"
    metric_loss.__doc__ = f"{prefix.capitalize()} {_fun_doc(metric_fn)}"
    return metric_loss


def _fun_name(fn) -> str:
    """The name of any callable, as ``jax.util.wraps`` (rax's decorator) takes it: its
    ``__name__``, a partial's function's, else ``<unnamed function>`` (a callable object)."""
    name = getattr(fn, "__name__", None)
    if name is not None:
        return name
    return _fun_name(fn.func) if isinstance(fn, functools.partial) else "<unnamed function>"


def _fun_doc(fn) -> str:
    while isinstance(fn, functools.partial):  # a partial's own __doc__ is functools.partial's
        fn = fn.func
    return getattr(fn, "__doc__", "") or ""


def approx_t12n(metric_fn, temperature: float = 1.0):
    """rax's approximate-metric transformation (Qin et al., 2010): a loss, minus
    ``metric_fn`` with ranks :math:`1 + \\sum_{j \\ne i} \\sigma((s_j - s_i) / T)` and a
    sigmoid top-``n`` cutoff of width ``T`` (:func:`approx_cutoff`)."""

    def step(x):
        return jax.nn.sigmoid(x / temperature)

    return _with_hooks(metric_fn, step, step, "approx")


def bound_t12n(metric_fn):
    """rax's bound transformation: a loss, minus ``metric_fn`` with the upper bound of the
    ranks :math:`1 + \\sum_{j \\ne i} \\text{relu}(s_j - s_i + 1)` and the cutoff step
    :math:`1 - \\text{relu}(1 - x)`: a lower bound of the metric for those that
    decrease with rank."""
    return _with_hooks(metric_fn, lambda x: jax.nn.relu(x + 1.0), lambda x: 1.0 - jax.nn.relu(1.0 - x), "bounded")


def gumbel_t12n(loss_or_metric_fn, *, samples: int = 8, beta: float = 1.0, smoothing_factor: Optional[float] = None):
    """rax's Gumbel transformation: ``loss_or_metric_fn`` on ``samples`` draws of
    ``scores + beta * Gumbel`` (a new leading axis; ``key`` required), optionally
    mapped to ``log(softmax + smoothing_factor)`` (Bruch et al., 2020)."""

    def repeat(a):
        return jnp.repeat(jnp.expand_dims(a, 0), samples, 0)

    def gumbel_fn(scores, labels, *, key, **kwargs):
        scores, labels = repeat(scores), repeat(labels)
        kwargs = {name: repeat(arg) if isinstance(arg, jax.Array) else arg for name, arg in kwargs.items()}
        if _accepts(loss_or_metric_fn, key=key):
            key, kwargs["key"] = jax.random.split(key)
        noisy = jax.random.gumbel(key, shape=scores.shape) * beta + scores
        if smoothing_factor is not None:
            # log(softmax + smoothing), rax's choice over log_softmax (it smooths).
            where = kwargs.get("where")
            if where is not None:
                noisy = jnp.where(where, noisy, -jnp.inf)
            noisy = jnp.log(jax.nn.softmax(noisy) + smoothing_factor)
        return loss_or_metric_fn(noisy, labels, **kwargs)

    return _with_keyword(loss_or_metric_fn, "key", gumbel_fn)


def segment_t12n(loss_or_metric_fn):
    """rax's segment transformation: ``loss_or_metric_fn`` itself when it takes
    ``segments=`` (every function here does); otherwise each segment becomes its own
    masked row, ``[..., n, n]`` (O(n^2) memory), one row per segment."""
    if _accepts(loss_or_metric_fn, segments=None):
        return loss_or_metric_fn

    def segmented_fn(scores, labels, *, segments=None, **kwargs):
        if segments is None:
            return loss_or_metric_fn(scores, labels, **kwargs)
        n = scores.shape[-1]

        def rows(a):
            return jnp.repeat(jnp.expand_dims(a, -2), n, -2)

        scores, labels = rows(scores), rows(labels)
        kwargs = {k: rows(v) if isinstance(v, jax.Array) and k != "key" else v for k, v in kwargs.items()}
        mask = segments[..., :, None] == segments[..., None, :]
        # One row per segment: the row of its first item.
        mask &= jnp.cumsum(mask, axis=-2) == 1
        if kwargs.get("where") is not None:
            mask &= kwargs["where"]
        kwargs["where"] = mask
        return loss_or_metric_fn(scores, labels, **kwargs)

    return _with_keyword(loss_or_metric_fn, "segments", segmented_fn)
