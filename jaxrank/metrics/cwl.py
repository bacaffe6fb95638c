"""The C/W/L measures that ir_measures computes through cwl-eval (INST, INSQ, BPM, SDCG,
NERR8-11), each once over :class:`~jaxrank.ranking.Ranks`.

A C/W/L measure (Moffat et al.; Azzopardi, Thomas & Moffat, SIGIR 2019) is the expected rate
of gain of a user who, having looked at position :math:`r`, goes on to :math:`r + 1` with
probability :math:`C(r)`:

.. math:: M = \\sum_{r=1}^{K} W(r)\\, g_r, \\qquad
    W(r) = \\frac{\\prod_{j<r} C(j)}{\\sum_{s=1}^{K} \\prod_{j<s} C(j)}

over the first :math:`K` positions (``k``: cwl-eval's depth, its ``max_n``, 1000 unless
given), past the end of the list with gain 0. The gain of a label :math:`y` is what
ir_measures hands cwl-eval, :math:`g = (\\mathrm{clip}(y, min\\_rel, max\\_rel) - min\\_rel) /
(max\\_rel - min\\_rel) \\in [0, 1]`.

How each is written over the ranks (the ranker then decides exact or relaxed):

* INSQ and SDCG have a fixed :math:`W`: one ``linear``.
* NERR8-11 continue with :math:`C(r) = \\frac{a(r+1)}{a(r)}(1 - g_r)` for a fixed :math:`a`, so
  :math:`W(r) \\propto a(r) S_r` with :math:`S_r = \\prod_{j<r}(1 - g_j)`: the numerator is
  ``cascade(g, a)``; since :math:`S_{r+1} = S_r - g_r S_r`, the normaliser is
  :math:`\\sum_{r \\le K} a(r) S_r = A(K) - \\text{cascade}(g, A(K) - A(r))` with
  :math:`A(r) = \\sum_{s \\le r} a(s)`: two columns of one ``cascade``.
* INST and BPM continue as a function of the gain gathered so far, which is not linear in
  the ranked items (INST's :math:`C(r)` is a ratio of it, BPM stops where it reaches
  :math:`T`): they read the cumulative gain at every position, ``prefix_sum`` (exact ranks:
  the gains in rank order added left to right, as cwl-eval's numpy ``cumsum`` adds them;
  BPM compares these sums with :math:`T`, where the order of the additions decides ties:
  1/3 + 1 + 1/3 + 1/3 is 1.9999999999999998 in doubles, and cwl-eval then reads on).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank import _checks
from jaxrank.metrics import common as _c
from jaxrank.metrics.common import Array, Cutoff
from jaxrank.metrics.segments import segmented
from jaxrank.ranking import HardRanks, Ranks
from jaxrank.ranking.backend import divide, vary_like

_DEFAULT_RANKER = _c.DEFAULT_RANKER

#: cwl-eval's depth (``max_n``): the positions a C/W/L user may look at when ``k`` is None.
DEPTH = 1000


# Shared pieces ---------------------------------------------------------------------------
def _prepare(scores, labels, k, where, ranker, judgments, judgments_where, min_rel, max_rel):
    for value, name in ((min_rel, "min_rel"), (max_rel, "max_rel")):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
            raise ValueError(f"{name} must be a finite number, got {value!r}")
    if not min_rel < max_rel:
        raise ValueError(f"min_rel must be below max_rel, got min_rel={min_rel!r}, max_rel={max_rel!r}")
    full = getattr(ranker, "ties", None) == "expected"
    p = _c.prepare(scores, labels, DEPTH if k is None else k, where, ranker, judgments, judgments_where, full=full)
    y = jnp.clip(p.labels, min_rel, max_rel) - min_rel
    gains = jnp.where(p.valid, divide(y, jnp.asarray(max_rel - min_rel, y.dtype)), 0)  # rounded once, as numpy
    return p, gains


def _table(a: Callable[[np.ndarray], np.ndarray], depth: int) -> np.ndarray:
    """:math:`A(r) = \\sum_{s \\le r} a(s)` for ``r = 0..depth`` (float64, on the host)."""
    return np.concatenate([[0.0], np.cumsum(a(np.arange(1, depth + 1, dtype=np.float64)))])


def _linear_rate(p: _c.Prepared, g: Array, a) -> Array:
    """A fixed :math:`W \\propto a`: ``sum_{r <= k} a(r) g_r / A(k)`` for each cutoff."""
    total = _table(a, max(p.ks))[list(p.ks)]
    num = p.at_cutoffs(g, a)
    return p.finish(num / jnp.asarray(total, num.dtype))


def _cascade_rate(p: _c.Prepared, g: Array, a) -> Array:
    """:math:`W(r) \\propto a(r) S_r`: ``cascade(g, a) / (A(k) - cascade(g, A(k) - A(r)))``
    for each cutoff (module docstring). ``A`` between integer positions (smooth ranks) is
    interpolated linearly."""
    table = _table(a, max(p.ks))
    dtype = g.dtype
    ks = jnp.asarray(p.ks, dtype)
    a_k = jnp.asarray(table[list(p.ks)], dtype)
    xp, fp = jnp.arange(table.size, dtype=dtype), jnp.asarray(table, dtype)

    def f(pos):
        cut = p.ranks.cutoff(pos[..., None], ks)  # [..., P, C]
        rest = a_k - jnp.interp(pos, xp, fp)[..., None]
        return jnp.concatenate([a(pos)[..., None] * cut, rest * cut], axis=-1)

    out = p.ranks.cascade(g, f)
    c = len(p.ks)
    return p.finish(out[..., :c] / (a_k - out[..., c:]))


def _running_sum(terms: Array) -> Array:
    """Inclusive running sums along the last axis, added left to right (numpy's ``cumsum``)."""

    def step(i, carry):
        s, out = carry
        s = s + lax.dynamic_index_in_dim(terms, i, -1, keepdims=False)
        return s, lax.dynamic_update_index_in_dim(out, s, i, -1)

    init = (vary_like(jnp.zeros(terms.shape[:-1], terms.dtype), terms), vary_like(jnp.zeros_like(terms), terms))
    return lax.fori_loop(0, terms.shape[-1], step, init)[1]


def _by_position(r: Ranks, g: Array, depth: int) -> tuple[Array, Array]:
    """The gain at each position ``1..depth`` and the gain up to it, ``[..., depth]`` each
    (0 and the total past the list). Exact ranks: :meth:`HardRanks.linear_terms` (for
    ``ties="expected"`` the mean gain of the position's tie group) added left to right;
    other ranks: ``prefix_sum`` at every position."""
    if isinstance(r, HardRanks):
        terms = r.linear_terms(g)
        cum = _running_sum(terms)
    else:
        n = min(r.size, depth)
        cum = r.prefix_sum(g, jnp.broadcast_to(jnp.arange(1, n + 1, dtype=g.dtype), g.shape[:-1] + (n,)))
        terms = jnp.diff(cum, axis=-1, prepend=jnp.zeros(cum.shape[:-1] + (1,), cum.dtype))
    n = terms.shape[-1]
    if n >= depth:
        return terms[..., :depth], cum[..., :depth]
    tail = g.shape[:-1] + (depth - n,)
    return (
        jnp.concatenate([terms, jnp.zeros(tail, terms.dtype)], -1),
        jnp.concatenate([cum, jnp.broadcast_to(cum[..., -1:], tail)], -1),
    )


def _depths(ks, depth: int, dtype) -> Array:
    """``[depth, C]``: position ``r <= k`` for each cutoff."""
    return (jnp.arange(1, depth + 1)[:, None] <= jnp.asarray(ks)).astype(dtype)


# Per-position weights a(r), written for numpy (the host tables of A) and jax alike.
def _ones(pos):
    return pos * 0.0 + 1.0


def _log2_discount(pos):
    return 1.0 / (np if isinstance(pos, np.ndarray) else jnp).log2(pos + 1.0)


def _insq_weight(T: float):
    return lambda pos: (2.0 * T / (pos + 2.0 * T - 1.0)) ** 2


# The measures ----------------------------------------------------------------------------
@segmented()
def insq(
    scores,
    labels,
    *,
    max_rel: float,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    T: float = 1.0,
    min_rel: float = 0,
) -> Array:
    """INSQ (Moffat, Scholer & Thomas, 2012): a C/W/L measure that continues with
    :math:`C(r) = \\big(\\frac{r + 2T - 1}{r + 2T}\\big)^2`, so that

    .. math:: INSQ = \\frac{\\sum_{r \\le K} w_r\\, g_r}{\\sum_{r \\le K} w_r}, \\qquad
        w_r = \\Big(\\frac{2T}{r + 2T - 1}\\Big)^2

    ``T``: the gain the user wants (> 0). ``K = k`` (None: 1000, cwl-eval's depth): the
    normaliser runs over all ``K`` positions, however long the list. Gains
    :math:`g = (\\mathrm{clip}(y, min\\_rel, max\\_rel) - min\\_rel) / (max\\_rel - min\\_rel)`
    (module :mod:`jaxrank.metrics.cwl`); ``max_rel`` is required, as in ir_measures.

    ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> # T = 1, two positions: weights 1 and (2/3)^2, gain 1 at the second
      >>> round(float(jaxrank.insq([0.2, 0.9], [1, 0], max_rel=1, k=2)), 5)  # (4/9) / (1 + 4/9)
      0.30769
    """
    T = _checks.positive(T, "T")
    p, g = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, min_rel, max_rel)
    return _linear_rate(p, g, _insq_weight(T))


