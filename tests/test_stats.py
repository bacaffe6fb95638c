"""jaxrank.stats against scipy.stats and statsmodels."""

import warnings

import jax
import numpy as np
import pytest
import scipy.stats as st
from statsmodels.stats.multitest import multipletests as sm_multipletests

from jaxrank import stats
from tests.devices import run_with_host_devices

pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)

ALTERNATIVES = ("two-sided", "less", "greater")


def _pair(n, kind, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.random(n), rng.random(n)
    if kind in ("ties", "zeros"):  # per-query values of a short cutoff: few distinct values
        x, y = np.round(x * 4) / 4, np.round(y * 4) / 4
    if kind == "zeros":
        y[:3] = x[:3]
    return x, y


def _mean_diff(a, b, axis):
    return np.mean(a - b, axis=axis)


# n spans scipy's wilcoxon regimes: exact (<= 50, no ties/zeros), permutation (<= 13 with
# ties/zeros), normal approximation (ties beyond 13, anything beyond 50).
# One program per call (op-by-op dispatch compiles every op: slower in a test).
_wilcoxon = jax.jit(stats.wilcoxon, static_argnames="alternative")
_ttest = jax.jit(stats.paired_ttest, static_argnames="alternative")


@pytest.mark.parametrize("n", [5, 14, 60])
@pytest.mark.parametrize("kind", ["continuous", "ties", "zeros"])
def test_wilcoxon_and_ttest_match_scipy(n, kind):
    x, y = _pair(n, kind, seed=n)
    for alternative in ALTERNATIVES:
        w, p = _wilcoxon(x, y, alternative=alternative)
        ref = st.wilcoxon(x, y, alternative=alternative)
        np.testing.assert_allclose([w, p], [ref.statistic, ref.pvalue], rtol=1e-9, err_msg=alternative)
        t, p = _ttest(x, y, alternative=alternative)
        ref = st.ttest_rel(x, y, alternative=alternative)
        np.testing.assert_allclose([t, p], [ref.statistic, ref.pvalue], rtol=1e-9, err_msg=alternative)


@pytest.mark.parametrize("n", [6, 300])
def test_sign_test_matches_binomtest(n):
    x, y = _pair(n, "zeros", seed=n)
    k, m = int((x > y).sum()), int((x != y).sum())
    np.testing.assert_allclose(stats.sign_test(x, y), st.binomtest(k, m, 0.5).pvalue, rtol=1e-10)
    assert float(stats.sign_test(x, x)) == 1.0  # no differing query


@pytest.mark.parametrize("n", [4, 13])
def test_randomization_exact_matches_permutation_test(n):
    x, y = _pair(n, "zeros", seed=n)
    for alternative in ALTERNATIVES:
        d, p = stats.randomization_test(x, y, alternative=alternative, n_resamples=10000)
        ref = st.permutation_test(
            (x, y), _mean_diff, permutation_type="samples", alternative=alternative, n_resamples=10000
        )
        np.testing.assert_allclose([d, p], [ref.statistic, ref.pvalue], rtol=1e-12, err_msg=alternative)


def test_randomization_monte_carlo_within_error():
    x, y = _pair(60, "continuous", seed=3)
    y = y + 0.05
    key = jax.random.key(0)
    for alternative in ALTERNATIVES:
        d, p = stats.randomization_test(x, y, alternative=alternative, key=key, n_resamples=10000)
        ref = st.permutation_test(
            (x, y), _mean_diff, permutation_type="samples", alternative=alternative, n_resamples=10000, rng=1
        )
        se = np.sqrt(ref.pvalue * (1 - ref.pvalue) / 10000) * 2 + 1e-4
        np.testing.assert_allclose(d, ref.statistic, rtol=1e-12)
        assert abs(float(p) - ref.pvalue) < 5 * se, (alternative, float(p), ref.pvalue)
    # scipy's Monte Carlo convention: (count + 1) / (n_resamples + 1), never 0
    _, p = stats.randomization_test(x + 10, y, key=key, n_resamples=999, alternative="less")
    assert float(p) == pytest.approx(1.0)
    _, p = stats.randomization_test(x + 10, y, key=key, n_resamples=999, alternative="greater")
    assert float(p) == pytest.approx(1 / 1000)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_bootstrap_ci_within_monte_carlo_error(method):
    x = np.random.default_rng(5).gamma(2.0, 0.2, size=40)
    ref = st.bootstrap((x,), np.mean, method=method, n_resamples=10000, rng=2)
    # an endpoint's Monte Carlo sd is about 2.7 x (bootstrap sd) / sqrt(resamples)
    tol = 6 * 2.7 * ref.standard_error / np.sqrt(10000)
    for where in (None, np.ones(40, bool)):  # the shared-resample path and the masked path
        low, high = stats.bootstrap_ci(x, key=jax.random.key(1), method=method, n_resamples=10000, where=where)
        np.testing.assert_allclose([low, high], [ref.confidence_interval.low, ref.confidence_interval.high], atol=tol)


@pytest.mark.parametrize("method", ["bonferroni", "holm", "fdr_bh"])
def test_multipletests_match_statsmodels(method):
    p = np.random.default_rng(0).random((3, 11)) ** 3
    p[0, 2] = p[0, 5]  # tied p-values
    adjust = jax.jit(stats.multipletests, static_argnums=1)
    got = adjust(p, method)
    want = np.stack([sm_multipletests(row, method=method)[1] for row in p])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    where = np.arange(11) < 7  # a family of the first 7 tests
    got = adjust(p, method, where=where)
    want = np.stack([sm_multipletests(row[:7], method=method)[1] for row in p])
    np.testing.assert_allclose(got[:, :7], want, rtol=1e-12)
    assert np.isnan(got[:, 7:]).all()


@pytest.mark.parametrize("method", ["bonferroni", "holm", "fdr_bh"])
def test_multipletests_of_no_tests_is_empty(method):
    want = sm_multipletests(np.zeros(0), method=method)[1]
    got = stats.multipletests(np.zeros((2, 0)), method)
    assert got.shape == (2, 0) and want.shape == (0,)


def test_batch_axes_where_jit_vmap():
    """Leading axes, masks, jit and vmap give what scipy gives row by row on the valid queries
    (``eager`` is jitted too: op-by-op dispatch compiles every op, slower in a test)."""
    rng = np.random.default_rng(7)
    x = np.round(rng.random((2, 3, 30)) * 5) / 5
    y = np.round(rng.random((2, 3, 30)) * 5) / 5
    where = rng.random((2, 3, 30)) < 0.7
    where[0, 0, :] = np.arange(30) < 10  # a row small enough for the exact paths
    key = jax.random.key(0)

    def all_tests(x, y, where):
        return (
            stats.paired_ttest(x, y, where=where)[1],
            stats.wilcoxon(x, y, where=where)[1],
            stats.sign_test(x, y, where=where),
            stats.randomization_test(x, y, where=where, key=key, n_resamples=1024)[1],
        )

    eager = jax.jit(all_tests)(x, y, where)
    mapped = jax.jit(jax.vmap(all_tests))(x, y, where)
    for a, b in zip(eager, mapped):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    for i in np.ndindex(2, 3):
        xs, ys = x[i][where[i]], y[i][where[i]]
        np.testing.assert_allclose(eager[0][i], st.ttest_rel(xs, ys).pvalue, rtol=1e-9)
        np.testing.assert_allclose(eager[1][i], st.wilcoxon(xs, ys).pvalue, rtol=1e-9)
        k, m = int((xs > ys).sum()), int((xs != ys).sum())
        np.testing.assert_allclose(eager[2][i], st.binomtest(k, m).pvalue, rtol=1e-9)
    exact = st.permutation_test((x[0, 0][:10], y[0, 0][:10]), _mean_diff, permutation_type="samples")
    np.testing.assert_allclose(eager[3][0, 0], exact.pvalue, rtol=1e-12)


def test_bad_input_is_named():
    x = np.arange(5.0)
    with pytest.raises(ValueError, match="same shape"):
        stats.paired_ttest(x, x[:4])
    with pytest.raises(ValueError, match="at least two queries"):
        stats.wilcoxon(x[:1], x[:1])
    with pytest.raises(ValueError, match="at least two queries in common"):
        stats.sign_test(x, x + 1, where=np.zeros(5, bool))
    with pytest.raises(ValueError, match="n_resamples"):
        stats.randomization_test(x, x + 1, n_resamples=0)
    with pytest.raises(ValueError, match="n_resamples"):
        stats.bootstrap_ci(x, n_resamples=-3, key=jax.random.key(0))
    with pytest.raises(ValueError, match="key is required"):
        stats.randomization_test(np.arange(20.0), np.zeros(20))
    with pytest.raises(ValueError, match="alternative"):
        stats.paired_ttest(x, x + 1, alternative="bigger")
    with pytest.raises(ValueError, match="method"):
        stats.multipletests([0.1, 0.2], "sidak")


def test_rows_sharded_over_8_devices():
    """A batch sharded over 8 host devices under jit gives the unsharded values (the Wilcoxon
    ranks and the sorted p-values take the ranking primitive's sharded path)."""
    out = run_with_host_devices(
        """
        import jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        from jax.sharding import Mesh, NamedSharding, PartitionSpec
        from jaxrank import stats
        rng = np.random.default_rng(0)
        x, y = np.round(rng.random((2, 8, 40)) * 4) / 4, np.round(rng.random((2, 8, 40)) * 4) / 4
        sharding = NamedSharding(Mesh(jax.devices(), ("rows",)), PartitionSpec(None, "rows"))
        key = jax.random.key(0)
        def f(x, y):
            return (
                stats.wilcoxon(x, y)[1],
                stats.paired_ttest(x, y)[1],
                stats.sign_test(x, y),
                stats.randomization_test(x, y, key=key, n_resamples=500)[1],
                stats.bootstrap_ci(x, key=key, n_resamples=500),
                stats.multipletests(stats.paired_ttest(x, y)[1], "holm"),
            )
        sharded = jax.jit(f)(jax.device_put(x, sharding), jax.device_put(y, sharding))
        for a, b in zip(jax.tree.leaves(sharded), jax.tree.leaves(f(x, y))):
            np.testing.assert_allclose(a, b, rtol=1e-12)
        print("same")
        """
    )
    assert "same" in out


# Precision: concrete calls compute in float64 whatever jax_enable_x64 says ------------------
def _tenths(n, seed):
    """Per-query values of a cutoff-10 measure: multiples of 0.1, whose float64 differences
    (0.3 - 0.1 != 0.5 - 0.3) scipy ranks apart and whose float32 roundings may tie."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, 11, n) / 10, rng.integers(0, 11, n) / 10


@pytest.fixture
def x64_off():
    """JAX's default setting (the suite turns x64 on in conftest.py)."""
    with jax.enable_x64(False):
        assert not jax.config.jax_enable_x64
        yield


@pytest.mark.parametrize("values", ["tenths", "continuous"])
def test_concrete_inputs_give_scipy_digits_with_x64_off(x64_off, values):
    x, y = _tenths(50, seed=1) if values == "tenths" else _pair(50, "continuous", seed=2)
    t, p = stats.paired_ttest(x, y)
    ref = st.ttest_rel(x, y)
    assert isinstance(p, np.ndarray) and p.dtype == np.float64  # NumPy: no x64 warnings downstream
    np.testing.assert_allclose([t, p], [ref.statistic, ref.pvalue], rtol=1e-9)
    w, p = stats.wilcoxon(x, y)
    ref = st.wilcoxon(x, y)
    np.testing.assert_allclose([w, p], [ref.statistic, ref.pvalue], rtol=1e-9)
    k, m = int((x > y).sum()), int((x != y).sum())
    np.testing.assert_allclose(stats.sign_test(x, y), st.binomtest(k, m).pvalue, rtol=1e-9)
    ps = np.array([ref.pvalue, 0.01, 0.04, 0.2])
    np.testing.assert_allclose(stats.multipletests(ps, "holm"), sm_multipletests(ps, method="holm")[1], rtol=1e-9)
    d, p = stats.randomization_test(x[:12], y[:12])  # exact: every sign assignment
    ref = st.permutation_test((x[:12], y[:12]), _mean_diff, permutation_type="samples")
    np.testing.assert_allclose([d, p], [ref.statistic, ref.pvalue], rtol=1e-9)


def test_float32_inputs_are_widened_and_monte_carlo_ignores_the_x64_setting():
    """Concrete float32 input computes in float64 too, and the Monte Carlo tests draw the
    same resamples with x64 off as on (the draws depend on the dtype)."""
    x, y = _tenths(50, seed=3)
    key = jax.random.key(4)
    on = stats.randomization_test(x, y, key=key, n_resamples=2000), stats.bootstrap_ci(x, key=key, n_resamples=2000)
    with jax.enable_x64(False):
        off = (
            stats.randomization_test(x, y, key=key, n_resamples=2000),
            stats.bootstrap_ci(x, key=key, n_resamples=2000),
        )
        assert stats.paired_ttest(x.astype(np.float32), y.astype(np.float32))[1].dtype == np.float64
    for a, b in zip(jax.tree.leaves(on), jax.tree.leaves(off)):
        assert b.dtype == np.float64
        np.testing.assert_array_equal(a, b)


def test_traced_calls_keep_the_traced_dtype(x64_off):
    """Under jit, vmap, or jit around constant inputs, float32 stays float32 (x64 is never
    switched on inside a trace: no float64 warning, no float64 in the program)."""
    x, y = _tenths(20, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        outs = [
            jax.jit(stats.paired_ttest)(x, y),
            jax.vmap(stats.sign_test)(x[None], y[None]),
            jax.jit(lambda: stats.wilcoxon(x, y))(),
            jax.jit(lambda p: stats.multipletests(p))(jax.numpy.asarray([0.1, 0.2])),
        ]
    assert {leaf.dtype for leaf in jax.tree.leaves(outs)} == {np.dtype(np.float32)}


def test_a_fresh_process_with_x64_off_gives_scipy_digits():
    """The user's setting, not the suite's: JAX's default (x64 off) in a new interpreter,
    float64 NumPy arrays in, scipy's digits out."""
    x, y = _tenths(50, seed=6)
    out = run_with_host_devices(
        f"""
        import jax, numpy as np
        assert not jax.config.jax_enable_x64
        from jaxrank import stats
        x, y = np.array({x.tolist()}), np.array({y.tolist()})
        print(repr([float(v) for v in (*stats.paired_ttest(x, y), *stats.wilcoxon(x, y))]))
        """,
        devices=1,
    )
    t, w = st.ttest_rel(x, y), st.wilcoxon(x, y)
    np.testing.assert_allclose(eval(out), [t.statistic, t.pvalue, w.statistic, w.pvalue], rtol=1e-9)


# Tukey's HSD: k systems x n queries, as ranx.compare(stat_test="tukey") calls scipy.
def _systems(k, n, seed, kind="continuous"):
    """Per-query values of k systems on n queries: shared query difficulty plus a system
    effect of several hundredths, so the p-values span (0, 1] (some near 0, some near 1)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.beta(2, 3, n)
    effect = rng.normal(0, 0.08, k)[:, None]
    x = np.clip(difficulty + effect + rng.normal(0, 0.15, (k, n)), 0, 1)
    return np.round(x * 10) / 10 if kind == "P@10" else x


@pytest.mark.parametrize(
    "k,n,kind",
    [
        (2, 2, "continuous"),
        (2, 250, "continuous"),
        (3, 5, "continuous"),
        (3, 50, "P@10"),
        (4, 20, "continuous"),
        (5, 120, "continuous"),
        (7, 80, "P@10"),
        (10, 50, "continuous"),
        (10, 250, "P@10"),
    ],
)
def test_tukey_hsd_matches_scipy(k, n, kind):
    x = _systems(k, n, seed=k * 1000 + n, kind=kind)
    want = st.tukey_hsd(*x)
    statistic, p = stats.tukey_hsd(x)
    assert isinstance(p, np.ndarray) and p.dtype == np.float64 and p.shape == (k, k)
    np.testing.assert_allclose(statistic, want.statistic, rtol=0, atol=1e-12)
    np.testing.assert_allclose(p, want.pvalue, rtol=0, atol=1e-9)  # measured: at most 2e-12
    assert np.all(p == p.T) and np.all(np.diag(p) == 1)


def test_tukey_hsd_small_pvalues_keep_their_relative_precision():
    """k = 2: the studentized range is sqrt(2) |T|, so p = 2 P(T_df > q / sqrt(2)) exactly;
    scipy's own tukey_hsd (1 - cdf) loses p-values below ~1e-11; jaxrank's keep 1e-9 relative
    down to ~1e-16 (measured: <= 1e-13 here; 1e-7 at 1e-20, none beyond 1e-30)."""
    rng = np.random.default_rng(3)
    for n in (3, 30, 125):
        for shift in (0.0, 0.1, 0.3):  # p from 0.8 down to 1.5e-16
            x = np.stack([rng.normal(0, 1, n), rng.normal(shift * 4, 1, n)])
            statistic, p = stats.tukey_hsd(x)
            se = np.sqrt(x.var(-1, ddof=1).mean() / n)
            exact = 2 * st.t.sf(abs(statistic[0, 1]) / se / np.sqrt(2), 2 * (n - 1))
            np.testing.assert_allclose(p[0, 1], exact, rtol=1e-9, atol=1e-300)


def test_tukey_hsd_batched_degenerate_and_jitted():
    x = np.stack([_systems(4, 30, seed=s) for s in range(3)])  # [measures, k, n]
    _, p = stats.tukey_hsd(x)
    for m in range(3):
        np.testing.assert_allclose(p[m], st.tukey_hsd(*x[m]).pvalue, rtol=0, atol=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        constant = np.array([[1.0, 1, 1], [2, 2, 2], [1, 1, 1]])  # MSE = 0: scipy's 0 and NaN
        np.testing.assert_array_equal(stats.tukey_hsd(constant)[1], st.tukey_hsd(*constant).pvalue)
    with jax.enable_x64(True):
        jitted = jax.jit(stats.tukey_hsd)(jax.numpy.asarray(x))[1]
    np.testing.assert_allclose(np.asarray(jitted), p, rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="k >= 2 systems"):
        stats.tukey_hsd(np.ones((1, 5)))
    with pytest.raises(ValueError, match="at least two queries"):
        stats.tukey_hsd(np.ones((3, 1)))
