"""Pointwise baselines: each item's score against its label."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp

from jaxrank.losses import lists as _lists


def pointwise_terms(lists: _lists.Lists, fn) -> jax.Array:
    terms = fn(lists.scores, lists.labels)
    return terms if lists.weights is None else terms * lists.weights


def squared_error(s, y):
    return jnp.square(s - y)


def sigmoid_cross_entropy(s, y):
    return jax.nn.softplus(s) - s * jnp.clip(y, 0, 1)


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
    return _lists.per_list(pointwise_terms(lists, squared_error), lists)


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
    return _lists.per_list(pointwise_terms(lists, sigmoid_cross_entropy), lists)
