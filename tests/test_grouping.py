"""jaxrank.group_by_query against a dict-of-lists brute force."""

from collections import defaultdict

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.lists._grouping import group_by_query


def brute(preds, target, indexes, ignore_index=None):
    """{query id: [(pred, target), ...]} in input order."""
    out = defaultdict(list)
    for p, t, i in zip(preds.tolist(), target.tolist(), indexes.tolist()):
        if ignore_index is None or t != ignore_index:
            out[i].append((p, t))
    return dict(out)


def as_dict(g):
    out = {}
    for q, p, t, w in zip(*(np.asarray(x).tolist() for x in (g.query_ids, g.preds, g.target, g.where))):
        if q == -1:
            assert not any(w)
            continue
        assert w == sorted(w, reverse=True)  # valid items first, padding after
        out[q] = [(a, b) for a, b, v in zip(p, t, w) if v]
    return out


def flat_case(seed, num_items=300, num_ids=40):
    rng = np.random.default_rng(seed)
    indexes = rng.integers(-5, num_ids, num_items) * 3  # negative, sparse, unsorted ids
    preds = rng.random(num_items)
    target = rng.integers(-1, 3, num_items)
    return preds, target, indexes


@pytest.mark.parametrize("seed", range(3))
def test_host_grouping_equals_dict_of_lists(seed):
    preds, target, indexes = flat_case(seed)
    g = group_by_query(preds, target, indexes)
    assert as_dict(g) == brute(preds, target, indexes)
    assert g.query_ids.tolist() == sorted(set(indexes.tolist()))
    assert g.preds.shape[1] == max(len(v) for v in brute(preds, target, indexes).values())
    assert int(g.overflow) == 0


def test_ids_spanning_the_int64_range():  # too wide to pack beside the positions: plain stable argsort
    preds, target, indexes = flat_case(5, num_items=50)
    indexes = np.where(indexes % 2 == 0, indexes + 2**62, indexes - 2**62)
    assert as_dict(group_by_query(preds, target, indexes)) == brute(preds, target, indexes)


def test_ignore_index_drops_items_and_empty_queries():
    preds, target, indexes = flat_case(1)
    indexes[target == -1] = 10_000  # this query holds only ignored items: it disappears
    g = group_by_query(preds, target, indexes, ignore_index=-1)
    expected = brute(preds, target, indexes, ignore_index=-1)
    assert 10_000 not in expected
    assert as_dict(g) == expected


def test_multidimensional_inputs_are_flattened():
    preds, target, indexes = flat_case(2, num_items=60)
    g = group_by_query(preds.reshape(6, 10), target.reshape(6, 10), indexes.reshape(6, 10))
    assert as_dict(g) == brute(preds, target, indexes)


def test_static_sizes_under_jit_equal_host():
    preds, target, indexes = flat_case(3)
    host = group_by_query(preds, target, indexes, ignore_index=-1)
    q, n = host.preds.shape
    f = jax.jit(lambda p, t, i: group_by_query(p, t, i, ignore_index=-1, num_queries=q + 2, max_size=n + 1))
    g = f(preds, target, indexes)
    assert as_dict(g) == as_dict(host)
    assert g.preds.shape == (q + 2, n + 1)
    assert g.query_ids[q:].tolist() == [-1, -1] and int(g.overflow) == 0
    np.testing.assert_array_equal(g.preds[:q, :n], host.preds)
    np.testing.assert_array_equal(g.where[:q, :n], host.where)


def test_static_sizes_count_what_does_not_fit():
    preds, target, indexes = np.array([0.1, 0.2, 0.3, 0.4]), np.array([1, 0, 1, 0]), np.array([5, 5, 5, 6])
    g = jax.jit(lambda p, t, i: group_by_query(p, t, i, num_queries=1, max_size=2))(preds, target, indexes)
    assert int(g.overflow) == 2  # the third item of query 5, and query 6
    assert g.preds.tolist() == [[0.1, 0.2]]
    with pytest.raises(ValueError, match="do not fit"):
        group_by_query(preds, target, indexes, num_queries=1, max_size=2)


def test_grouped_lists_feed_the_metrics():
    preds, target, indexes = flat_case(4, num_items=40, num_ids=4)
    target = np.maximum(target, 0)
    g = group_by_query(preds, target, indexes)
    # The same lists padded by hand, each in its own row and with a different padding width.
    lists = [brute(preds, target, indexes)[q] for q in g.query_ids.tolist()]
    width = g.preds.shape[1] + 3
    p, t, w = np.zeros((len(lists), width)), np.zeros((len(lists), width)), np.zeros((len(lists), width), bool)
    for row, items in enumerate(lists):
        p[row, : len(items)], t[row, : len(items)] = zip(*items)
        w[row, : len(items)] = True
    np.testing.assert_allclose(
        jaxrank.ndcg(g.preds, g.target, k=5, where=g.where), jaxrank.ndcg(p, t, k=5, where=w), atol=1e-12
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(preds=[0.1, 0.2], target=[1], indexes=[0, 0]), "same shape"),
        (dict(preds=[], target=[], indexes=[]), "non-empty"),
        (dict(preds=[0.1], target=[1], indexes=[0.5]), "indexes must hold integers"),
        (dict(preds=[0.1], target=[1], indexes=[0], ignore_index=0.5), "ignore_index"),
        (dict(preds=[0.1], target=[1], indexes=[0], ignore_index=1), "no item is left"),
        (dict(preds=[0.1], target=[1], indexes=[0], num_queries=1), "together"),
        (dict(preds=[0.1], target=[1], indexes=[0], num_queries=0, max_size=1), "num_queries"),
    ],
)
def test_bad_input_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        group_by_query(**kwargs)


def test_under_jit_without_sizes_asks_for_them():
    with pytest.raises(ValueError, match="num_queries and max_size"):
        jax.jit(lambda p: group_by_query(p, p, jnp.zeros(3, int)))(jnp.ones(3))
