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

Each weight here is a function of per-item values (gains, positions) combined pair by
pair: :func:`pair_weight` gives that form, :class:`PairWeight`, with which the pairwise
losses build the weights of a block of rows at a time instead of all ``n^2`` at once.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp

from jaxrank import _checks
from jaxrank.losses import lists as _lists
from jaxrank.metrics import common as _c

__all__ = ["PairWeight", "dcg", "dcg2", "labeldiff", "pair_weight"]


class PairWeight(NamedTuple):
    """A lambdaweight as per-item values and the rule that combines two items' values.

    ``items`` is a pytree of ``[..., n]`` arrays; ``pair(row, col)`` takes it twice, the
    leaves of ``row`` shaped ``[..., b, 1]`` (items ``i``) and those of ``col``
    ``[..., 1, n]`` (items ``j``), and returns the weights ``[..., b, n]`` of those pairs,
    valid or not (the loss masks them). Over all rows it is the lambdaweight's
    ``[..., n, n]``; over ``b`` rows at a time it never holds every pair.
    """

    items: Any
    pair: Callable[[Any, Any], jax.Array]

    def scaled(self, factor: float) -> PairWeight:
        """The same weights times ``factor``."""
        pair = self.pair
        return PairWeight(self.items, lambda row, col: pair(row, col) * factor)


def _on_every_pair(weight: PairWeight, lists: _lists.Lists) -> jax.Array:
    """The ``[..., n, n]`` weights, 0 on pairs with an invalid item or of two segments."""
    row = jax.tree_util.tree_map(lambda a: a[..., :, None], weight.items)
    col = jax.tree_util.tree_map(lambda a: a[..., None, :], weight.items)
    valid_pairs = _lists.pair_mask(lists.valid) if lists.same is None else lists.same
    return jnp.where(valid_pairs, weight.pair(row, col), 0)


def pair_weight(lambdaweight: Callable[..., jax.Array]) -> Optional[Callable[..., PairWeight]]:
    """The :class:`PairWeight` form of ``lambdaweight``: a function of the same arguments
    (``scores, labels, *, where, segments, weights``) that returns it, or None where
    ``lambdaweight`` has none (any callable of the ``[..., n, n]`` kind is a lambdaweight;
    those of this module have the form, also under :func:`functools.partial` with keywords).
    A lambdaweight of your own gets it from its attribute ``pair_weight``, such a function.

    Example:
      >>> import functools, jax, jax.numpy as jnp
      >>> s, y = jnp.array([1.0, 0.0]), jnp.array([0, 1])
      >>> w = pair_weight(functools.partial(dcg, normalize=False))(s, y)
      >>> row = jax.tree_util.tree_map(lambda a: a[:, None], w.items)
      >>> col = jax.tree_util.tree_map(lambda a: a[None, :], w.items)
      >>> round(float(w.pair(row, col)[0, 1]), 5)  # dcg(s, y, normalize=False)[0, 1]
      0.36907
      >>> pair_weight(lambda scores, labels, **kwargs: jnp.ones((2, 2))) is None
      True
    """
    keywords: dict = {}
    fn = lambdaweight
    while isinstance(fn, functools.partial):
        if fn.args:
            return None
        keywords = {**fn.keywords, **keywords}
        fn = fn.func
    form = getattr(fn, "pair_weight", None)
    return None if form is None else functools.partial(form, **keywords)


def _abs_diff(row: jax.Array, col: jax.Array) -> jax.Array:
    return jnp.abs(row - col)


def _labeldiff_form(scores, labels, *, where=None, segments=None, weights=None) -> PairWeight:
    lists = _lists.prepare(scores, labels, where, segments, weights)
    return PairWeight(lists.labels, _abs_diff)


def labeldiff(scores, labels, *, where=None, segments=None, weights=None) -> jax.Array:
    """Absolute label difference, :math:`\\lambda_{ij} = |y_i - y_j|` (``weights`` unused).

    Example:
      >>> import jax.numpy as jnp
      >>> labeldiff(jnp.array([0.0, 0.0]), jnp.array([2, 0])).tolist()
      [[0.0, 2.0], [2.0, 0.0]]
    """
    lists = _lists.prepare(scores, labels, where, segments, weights)
    return _on_every_pair(_labeldiff_form(scores, labels, where=where, segments=segments, weights=weights), lists)


def _gains(lists: _lists.Lists, topn, normalize, gain, discount) -> jax.Array:
    g = _c.gain_fn(gain)(lists.labels)
    if lists.weights is not None:
        g = g * lists.weights
    g = jnp.where(lists.valid, g, 0)
    return g / _ideal_dcg(g, lists, topn, discount) if normalize else g


