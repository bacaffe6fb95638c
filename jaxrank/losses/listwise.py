"""Listwise baselines: softmax cross-entropy (ListNet), PolyLoss, unique softmax, ListMLE."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank.losses import lists as _lists
from jaxrank.metrics import common as _c
from jaxrank.ranking.backend import inverse_permutation, take
from jaxrank.ranking.smooth import masked_logsumexp


# Baselines: shared pieces --------------------------------------------------------------------
def _log_softmax(lists: _lists.Lists) -> jax.Array:
    """Log-softmax of the scores over the valid items of each list (or segment)."""
    s = lists.scores
    if lists.same is None:
        return s - masked_logsumexp(s, lists.valid, axis=-1)
    rows = jnp.broadcast_to(s[..., None, :], lists.same.shape)
    return s - masked_logsumexp(rows, lists.same, axis=-1)[..., 0]


def distribution(lists: _lists.Lists, values: jax.Array, empty: str = "zero") -> jax.Array:
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


def cross_entropy(lists: _lists.Lists, p: jax.Array) -> jax.Array:
    """:math:`-\\sum_i p_i \\log \\mathrm{softmax}(s)_i` per list (segment). Without segments
    as :math:`\\mathrm{lse}(s) \\sum_i p_i - \\sum_i p_i s_i`: two reductions, no per-item
    log-softmax in the value or the gradient (docs/compat/rax.md: the speed)."""
    if lists.same is not None:
        return _lists.per_list(-p * _log_softmax(lists), lists)
    p = jnp.where(lists.valid, p, 0)
    lse = masked_logsumexp(lists.scores, lists.valid, axis=-1)[..., 0]
    return lse * jnp.sum(p, axis=-1) - jnp.sum(p * lists.scores, axis=-1)


def poly1(lists: _lists.Lists, ce: jax.Array, p: jax.Array, epsilon: float) -> jax.Array:
    """``ce + epsilon (1 - pt)``, ``pt`` the softmax probability of the target ``p``; 0 at
    the positions (segments) where ``ce`` holds no list."""
    pt = _lists.per_list(p * jnp.exp(_log_softmax(lists)), lists)
    return jnp.where(_lists.holds_list(lists), ce + epsilon * (1 - pt), 0)


def unique_softmax_terms(lists: _lists.Lists, gain) -> jax.Array:
    """Per item, :math:`-g_i w_i \\log(e^{s_i} / (e^{s_i} + \\sum_{j: y_j < y_i} e^{s_j}))`."""
    s, y = lists.scores, lists.labels
    n = s.shape[-1]
    pairs = _lists.pair_mask(lists.valid) if lists.same is None else lists.same
    below = (y[..., None, :] < y[..., :, None]) | jnp.eye(n, dtype=bool)
    rows = jnp.broadcast_to(s[..., None, :], pairs.shape)
    log_p = s - masked_logsumexp(rows, pairs & below, axis=-1)[..., 0]
    if lists.weights is not None:
        log_p = log_p * lists.weights
    if gain is not None:
        log_p = log_p * _c.gain_fn(gain)(lists.labels)
    return -log_p


def listmle_terms(lists: _lists.Lists, key) -> jax.Array:
    """Per item, :math:`\\log \\sum_{q \\ge p_i} e^{s_{\\pi(q)}} - s_i`, ``p_i`` the item's
    position by label (descending; ties in input order, or in a random order drawn
    from ``key``), within its list or segment."""
    s, y, valid = lists.scores, lists.labels, lists.valid
    order = _lists.order(y, valid, key)
    if lists.same is not None:
        pos = inverse_permutation(order)
        later = lists.same & (pos[..., None, :] >= pos[..., :, None])
        rows = jnp.broadcast_to(s[..., None, :], later.shape)
        return masked_logsumexp(rows, later, axis=-1)[..., 0] - s
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
    return cross_entropy(lists, distribution(lists, _label_mass(lists)))


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
    p = distribution(lists, _label_mass(lists))
    loss = poly1(lists, cross_entropy(lists, p), p, epsilon)
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
    return _lists.per_list(unique_softmax_terms(lists, gain), lists)


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
    return _lists.per_list(listmle_terms(lists, key), lists)
