"""Losses: hand-computed values, masks, finite gradients, shapes."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxrank
from jaxrank import lambdaweights, losses

pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)

BASELINES = {
    "softmax_cross_entropy": losses.softmax_cross_entropy,
    "poly1_softmax": losses.poly1_softmax,
    "unique_softmax": losses.unique_softmax,
    "pairwise_logistic": losses.pairwise_logistic,
    "pairwise_hinge": losses.pairwise_hinge,
    "pairwise_soft_zero_one": losses.pairwise_soft_zero_one,
    "pairwise_qr": functools.partial(losses.pairwise_qr, tau=0.3),
    "pairwise_mse": losses.pairwise_mse,
    "lambda_loss": losses.lambda_loss,
    "listmle": losses.listmle,
    "pointwise_mse": losses.pointwise_mse,
    "pointwise_sigmoid": losses.pointwise_sigmoid,
    "pairwise_logistic[dcg]": functools.partial(
        losses.pairwise_logistic, lambdaweight=functools.partial(lambdaweights.dcg, topn=2)
    ),
    "pairwise_hinge[dcg2]": functools.partial(losses.pairwise_hinge, lambdaweight=lambdaweights.dcg2),
    "pairwise_soft_zero_one[labeldiff]": functools.partial(
        losses.pairwise_soft_zero_one, lambdaweight=lambdaweights.labeldiff
    ),
}
#: squared errors overflow at the huge scores of the finiteness test
SQUARED = {"pairwise_mse", "pointwise_mse"}
METRIC_LOSSES = {
    "ndcg_loss": lambda s, y, where=None: losses.ndcg_loss(s, y, k=2, where=where, ranker=jaxrank.approx(0.5)),
    "mrr_loss": lambda s, y, where=None: losses.mrr_loss(s, y, where=where, ranker=jaxrank.softrank(0.5)),
    "ap_loss": lambda s, y, where=None: losses.ap_loss(s, y, where=where, ranker=jaxrank.neuralsort(0.5)),
    "metric_loss": lambda s, y, where=None: losses.metric_loss(
        s, y, metric=jaxrank.recall, where=where, ranker=jaxrank.softsort(0.5), k=2
    ),
}
ALL = {**BASELINES, **METRIC_LOSSES}


def _softplus(x):
    return math.log1p(math.exp(x))


# Hand-computed values -------------------------------------------------------------
def test_softmax_cross_entropy_on_a_tiny_list():
    # p = (2/3, 1/3, 0); log softmax(1, 0, 0) = (1, 0, 0) - log(e + 2)
    want = -(2 / 3) * (1 - math.log(math.e + 2)) - (1 / 3) * (0 - math.log(math.e + 2))
    got = losses.softmax_cross_entropy(jnp.array([1.0, 0.0, 0.0]), jnp.array([2, 1, 0]))
    assert float(got) == pytest.approx(want, rel=1e-12)
    assert float(losses.softmax_cross_entropy(jnp.array([1.0, 0.0]), jnp.array([0, 0]))) == 0.0


def test_pairwise_logistic_on_a_tiny_list():
    # pairs with y_i > y_j: (0, 1): s diff 1; (2, 0): 1; (2, 1): 2
    want = 2 * _softplus(-1.0) + _softplus(-2.0)
    got = losses.pairwise_logistic(jnp.array([1.0, 0.0, 2.0]), jnp.array([1, 0, 2]))
    assert float(got) == pytest.approx(want, rel=1e-12)


def test_lambda_loss_on_a_tiny_list():
    # scores (0.5, 2, 1) rank the items (3, 1, 2); gains 2^y - 1 = (3, 0, 1);
    # ideal DCG = 3/log2(2) + 1/log2(3); D_r = log2(1 + r).
    inv_d = lambda r: 1 / math.log2(1 + r)
    idcg = 3 + inv_d(2)
    mu = 10.0
    pairs = [  # (rank_i, rank_j, G_i - G_j, s_i - s_j) for y_i > y_j
        (3, 1, 3 / idcg, -1.5),
        (3, 2, 2 / idcg, -0.5),
        (2, 1, 1 / idcg, -1.0),
    ]
    want = 0.0
    for ri, rj, dg, ds in pairs:
        rho = abs(inv_d(ri) - inv_d(rj))
        delta = abs(inv_d(abs(ri - rj)) - inv_d(abs(ri - rj) + 1))
        want += (rho + mu * delta) * dg * math.log2(1 + math.exp(-ds))
    got = losses.lambda_loss(jnp.array([0.5, 2.0, 1.0]), jnp.array([2, 0, 1]), mu=mu)
    assert float(got) == pytest.approx(want, rel=1e-12)


def test_listmle_on_a_tiny_list():
    # labels (0, 2, 1) order the items (1, 2, 0): scores in that order (2, 0, 1)
    want = (math.log(math.e**2 + 1 + math.e) - 2) + (math.log(1 + math.e) - 0) + (math.log(math.e) - 1)
    got = losses.listmle(jnp.array([1.0, 2.0, 0.0]), jnp.array([0, 2, 1]))
    assert float(got) == pytest.approx(want, rel=1e-12)


def test_metric_losses_are_one_minus_the_metric():
    scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 1, 1])
    cold = jaxrank.approx(1e-3, units="score")  # the default units keep T above a tenth of the spread
    # nDCG = (1/log2 3 + 1/log2 4) / (1 + 1/log2 3); RR = 1/2; AP = (1/2 + 2/3) / 2
    ndcg = (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))
    assert float(losses.ndcg_loss(scores, labels, ranker=cold)) == pytest.approx(1 - ndcg, abs=1e-9)
    assert float(losses.mrr_loss(scores, labels, ranker=cold)) == pytest.approx(0.5, abs=1e-9)
    assert float(losses.ap_loss(scores, labels, ranker=cold)) == pytest.approx(1 - 7 / 12, abs=1e-9)
    warm = jaxrank.approx(0.7)
    np.testing.assert_allclose(
        losses.metric_loss(scores, labels, metric=jaxrank.precision, ranker=warm, k=2),
        1 - jaxrank.precision(scores, labels, k=2, ranker=warm),
        rtol=1e-12,
    )


@pytest.mark.parametrize("loss", [losses.metric_loss, losses.ndcg_loss, losses.mrr_loss, losses.ap_loss])
@pytest.mark.parametrize(
    "ranker",
    [jaxrank.hard(), jaxrank.hard("pessimistic"), jaxrank.gumbel(jaxrank.hard(), key=jax.random.PRNGKey(0)), "ranks"],
)
def test_metric_losses_refuse_a_ranker_without_gradient(loss, ranker):
    # exact ranks have zero gradient wherever they have one: the loss would train nothing
    scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 1, 1])
    if ranker == "ranks":
        ranker = jaxrank.hard()(scores)  # precomputed exact Ranks
    with pytest.raises(ValueError, match=r"smooth ranker.*approx.*softrank.*neuralsort.*softsort.*gumbel"):
        loss(scores, labels, ranker=ranker)


def test_metric_losses_take_precomputed_smooth_ranks():
    # as the metrics do: Ranks of the same scores, computed once, stand for the ranker
    scores, labels = jnp.array([2.0, 1.0, 0.0]), jnp.array([0, 1, 1])
    ranker = jaxrank.approx(0.5)

    def with_ranks(s):
        return losses.ndcg_loss(s, labels, ranker=ranker(s))

    def with_ranker(s):
        return losses.ndcg_loss(s, labels, ranker=ranker)

    # one program (eagerly, every operation of the backward passes compiles alone)
    (got, grad), (want, g_want) = jax.jit(lambda s: [jax.value_and_grad(f)(s) for f in (with_ranks, with_ranker)])(
        scores
    )
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(grad, g_want)
    assert np.any(np.asarray(grad) != 0)


# Masks, shapes, gradients -------------------------------------------------------------
@pytest.mark.parametrize("name", list(ALL))
def test_masked_items_change_neither_values_nor_gradients(name):
    loss = ALL[name]
    rng = np.random.default_rng(0)
    scores = jnp.asarray(rng.normal(size=(3, 5)))
    labels = jnp.asarray(np.maximum(rng.integers(0, 3, (3, 5)), np.eye(3, 5, dtype=int)))
    slots = np.array([0, 2, 3, 5, 7])  # real items among 8 slots
    big_s = np.full((3, 8), -np.inf)
    big_y = rng.integers(0, 5, (3, 8))
    big_w = np.zeros((3, 8), bool)
    big_s[:, slots], big_y[:, slots], big_w[:, slots] = scores, labels, True

    def total(s, y, w):
        return jnp.sum(loss(s, y, where=w))

    @jax.jit  # both inputs in one program (each program costs a compilation)
    def values_and_grads(inputs):
        return [jax.value_and_grad(total)(*args) for args in inputs]

    (v1, g1), (v2, g2) = values_and_grads(
        [(scores, labels, jnp.ones((3, 5), bool)), (jnp.asarray(big_s), jnp.asarray(big_y), jnp.asarray(big_w))]
    )
    np.testing.assert_allclose(v2, v1, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(g2)[:, slots], g1, rtol=1e-8, atol=1e-12)
    assert np.all(np.delete(np.asarray(g2), slots, axis=1) == 0)


@pytest.mark.parametrize("name", [name for name in ALL if name not in SQUARED])
def test_losses_have_one_value_per_list_and_finite_gradients(name):
    loss = ALL[name]
    rows = [
        ([0.3, -1.2, 2.0, 0.1], [1, 0, 2, 0], [1, 1, 1, 1]),
        ([0.3, -1.2, 2.0, 0.1], [1, 0, 2, 0], [0, 0, 0, 0]),  # fully masked
        ([0.3, -1.2, 2.0, 0.1], [0, 0, 0, 0], [1, 1, 1, 1]),  # all-zero labels
        ([1.0, 1.0, 1.0, 1.0], [1, 0, 2, 0], [1, 1, 1, 1]),  # ties
        ([1e30, -1e30, 3e29, -2e30], [1, 0, 2, 0], [1, 1, 0, 1]),  # huge scores
        ([0.0, 5.0, 0.0, -5.0], [3, 0, 1, 0], [1, 0, 1, 1]),
    ]
    labels = jnp.asarray([r[1] for r in rows])
    where = jnp.asarray([r[2] for r in rows], bool)

    dtypes = (jnp.float64, jnp.float32, jnp.bfloat16)

    @jax.jit  # every dtype and the batch in one program (each program costs a compilation)
    def values_and_grads(by_dtype, batch):
        out = []
        for s in by_dtype:
            values, pullback = jax.vjp(lambda x: loss(x, labels, where=where), s)
            out.append((pullback(jnp.ones_like(values))[0], values))  # the gradient of the sum
        return out, loss(*batch)

    by_dtype = [jnp.asarray([r[0] for r in rows], dtype) for dtype in dtypes]
    out, batched = values_and_grads(by_dtype, (jnp.zeros((2, 3, 4)), jnp.ones((2, 3, 4))))
    for dtype, (grad, values) in zip(dtypes, out):
        assert values.shape == (len(rows),)
        assert grad.dtype == dtype
        assert np.all(np.isfinite(np.asarray(values, np.float64))), (name, dtype, values)
        assert np.all(np.isfinite(np.asarray(grad, np.float64))), (name, dtype, grad)
        assert np.all(np.asarray(grad, np.float64)[1] == 0)  # nothing valid: no gradient
    assert batched.shape == (2, 3)


@pytest.mark.parametrize("name", list(BASELINES))
def test_baseline_losses_prefer_the_right_order(name):
    loss = BASELINES[name]
    labels = jnp.array([2, 1, 0])
    assert float(loss(jnp.array([3.0, 2.0, 1.0]), labels)) < float(loss(jnp.array([1.0, 2.0, 3.0]), labels))


# segments= and weights= ----------------------------------------------------------------------
def _values_and_grad_of_total(f, scores):
    """``f(scores)`` and the gradient of its sum (one backward pass)."""
    values, vjp = jax.vjp(f, scores)
    return values, vjp(jnp.ones_like(values))[0]


@pytest.mark.parametrize("name", list(BASELINES))
def test_packed_segments_equal_the_lists_padded_apart(name):
    loss = BASELINES[name]
    rng = np.random.default_rng(len(name))
    sizes = (3, 5, 2)
    # interleaved (unsorted) segment ids, a masked item, and a segment of one item
    seg = np.array([7, 2, 7, 2, 2, 7, 2, 2, 0, 9, 0, 4])
    where = seg != 9
    assert [np.sum((seg == g) & where) for g in (7, 2, 0)] == list(sizes)
    scores = rng.normal(size=seg.shape)
    labels = rng.integers(0, 4, seg.shape).astype(float)
    weights = rng.uniform(0.5, 2.0, seg.shape)
    takes_weights = "listmle" not in name and "lambda_loss" not in name

    def packed(s, **kw):
        if takes_weights:
            kw["weights"] = jnp.asarray(weights)
        return loss(s, jnp.asarray(labels), where=jnp.asarray(where), segments=jnp.asarray(seg), **kw)

    def apart(s):
        rows = [np.flatnonzero((seg == g) & where) for g in (7, 2, 0, 4)]
        n = max(map(len, rows))
        idx = np.array([np.pad(r, (0, n - len(r))) for r in rows])
        mask = np.array([np.arange(n) < len(r) for r in rows])
        kw = dict(weights=jnp.asarray(weights[idx])) if takes_weights else {}
        return loss(s[idx], jnp.asarray(labels[idx]), where=jnp.asarray(mask), **kw)

    @jax.jit  # one program for both ways and num_segments=4 (each program costs a compilation)
    def both_ways(s):
        return dict(
            packed=_values_and_grad_of_total(packed, s),
            apart=_values_and_grad_of_total(apart, s),
            four=packed(s, num_segments=4),
        )

    out = both_ways(jnp.asarray(scores))
    (got, g_got), (want, g_want) = out["packed"], out["apart"]
    assert got.shape == seg.shape  # num_segments defaults to n: one slot per item
    # slots in ascending id: 0, 2, 4, 7; the other slots empty
    np.testing.assert_allclose(np.asarray(got)[:4], np.asarray(want)[[2, 1, 3, 0]], rtol=1e-10, atol=1e-12)
    assert np.all(np.asarray(got)[4:] == 0)
    np.testing.assert_allclose(out["four"], got[:4], rtol=1e-12)
    np.testing.assert_allclose(g_got, g_want, rtol=1e-10, atol=1e-12)


def test_more_lists_than_num_segments_is_an_error_or_nan_under_jit():
    s, y, seg = jnp.arange(4.0), jnp.array([1.0, 0, 1, 0]), jnp.array([0, 0, 1, 2])
    with pytest.raises(ValueError, match="num_segments"):
        losses.softmax_cross_entropy(s, y, segments=seg, num_segments=2)
    out = jax.jit(lambda a, g: losses.pairwise_logistic(a, y, segments=g, num_segments=2))(s, seg)
    assert np.all(np.isnan(np.asarray(out)))
    with pytest.raises(ValueError, match="segments"):
        losses.listmle(s, y, segments=jnp.zeros(4))


def test_unit_weights_change_nothing_and_pointwise_weights_count_items():
    rng = np.random.default_rng(3)
    s, y = jnp.asarray(rng.normal(size=(2, 6))), jnp.asarray(rng.integers(0, 3, (2, 6)).astype(float))
    # no weights= in listmle and lambda_loss (as in rax)
    weighted = {name: loss for name, loss in BASELINES.items() if "listmle" not in name and "lambda_loss" not in name}
    w = jnp.array([[2.0, 1, 1, 1, 1, 1]] * 2)
    twice = jnp.concatenate([s[:, :1], s], axis=1), jnp.concatenate([y[:, :1], y], axis=1)
    pointwise = {"pointwise_mse": losses.pointwise_mse, "pointwise_sigmoid": losses.pointwise_sigmoid}

    @jax.jit  # one program for every loss (eagerly, each operation compiles alone)
    def pairs(s, y, twice):
        unit = {name: (loss(s, y, weights=jnp.ones((2, 6))), loss(s, y)) for name, loss in weighted.items()}
        counted = {name: (loss(s, y, weights=w), loss(*twice)) for name, loss in pointwise.items()}
        return unit, counted

    for out in pairs(s, y, twice):
        for name, (got, want) in out.items():
            np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=name)


def test_lambdaweights_are_the_ndcg_change_of_a_swap():
    # lambdaweights.dcg(normalize=True)[i, j] = |nDCG(after swapping i and j) - nDCG|
    rng = np.random.default_rng(5)
    s, y = rng.normal(size=6), rng.integers(0, 4, 6).astype(float)
    swaps = np.repeat(s[None, None], 6, 0).repeat(6, 1)  # [i, j]: s with items i and j swapped
    i, j = np.indices((6, 6))
    swaps[i, j, i], swaps[i, j, j] = s[j], s[i]

    @jax.jit  # one program (eagerly, each operation compiles alone)
    def weights_and_ndcgs(s, y, swaps):
        ndcg = functools.partial(jaxrank.ndcg, gain="exp")
        return lambdaweights.dcg(s, y), ndcg(s, y), ndcg(swaps, jnp.broadcast_to(y, swaps.shape))

    w, base, swapped = weights_and_ndcgs(jnp.asarray(s), jnp.asarray(y), jnp.asarray(swaps))
    np.testing.assert_allclose(w, np.abs(np.asarray(swapped) - float(base)), rtol=0, atol=1e-12)


def test_lambda_loss_rejects_an_unknown_gain():
    with pytest.raises(ValueError):
        losses.lambda_loss(jnp.zeros(3), jnp.zeros(3), gain="cubic")


def test_losses_check_their_inputs():
    with pytest.raises(ValueError):
        losses.listmle(jnp.zeros(3), jnp.zeros(4))
    with pytest.raises(ValueError):
        losses.pairwise_logistic(jnp.zeros(3, jnp.int32), jnp.zeros(3))


# Pairwise losses in row blocks --------------------------------------------------------------
PAIR_LOSSES = {
    "logistic": losses.pairwise_logistic,
    "hinge": losses.pairwise_hinge,
    "soft_zero_one": losses.pairwise_soft_zero_one,
    "mse": losses.pairwise_mse,
    "qr": functools.partial(losses.pairwise_qr, tau=0.3, squared=True),
}
PAIR_WEIGHTS = {
    "none": None,
    "dcg": functools.partial(lambdaweights.dcg, topn=3),
    "dcg2": lambdaweights.dcg2,
    "labeldiff": lambdaweights.labeldiff,
}


def _every_pair_at_once(loss, lambdaweight):
    """The same loss through a lambdaweight without a PairWeight form: the [..., n, n] path."""
    if lambdaweight is None:
        return functools.partial(loss, lambdaweight=lambda s, y, **kw: jnp.ones(s.shape + s.shape[-1:]))

    def opaque(scores, labels, **kwargs):
        return lambdaweight(scores, labels, **kwargs)

    return functools.partial(loss, lambdaweight=opaque)


@pytest.mark.parametrize("weight", list(PAIR_WEIGHTS))
@pytest.mark.parametrize("name", list(PAIR_LOSSES))
def test_pairwise_losses_in_row_blocks_equal_every_pair_at_once(monkeypatch, name, weight):
    # 7 rows per block over lists of 40: 6 blocks, the last padded
    monkeypatch.setattr(losses.pairwise, "PAIRS_PER_LIST", 7 * 40)
    rng = np.random.default_rng(len(name) + len(weight))
    shape = (2, 3, 40)
    s = jnp.asarray(rng.normal(size=shape) * 2)
    y = jnp.asarray(rng.integers(0, 4, shape).astype(float))
    kwargs = dict(
        where=jnp.asarray(rng.random(shape) < 0.8),
        segments=jnp.asarray(np.sort(rng.integers(0, 4, shape), axis=-1)),
        weights=jnp.asarray(rng.uniform(0.5, 2.0, shape)),
    )
    lambdaweight = PAIR_WEIGHTS[weight]
    blocked = functools.partial(PAIR_LOSSES[name], lambdaweight=lambdaweight)
    at_once = _every_pair_at_once(PAIR_LOSSES[name], lambdaweight)
    assert losses.pairwise._row_blocks(6, 40) == 7
    key_sets = ((), ("where",), ("where", "segments"), ("weights",), ("where", "segments", "weights"))

    @jax.jit  # one program for every keyword set and both ways: eagerly, each operation compiles alone
    def both_ways(s, kwargs):
        out = []
        for keys in key_sets:
            kw = {k: kwargs[k] for k in keys}
            # the gradient in the weights too, where lambdaweights (which carry none) are off
            wrt = dict(scores=s)
            if "weights" in kw and lambdaweight is None:
                wrt["weights"] = kw.pop("weights")
            case = {}
            for way, loss in (("blocked", blocked), ("at_once", at_once)):
                values, pullback = jax.vjp(lambda d, loss=loss, kw=kw: loss(labels=y, **d, **kw), wrt)
                # a projection of the per-list values: every list's gradient counts
                (grads,) = pullback(jnp.cos(jnp.arange(values.size).reshape(values.shape)))
                case[way] = dict(values=values, **grads)
            out.append(case)
        return out

    tolerances = dict(values=(1e-10, 1e-10), scores=(1e-9, 1e-10), weights=(1e-9, 1e-10))
    for keys, case in zip(key_sets, both_ways(s, kwargs)):
        for what, want in case["at_once"].items():
            rtol, atol = tolerances[what]
            np.testing.assert_allclose(case["blocked"][what], want, rtol=rtol, atol=atol, err_msg=f"{what} {keys}")


def test_pairwise_losses_have_forward_mode_derivatives_too():
    s, y = jnp.array([0.3, -1.0, 2.0, 0.5]), jnp.array([1.0, 0.0, 2.0, 0.0])
    fn = functools.partial(losses.pairwise_logistic, lambdaweight=lambdaweights.dcg)
    # compiled: eagerly, each operation of the two derivatives compiles alone
    np.testing.assert_allclose(jax.jit(jax.jacfwd(fn))(s, y), jax.jit(jax.grad(fn))(s, y), rtol=1e-12)


def _temp_mib(fn, *shapes) -> float:
    specs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in shapes]
    compiled = jax.jit(jax.value_and_grad(fn)).lower(*specs).compile()
    return compiled.memory_analysis().temp_size_in_bytes / 2**20


@pytest.mark.parametrize("lambdaweight", [None, lambdaweights.dcg])
def test_pairwise_losses_never_hold_every_pair(lambdaweight):
    # [16, 4096] float32: every pair is 1 GiB; the blocks keep value and gradient far below
    batch, n = 16, 4096
    f32, i32, b = jnp.float32, jnp.int32, jnp.bool_

    def mean_loss(s, y, where, segments):
        return jnp.mean(
            losses.pairwise_logistic(s, y, where=where, segments=segments, num_segments=8, lambdaweight=lambdaweight)
        )

    shapes = [((batch, n), f32), ((batch, n), f32), ((batch, n), b), ((batch, n), i32)]
    assert _temp_mib(mean_loss, *shapes) < 128


# The README's soft loss (issue 11) --------------------------------------------------------
# The README's call uses the default ranker; the others are the explicit settings users pass.
README_RANKERS = [jaxrank.softsort(), jaxrank.softrank(0.5), jaxrank.softrank(0.01), jaxrank.approx(0.1)]


def _readme_batch(seed=0):
    """[64, 200] lists: grades 1..4 on about 10% of the items, 5% padding."""
    rng = np.random.default_rng(seed)
    labels = jnp.asarray(rng.integers(1, 5, (64, 200)) * (rng.random((64, 200)) < 0.1))
    where = jnp.asarray(rng.random((64, 200)) < 0.95)
    return jnp.asarray(rng.normal(size=(64, 200)), jnp.float32), labels, where


@functools.partial(jax.jit, static_argnames="ranker")
def _readme_loss_and_grad(scores, labels, where, ranker):
    """The README's recipe: the mean over lists of 1 - soft nDCG@10."""
    return jax.value_and_grad(lambda s: losses.metric_loss(s, labels, where=where, ranker=ranker, k=10).mean())(scores)


