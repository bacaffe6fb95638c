"""Significance tests, confidence intervals and multiple-comparison corrections over
per-query values.

Every function takes per-query values ``[..., n_queries]``: the leading axes are batch
axes (many systems, measures or pairs at once), ``where[..., n_queries]`` marks the
queries that count (default: all), and the result has the leading shape ``[...]``. All of
them are jittable and vmappable; each agrees with its reference:

* :func:`paired_ttest` -- ``scipy.stats.ttest_rel``;
* :func:`wilcoxon` -- ``scipy.stats.wilcoxon`` with its defaults;
* :func:`sign_test` -- ``scipy.stats.binomtest`` on the non-zero differences;
* :func:`randomization_test` -- ``scipy.stats.permutation_test(permutation_type="samples")``
  on the mean difference (exact, or within Monte Carlo error);
* :func:`bootstrap_ci` -- ``scipy.stats.bootstrap`` of the mean (within Monte Carlo error);
* :func:`multipletests` -- ``statsmodels.stats.multitest.multipletests``' adjusted p-values;
* :func:`tukey_hsd` -- ``scipy.stats.tukey_hsd`` over ``[..., k systems, n queries]`` (all
  pairs at once; no ``where``).

Sorting (average ranks of the absolute differences, order statistics, sorted p-values)
goes through the ranking primitive, :func:`jaxrank.hard`.

Precision: called on concrete values (NumPy arrays, lists, JAX arrays outside a
transformation), every function computes in float64 whatever ``jax_enable_x64`` says and
returns NumPy float64 arrays, with scipy's digits (to 1e-9): per-query values rounded to
float32 would shift p-values in the fifth digit and make or break Wilcoxon's ties. Under
``jit``, ``vmap`` or ``grad`` (traced inputs) the computation keeps the traced dtype,
float32 unless x64 is on, and returns traced arrays; docs/compare.md gives what float32
costs, measured.

Bad input raises a ``ValueError`` naming the argument: different shapes, fewer than two
queries (when ``where`` is a concrete array, rows with fewer than two queries in common
raise too; under ``jit`` such rows give NaN), ``n_resamples <= 0``, an unknown
``alternative`` or ``method``.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Literal, Optional, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import betainc, ndtr, ndtri

from jaxrank import _checks
from jaxrank.metrics.common import item_values
from jaxrank.ranking.backend import inverse_permutation
from jaxrank.ranking.hard import hard

Alternative = Literal["two-sided", "less", "greater"]
ALTERNATIVES = ("two-sided", "less", "greater")
CORRECTIONS = ("bonferroni", "holm", "fdr_bh")
Array = jax.Array

# scipy.stats.wilcoxon (method="auto") uses the exact null distribution up to 50 queries
# when there are no ties and no zero differences, a permutation test over all 2^n sign
# assignments up to 13 queries otherwise, and the normal approximation beyond.
WILCOXON_EXACT_MAX = 50
WILCOXON_PERMUTATION_MAX = 13
_EXPECTED = hard("expected")
_STABLE = hard("stable")
_F = TypeVar("_F", bound=Callable)


# Precision ------------------------------------------------------------------------------
def _tracing(args) -> bool:
    """Whether JAX is tracing this call: an argument is a Tracer (``jit``, ``vmap``,
    ``grad`` of the inputs), or a transformation is being traced around constant
    arguments (its jaxpr keeps the ambient dtype, so x64 must not be switched on inside)."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(args)):
        return True
    try:
        from jax._src.core import trace_state_clean  # no public equivalent (jax 0.10)
    except ImportError:  # pragma: no cover - a later JAX: judge by the arguments alone
        return False
    return not trace_state_clean()


def _as_float64(v):
    """``v`` as a JAX array; floating values in float64 (call with x64 on)."""
    a = jnp.asarray(v)
    return a.astype(jnp.float64) if jnp.issubdtype(a.dtype, jnp.floating) else a


def _float64_when_concrete(*values: str) -> Callable[[_F], _F]:
    """Run the decorated test in float64 when its call is not traced: the arguments named
    ``values`` become float64, the body runs under ``jax.enable_x64``, and the results come
    back as NumPy float64 arrays. So the one implementation gives scipy's digits eagerly
    and the traced dtype under ``jit``. NumPy, not JAX arrays: a float64 JAX array in a
    process with x64 off makes every later ``jnp`` operation on it warn."""

    def wrap(fn: _F) -> _F:
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def run(*args, **kwargs):
            if _tracing((args, kwargs)):
                return fn(*args, **kwargs)
            with jax.enable_x64(True):
                bound = signature.bind(*args, **kwargs)
                for name in values:
                    if bound.arguments.get(name) is not None:
                        bound.arguments[name] = _as_float64(bound.arguments[name])
                return jax.device_get(fn(*bound.args, **bound.kwargs))

        return run  # type: ignore[return-value]

    return wrap