def _ideal_dcg(g: jax.Array, lists: _lists.Lists, topn, discount) -> jax.Array:
    """Per item, the ideal DCG of its list (segment) at ``topn`` with gains ``g``; 1 where
    it is 0. The gains by their place in the descending order, summed per segment."""
    slot = None if lists.slots is None else lists.slots.slot
    place = _lists.positions(g, lists.valid, slot)
    d = _c.discount_fn(discount)(jnp.maximum(place, 1))
    if topn is not None:
        d = jnp.where(place <= topn, d, 0)
    terms = jnp.where(lists.valid, g * d, 0)
    if slot is None:
        ideal = jnp.sum(terms, axis=-1, keepdims=True)
    else:
        ideal = jnp.take_along_axis(_lists.per_list(terms, lists), jnp.maximum(slot, 0), axis=-1)
    return jnp.where(ideal == 0, 1, ideal)


def _options(topn, normalize) -> Optional[int]:
    _checks.boolean(normalize, "normalize")
    return None if topn is None else _checks.positive_int(topn, "topn")


class _GainsAndPositions(NamedTuple):
    g: jax.Array  # gains, normalised with ``normalize``
    r: jax.Array  # 1-based positions by score within the segment (no gradient)


def _gains_and_positions(scores, labels, where, segments, weights, topn, normalize, gain, discount):
    lists = _lists.prepare(scores, labels, where, segments, weights)
    g = _gains(lists, topn, normalize, gain, discount)
    slot = None if lists.slots is None else lists.slots.slot
    return _GainsAndPositions(g, _lists.positions(lists.scores, lists.valid, slot))


def _dcg_pairs(topn: Optional[int], discount_fn: Callable[[jax.Array], jax.Array]):
    def pair(row: _GainsAndPositions, col: _GainsAndPositions) -> jax.Array:
        d_row, d_col = discount_fn(row.r), discount_fn(col.r)
        if topn is not None:
            d_row, d_col = jnp.where(row.r <= topn, d_row, 0), jnp.where(col.r <= topn, d_col, 0)
        return _abs_diff(row.g, col.g) * _abs_diff(d_row, d_col)

    return pair


def _dcg_form(
    scores, labels, *, where=None, segments=None, weights=None, topn=None, normalize=True, gain="exp", discount="log2"
) -> PairWeight:
    topn = _options(topn, normalize)
    items = _gains_and_positions(scores, labels, where, segments, weights, topn, normalize, gain, discount)
    return PairWeight(items, _dcg_pairs(topn, _c.discount_fn(discount)))


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
    options = dict(topn=topn, normalize=normalize, gain=gain, discount=discount)
    form = _dcg_form(scores, labels, where=where, segments=segments, weights=weights, **options)
    return _on_every_pair(form, _lists.prepare(scores, labels, where, segments, weights))


def _dcg2_pairs(topn: Optional[int], discount_fn: Callable[[jax.Array], jax.Array], light_discount: bool):
    def pair(row: _GainsAndPositions, col: _GainsAndPositions) -> jax.Array:
        gap = _abs_diff(row.r, col.r)
        # gap is 0 only on the diagonal (and between invalid items): a placeholder 1 keeps
        # the discount finite there before the result is zeroed.
        safe_gap = jnp.where(gap > 0, gap, 1)
        d = discount_fn(safe_gap) if light_discount else discount_fn(safe_gap) - discount_fn(safe_gap + 1)
        d = jnp.where(gap > 0, jnp.abs(d), 0)
        if topn is not None:
            top = jnp.maximum(row.r, col.r)
            d = d * jnp.where(top > topn, 1 / (1 - discount_fn(jnp.where(top > topn, top, 2))), 1)
        return _abs_diff(row.g, col.g) * d

    return pair


def _dcg2_form(
    scores,
    labels,
    *,
    where=None,
    segments=None,
    weights=None,
    topn=None,
    normalize=True,
    gain="exp",
    discount="log2",
    light_discount=False,
) -> PairWeight:
    topn = _options(topn, normalize)
    _checks.boolean(light_discount, "light_discount")
    items = _gains_and_positions(scores, labels, where, segments, weights, topn, normalize, gain, discount)
    return PairWeight(items, _dcg2_pairs(topn, _c.discount_fn(discount), light_discount))


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
    options = dict(topn=topn, normalize=normalize, gain=gain, discount=discount, light_discount=light_discount)
    form = _dcg2_form(scores, labels, where=where, segments=segments, weights=weights, **options)
    return _on_every_pair(form, _lists.prepare(scores, labels, where, segments, weights))


labeldiff.pair_weight = _labeldiff_form
dcg.pair_weight = _dcg_form
dcg2.pair_weight = _dcg2_form
