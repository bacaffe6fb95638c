"""What float32 costs jaxrank.stats under ``jit``: its values against scipy's (float64) on
realistic per-query values, with ``jax_enable_x64`` off (JAX's default).

    python benchmarks/stats_float32.py [--pairs 100] [--queries 50]

Each pair is two systems' nDCG@10 (or P@10: multiples of 0.1, where the float64 differences
``0.3 - 0.1`` and ``0.5 - 0.3`` differ but their float32 roundings may not) on the same
``--queries`` queries (30 documents each, graded labels 0-4 on 40 % of them, scores = label
+ noise, the second system noisier), computed in float64. The float64 values go into ``jax.jit`` of each test with x64 off, so
they are rounded to float32 there, as in a float32 training or evaluation loop. All pairs
are one batch (the leading axis; every test decides per row, as a 1-D scipy call does).
Printed per quantity: the largest absolute difference from the reference over the pairs,
and for ``wilcoxon`` how many of the pairs' statistics differ (a rounded difference can make or
break a tie). The reference is scipy / statsmodels for the deterministic tests; for the
Monte Carlo ones (``randomization_test``, ``bootstrap_ci``, 10,000 resamples) it is jaxrank
itself in float64 with the same key, and the difference is mostly Monte Carlo error: JAX
draws different random bits for float32 and float64, so the resamples are not the same.

A measurement of precision, not of time: the machine's load cannot change it, so unlike
the timing scripts it records no machine header (benchmarks/_machine.py). docs/compare.md
quotes its output. Concrete (untraced) calls do not pay this: they compute in float64 whatever the x64
setting (tests/test_stats.py checks scipy's digits to 1e-9 with x64 off).
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats as st
from statsmodels.stats.multitest import multipletests as sm_multipletests

import jaxrank
from jaxrank import stats

MEASURES = {"nDCG@10": jaxrank.ndcg, "P@10": jaxrank.precision}


def value_pairs(measure: str, pairs: int, queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``x, y``: float64 per-query values of ``measure`` (a key of :data:`MEASURES`) for
    two systems, ``[pairs, queries]``."""
    rng = np.random.default_rng(seed)
    shape = (pairs, queries, 30)
    labels = rng.integers(0, 5, shape) * (rng.random(shape) < 0.4)
    signal = labels + rng.normal(0, 2.0, shape)
    a, b = signal + rng.normal(0, 1.0, shape), signal + rng.normal(0, 1.2, shape)
    with jax.enable_x64(True):
        metric = MEASURES[measure]
        x = np.asarray(metric(jnp.asarray(a), jnp.asarray(labels), k=10))
        y = np.asarray(metric(jnp.asarray(b), jnp.asarray(labels), k=10))
    return x, y


def _all_tests(x, y, key):
    t, p_t = stats.paired_ttest(x, y)
    w, p_w = stats.wilcoxon(x, y)
    p_s = stats.sign_test(x, y)
    _, p_r = stats.randomization_test(x, y, key=key)
    low, high = stats.bootstrap_ci(x - y, key=key)
    holm = stats.multipletests(jnp.stack([p_t, p_w, p_s], -1), "holm")
    return {"t": t, "p_ttest": p_t, "w": w, "p_wilcoxon": p_w, "p_sign": p_s, "p_randomization": p_r}, (
        low,
        high,
        holm,
    )


def measure(measure: str = "nDCG@10", pairs: int = 100, queries: int = 50, seed: int = 0) -> dict[str, float]:
    """``{quantity: largest absolute difference}``, plus ``"wilcoxon statistics
    differing"``: how many of the ``pairs``."""
    x, y = value_pairs(measure, pairs, queries, seed)
    key = jax.random.key(seed)
    program = jax.jit(_all_tests)
    with jax.enable_x64(False):
        got, (low, high, holm) = jax.device_get(program(x, y, key))
    with jax.enable_x64(True):
        ref64, (low64, high64, _) = jax.device_get(program(jnp.asarray(x), jnp.asarray(y), key))

    ttest = [st.ttest_rel(a, b) for a, b in zip(x, y)]
    wilcoxon = [st.wilcoxon(a, b) for a, b in zip(x, y)]
    sign = [st.binomtest(int((a > b).sum()), int((a != b).sum())).pvalue for a, b in zip(x, y)]
    ref = {
        "t": np.array([r.statistic for r in ttest]),
        "p_ttest": np.array([r.pvalue for r in ttest]),
        "w": np.array([r.statistic for r in wilcoxon]),
        "p_wilcoxon": np.array([r.pvalue for r in wilcoxon]),
        "p_sign": np.array(sign),
        "p_randomization": ref64["p_randomization"],
    }
    family = np.stack([ref["p_ttest"], ref["p_wilcoxon"], ref["p_sign"]], -1)
    ref["holm"] = np.stack([sm_multipletests(row, method="holm")[1] for row in family])
    got = {**got, "holm": holm}
    got["bootstrap_ci"], ref["bootstrap_ci"] = np.stack([low, high]), np.stack([low64, high64])

    # absolute differences only: relative ones explode where scipy's float64 gives 1e-17 for 0
    out: dict[str, float] = {
        name: float(np.abs(np.asarray(got[name], np.float64) - want).max()) for name, want in ref.items()
    }
    out["wilcoxon statistics differing"] = int((got["w"] != ref["w"]).sum())
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args(argv)
    print(f"jax {jax.__version__}, {args.pairs} pairs x {args.queries} queries, float32 under jit vs float64")
    results = {name: measure(name, args.pairs, args.queries) for name in MEASURES}
    print("| largest difference from float64 | " + " | ".join(results) + " |")
    print("|---|" + "---|" * len(results))
    for quantity in results["nDCG@10"]:
        cells = [f"{r[quantity]}" if isinstance(r[quantity], int) else f"{r[quantity]:.1e}" for r in results.values()]
        print(f"| {quantity} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
