"""Aggregation over queries: each statistic and each empty-query policy."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank

VALUES = jnp.array([0.5, 1.0, 0.0, 0.25])
EMPTY = jnp.array([False, False, True, False])


@pytest.mark.parametrize(
    "empty, want",
    [
        ("zero", (0.5 + 1.0 + 0.0 + 0.25) / 4),
        ("one", (0.5 + 1.0 + 1.0 + 0.25) / 4),
        ("skip", (0.5 + 1.0 + 0.25) / 3),
    ],
)
def test_empty_policies_for_the_mean(empty, want):
    assert float(jaxrank.aggregate(VALUES, empty=empty, is_empty=EMPTY)) == pytest.approx(want)


def test_empty_nan_policy_makes_the_mean_nan():
    assert math.isnan(float(jaxrank.aggregate(VALUES, empty="nan", is_empty=EMPTY)))
    assert float(jaxrank.aggregate(VALUES, empty="nan", is_empty=~jnp.ones(4, bool))) == pytest.approx(0.4375)


def test_empty_error_policy_raises_only_when_a_query_is_empty():
    with pytest.raises(ValueError, match="1 queries have no relevant document"):
        jaxrank.aggregate(VALUES, empty="error", is_empty=EMPTY)
    assert float(jaxrank.aggregate(VALUES, empty="error", is_empty=jnp.zeros(4, bool))) == pytest.approx(0.4375)
    with pytest.raises(ValueError, match="needs concrete values"):
        jax.jit(lambda v, e: jaxrank.aggregate(v, empty="error", is_empty=e))(VALUES, EMPTY)


def test_median_min_max():
    assert float(jaxrank.aggregate(VALUES, how="median")) == pytest.approx(0.375)
    assert float(jaxrank.aggregate(VALUES, how="median", empty="skip", is_empty=EMPTY)) == pytest.approx(0.5)
    assert float(jaxrank.aggregate(VALUES, how="min")) == 0.0
    assert float(jaxrank.aggregate(VALUES, how="min", empty="skip", is_empty=EMPTY)) == 0.25
    assert float(jaxrank.aggregate(VALUES, how="max")) == 1.0


def test_geometric_mean_floors_zeros_like_trec_eval_gm_map():
    want = math.exp((math.log(0.5) + math.log(1.0) + math.log(1e-5) + math.log(0.25)) / 4)
    assert float(jaxrank.aggregate(VALUES, how="gmean")) == pytest.approx(want)


def test_query_weights():
    w = jnp.array([1.0, 3.0, 0.0, 0.0])
    assert float(jaxrank.aggregate(VALUES, weights=w)) == pytest.approx((0.5 + 3.0) / 4)
    with pytest.raises(ValueError, match="weights are not supported"):
        jaxrank.aggregate(VALUES, how="median", weights=w)


def test_columns_per_cutoff_are_aggregated_separately():
    table = jnp.stack([VALUES, 2 * VALUES], axis=1)
    np.testing.assert_allclose(
        jaxrank.aggregate(table, empty="skip", is_empty=EMPTY), [0.5833333, 1.1666667], rtol=1e-6
    )


def test_aggregate_is_jittable():
    fn = jax.jit(lambda v, e: jaxrank.aggregate(v, empty="skip", is_empty=e))
    assert float(fn(VALUES, EMPTY)) == pytest.approx((0.5 + 1.0 + 0.25) / 3)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="how must be one of"):
        jaxrank.aggregate(VALUES, how="mode")
    with pytest.raises(ValueError, match="empty must be one of"):
        jaxrank.aggregate(VALUES, empty="drop")
    with pytest.raises(ValueError, match="is_empty must have shape"):
        jaxrank.aggregate(VALUES, is_empty=[True])
    with pytest.raises(ValueError, match="values must have shape"):
        jaxrank.aggregate(jnp.zeros((2, 2, 2)))