@segmented()
def sdcg(
    scores,
    labels,
    *,
    max_rel: float,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    min_rel: float = 0,
) -> Array:
    """Scaled DCG: DCG at ``k`` of the gains in [0, 1], over the DCG of ``k`` documents of
    gain 1 (nDCG that assumes at least ``k`` fully relevant documents exist; cwl-eval's
    ``NDCG-k``, ir_measures' ``SDCG@k``).

    .. math:: SDCG@k = \\frac{\\sum_{r \\le k} g_r / \\log_2(r + 1)}{\\sum_{r \\le k} 1 / \\log_2(r + 1)}

    The C/W/L view: :math:`C(r) = \\log_2(r + 1) / \\log_2(r + 2)` before ``k``, 0 at
    ``k``. ``k`` None: 1000 (cwl-eval's depth). Gains as :func:`jaxrank.insq`'s
    (``max_rel`` required).

    ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.sdcg([0.2, 0.9], [2, 1], max_rel=2, k=2)), 5)  # (1/2 + 1/log2 3) / (1 + 1/log2 3)
      0.69343
    """
    p, g = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, min_rel, max_rel)
    return _linear_rate(p, g, _log2_discount)


@segmented()
def nerr8(
    scores,
    labels,
    *,
    max_rel: float,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    min_rel: float = 0,
) -> Array:
    """NERR, equation (8) of Azzopardi, Mackenzie & Moffat (ICTIR 2021): ERR's cascade as a
    C/W/L measure, :math:`C(r) = 1 - g_r` before ``k``, 0 at ``k``.

    .. math:: NERR_8@k = \\frac{\\sum_{r \\le k} g_r S_r}{\\sum_{r \\le k} S_r}, \\qquad
        S_r = \\prod_{j < r} (1 - g_j)

    ``k`` None: 1000 (cwl-eval's depth). Gains as :func:`jaxrank.insq`'s (``max_rel``
    required). ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they
    are accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> # gains 1/2, 1 in rank order: S = 1, 1/2
      >>> round(float(jaxrank.nerr8([0.9, 0.2], [1, 2], max_rel=2, k=5)), 5)  # (1/2 + 1/2) / (1 + 1/2)
      0.66667
    """
    p, g = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, min_rel, max_rel)
    return _cascade_rate(p, g, _ones)