@pytest.mark.parametrize("ranker", README_RANKERS, ids=repr)
def test_the_readme_soft_loss_has_a_gradient_at_every_score_scale(ranker):
    # Before the scale-aware defaults: loss exactly 1 and a zero gradient at std 0.06, 0.56, 5.6.
    base, labels, where = _readme_batch()
    for std in (0.01, 0.06, 0.56, 5.6, 100.0):
        loss, grad = _readme_loss_and_grad(base * std, labels, where, ranker)
        grad = np.asarray(grad)
        assert float(loss) < 0.99 and np.all(np.isfinite(grad)), (ranker, std, loss)
        per_list = np.linalg.norm(grad, axis=-1)
        # softrank(0.01) is l2 below the gaps of most neighbours: exact (piecewise constant)
        # ranks on parts of a list, so some lists can have no gradient; the batch has one.
        assert np.all(per_list > 0) if getattr(ranker, "strength", None) != 0.01 else np.sum(per_list > 0) > 32, (
            ranker,
            std,
        )
        assert np.all(grad[~np.asarray(where)] == 0)


def test_the_readme_soft_loss_trains_from_small_random_scores():
    base, labels, where = _readme_batch(seed=1)
    scores = base * 0.01  # normal(0, 0.01): the scale that gave a zero gradient
    ranker = README_RANKERS[0]

    @jax.jit  # compiled once for the two calls (eagerly, each operation compiles alone)
    def exact(s):
        return jnp.mean(jaxrank.ndcg(s, labels, k=10, where=where))

    opt = optax.adam(0.01)
    state = opt.init(scores)
    before, losses_seen = float(exact(scores)), []
    for _ in range(5):
        loss, grad = _readme_loss_and_grad(scores, labels, where, ranker)
        updates, state = opt.update(grad, state)
        scores = optax.apply_updates(scores, updates)
        losses_seen.append(float(loss))
    after = float(exact(scores))
    assert after > before + 0.2, (before, after)
    assert losses_seen[-1] < losses_seen[0]
