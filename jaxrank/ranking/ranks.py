"""The contract every ranker meets.

A *ranker* maps ``scores[..., n]`` and a validity mask ``where[..., n]`` to a
:class:`Ranks` object. Every metric in :mod:`jaxrank.metrics` is written once
against the four operations of :class:`Ranks`; the ranker alone decides whether
the result is the exact metric (:func:`~jaxrank.hard`) or a smooth relaxation
(:mod:`jaxrank.ranking.smooth`).

Writing :math:`r_i` for the (random, or smoothed) 1-based rank of item
:math:`i` and :math:`j \\prec i` for "item :math:`j` is ranked above item
:math:`i`", the operations are, for per-item weights :math:`g, w` and a
function of the position :math:`f`:

.. math::

    \\text{linear}(g, f) &= \\sum_i g_i\\, \\mathbb{E}[f(r_i)] \\\\
    \\text{count\\_before}(g, f, w) &= \\sum_i g_i\\,
        \\mathbb{E}\\Big[f(r_i)\\,\\big(w_i + \\textstyle\\sum_{j \\prec i} w_j\\big)\\Big] \\\\
    \\text{survival}(g, f, w) &= \\sum_i g_i\\,
        \\mathbb{E}\\Big[f(r_i) \\textstyle\\prod_{j \\prec i} (1 - w_j)\\Big],
        \\quad w \\in \\{0, 1\\} \\\\
    \\text{cascade}(p, f) &= \\sum_i p_i\\,
        \\mathbb{E}\\Big[f(r_i) \\textstyle\\prod_{j \\prec i} (1 - p_j)\\Big]

The expectation is over the orderings of tied items for ``ties="expected"``
and is trivial otherwise. ``f`` maps positions of shape ``[..., P]`` to weights
``[..., P, C]`` (``C`` cutoffs), and every operation returns ``[..., C]``.

One derived operation, :meth:`Ranks.prefix_sum`, is ``linear`` with the cutoff
indicator at cutoffs ``k[..., C]`` that differ between lists,

.. math:: \\text{prefix\\_sum}(g, k) = \\sum_i g_i\\, \\mathbb{E}\\big[[r_i \\le k]\\big],

which exact ranks compute as a running sum read at ``k`` (no ``[..., n, C]``
weights).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Literal, Optional, Protocol, runtime_checkable

import jax
import jax.numpy as jnp

Ties = Literal["stable", "pessimistic", "optimistic", "expected"]
TIE_POLICIES: tuple[str, ...] = ("stable", "pessimistic", "optimistic", "expected")
PositionFn = Callable[[jax.Array], jax.Array]


def float_dtype() -> jnp.dtype:
    """The default float dtype (float64 under ``jax_enable_x64``)."""
    return jnp.result_type(float)


class Ranks(abc.ABC):
    """What a ranker returns: the four operations every metric is written with.

    Subclasses: :class:`~jaxrank.ranking.HardRanks` (exact), the smooth ones in
    :mod:`jaxrank.ranking.smooth`. ``g``, ``w`` and ``p`` are per-item arrays of shape
    ``[..., n]``; invalid items must carry zero weight (the metrics guarantee it).
    """

    #: Number of items ``n`` of the ranked lists.
    size: int
    #: True when the operations are differentiable in the scores.
    smooth: bool = False

    def cutoff(self, positions: jax.Array, k: jax.Array) -> jax.Array:
        """Indicator (hard) or smooth indicator of ``positions <= k``."""
        return (positions <= k).astype(positions.dtype)

    @abc.abstractmethod
    def linear(self, g: jax.Array, f: PositionFn) -> jax.Array:
        """See the module docstring."""

    @abc.abstractmethod
    def count_before(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        """See the module docstring."""

    @abc.abstractmethod
    def survival(self, g: jax.Array, f: PositionFn, w: jax.Array) -> jax.Array:
        """See the module docstring."""

    @abc.abstractmethod
    def cascade(self, p: jax.Array, f: PositionFn) -> jax.Array:
        """See the module docstring."""

    def prefix_sum(self, g: jax.Array, k: jax.Array) -> jax.Array:
        """``linear`` with the cutoff indicator at per-list cutoffs ``k[..., C]``:
        ``sum_i g_i E[[r_i <= k]]``, shape ``[..., C]``."""
        return self.linear(g, lambda pos: self.cutoff(pos[..., None], k[..., None, :]))


@runtime_checkable
class Ranker(Protocol):
    """What the metrics' ``ranker=`` accepts besides a :class:`Ranks`: a callable
    ``ranker(scores[..., n], where[..., n] or None, *, depth=None) -> Ranks``.

    ``depth`` asks for the first ``depth`` positions only (a cutoff metric's
    largest ``k``); a ranker may return more. ``smooth`` says whether the
    returned operations are differentiable in the scores.
    """

    smooth: bool

    def __call__(
        self, scores: jax.Array, where: Optional[jax.Array] = None, *, depth: Optional[int] = None
    ) -> Ranks: ...
