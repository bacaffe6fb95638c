"""Rankers screened as candidate defaults and not adopted: kept so that the screens'
commands in docs/reports/defaults.md run. Not part of the library.

``band(T, low, high)``: :func:`jaxrank.laplace`'s ranks at a temperature ``T`` in the units
of the scores, kept between ``low`` and ``high`` times the mean gap among each list's top 11
scores (held constant in the gradient): inside the band a model sharpens the relaxation by
spreading its scores apart, as with ``softsort()``'s temperature in score units.

    python benchmarks/bench_letor.py --data lambdarank --rankers "__import__('_screen_rankers').band(1.0, 0.05, 1.0)"

``expected(t)``: laplace's position weights averaged over each rank's spread. ``gapped(r)``:
the ranker ``r`` (score units) with its temperature in top gaps. ``mixed(t, beta, ratio)``:
laplace with a heavier-tailed step. ``spread(t, live=True)``: SoftSort's kernel normalised over
the positions (monotone at every temperature). Results: docs/reports/defaults.md.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from jaxrank.ranking._ties import reduce_positions
from jaxrank.ranking.laplace import LaplaceRanker, LaplaceRanks, _ranks_in_order, _step, order_and_scale
from jaxrank.ranking.smooth import _inputs


@dataclasses.dataclass(frozen=True)
class BandedLaplace(LaplaceRanker):
    """``temperature``: the band's top, in top gaps; ``low``: its floor; ``score_temperature``:
    the temperature in score units, clipped to the band."""

    score_temperature: float = 1.0
    low: float = 0.1

    def __call__(self, scores, where=None, *, depth=None) -> LaplaceRanks:
        del depth
        x, valid = _inputs(scores, where)
        order, gap = order_and_scale(x, valid, 1.0, self.top)
        scale = jnp.clip(self.score_temperature, self.low * gap, self.temperature * gap)
        ranks = _ranks_in_order(x, order, valid, valid, scale)
        return LaplaceRanks(ranks, valid, x, order, scale, self.cutoff_temperature, self.reach)


def band(score_temperature: float = 1.0, low: float = 0.1, high: float = 0.5, top: int = 10) -> BandedLaplace:
    """Laplace ranks at ``score_temperature`` clipped to ``[low, high]`` top gaps.

    >>> import jax.numpy as jnp
    >>> s = jnp.array([3.0, 2.0, 1.0, 0.0])
    >>> [round(float(r), 3) for r in band(1e-6, 1e-6, 1e6)(s).ranks]  # T = 1e-6 score units: exact
    [1.0, 2.0, 3.0, 4.0]
    """
    return BandedLaplace(temperature=high, top=top, score_temperature=score_temperature, low=low)


# Gauss-Hermite nodes and weights (probabilists', normalised): E f(Z), Z ~ N(0, 1), exact
# for polynomials of degree 9.
_NODES = (-2.8569700138728056, -1.3556261799742659, 0.0, 1.3556261799742659, 2.8569700138728056)
_WEIGHTS = (0.011257411327720693, 0.22207592200561256, 0.5333333333333333, 0.22207592200561256, 0.011257411327720693)


@dataclasses.dataclass(frozen=True)
class ExpectedLaplaceRanks(LaplaceRanks):
    """A metric's position weights at each item's mean rank replaced by their mean over its
    rank: ``E f(R_i)``, ``R_i = 1 + sum_j Bernoulli(F((s_j - s_i) / T))`` taken as normal
    (mean the Laplace rank, variance ``sum_j p_ij (1 - p_ij)``), by Gauss-Hermite. Dense:
    ``n^2`` pairs a list (a screen on short lists)."""

    def _weighted(self, g, f, factor=None):
        h = g if factor is None else g * factor
        h = jnp.where(self.valid, h, 0)
        x = self.scores
        p = _step((x[..., None, :] - x[..., :, None]) / self.scale[..., None])
        keep = self.valid[..., None, :] & self.valid[..., :, None] & ~jnp.eye(x.shape[-1], dtype=bool)
        sd = jnp.sqrt(jnp.sum(jnp.where(keep, p * (1 - p), 0), axis=-1) + 1e-12)
        m = jnp.sum(self.valid, axis=-1, keepdims=True).astype(x.dtype)
        total = 0
        for node, weight in zip(_NODES, _WEIGHTS):
            total = total + weight * reduce_positions(h, f(jnp.clip(self.ranks + node * sd, 1, jnp.maximum(m, 1))))
        return total


@dataclasses.dataclass(frozen=True)
class ExpectedLaplace(LaplaceRanker):
    def __call__(self, scores, where=None, *, depth=None) -> ExpectedLaplaceRanks:
        r = super().__call__(scores, where, depth=depth)
        return ExpectedLaplaceRanks(r.ranks, r.valid, r.scores, r.order, r.scale, r.tau, r.reach)


def expected(temperature: float = 0.5, top: int = 10) -> ExpectedLaplace:
    """``laplace(temperature, top=top)`` with each position weight averaged over the rank's
    spread (:class:`ExpectedLaplaceRanks`)."""
    return ExpectedLaplace(temperature=temperature, top=top)


@dataclasses.dataclass(frozen=True)
class Gapped:
    """``inner`` (a ranker with its temperature in score units) on each list's scores divided
    by the mean gap among its top ``top + 1`` (held constant in the gradient): ``inner``'s
    temperature measured in top gaps, as :func:`jaxrank.laplace`'s is."""

    inner: object
    top: int = 10
    smooth = True

    def __call__(self, scores, where=None, *, depth=None):
        x, valid = _inputs(scores, where)
        _, gap = order_and_scale(x, valid, 1.0, self.top)
        return self.inner(jnp.where(valid, x / gap, 0), valid)