# Input ----------------------------------------------------------------------------------
def _alternative(alternative: str) -> str:
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {ALTERNATIVES}, got {alternative!r}")
    return alternative


def _values(x, name: str) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return _checks.scores(x, name)


def _mask(x: Array, where) -> Array:
    valid = _checks.mask(where, x.shape, like="x", broadcast=True)
    if not isinstance(valid, jax.core.Tracer):
        fewest = int(np.min(np.sum(np.asarray(valid), axis=-1), initial=x.shape[-1]))
        if fewest < 2:
            raise ValueError(f"every row needs at least two queries in common (where), one has {fewest}")
    return valid


def _one(x, where) -> tuple[Array, Array]:
    x = _values(x, "x")
    if x.shape[-1] < 2:
        raise ValueError(f"x needs at least two queries along its last axis, got {x.shape[-1]}")
    return x, _mask(x, where)


def _paired(x, y, where) -> tuple[Array, Array]:
    """``d = x - y`` and the mask."""
    x, y = _values(x, "x"), _values(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape (paired per-query values), got {x.shape} and {y.shape}")
    if x.shape[-1] < 2:
        raise ValueError(f"x and y need at least two queries along their last axis, got {x.shape[-1]}")
    return x - y, _mask(x, where)


def _resamples(n_resamples) -> int:
    return _checks.positive_int(n_resamples, "n_resamples")


# Distributions --------------------------------------------------------------------------
def _t_tails(t: Array, df: Array) -> tuple[Array, Array]:
    """``P(T <= t), P(T >= t)`` for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))  # P(T >= |t|)
    upper = jnp.where(t > 0, tail, 1 - tail)
    lower = jnp.where(t < 0, tail, 1 - tail)
    return lower, upper


def _pvalue(lower: Array, upper: Array, alternative: str) -> Array:
    if alternative == "less":
        return lower
    if alternative == "greater":
        return upper
    return jnp.clip(2 * jnp.minimum(lower, upper), 0, 1)


# Tests ----------------------------------------------------------------------------------
@_float64_when_concrete("x", "y")
def paired_ttest(x, y, *, alternative: Alternative = "two-sided", where=None) -> tuple[Array, Array]:
    """Paired t-test of the mean difference (``scipy.stats.ttest_rel``).

    With :math:`d = x - y` over the :math:`n` valid queries,

    .. math:: t = \\frac{\\bar d}{s_d / \\sqrt n}, \\qquad
        s_d^2 = \\frac{1}{n - 1} \\sum_i (d_i - \\bar d)^2,

    and the p-value is read from Student's t with :math:`n - 1` degrees of freedom.
    ``alternative="less"`` tests :math:`E[x] < E[y]`. Equal ``x`` and ``y`` give NaN.

    Args:
      x, y: per-query values ``[..., n]``.
      alternative: ``"two-sided"``, ``"less"`` or ``"greater"``.
      where: ``bool[..., n]`` (broadcastable), the queries that count.

    Returns:
      ``(statistic, pvalue)``, each ``[...]``.

    Example:
      >>> import jaxrank
      >>> t, p = jaxrank.stats.paired_ttest([0.5, 0.7, 0.2, 0.9], [0.4, 0.5, 0.2, 0.6])
      >>> round(float(t), 4), round(float(p), 4)
      (2.3238, 0.1027)
    """
    alternative = _alternative(alternative)
    d, valid = _paired(x, y, where)
    v = valid.astype(d.dtype)
    n = v.sum(-1)
    mean = (d * v).sum(-1) / n
    var = (((d - mean[..., None]) * v) ** 2).sum(-1) / (n - 1)
    t = mean / jnp.sqrt(var / n)
    return t, _pvalue(*_t_tails(t, n - 1), alternative)


def _average_ranks(a: Array, valid: Array) -> tuple[Array, Array]:
    """Ascending average ranks of ``a`` among the valid items (1-based; 0 elsewhere), and
    per item ``t^2 - 1`` for its tie group of size ``t``: the ranks are read through
    ``hard("expected")``, whose ranks in a tie group are uniform over the group's
    positions, so their variance is :math:`(t^2 - 1) / 12`."""
    ranks = _EXPECTED(-a, valid)  # descending in -a: ascending in a
    zeros = jnp.zeros(a.shape, a.dtype)
    mean = jnp.round(2 * item_values(ranks, lambda pos: pos, zeros)) / 2
    square = item_values(ranks, lambda pos: pos * pos, zeros)
    ties = jnp.round(12 * (square - mean * mean))
    return jnp.where(valid, mean, 0), jnp.where(valid, ties, 0)


def _compact(v: Array, valid: Array, k: int) -> Array:
    """The first ``k`` valid items of each row, ``[..., k]``, 0 past the last one."""
    pos = jnp.cumsum(valid, axis=-1) - 1
    slot = jnp.where(valid & (pos < k), pos, k)  # slot k: dropped

    def one(vr, sr):
        return jnp.zeros(k + 1, v.dtype).at[sr].set(vr)[:k]

    flat = jax.vmap(one)(v.reshape(-1, v.shape[-1]), slot.reshape(-1, v.shape[-1]))
    return flat.reshape(v.shape[:-1] + (k,))


def _signed_rank_counts(doubled: Array) -> Array:
    """The null distribution of the sum of a random subset of ``doubled`` (each item in
    or out with probability 1/2), as counts over ``0..sum``: ``[..., k(k+1) + 1]``
    for ``k`` items of doubled ranks at most ``2k``. An empty slot (0) doubles every
    count, which the normalisation undoes. Counts stay integers below 2^53."""
    k = doubled.shape[-1]
    size = k * (k + 1) + 1
    idx = jnp.arange(size)

    def one(a):
        def step(c, ai):
            return c + jnp.where(idx >= ai, jnp.roll(c, ai), 0), None

        c0 = jnp.zeros(size, a.dtype).at[0].set(1)
        return lax.scan(step, c0, a)[0]

    flat = doubled.reshape(-1, k)
    return jax.vmap(one)(flat).reshape(doubled.shape[:-1] + (size,))


@_float64_when_concrete("x", "y")
def wilcoxon(x, y, *, alternative: Alternative = "two-sided", where=None) -> tuple[Array, Array]:
    """Wilcoxon signed-rank test (``scipy.stats.wilcoxon`` with its defaults).

    Zero differences are dropped (``zero_method="wilcox"``); the absolute differences of
    the others get average ranks :math:`r_i` (ties share their mean rank), and
    :math:`R^+ = \\sum_{d_i > 0} r_i`. The p-value follows scipy's ``method="auto"``,
    decided per row (``n`` valid queries, zeros included):

    * ``n <= 50``, no ties, no zeros: the exact null distribution of :math:`R^+`;
    * ``n <= 13`` with ties or zeros: every one of the :math:`2^n` sign assignments
      (scipy's permutation test, which is exact at that size);
    * otherwise the normal approximation with the tie correction (scipy's default has
      no continuity correction): :math:`z = (R^+ - m(m+1)/4) / \\sigma`,
      :math:`\\sigma^2 = (m(m+1)(2m+1) - \\sum_g (t_g^3 - t_g)/2) / 24` over the
      :math:`m` non-zero differences and tie groups of sizes :math:`t_g`.

    The exact distributions are counted by a convolution over the doubled ranks (static
    size ``min(n, 50)``). scipy decides the method once for a whole batch (ties anywhere
    change every row); here each row is decided alone, as a 1-D call to scipy would be.

    Args:
      x, y: per-query values ``[..., n]``.
      alternative: ``"two-sided"``, ``"less"`` or ``"greater"`` (for :math:`x - y`).
      where: ``bool[..., n]`` (broadcastable), the queries that count.

    Returns:
      ``(statistic, pvalue)``: the statistic is :math:`\\min(R^+, R^-)` for the
      two-sided test and :math:`R^+` otherwise, as scipy's.

    Example:
      >>> import jaxrank
      >>> w, p = jaxrank.stats.wilcoxon([0.5, 0.7, 0.2, 0.9, 0.3], [0.4, 0.5, 0.1, 0.6, 0.35])
      >>> float(w), float(p)
      (1.0, 0.125)
    """
    alternative = _alternative(alternative)
    d, valid = _paired(x, y, where)
    nonzero = valid & (d != 0)
    n = valid.sum(-1)
    m = nonzero.sum(-1).astype(d.dtype)
    ranks, ties = _average_ranks(jnp.abs(d), nonzero)
    r_plus = jnp.where(d > 0, ranks, 0).sum(-1)
    r_minus = m * (m + 1) / 2 - r_plus
    statistic = jnp.minimum(r_plus, r_minus) if alternative == "two-sided" else r_plus

    # normal approximation
    tie_term = ties.sum(-1)  # sum over groups of t^3 - t
    se = jnp.sqrt((m * (m + 1) * (2 * m + 1) - tie_term / 2) / 24)
    z = (r_plus - m * (m + 1) / 4) / se
    p_normal = _pvalue(ndtr(z), ndtr(-z), alternative)

    # exact: counts of the doubled statistic over all sign assignments
    k = min(d.shape[-1], WILCOXON_EXACT_MAX)
    doubled = _compact(jnp.round(2 * ranks).astype(d.dtype), nonzero, k)
    counts = _signed_rank_counts(doubled)
    total = counts.sum(-1)
    support = jnp.arange(counts.shape[-1], dtype=d.dtype)
    observed = jnp.round(2 * r_plus)[..., None]
    lower = jnp.where(support <= observed, counts, 0).sum(-1) / total
    upper = jnp.where(support >= observed, counts, 0).sum(-1) / total
    p_exact = _pvalue(lower, upper, alternative)

    has_ties = (ties > 0).any(-1)
    has_zeros = n > m
    exact = (n <= WILCOXON_EXACT_MAX) & ((~has_ties & ~has_zeros) | (n <= WILCOXON_PERMUTATION_MAX))
    return statistic, jnp.where(exact, p_exact, p_normal)


def _binom_cdf(k: Array, n: Array) -> Array:
    """``P(X <= k)`` for ``X ~ Binomial(n, 1/2)``."""
    return jnp.where(k >= n, 1.0, betainc(jnp.maximum(n - k, 1e-300), k + 1, 0.5))


@_float64_when_concrete("x", "y")
def sign_test(x, y, *, where=None) -> Array:
    """Two-sided sign test: ``scipy.stats.binomtest(k, m, 0.5)`` with ``k`` the queries
    where ``x > y`` among the ``m`` where they differ.

    .. math:: p = \\min\\big(1,\\ 2\\,P(X \\le \\min(k, m - k))\\big),
        \\quad X \\sim \\text{Binomial}(m, 1/2)

    (for p = 1/2 this is binomtest's two-sided sum over outcomes no more likely than
    ``k``). With no differing query (``m = 0``) the p-value is 1.

    Args:
      x, y: per-query values ``[..., n]``.
      where: ``bool[..., n]`` (broadcastable), the queries that count.

    Returns:
      The p-value, ``[...]``.

    Example:
      >>> import jaxrank
      >>> round(float(jaxrank.stats.sign_test([0.5, 0.7, 0.2, 0.9, 0.3], [0.4, 0.5, 0.1, 0.6, 0.2])), 4)
      0.0625
    """
    d, valid = _paired(x, y, where)
    fdtype = d.dtype
    k = (valid & (d > 0)).sum(-1).astype(fdtype)
    m = (valid & (d != 0)).sum(-1).astype(fdtype)
    return jnp.clip(2 * _binom_cdf(jnp.minimum(k, m - k), m), 0, 1)


def _counts_to_pvalue(n_le: Array, n_ge: Array, total, adjustment: int, alternative: str) -> Array:
    lower = (n_le + adjustment) / (total + adjustment)
    upper = (n_ge + adjustment) / (total + adjustment)
    return _pvalue(lower, upper, alternative)


def _sign_patterns(k: int, dtype) -> Array:
    """All ``2^k`` assignments of +-1 to ``k`` items, ``[2^k, k]``."""
    bits = (np.arange(2**k)[:, None] >> np.arange(k)[None, :]) & 1
    return jnp.asarray(1 - 2 * bits, dtype)


@_float64_when_concrete("x", "y")
def randomization_test(
    x,
    y,
    *,
    n_resamples: int = 10000,
    key: Optional[Array] = None,
    alternative: Alternative = "two-sided",
    where=None,
    batch: int = 1000,
) -> tuple[Array, Array]:
    """Fisher's paired randomization test of the mean difference
    (``scipy.stats.permutation_test((x, y), mean diff, permutation_type="samples")``).

    Under the null hypothesis each query's pair ``(x_i, y_i)`` may be swapped: the
    statistic :math:`\\bar d = \\frac1n \\sum_i d_i` is compared with
    :math:`\\frac1n \\sum_i s_i d_i` over sign assignments :math:`s \\in \\{\\pm1\\}^n`.

    * ``2^n <= n_resamples``: every assignment (exact), p-value
      :math:`\\#\\{\\text{as extreme}\\} / 2^n`;
    * otherwise ``n_resamples`` random assignments (Monte Carlo) and, as scipy,
      :math:`(\\#\\{\\text{as extreme}\\} + 1) / (n_{\\text{resamples}} + 1)`.

    "As extreme" is scipy's: ``null <= observed + gamma`` (``less``), ``>= observed -
    gamma`` (``greater``), twice the smaller of the two (two-sided, at most 1), with
    ``gamma = 100 eps |observed|``. The random assignments are shared by every row of the
    batch (each row's test is still a valid test), drawn ``batch`` at a time.

    Args:
      x, y: per-query values ``[..., n]``.
      n_resamples: the number of random assignments; also the exact threshold.
      key: a ``jax.random`` key, needed when any row is tested by Monte Carlo.
      alternative: ``"two-sided"``, ``"less"`` or ``"greater"``.
      where: ``bool[..., n]`` (broadcastable), the queries that count.
      batch: assignments drawn per step (memory ``batch x n``).

    Returns:
      ``(statistic, pvalue)``, each ``[...]``; the statistic is the mean difference.

    Example:
      >>> import jaxrank
      >>> d, p = jaxrank.stats.randomization_test([0.5, 0.7, 0.2, 0.9, 0.3], [0.4, 0.5, 0.1, 0.6, 0.2])
      >>> round(float(d), 4), float(p)
      (0.16, 0.0625)
    """
    alternative = _alternative(alternative)
    n_resamples = _resamples(n_resamples)
    batch = _checks.positive_int(batch, "batch")
    d, valid = _paired(x, y, where)
    shape, size = d.shape[:-1], d.shape[-1]
    d = jnp.where(valid, d, 0).reshape(-1, size)
    n = valid.reshape(-1, size).sum(-1).astype(d.dtype)
    observed = d.sum(-1) / n
    gamma = jnp.abs(100 * jnp.finfo(d.dtype).eps * observed)
    k_exact = int(math.floor(math.log2(n_resamples)))
    exact_possible = where is not None or size <= k_exact
    mc_possible = size > k_exact
    p = jnp.zeros_like(observed)

    if exact_possible:
        k = min(size, k_exact)
        signs = _sign_patterns(k, d.dtype)
        null = _compact(d, valid.reshape(-1, size), k) @ signs.T / n[:, None]  # [rows, 2^k]
        n_le = (null <= (observed + gamma)[:, None]).sum(-1)
        n_ge = (null >= (observed - gamma)[:, None]).sum(-1)
        p_exact = _counts_to_pvalue(n_le, n_ge, 2**k, 0, alternative)
        p = jnp.where(2.0**n <= n_resamples, p_exact, p)

    if mc_possible:
        if key is None:
            raise ValueError(
                f"key is required: 2^{size} sign assignments exceed n_resamples={n_resamples} (Monte Carlo)"
            )
        chunks = -(-n_resamples // batch)

        def step(carry, i):
            signs = jax.random.rademacher(jax.random.fold_in(key, i), (batch, size), d.dtype)
            null = d @ signs.T / n[:, None]  # [rows, batch]
            live = (i * batch + jnp.arange(batch)) < n_resamples
            n_le = carry[0] + ((null <= (observed + gamma)[:, None]) & live).sum(-1, dtype=jnp.int32)
            n_ge = carry[1] + ((null >= (observed - gamma)[:, None]) & live).sum(-1, dtype=jnp.int32)
            return (n_le, n_ge), None

        zero = jnp.zeros(observed.shape, jnp.int32)
        (n_le, n_ge), _ = lax.scan(step, (zero, zero), jnp.arange(chunks))
        p_mc = _counts_to_pvalue(n_le, n_ge, n_resamples, 1, alternative)
        p = jnp.where(2.0**n <= n_resamples, p, p_mc)
    return observed.reshape(shape), p.reshape(shape)


# Intervals ------------------------------------------------------------------------------
def _sorted(v: Array) -> Array:
    """``v`` ascending along the last axis (through the ranking primitive)."""
    return jnp.take_along_axis(v, _STABLE(-v).order, axis=-1)


def _quantile(s: Array, q: Array) -> Array:
    """numpy's "linear" quantile ``q[...]`` of sorted ``s[..., R]``."""
    h = (s.shape[-1] - 1) * jnp.clip(q, 0, 1)
    lo = jnp.floor(h).astype(jnp.int32)
    hi = jnp.minimum(lo + 1, s.shape[-1] - 1)
    a = jnp.take_along_axis(s, lo[..., None], axis=-1)[..., 0]
    b = jnp.take_along_axis(s, hi[..., None], axis=-1)[..., 0]
    return a + (h - lo) * (b - a)


def _bootstrap_means(x: Array, valid: Array, n: Array, n_resamples: int, key: Array, batch: int, dense: bool) -> Array:
    """Means of ``n_resamples`` resamples (with replacement) of each row's valid values,
    ``[rows, n_resamples]``. Without a mask the resamples are shared by the rows (counts
    of each query times the values: one matrix product)."""
    rows, size = x.shape
    chunks = -(-n_resamples // batch)
    xc = _compact(x, valid, size)  # valid values first

    def draw(i):
        k = jax.random.fold_in(key, i)
        if dense:
            idx = jax.random.randint(k, (batch, size), 0, size)
            counts = jnp.zeros((batch, size), x.dtype).at[jnp.arange(batch)[:, None], idx].add(1)
            return xc @ counts.T / n[:, None]
        u = jax.random.uniform(k, (batch, size), x.dtype)
        idx = jnp.minimum(jnp.floor(u[None] * n[:, None, None]), n[:, None, None] - 1).astype(jnp.int32)
        picked = jnp.take_along_axis(xc[:, None, :], idx, axis=-1)  # [rows, batch, size]
        used = jnp.arange(size) < n[:, None, None]
        return jnp.where(used, picked, 0).sum(-1) / n[:, None]

    means = lax.map(draw, jnp.arange(chunks))  # [chunks, rows, batch]
    return jnp.moveaxis(means, 0, 1).reshape(rows, chunks * batch)[:, :n_resamples]


@_float64_when_concrete("x")
def bootstrap_ci(
    x,
    *,
    confidence: float = 0.95,
    n_resamples: int = 10000,
    key: Array,
    method: Literal["percentile", "bca"] = "percentile",
    where=None,
    batch: int = 1000,
) -> tuple[Array, Array]:
    """Two-sided bootstrap confidence interval of the mean (``scipy.stats.bootstrap``).

    The means :math:`\\theta^*_b` of ``n_resamples`` resamples with replacement give, for
    :math:`\\alpha = (1 - \\text{confidence}) / 2`:

    * ``"percentile"``: their :math:`\\alpha` and :math:`1 - \\alpha` quantiles (numpy's
      linear interpolation);
    * ``"bca"``: the quantiles at :math:`\\Phi(z_0 + (z_0 + z)/(1 - a (z_0 + z)))`,
      :math:`z = \\Phi^{-1}(\\alpha), \\Phi^{-1}(1 - \\alpha)`, with the bias
      :math:`z_0 = \\Phi^{-1}((\\#\\{\\theta^* < \\hat\\theta\\} + \\#\\{\\theta^* \\le
      \\hat\\theta\\}) / 2B)` and the jackknife acceleration
      :math:`a = \\sum_i U_i^3 / (6 (\\sum_i U_i^2)^{3/2})`, :math:`U_i = (n-1)(\\bar\\theta_{(\\cdot)} - \\theta_{(i)})`.

    Args:
      x: per-query values ``[..., n]``.
      confidence: the confidence level, in (0, 1).
      n_resamples: bootstrap resamples.
      key: a ``jax.random`` key.
      method: ``"percentile"`` or ``"bca"``.
      where: ``bool[..., n]`` (broadcastable), the queries that count.
      batch: resamples drawn per step.

    Returns:
      ``(low, high)``, each ``[...]``.

    Example:
      >>> import jax, jaxrank
      >>> low, high = jaxrank.stats.bootstrap_ci([0.5, 0.7, 0.2, 0.9, 0.3, 0.6], key=jax.random.key(0))
      >>> bool(low < 0.5333 < high)
      True
    """
    confidence = _checks.in_range(confidence, "confidence", 0, 1)
    n_resamples = _resamples(n_resamples)
    batch = _checks.positive_int(batch, "batch")
    if method not in ("percentile", "bca"):
        raise ValueError(f"method must be 'percentile' or 'bca', got {method!r}")
    dense = where is None
    x, valid = _one(x, where)
    shape, size = x.shape[:-1], x.shape[-1]
    x, valid = x.reshape(-1, size), valid.reshape(-1, size)
    x = jnp.where(valid, x, 0)
    n = valid.sum(-1).astype(x.dtype)
    theta = _sorted(_bootstrap_means(x, valid, n, n_resamples, key, batch, dense))
    alpha = (1 - confidence) / 2
    q = jnp.array([alpha, 1 - alpha], x.dtype)[None, :]
    if method == "bca":
        estimate = x.sum(-1) / n
        below = (theta < estimate[:, None]).sum(-1) + (theta <= estimate[:, None]).sum(-1)
        z0 = ndtri(below / (2 * n_resamples))[:, None]
        jack = (x.sum(-1, keepdims=True) - x) / (n[:, None] - 1)
        u = jnp.where(valid, (n[:, None] - 1) * (jnp.sum(jack * valid, -1, keepdims=True) / n[:, None] - jack), 0)
        a = ((u**3).sum(-1) / n**3 / ((u**2).sum(-1) / n**2) ** 1.5 / 6)[:, None]
        z = z0 + ndtri(q)
        q = ndtr(z0 + z / (1 - a * z))
    low = _quantile(theta, q[..., 0])
    high = _quantile(theta, q[..., 1])
    return low.reshape(shape), high.reshape(shape)


# Tukey's HSD ----------------------------------------------------------------------------
# The studentized range survival function by fixed composite Gauss-Legendre quadrature
# (nodes chosen on the host from k and df, which are static: shapes), in the array dtype.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(12)
_Z_PANELS = 36  # y = z - w/2 over [-9, 9]: 432 nodes
_S_PANELS = 48  # t = log s over the range where the density of s is above e^-50 of its peak: 576 nodes


def _composite(lo: float, hi: float, panels: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of composite Gauss-Legendre (12 nodes a panel) on ``[lo, hi]``."""
    edges = np.linspace(lo, hi, panels + 1)
    half = np.diff(edges)[:, None] / 2
    nodes = (edges[:-1, None] + half) + half * _GL_NODES
    return nodes.ravel(), (half * _GL_WEIGHTS).ravel()


@functools.lru_cache(maxsize=64)
def _log_s_quadrature(df: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``t = log s`` and weights ``w * f_t(t)`` (the density of ``log s``, where
    ``s = sqrt(chi2_df / df)``, folded in), in float64 on the host."""
    nu = float(df)
    # log f_t(t) = log c + nu t - nu e^(2t) / 2, peak at t = 0; c normalises it
    log_c = (nu / 2) * math.log(nu / 2) - math.lgamma(nu / 2) + math.log(2.0)
    drop = lambda t: nu * t - nu * math.expm1(2 * t) / 2 + 50.0  # > 0 inside the range

    def root(a: float, b: float) -> float:  # drop(a) < 0 < drop(b) or the reverse; bisection
        for _ in range(200):
            mid = (a + b) / 2
            if (drop(mid) > 0) == (drop(b) > 0):
                b = mid
            else:
                a = mid
        return (a + b) / 2

    lo = root(-60.0 / nu - 1.0, 0.0)
    hi = root(10.0, 0.0)
    t, w = _composite(lo, hi, _S_PANELS)
    return t, w * np.exp(log_c + nu * t - nu * np.exp(2 * t) / 2)


def _studentized_range_sf(q: Array, k: int, df: int) -> Array:
    """``P(Q > q)`` for the studentized range of ``k`` means with ``df`` degrees of freedom
    (``scipy.stats.studentized_range.sf``), elementwise over ``q >= 0``."""
    t, wt = (jnp.asarray(a, q.dtype) for a in _log_s_quadrature(int(df)))
    y, wy = (jnp.asarray(a, q.dtype) for a in _composite(-9.0, 9.0, _Z_PANELS))
    m = k - 1

    def range_sf(w: Array) -> Array:
        # P(R > w), R the range of k standard normals: k int phi(z) (a^m - c^m) dz, a = Phi(z),
        # b = Phi(z - w), c = a - b, with a^m - c^m = b sum_{j<m} a^(m-1-j) c^j (no cancellation:
        # small p-values keep their relative precision). z = y + w/2 centres the integrand.
        z = y + w[..., None] / 2
        a, b = ndtr(z), ndtr(z - w[..., None])
        c = a - b
        total, power = jnp.ones_like(z), jnp.ones_like(z)
        for _ in range(m - 1):  # S_{i+1} = a S_i + c^i
            power = power * c
            total = total * a + power
        phi = jnp.exp(-z * z / 2) / math.sqrt(2 * math.pi)
        return k * jnp.sum(wy * phi * b * total, axis=-1)

    def step(acc, node):
        tn, wn = node
        return acc + wn * range_sf(q * jnp.exp(tn)), None

    acc, _ = lax.scan(step, jnp.zeros_like(q), (t, wt))
    return jnp.clip(acc, 0, 1)


@_float64_when_concrete("values")
def tukey_hsd(values) -> tuple[Array, Array]:
    """Tukey's honestly significant difference test between every pair of ``k`` systems,
    each measured on the same ``n`` queries (``scipy.stats.tukey_hsd(*values)``: one-way,
    equal variances, equal group sizes; what ``ranx.compare(..., stat_test="tukey")``
    computes).

    With system means :math:`\\bar x_i`, the pooled within-system variance
    :math:`\\mathrm{MSE} = \\frac{1}{k}\\sum_i s_i^2` (:math:`s_i^2` with ``ddof=1``) and
    :math:`\\nu = k (n - 1)` degrees of freedom, the pair :math:`(i, j)` has

    .. math::
        q_{ij} = \\frac{|\\bar x_i - \\bar x_j|}{\\sqrt{\\mathrm{MSE} / n}}, \\qquad
        p_{ij} = P(Q_{k,\\nu} > q_{ij}) = \\int_0^\\infty f_\\nu(s)\\,
        k \\int_{-\\infty}^{\\infty} \\varphi(z) \\left[\\Phi(z)^{k-1} - (\\Phi(z) - \\Phi(z - q s))^{k-1}\\right] dz\\, ds

    where :math:`Q_{k,\\nu}` is the studentized range, :math:`f_\\nu` the density of
    :math:`s = \\sqrt{\\chi^2_\\nu / \\nu}`. The double integral is computed by fixed
    composite Gauss-Legendre quadrature (576 nodes in :math:`\\log s` over the range where
    :math:`f_\\nu` exceeds :math:`e^{-50}` of its peak, 432 in :math:`z - qs/2` over
    :math:`[-9, 9]`); the bracket is summed as :math:`b \\sum_{j<k-1} a^{k-2-j}(a-b)^j`, so
    small p-values keep 1e-9 relative precision down to about 1e-16 (none below 1e-30). No
    scipy at run time; the p-values equal scipy's to about 1e-12 absolute (scipy's own
    ``1 - cdf`` error; tests/test_stats.py). They are adjusted for all :math:`k(k-1)/2`
    pairs already (family-wise). Jittable (``k`` and ``n`` are static shapes).

    Args:
      values: ``float[..., k, n]``: ``k >= 2`` systems' per-query values (leading axes:
        measures, ...).

    Returns:
      ``(statistic, pvalue)``, each ``float[..., k, k]``: ``statistic[i, j]`` is
      :math:`\\bar x_i - \\bar x_j`, ``pvalue`` is symmetric with ones on the diagonal
      (NaN where every system is constant and two means are equal; 0 where they differ).

    Example:
      >>> import jaxrank
      >>> statistic, p = jaxrank.stats.tukey_hsd([[1.0, 2.0, 3.0], [2.0, 3.0, 4.0], [5.0, 6.0, 7.0]])
      >>> [round(float(v), 6) for v in p[0]]
      [1.0, 0.482727, 0.006494]
      >>> float(statistic[2, 0])
      4.0
    """
    x = _values(values, "values")
    if x.ndim < 2 or x.shape[-2] < 2:
        raise ValueError(f"values must be [..., k, n] with k >= 2 systems, got shape {x.shape}")
    k, n = x.shape[-2], x.shape[-1]
    if n < 2:
        raise ValueError(f"values needs at least two queries along its last axis, got {n}")
    mean = x.mean(-1)
    mse = x.var(-1, ddof=1).mean(-1)  # [...]: equal group sizes, so the pooled variance is the mean
    statistic = mean[..., :, None] - mean[..., None, :]
    q = jnp.abs(statistic) / jnp.sqrt(mse / n)[..., None, None]
    i, j = np.triu_indices(k, 1)
    qij = q[..., i, j]
    p = _studentized_range_sf(jnp.where(jnp.isfinite(qij), qij, 0), k, k * (n - 1))
    p = jnp.where(jnp.isnan(qij), jnp.nan, jnp.where(jnp.isinf(qij), 0, p))
    d = np.arange(k)
    out = jnp.ones_like(q).at[..., i, j].set(p).at[..., j, i].set(p)
    out = out.at[..., d, d].set(jnp.where(jnp.isnan(q[..., d, d]), jnp.nan, 1))
    return statistic, out


# Multiple comparisons -------------------------------------------------------------------
@_float64_when_concrete("pvalues")
def multipletests(pvalues, method: Literal["bonferroni", "holm", "fdr_bh"] = "holm", *, where=None) -> Array:
    """Adjusted p-values for the ``m`` tests along the last axis (statsmodels'
    ``multipletests(pvalues, method=...)[1]``).

    With :math:`p_{(1)} \\le \\dots \\le p_{(m)}`:

    * ``"bonferroni"``: :math:`\\min(1, m p_i)`;
    * ``"holm"``: :math:`\\min(1, \\max_{j \\le i} (m - j + 1) p_{(j)})`;
    * ``"fdr_bh"`` (Benjamini-Hochberg): :math:`\\min(1, \\min_{j \\ge i} m p_{(j)} / j)`.

    Args:
      pvalues: ``[..., m]``.
      method: the correction.
      where: ``bool[..., m]`` (broadcastable), the tests of each family; others get NaN.

    Returns:
      Adjusted p-values, ``[..., m]``.

    Example:
      >>> import jaxrank
      >>> [round(float(p), 3) for p in jaxrank.stats.multipletests([0.01, 0.04, 0.03], "holm")]
      [0.03, 0.06, 0.06]
    """
    if method not in CORRECTIONS:
        raise ValueError(f"method must be one of {CORRECTIONS}, got {method!r}")
    p = _values(pvalues, "pvalues")
    valid = _checks.mask(where, p.shape, like="pvalues", broadcast=True)
    m = valid.sum(-1, keepdims=True).astype(p.dtype)
    if method == "bonferroni":
        return jnp.where(valid, jnp.minimum(1, m * p), jnp.nan)
    if p.shape[-1] == 0:  # no tests: nothing to adjust (an empty family, as statsmodels returns it)
        return p
    order = _STABLE(-p, valid).order  # ascending p, the valid ones first
    ps = jnp.take_along_axis(p, order, axis=-1)
    j = jnp.arange(1, p.shape[-1] + 1, dtype=p.dtype)
    used = j <= m
    if method == "holm":
        adjusted = lax.cummax(jnp.where(used, (m - j + 1) * ps, 0), axis=p.ndim - 1)
    else:
        adjusted = lax.cummin(jnp.where(used, m * ps / j, jnp.inf), axis=p.ndim - 1, reverse=True)
    adjusted = jnp.minimum(adjusted, 1)
    back = jnp.take_along_axis(adjusted, inverse_permutation(order), axis=-1)
    return jnp.where(valid, back, jnp.nan)


__all__ = ["bootstrap_ci", "multipletests", "paired_ttest", "randomization_test", "sign_test", "tukey_hsd", "wilcoxon"]