@segmented()
def nerr9(
    scores,
    labels,
    *,
    max_rel: float,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    min_rel: float = 0,
) -> Array:
    """NERR, equation (9) of Azzopardi, Mackenzie & Moffat (ICTIR 2021): ERR's discount
    as well, :math:`C(r) = \\frac{r}{r + 1}(1 - g_r)` before ``k``, 0 at ``k``.

    .. math:: NERR_9@k = \\frac{\\sum_{r \\le k} g_r S_r / r}{\\sum_{r \\le k} S_r / r}, \\qquad
        S_r = \\prod_{j < r} (1 - g_j)

    The numerator is ERR@k with stop probabilities :math:`g`. ``k`` None: 1000. Gains as
    :func:`jaxrank.insq`'s (``max_rel`` required). ``rel``, ``judgments`` and
    ``judgments_where`` cannot change the value: they are accepted (and checked) so that
    every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.nerr9([0.9, 0.2], [1, 2], max_rel=2, k=5)), 5)  # (1/2 + 1/4) / (1 + 1/4)
      0.6
    """
    p, g = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, min_rel, max_rel)
    return _cascade_rate(p, g, _c.inverse)


@segmented()
def nerr10(
    scores,
    labels,
    *,
    max_rel: float,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    p: float = 0.9,
    min_rel: float = 0,
) -> Array:
    """NERR, equation (10) of Azzopardi, Mackenzie & Moffat (ICTIR 2021): RBP's patience
    ``p`` as well, :math:`C(r) = p\\,(1 - g_r)`.

    .. math:: NERR_{10} = \\frac{\\sum_{r \\le K} p^{r-1} g_r S_r}{\\sum_{r \\le K} p^{r-1} S_r},
        \\qquad S_r = \\prod_{j < r} (1 - g_j)

    ``K = k`` (None: 1000, cwl-eval's depth). Gains as :func:`jaxrank.insq`'s (``max_rel``
    required). ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they
    are accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.nerr10([0.9, 0.2], [0, 1], max_rel=1, p=0.5, k=2)), 5)  # 0.5 / (1 + 0.5)
      0.33333
    """
    prob = _checks.in_range(p, "p", 0.0, 1.0, closed_high=True)
    prep, g = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, min_rel, max_rel)
    return _cascade_rate(prep, g, lambda pos: prob ** (pos - 1.0))