def gapped(inner, top: int = 10) -> Gapped:
    """``inner`` with its temperature in top gaps (:class:`Gapped`)."""
    return Gapped(inner, top)


@dataclasses.dataclass(frozen=True)
class MixedLaplace(LaplaceRanker):
    """Laplace ranks whose step is ``(1 - beta) F(x / T) + beta F(x / (ratio T))``: a heavier
    tail between far-apart items (ranks are linear in the step, so the mixture's ranks are
    the mixture of the two rankings)."""

    beta: float = 0.2
    ratio: float = 8.0

    def __call__(self, scores, where=None, *, depth=None) -> LaplaceRanks:
        r = super().__call__(scores, where, depth=depth)
        far = _ranks_in_order(r.scores, r.order, r.valid, r.valid, self.ratio * r.scale)
        ranks = (1 - self.beta) * r.ranks + self.beta * far
        return LaplaceRanks(ranks, r.valid, r.scores, r.order, r.scale, r.tau, r.reach)


def mixed(temperature: float = 0.5, beta: float = 0.2, ratio: float = 8.0, top: int = 10) -> MixedLaplace:
    """``laplace(temperature)`` with a fraction ``beta`` of its step ``ratio`` times hotter."""
    return MixedLaplace(temperature=temperature, top=top, beta=beta, ratio=ratio)


@dataclasses.dataclass(frozen=True)
class Spread:
    """Each item's mass spread over the positions by its score's distance to the sorted
    scores (held constant in the gradient): ``Q[p, j] = softmax_p(-|t_p - s_j| / T)`` over the
    valid positions, ``T`` = ``temperature`` top gaps. SoftSort's kernel normalised over
    positions (each column sums to 1) instead of items: an item's expected discount is a
    kernel smoother of the discount curve at its score, which rises with its score at every
    temperature. Dense: ``n^2`` a list (a screen on short lists)."""

    temperature: float = 1.0
    top: int = 10
    live: bool = False  # the centers t_p differentiated (they are the items' own scores)
    smooth = True

    def __call__(self, scores, where=None, *, depth=None):
        from jaxrank.ranking.permutation import PermutationRanks

        x, valid = _inputs(scores, where)
        order, scale = order_and_scale(x, valid, self.temperature, self.top)
        rows = jnp.arange(x.shape[-1]) < jnp.sum(valid, axis=-1, keepdims=True)  # [..., n] positions that hold an item
        top = jnp.where(rows, jnp.take_along_axis(x if self.live else lax.stop_gradient(x), order, axis=-1), 0)
        logits = -jnp.abs(top[..., :, None] - x[..., None, :]) / scale[..., None]
        logits = jnp.where(rows[..., :, None], logits, -jnp.inf)
        perm = jnp.where(valid[..., None, :], jax.nn.softmax(logits, axis=-2), 0)
        return PermutationRanks(perm, valid)


def spread(temperature: float = 1.0, top: int = 10, live: bool = False) -> Spread:
    """:class:`Spread` at ``temperature`` top gaps."""
    return Spread(temperature, top, live)
