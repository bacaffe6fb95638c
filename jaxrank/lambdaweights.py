"""Lambdaweights: per-pair weights for the pairwise losses of :mod:`jaxrank.losses`.

A lambdaweight is a callable ``lambdaweight(scores, labels, *, where, segments,
weights) -> [..., n, n]`` whose entry ``(i, j)`` multiplies the loss of the pair
``(i, j)``; the pairwise losses take it as ``lambdaweight=`` (use
:func:`functools.partial` to set its options). Zero on pairs with an invalid
item or items of two segments. The current positions :math:`r_i` come from
:func:`jaxrank.hard` (by score, ties in input order, within each segment) and
carry no gradient.

Gains are :math:`G_i = \\text{gain}(y_i)\\, w_i` (``w`` the optional per-item
``weights``); with ``normalize`` they are divided by the ideal DCG of their list
(at ``topn``), so that :func:`dcg` is LambdaRank's :math:`|\\Delta \\text{NDCG}|`.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from jaxrank import _checks, _lists, metrics
from jaxrank.metrics import _common as _c

__all__ = ["dcg", "dcg2", "labeldiff"]


def _valid_pairs(lists: _lists.Lists) -> jax.Array:
    return _lists.pair_mask(lists.valid) if lists.same is None else lists.same


def _abs_diff(x: jax.Array) -> jax.Array:
    return jnp.abs(x[..., :, None] - x[..., None, :])


def labeldiff(scores, labels, *, where=None, segments=None, weights=None) -> jax.Array:
    """Absolute label difference, :math:`\\lambda_{ij} = |y_i - y_j|` (``weights`` unused).

    Example:
      >>> import jax.numpy as jnp
      >>> labeldiff(jnp.array([0.0, 0.0]), jnp.array([2, 0])).tolist()
      [[0.0, 2.0], [2.0, 0.0]]
    """
    lists = _lists.prepare(scores, labels, where, segments, weights)
    return jnp.where(_valid_pairs(lists), _abs_diff(lists.labels), 0)


def _gains(lists: _lists.Lists, topn, normalize, gain, discount) -> jax.Array:
    g = _c.gain_fn(gain)(lists.labels)
    if lists.weights is not None:
        g = g * lists.weights
    g = jnp.where(lists.valid, g, 0)
    if not normalize:
        return g

    def as_is(x):
        return x

    if lists.same is None:
        ideal = metrics.dcg(g, g, k=topn, where=lists.valid, gain=as_is, discount=discount)[..., None]
    else:
        # Each item's own segment as a list of the row: [..., n (item), n].
        rows = jnp.broadcast_to(g[..., None, :], lists.same.shape)
        ideal = metrics.dcg(rows, rows, k=topn, where=lists.same, gain=as_is, discount=discount)
    return g / jnp.where(ideal == 0, 1, ideal)


def _options(topn, normalize) -> Optional[int]:
    _checks.boolean(normalize, "normalize")
    return None if topn is None else _checks.positive_int(topn, "topn")


def dcg(
    scores,
    labels,
    *,
    where=None,
    segments=None,
    weights=None,
    topn: Optional[int] = None,
    normalize: bool = True,
    gain: _c.Gain = "exp",
    discount: _c.Discount = "log2",
) -> jax.Array:
    """DCG lambdaweights (LambdaRank, Burges 2006): the change of DCG (nDCG with
    ``normalize``) when items ``i`` and ``j`` swap positions.

    .. math:: \\lambda_{ij} = |G_i - G_j|\\, |D(r_i) - D(r_j)|, \\qquad
        D(r) = \\text{discount}(r)\\, [r \\le \\text{topn}]

    Args:
      topn: the cutoff of :math:`D` and of the ideal DCG; None for none.
      normalize: divide the gains by the ideal DCG (:math:`|\\Delta \\text{NDCG}|`).
      gain: ``"exp"`` (:math:`2^y - 1`), ``"linear"`` or a callable on labels.
      discount: ``"log2"`` (:math:`1 / \\log_2(1 + r)`) or a callable on positions.

    Example:
      >>> import jax.numpy as jnp
      >>> w = dcg(jnp.array([1.0, 0.0]), jnp.array([0, 1]), normalize=False)
      >>> round(float(w[0, 1]), 5)  # |0 - 1| * |1 - 1/log2(3)|
      0.36907
    """
    topn = _options(topn, normalize)
    lists = _lists.prepare(scores, labels, where, segments, weights)
    g = _gains(lists, topn, normalize, gain, discount)
    r = _lists.positions(lists.scores, lists.valid, lists.same)
    d = _c.discount_fn(discount)(r)
    if topn is not None:
        d = jnp.where(r <= topn, d, 0)
    return jnp.where(_valid_pairs(lists), _abs_diff(g) * _abs_diff(d), 0)


def dcg2(
    scores,
    labels,
    *,
    where=None,
    segments=None,
    weights=None,
    topn: Optional[int] = None,
    normalize: bool = True,
    gain: _c.Gain = "exp",
    discount: _c.Discount = "log2",
    light_discount: bool = False,
) -> jax.Array:
    """LambdaLoss's NDCG-Loss2 lambdaweights (Wang et al., 2018), by the distance
    between the positions of ``i`` and ``j``:

    .. math:: \\lambda_{ij} = |G_i - G_j|\\, \\big|D(|r_i - r_j|) - D(|r_i - r_j| + 1)\\big|\\,
        c_{ij}, \\qquad c_{ij} = \\begin{cases} 1 / (1 - D(\\max(r_i, r_j))) &
        \\max(r_i, r_j) > \\text{topn} \\\\ 1 & \\text{otherwise} \\end{cases}

    (Jagerman et al., 2022, for ``topn``); with ``light_discount``, :math:`|D(|r_i - r_j|)|`.
    0 on the diagonal. Arguments as :func:`dcg`.

    Example:
      >>> import jax.numpy as jnp
      >>> w = dcg2(jnp.array([1.0, 0.0]), jnp.array([0, 1]), normalize=False)
      >>> round(float(w[0, 1]), 5)  # |0 - 1| * |1/log2(2) - 1/log2(3)|
      0.36907
    """
    topn = _options(topn, normalize)
    _checks.boolean(light_discount, "light_discount")
    lists = _lists.prepare(scores, labels, where, segments, weights)
    g = _gains(lists, topn, normalize, gain, discount)
    r = _lists.positions(lists.scores, lists.valid, lists.same)
    discount_fn = _c.discount_fn(discount)
    gap = _abs_diff(r)
    # gap is 0 only on the diagonal (and between invalid items): a placeholder 1 keeps
    # the discount finite there before the result is zeroed.
    safe_gap = jnp.where(gap > 0, gap, 1)
    d = discount_fn(safe_gap) if light_discount else discount_fn(safe_gap) - discount_fn(safe_gap + 1)
    d = jnp.where(gap > 0, jnp.abs(d), 0)
    if topn is not None:
        top = jnp.maximum(r[..., :, None], r[..., None, :])
        d = d * jnp.where(top > topn, 1 / (1 - discount_fn(jnp.where(top > topn, top, 2))), 1)
    return jnp.where(_valid_pairs(lists), _abs_diff(g) * d, 0)