@segmented()
def nerr11(
    scores,
    labels,
    *,
    max_rel: float,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    T: float = 1.0,
    min_rel: float = 0,
) -> Array:
    """NERR, equation (11) of Azzopardi, Mackenzie & Moffat (ICTIR 2021): INSQ's goal
    ``T`` as well, :math:`C(r) = \\big(\\frac{r + 2T - 1}{r + 2T}\\big)^2 (1 - g_r)`.

    .. math:: NERR_{11} = \\frac{\\sum_{r \\le K} w_r g_r S_r}{\\sum_{r \\le K} w_r S_r},
        \\qquad w_r = \\Big(\\frac{2T}{r + 2T - 1}\\Big)^2, \\quad S_r = \\prod_{j < r} (1 - g_j)

    ``K = k`` (None: 1000, cwl-eval's depth). Gains as :func:`jaxrank.insq`'s (``max_rel``
    required). ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they
    are accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> # T = 1: w = 1, 4/9; gain 1 at the second position
      >>> round(float(jaxrank.nerr11([0.9, 0.2], [0, 1], max_rel=1, k=2)), 5)  # (4/9) / (1 + 4/9)
      0.30769
    """
    T = _checks.positive(T, "T")
    p, g = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, min_rel, max_rel)
    return _cascade_rate(p, g, _insq_weight(T))


