"""The ranking primitive: tie policies against brute force, NaN, masks, paths."""

import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.ranking import backend as _backend
from tests.brute import CUTOFF_METRICS, over_tie_orders, reference

# XLA optimisations stay on here: the ranking primitive is tested as users compile it.
ALL_METRICS = CUTOFF_METRICS + ["r_precision"]


def _tied_batch(seed, batch=40, n=7, pad=3):
    """Small lists with many ties, padded with masked items of random score."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 3, (batch, n + pad)).astype(float)
    labels = rng.integers(0, 4, (batch, n + pad))
    where = np.ones((batch, n + pad), bool)
    lengths = rng.integers(1, n + 1, batch)
    for b, length in enumerate(lengths):
        where[b, length:] = False
    perm = rng.permuted(np.tile(np.arange(n + pad), (batch, 1)), axis=1)
    take = lambda a: np.take_along_axis(a, perm, 1)  # masked items sit anywhere
    return take(scores), take(labels), take(where)


def _call(name, scores, labels, where, ranker, k):
    fn = getattr(jaxrank, name)
    kwargs = dict(where=where, ranker=ranker)
    if name != "r_precision":
        kwargs["k"] = k
    return np.asarray(fn(scores, labels, **kwargs))


@pytest.mark.parametrize("name", ALL_METRICS)
@pytest.mark.parametrize("k", [None, 3])
def test_expected_ties_equal_mean_over_all_tie_orders(name, k):
    scores, labels, where = _tied_batch(seed=zlib.crc32(name.encode()) % 1000)
    got = _call(name, scores, labels, where, jaxrank.hard("expected"), None if name == "r_precision" else k)
    for b in range(len(scores)):
        s, y = scores[b][where[b]], labels[b][where[b]]
        kw = {} if name == "r_precision" else dict(k=k)
        want = over_tie_orders(name, s, y, **kw).mean()
        np.testing.assert_allclose(got[b], want, atol=1e-9, err_msg=f"{name} row {b}")


@pytest.mark.parametrize("name", ALL_METRICS)
def test_optimistic_and_pessimistic_are_max_and_min_over_tie_orders(name):
    scores, labels, where = _tied_batch(seed=7 + zlib.crc32(name.encode()) % 1000)
    k = None if name == "r_precision" else 3
    best = _call(name, scores, labels, where, jaxrank.hard("optimistic"), k)
    worst = _call(name, scores, labels, where, jaxrank.hard("pessimistic"), k)
    for b in range(len(scores)):
        s, y = scores[b][where[b]], labels[b][where[b]]
        values = over_tie_orders(name, s, y, **({} if k is None else dict(k=k)))
        np.testing.assert_allclose(best[b], values.max(), atol=1e-9, err_msg=f"{name} row {b}")
        np.testing.assert_allclose(worst[b], values.min(), atol=1e-9, err_msg=f"{name} row {b}")


@pytest.mark.parametrize("name", CUTOFF_METRICS)
def test_stable_ties_follow_input_order(name):
    scores, labels, where = _tied_batch(seed=11)
    got = _call(name, scores, labels, where, jaxrank.hard("stable"), 4)
    for b in range(len(scores)):
        s, y = scores[b][where[b]], labels[b][where[b]]
        order = sorted(range(len(s)), key=lambda i: (-s[i], i))
        want = reference(name, [y[i] for i in order], k=4)
        np.testing.assert_allclose(got[b], want, atol=1e-9)


def test_constant_scores_get_the_random_ranking_value():
    labels = jnp.array([1, 1, 0, 0, 0, 0])
    flat = jnp.zeros(6)
    expected = jaxrank.hard("expected")
    rr = jaxrank.reciprocal_rank(flat, labels, ranker=expected)
    # first relevant position J of 2 among 6: E[1/J] = sum_j P(J=j)/j
    probs = [5 / 15, 4 / 15, 3 / 15, 2 / 15, 1 / 15]
    assert float(rr) == pytest.approx(sum(p / (j + 1) for j, p in enumerate(probs)))
    assert float(jaxrank.precision(flat, labels, k=3, ranker=expected)) == pytest.approx(2 / 6)
    assert float(jaxrank.precision(flat, labels[::-1], k=3, ranker=expected)) == pytest.approx(2 / 6)
    # the default ("stable") follows input order instead
    assert float(jaxrank.precision(flat, labels, k=3)) == pytest.approx(2 / 3)


def test_expected_ties_are_invariant_to_input_permutation():
    scores, labels, where = _tied_batch(seed=3)
    rng = np.random.default_rng(0)
    perm = rng.permuted(np.tile(np.arange(scores.shape[1]), (len(scores), 1)), axis=1)
    take = lambda a: np.take_along_axis(a, perm, 1)
    for name in CUTOFF_METRICS:
        a = _call(name, scores, labels, where, jaxrank.hard("expected"), 3)
        b = _call(name, take(scores), take(labels), take(where), jaxrank.hard("expected"), 3)
        np.testing.assert_allclose(a, b, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("ties", ["stable", "expected"])
def test_top_k_path_equals_full_sort(ties):
    rng = np.random.default_rng(5)
    scores = rng.integers(0, 20, (30, 200)).astype(np.float32)  # ties across the cutoff
    scores[rng.random(scores.shape) < 0.05] = np.nan
    scores[rng.random(scores.shape) < 0.05] = -np.inf
    labels = rng.integers(0, 3, scores.shape)
    where = rng.random(scores.shape) < 0.5
    where[0, :] = False
    where[1, 5:] = False  # shorter than the cutoff: NaN and -inf items reach the prefix
    ranker = jaxrank.hard(ties)
    full = ranker(scores, where, depth=None)
    for name in ["precision", "ndcg", "average_precision", "reciprocal_rank", "success"]:
        fn = getattr(jaxrank, name)
        fast = fn(scores, labels, k=(1, 10, 30), where=where, ranker=ranker)
        slow = fn(scores, labels, k=(1, 10, 30), where=where, ranker=full)
        np.testing.assert_allclose(fast, slow, rtol=1e-6, err_msg=name)


def test_nan_scores_rank_below_every_number_then_in_input_order():
    scores = jnp.array([jnp.nan, -jnp.inf, 0.5, jnp.nan, 2.0])
    ranks = jaxrank.hard("stable")(scores, depth=None)
    np.testing.assert_array_equal(ranks.order, [4, 2, 1, 0, 3])
    top = jaxrank.hard("stable")(scores, depth=4)
    np.testing.assert_array_equal(top.order, [4, 2, 1, 0])


def test_masked_items_are_never_ranked():
    scores = jnp.array([5.0, 1.0, 3.0, jnp.nan])
    where = jnp.array([False, True, True, True])
    ranks = jaxrank.hard("stable")(scores, where, depth=None)
    np.testing.assert_array_equal(ranks.order[:3], [2, 1, 3])
    assert int(ranks.n_valid[0]) == 3


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32, jnp.float64])
def test_negative_zero_gets_the_key_of_zero_under_jit(dtype):
    x = jnp.array([-0.0, 0.0, -1e-30, 1e-30], dtype)
    key = jax.jit(_backend.sort_key)(x, jnp.ones(4, bool))
    assert int(key[0]) == int(key[1])
    assert int(key[2]) <= int(key[0]) <= int(key[3])  # still between the nearest numbers


@pytest.mark.parametrize("ties", ["stable", "pessimistic", "optimistic", "expected"])
def test_negative_zero_ties_with_zero_on_the_sort_and_top_k_paths_under_jit(ties):
    """trec_eval compares scores as doubles (-0.0 == 0.0); so must every path of the ranker:
    the full sort (k=None) and, for the policies that use it, lax.top_k (k=3)."""
    rng = np.random.default_rng(17)
    scores = rng.choice(np.array([-1.0, -0.0, 0.0, 0.5]), (24, 8)).astype(np.float32)
    labels = rng.integers(0, 3, scores.shape)
    names = ["ndcg", "average_precision", "reciprocal_rank", "precision"]
    ranker = jaxrank.hard(ties)

    @jax.jit
    def values(s, y):
        return [getattr(jaxrank, name)(s, y, k=k, ranker=ranker) for name in names for k in (None, 3)]

    got = values(scores, labels)
    if ties in ("stable", "expected"):
        assert ranker(jnp.asarray(scores), depth=3).order.shape[-1] == 3  # the top_k path
    for b in range(len(scores)):
        s, y = scores[b].tolist(), labels[b].tolist()  # python floats: -0.0 == 0.0
        for (name, k), value in zip([(n, k) for n in names for k in (None, 3)], got):
            orders = over_tie_orders(name, s, y, **({} if k is None else dict(k=k)))
            if ties == "stable":
                order = sorted(range(len(s)), key=lambda i: -s[i])  # sorted() is stable
                want = reference(name, [y[i] for i in order], **({} if k is None else dict(k=k)))
            else:
                want = dict(expected=orders.mean(), optimistic=orders.max(), pessimistic=orders.min())[ties]
            np.testing.assert_allclose(value[b], want, rtol=1e-5, err_msg=f"{name} k={k} row {b}")


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float32, jnp.float64])
def test_low_precision_scores_are_ranked_exactly(dtype):
    scores = jnp.array([0.1, 3.0, -2.0, 0.1, 7.5], dtype)
    ranks = jaxrank.hard("stable")(scores, depth=None)
    np.testing.assert_array_equal(ranks.order, [4, 1, 0, 3, 2])
    labels = jnp.array([1, 0, 0, 1, 0])
    assert float(jaxrank.reciprocal_rank(scores, labels, ranker=jaxrank.hard("stable"))) == pytest.approx(1 / 3)


def test_device_sort_matches_host_sort():
    rng = np.random.default_rng(2)
    scores = rng.integers(-3, 3, (8, 50)).astype(np.float32)
    key = _backend.sort_key(jnp.asarray(scores), jnp.asarray(rng.random((8, 50)) < 0.8))
    np.testing.assert_array_equal(_backend._device_argsort(key), _backend._cpu_argsort(key))


def test_precomputed_ranks_are_shared_between_metrics():
    rng = np.random.default_rng(4)
    scores, labels = rng.standard_normal((3, 20)), rng.integers(0, 3, (3, 20))
    ranks = jaxrank.hard()(scores, depth=None)
    np.testing.assert_allclose(jaxrank.ndcg(scores, labels, k=5, ranker=ranks), jaxrank.ndcg(scores, labels, k=5))
    shallow = jaxrank.hard()(scores, depth=5)
    with pytest.raises(ValueError, match="first 5 positions"):
        jaxrank.average_precision(scores, labels, ranker=shallow)


def test_unknown_tie_policy_is_rejected():
    with pytest.raises(ValueError, match="ties must be one of"):
        jaxrank.hard("random")


def test_concurrent_host_sorts_in_one_jit_finish():
    """Two full sorts (scores and the nDCG ideal) run as concurrent host callbacks
    on the threaded sort; this once deadlocked, so it runs in a subprocess with a timeout."""
    import subprocess
    import sys

    code = (
        "import jax, jax.numpy as jnp, numpy as np, jaxrank\n"
        "rng = np.random.default_rng(0)\n"
        "s = jnp.asarray(rng.standard_normal((256, 1024)), jnp.float32)\n"
        "y = jnp.asarray(rng.integers(0, 5, (256, 1024)))\n"
        "f = jax.jit(lambda s, y: jaxrank.ndcg(s, y, k=(5, 1024)))\n"
        "for _ in range(10): jax.block_until_ready(f(s, y))\n"
        "print('finished')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "finished" in out.stdout, out.stderr


def test_expected_err_over_a_tie_group_larger_than_the_shifted_branch():
    """Nine tied items take the scan branch; brute force over distinct label orders
    (uniform over permutations is uniform over distinct orders of the multiset)."""
    import itertools

    labels = np.array([0, 0, 0, 0, 0, 1, 1, 2, 3])
    scores = np.zeros(9)
    got = float(jaxrank.err(scores, labels, ranker=jaxrank.hard("expected")))
    orders = set(itertools.permutations(labels.tolist()))
    want = np.mean([reference("err", list(o)) for o in orders])
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_expected_cascade_branches_agree():
    scores, labels, where = _tied_batch(seed=21)
    ranks = jaxrank.hard("expected")(scores, where, depth=None)
    p = jnp.where(where, (2.0**labels - 1) / 16, 0.0)
    weights = 1.0 / jnp.arange(1, ranks.depth + 1)[:, None]
    start, end, _, _ = ranks._groups()
    shifted = ranks._cascade_shifted(ranks.in_rank_order(p), weights, start, end, 8)
    scanned = ranks._cascade_scan(p, weights, start, end, ranks.depth)
    np.testing.assert_allclose(shifted, scanned, rtol=1e-10)


def test_inverse_permutation_gives_each_items_position_for_any_batch_shape():
    from jaxrank.ranking.backend import inverse_permutation

    rng = np.random.default_rng(3)
    order = np.stack([rng.permutation(7) for _ in range(6)]).reshape(2, 3, 7)
    inv = np.asarray(inverse_permutation(jnp.asarray(order, jnp.int32)))
    want = np.argsort(order, axis=-1)  # numpy's argsort of a permutation is its inverse
    np.testing.assert_array_equal(inv, want)
    np.testing.assert_array_equal(np.take_along_axis(order, inv, -1), np.broadcast_to(np.arange(7), (2, 3, 7)))


def test_float64_scores_that_differ_only_in_their_last_bits_rank_exactly():
    # The CPU sort of 64-bit keys packs the index into the keys' lowest bits and
    # re-sorts the rows where that reordered keys: these rows need it.
    rng = np.random.default_rng(5)
    scores = np.concatenate([1.0 + rng.integers(0, 64, (3, 40)) * 2.0**-52, rng.standard_normal((3, 40))])
    ranks = jaxrank.hard("stable")(jnp.asarray(scores, jnp.float64))
    assert ranks.order.shape == scores.shape  # the full sort, not top-k
    want = np.argsort(-scores, axis=-1, kind="stable")
    np.testing.assert_array_equal(np.asarray(ranks.order), want)


@pytest.mark.parametrize("n", [1, 7, 33, 64, 97, 100, 1000, 1009])
def test_cumsum_and_row_sum_equal_numpys_for_any_list_length(n):
    # On CPU both are matmuls over blocks: lengths with and without a block size that divides
    # them, and with a tail summed apart (97 and 1009 have no divisor in (32, 64]).
    from jaxrank.ranking.backend import cumsum, row_sum

    x = np.random.default_rng(n).standard_normal((3, n))
    np.testing.assert_allclose(np.asarray(cumsum(jnp.asarray(x))), np.cumsum(x, axis=-1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(row_sum(jnp.asarray(x))), x.sum(-1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ties", ["stable", "pessimistic", "optimistic", "expected"])
@pytest.mark.parametrize("depth", [None, 4])
def test_prefix_sum_is_linear_with_the_cutoff_indicator(ties, depth):
    scores, labels, where = _tied_batch(5)
    g = np.where(where, labels * 0.37 + 0.1, 0.0)  # non-integer weights, zero when masked
    rng = np.random.default_rng(6)
    k = np.stack(
        [
            rng.integers(-1, 12, len(scores)),
            rng.uniform(0, 9, len(scores)),
            np.zeros(len(scores)),
            np.full(len(scores), 50.0),
        ],
        -1,
    )  # per-list, fractional, 0, past n
    ranks = jaxrank.hard(ties)(jnp.asarray(scores), jnp.asarray(where), depth=depth)
    got = ranks.prefix_sum(jnp.asarray(g), jnp.asarray(k))
    by_linear = ranks.linear(jnp.asarray(g), lambda pos: ranks.cutoff(pos[..., None], jnp.asarray(k)[..., None, :]))
    np.testing.assert_allclose(got, by_linear, rtol=1e-6, atol=1e-6)
    assert got.shape == k.shape


def test_prefix_sum_under_jit_and_vmap_with_padding():
    scores, labels, where = _tied_batch(7)
    g = np.where(where, labels, 0).astype(float)
    k = np.random.default_rng(8).integers(0, 9, (len(scores), 3)).astype(float)

    def one(s, w, gg, kk):
        return jaxrank.hard()(s, w).prefix_sum(gg, kk)

    plain = jax.jit(one)(scores, where, g, k)
    mapped = jax.vmap(one)(scores, where, g, k)
    pad = lambda a, v: np.concatenate([a, np.full(a.shape[:-1] + (5,), v, a.dtype)], -1)
    padded = jax.jit(one)(pad(scores, 9.0), pad(where, False), pad(g, 0.0), k)
    np.testing.assert_allclose(mapped, plain)
    np.testing.assert_allclose(padded, plain)


def _host_sorts(fn, *args) -> int:
    text = jax.jit(fn).lower(*args).compile().as_text()
    return sum("custom-call(" in line and "callback" in line for line in text.splitlines())


def test_metrics_called_one_by_one_in_one_jit_share_one_sort():
    rng = np.random.default_rng(9)
    scores, labels = rng.standard_normal((5, 300)), rng.integers(0, 3, (5, 300))

    def separately(s, y):
        return [
            jaxrank.precision(s, y),
            jaxrank.average_precision(s, y, k=100),
            jaxrank.err(s, y),
            jaxrank.r_precision(s, y),
        ]

    def shared(s, y):
        ranks = jaxrank.hard()(s, depth=None)
        return [
            jaxrank.precision(s, y, ranker=ranks),
            jaxrank.average_precision(s, y, k=100, ranker=ranks),
            jaxrank.err(s, y, ranker=ranks),
            jaxrank.r_precision(s, y, ranker=ranks),
        ]

    assert _host_sorts(separately, scores, labels) == 1
    np.testing.assert_allclose(jax.jit(separately)(scores, labels), jax.jit(shared)(scores, labels), rtol=1e-12)


def test_ranks_computed_inside_a_cond_branch_are_not_reused_outside_it():
    rng = np.random.default_rng(10)
    scores, labels = rng.standard_normal((3, 20)), rng.integers(0, 3, (3, 20))

    def fn(s, y, flag):
        inside = jax.lax.cond(flag, lambda: jaxrank.ndcg(s, y), lambda: jnp.zeros(3))
        return inside, jaxrank.ndcg(s, y)  # the same scores again, outside the branch

    inside, outside = jax.jit(fn)(scores, labels, True)
    np.testing.assert_allclose(inside, outside)
    np.testing.assert_allclose(outside, jaxrank.ndcg(scores, labels))


# given: ranks computed elsewhere -------------------------------------------------------------
@pytest.mark.parametrize("name", CUTOFF_METRICS)
@pytest.mark.parametrize("k", [None, 3])
def test_given_exact_ranks_with_the_cutoff_as_weights_are_the_hard_metric(name, k):
    """given(r, [r <= k]) with r the exact (stable) ranks reproduces every metric of
    hard() on padded lists with ties, under jit."""
    scores, labels, where = _tied_batch(seed=7)
    exact = jaxrank.hard()(jnp.asarray(scores), jnp.asarray(where))
    ranks = jnp.asarray(jaxrank.metrics.common.item_values(exact, lambda p: p, jnp.ones(scores.shape)))
    present = jnp.ones(scores.shape) if k is None else (ranks <= k).astype(jnp.float32)
    ranker = jaxrank.ranking.given(jnp.where(jnp.asarray(where), ranks, 1e6), present)
    want = _call(name, scores, labels, where, jaxrank.hard(), k)
    kwargs = dict(where=where, ranker=ranker, k=k)
    got = jax.jit(lambda s: getattr(jaxrank, name)(s, labels, **kwargs))(jnp.asarray(scores))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def test_given_ranks_take_the_gradient_through_the_position_function():
    # dcg = sum_i y_i c_i / log2(1 + r_i): d/dr_i = -y_i c_i / ((1 + r_i) ln2 log2(1 + r_i)^2)
    r, c, y = jnp.array([1.5, 2.0, 3.5]), jnp.array([1.0, 0.5, 0.0]), jnp.array([1.0, 2.0, 3.0])
    grad = jax.grad(lambda r: jaxrank.dcg(jnp.zeros(3), y, ranker=jaxrank.ranking.given(r, c)))(r)
    want = -y * c / ((1 + r) * np.log(2) * np.log2(1 + r) ** 2)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(want), rtol=1e-5)
    with pytest.raises(ValueError, match="given: ranks"):
        jaxrank.dcg(jnp.zeros(4), jnp.zeros(4), ranker=jaxrank.ranking.given(r))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_top_k_on_unmasked_scores_equals_the_keyed_top_k_with_zeros_nans_and_infinities(dtype):
    """Without a mask, the top-k path ranks the scores themselves and takes the keyed path
    for a batch whose top k holds a zero or a NaN: the same order either way."""
    rng = np.random.default_rng(11)
    special = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf], dtype)
    plain = np.round(rng.standard_normal((16, 30)), 1).astype(dtype) + 5  # ties, no zero
    mixed = plain.copy()
    hit = rng.random(mixed.shape) < 0.3
    mixed[hit] = rng.choice(special, size=int(hit.sum()))
    # one program per depth, shared by the four batches
    top_k_order = jax.jit(lambda a, depth: jaxrank.hard()(a, None, depth=depth).order, static_argnums=1)
    for scores in (plain, mixed, -np.abs(plain), np.where(plain > 5, np.nan, plain)):
        s = jnp.asarray(scores)
        all_valid = jnp.ones(s.shape, bool)  # a mask takes the keyed path
        for depth in (1, 5, 20):
            want = jaxrank.hard()(s, all_valid, depth=depth).order
            np.testing.assert_array_equal(np.asarray(top_k_order(s, depth)), np.asarray(want), err_msg=f"depth {depth}")
        per_row = jax.vmap(lambda a: jaxrank.hard()(a[None], None, depth=5).order[0])(s)
        np.testing.assert_array_equal(np.asarray(per_row), np.asarray(jaxrank.hard()(s, all_valid, depth=5).order))


def test_given_exact_positions_are_read_off_not_sorted_under_jit_and_vmap():
    """exact=True takes the order from the permutation itself: the same metrics as the
    sorted path, on padded lists with ties."""
    from jaxrank.losses import lists as _lists

    scores, labels, where = _tied_batch(seed=5)
    s, w = jnp.asarray(scores), jnp.asarray(where)
    pos = _lists.positions(s, w)  # 1..n, valid items first

    def both(p, s, labels=labels, w=w):
        out = []
        for exact in (False, True):
            ranker = jaxrank.ranking.given(p, (p <= 3).astype(p.dtype), exact=exact)
            out.append(
                [
                    jaxrank.average_precision(s, labels, where=w, ranker=ranker),
                    jaxrank.ndcg(s, labels, k=3, where=w, ranker=ranker),
                    jaxrank.err(s, labels, where=w, ranker=ranker),
                ]
            )
        return out

    sorted_, read = jax.jit(both)(pos, s)
    for a, b in zip(sorted_, read):
        np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-6)
    y = jnp.asarray(labels)
    # compiled: vmapped eagerly, every metric of both() would run op by op
    per_row = jax.jit(jax.vmap(lambda p, s, y, w: both(p[None], s[None], y[None], w[None])[1][0][0]))(pos, s, y, w)
    np.testing.assert_allclose(np.asarray(per_row), np.asarray(sorted_[0]), rtol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("branch", ["_scanned_recurrence", "_associative_recurrence"])
def test_both_linear_recurrence_branches_equal_the_loop_and_its_gradient(branch, reverse):
    # CPU takes the scan, GPU and TPU the associative scan: both run here, under jit and grad
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.0, 1.0, (3, 37)), rng.standard_normal((3, 37))

    def loop(a, b):
        x, out = 0.0, []
        for i in range(a.shape[-1])[:: -1 if reverse else 1]:
            x = b[..., i] + a[..., i] * x
            out.append(x)
        return jnp.stack(out[:: -1 if reverse else 1], axis=-1)

    fn = jax.jit(lambda a, b: getattr(_backend, branch)(a, b, reverse))
    np.testing.assert_allclose(fn(a, b), loop(a, b), rtol=1e-12, atol=1e-12)
    weights = rng.standard_normal((3, 37))
    got = jax.grad(lambda a, b: (fn(a, b) * weights).sum(), argnums=(0, 1))(a, b)
    want = jax.grad(lambda a, b: (loop(a, b) * weights).sum(), argnums=(0, 1))(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n", [5120, 6001])
def test_the_screened_top_k_of_long_rows_equals_lax_top_k(n):
    # GPU and TPU take the screened path (backend.top_k_order_of_scores): run here, under jit
    rng = np.random.default_rng(n)
    rows = [
        rng.standard_normal(n),
        np.round(rng.standard_normal(n), 1),  # ties across chunks
        np.round(0.3 * rng.standard_normal(n)),  # few values: most of the row tied
        np.full(n, 2.0),
        np.where(rng.random(n) < 0.999, -np.inf, rng.standard_normal(n)),  # fewer finite items than k
    ]
    x = jnp.asarray(np.stack(rows), jnp.float32)
    for depth in (1, 10):
        got = jax.jit(lambda x, depth=depth: _backend.screened_top_k(x, depth))(x)
        want = jax.lax.top_k(x, depth)
        np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
        np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))


def test_the_top_k_of_long_masked_rows_equals_the_keyed_order():
    # a row long enough for the screened path off CPU: both platform branches are traced here
    rng = np.random.default_rng(1)
    scores = np.round(rng.standard_normal((6, 9000)), 1).astype(np.float32)
    scores[1, :20] = 0.0  # zeros in the prefix: the keyed path
    where = rng.random(scores.shape) < 0.8
    where[2, 5:] = False  # fewer valid items than k
    got = jax.jit(lambda s, w: _backend.top_k_order_of_scores(s, 10, w))(scores, where)
    want = _backend.top_k_order(_backend.sort_key(jnp.asarray(scores), jnp.asarray(where)), 10)
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(want[0]))
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