@segmented()
def inst(
    scores,
    labels,
    *,
    max_rel: float,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    T: float = 1.0,
    min_rel: float = 0,
) -> Array:
    """INST (Moffat, Bailey, Scholer & Thomas, 2015): INSQ whose goal shrinks with the gain
    already found, :math:`T_r = T - G_r` (:math:`G_r` the gain up to position :math:`r`):

    .. math:: C(r) = \\Big(\\frac{r + T + T_r - 1}{r + T + T_r}\\Big)^2, \\qquad
        INST = \\sum_{r \\le K} W(r)\\, g_r, \\quad
        W(r) = \\frac{\\prod_{j<r} C(j)}{\\sum_{s \\le K} \\prod_{j<s} C(j)}

    ``K = k`` (None: 1000, cwl-eval's depth). Gains as :func:`jaxrank.insq`'s (``max_rel``
    required). :math:`C(r)` is a ratio of the cumulative gain, which no single ``Ranks``
    operation weighs: the cumulative gain is read at every position (``prefix_sum``; exact
    ranks: the ranked gains added in rank order), so a smooth ranker gives INST of its
    expected cumulative gains; with ``hard("expected")``, INST of the mean gain of each tie
    group's positions (not the mean of INST over the orders).

    ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> # T = 1, gains 0, 1: C(1) = (2/3)^2, C(2) = (1/2)^2; W over 2 positions
      >>> round(float(jaxrank.inst([0.9, 0.2], [0, 1], max_rel=1, k=2)), 5)  # (4/9) / (1 + 4/9)
      0.30769
    """
    T = _checks.positive(T, "T")
    p, g = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, min_rel, max_rel)
    depth = max(p.ks)
    terms, cum = _by_position(p.ranks, g, depth)
    x = jnp.arange(1, depth + 1, dtype=cum.dtype) + 2.0 * T - cum
    c = ((x - 1.0) / x) ** 2
    u = jnp.concatenate([jnp.ones_like(c[..., :1]), jnp.cumprod(c[..., :-1], axis=-1)], -1)
    mask = _depths(p.ks, depth, u.dtype)
    return p.finish(jnp.matmul(u * terms, mask) / jnp.matmul(u, mask))


@segmented()
def bpm(
    scores,
    labels,
    *,
    max_rel: float,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
    T: float = 1.0,
    min_rel: float = 0,
) -> Array:
    """The static Bejeweled Player Model (Zhang et al., SIGIR 2017) as cwl-eval has it: the
    user reads down to the first position where the gain gathered reaches ``T`` or to
    ``k`` documents, whichever comes first, and the value is the gain per document read.

    .. math:: BPM@k = \\frac{G_s}{s}, \\qquad s = \\min(k, \\min\\{r: G_r \\ge T\\}),
        \\quad G_r = \\sum_{j \\le r} g_j

    (:math:`s = k` when the gain never reaches ``T``). ``k`` None: 1000 (cwl-eval's depth).
    Gains as :func:`jaxrank.insq`'s (``max_rel`` required). The stop is a step function of
    the cumulative gain, read at every position (``prefix_sum``; exact ranks: the ranked
    gains added in rank order, as cwl-eval adds them): with a smooth ranker the gradient
    flows through :math:`G_s`, not through the stop.

    ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> # gains 0, 1, 1: the gain reaches T = 1 at the second document
      >>> float(jaxrank.bpm([0.9, 0.5, 0.2], [0, 1, 1], max_rel=1, k=10))
      0.5
    """
    T = _checks.positive(T, "T")
    p, g = _prepare(scores, labels, k, where, ranker, judgments, judgments_where, min_rel, max_rel)
    depth = max(p.ks)
    _, cum = _by_position(p.ranks, g, depth)
    reached = cum >= T
    first = jnp.where(jnp.any(reached, axis=-1), jnp.argmax(reached, axis=-1) + 1, depth)
    stop = jnp.minimum(first[..., None], jnp.asarray(p.ks))  # [..., C]
    at_stop = jnp.take_along_axis(cum, stop - 1, axis=-1)
    return p.finish(at_stop / stop.astype(cum.dtype))
