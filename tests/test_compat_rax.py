"""jaxrank.compat.rax against rax 0.4 itself: values and gradients on random lists, every
keyword combination rax takes, under jit, vmap and grad. Inputs are float32 (rax's dtype)."""

import functools
import itertools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rax

from jaxrank.compat import rax as jr

TOL = dict(rtol=2e-5, atol=2e-5)


@pytest.fixture(autouse=True)
def _jax_util_wraps(monkeypatch):
    """rax's transformations decorate with ``jax.util.wraps``, gone from current jax."""

    def wraps(wrapped, namestr=None, docstr=None, **_):
        return functools.wraps(wrapped)

    if not hasattr(jax, "util") or not hasattr(jax.util, "wraps"):
        monkeypatch.setattr(jax, "util", types.SimpleNamespace(wraps=wraps), raising=False)


def _lists(seed, shape=(3, 7), segments=False):
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=shape).astype(np.float32) * 2
    labels = rng.integers(0, 4, size=shape).astype(np.float32)
    where = rng.random(shape) < 0.8
    where[..., :2] = True  # every list (and the first segment) keeps valid items
    weights = rng.uniform(0.2, 2.0, size=shape).astype(np.float32)
    segs = np.sort(rng.integers(0, 3, size=shape), axis=-1) if segments else None
    if segments:
        # every segment keeps a valid item: the first item of each segment is valid
        first = np.concatenate([np.ones(shape[:-1] + (1,), bool), segs[..., 1:] != segs[..., :-1]], axis=-1)
        where |= first
    return dict(scores=scores, labels=labels, where=where, weights=weights, segments=segs)


def _kwargs(data, use_where, use_segments, use_weights):
    out = {}
    if use_where:
        out["where"] = jnp.asarray(data["where"])
    if use_segments:
        out["segments"] = jnp.asarray(data["segments"])
    if use_weights:
        out["weights"] = jnp.asarray(data["weights"])
    return out


def _compare(ours, theirs, scores, labels, kwargs):
    s, y = jnp.asarray(scores), jnp.asarray(labels)
    want = theirs(s, y, **kwargs)
    got = ours(s, y, **kwargs)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL)
    if np.ndim(want) == 0:
        g_want = jax.grad(lambda x: theirs(x, y, **kwargs))(s)
        g_got = jax.grad(lambda x: ours(x, y, **kwargs))(s)
        assert np.all(np.isfinite(g_got))
        # rax's segmented ListMLE has NaN gradients on lists with masked items; elsewhere equal
        finite = np.isfinite(np.asarray(g_want))
        np.testing.assert_allclose(np.asarray(g_got)[finite], np.asarray(g_want)[finite], **TOL)


LOSSES = [
    "softmax_loss",
    "poly1_softmax_loss",
    "unique_softmax_loss",
    "listmle_loss",
    "pairwise_hinge_loss",
    "pairwise_logistic_loss",
    "pairwise_mse_loss",
    "pairwise_qr_loss",
    "pairwise_soft_zero_one_loss",
    "pointwise_mse_loss",
    "pointwise_sigmoid_loss",
]
NO_WEIGHTS = {"listmle_loss"}
REDUCE = {"mean": jnp.mean, "sum": jnp.sum, "none": None}


@pytest.mark.parametrize("name", LOSSES)
def test_losses_match_rax_on_every_keyword_combination(name):
    ours, theirs = getattr(jr, name), getattr(rax, name)
    data = _lists(hash(name) % 1000, segments=True)
    flags = itertools.product([False, True], [False, True], [False, name not in NO_WEIGHTS])
    for i, (use_where, use_segments, use_weights) in enumerate(sorted(set(flags))):
        kwargs = _kwargs(data, use_where, use_segments, use_weights)
        reduce_name = list(REDUCE)[i % 3]
        kwargs["reduce_fn"] = REDUCE[reduce_name]
        if name == "poly1_softmax_loss" and use_where and use_segments:
            # rax's poly1 cannot broadcast its empty-list test over a batch with segments:
            # compare list by list
            kwargs.pop("reduce_fn")
            theirs_one = jax.vmap(lambda s, y, kw: rax.poly1_softmax_loss(s, y, reduce_fn=None, **kw))
            theirs = lambda s, y, **kw: jnp.sum(theirs_one(s, y, kw))  # noqa: E731
            ours = lambda s, y, **kw: jnp.sum(jr.poly1_softmax_loss(s, y, reduce_fn=None, **kw))  # noqa: E731
        _compare(ours, theirs, data["scores"], data["labels"], kwargs)


@pytest.mark.parametrize(
    "name, extra",
    [
        ("poly1_softmax_loss", dict(epsilon=0.3)),
        ("unique_softmax_loss", dict(gain_fn=None)),
        ("unique_softmax_loss", dict(gain_fn=lambda y: y + 1.0)),
        ("pairwise_qr_loss", dict(tau=0.2, squared=True)),
        ("softmax_loss", dict(label_fn=None)),  # rax.utils.normalize_probabilities, below
    ],
)
def test_loss_options_match_rax(name, extra):
    data = _lists(7)
    kwargs = dict(where=jnp.asarray(data["where"]), weights=jnp.asarray(data["weights"]), **extra)
    theirs_kwargs = dict(kwargs)
    if "label_fn" in extra:
        kwargs["label_fn"] = jr.utils.normalize_probabilities
        theirs_kwargs["label_fn"] = rax.utils.normalize_probabilities
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    got, want = getattr(jr, name)(s, y, **kwargs), getattr(rax, name)(s, y, **theirs_kwargs)
    np.testing.assert_allclose(float(got), float(want), **TOL)


def test_listmle_with_a_key_breaks_ties_as_rax():
    data = _lists(3)
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])  # labels in 0..3: ties
    for seed in range(3):
        key = jax.random.PRNGKey(seed)
        want = rax.listmle_loss(s, y, key=key, reduce_fn=None)
        got = jr.listmle_loss(s, y, key=key, reduce_fn=None)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL)


LAMBDAWEIGHTS = ["labeldiff_lambdaweight", "dcg_lambdaweight", "dcg2_lambdaweight"]
PAIRWISE = ["pairwise_logistic_loss", "pairwise_hinge_loss", "pairwise_qr_loss"]


@pytest.mark.parametrize("lw", LAMBDAWEIGHTS)
def test_pairwise_losses_with_lambdaweights_match_rax(lw):
    data = _lists(11, segments=True)
    options = [dict()]
    if lw != "labeldiff_lambdaweight":
        options += [dict(topn=3), dict(normalize=True, topn=2), dict(gain_fn=lambda y: y, discount_fn=lambda r: 1 / r)]
    if lw == "dcg2_lambdaweight":
        options.append(dict(light_discount=True, normalize=True))
    for i, (loss, opts) in enumerate(itertools.product(PAIRWISE, options)):
        # segments with normalize: rax divides only the first item of each segment
        # by its ideal DCG (see test_rax_normalised_segments_quirk)
        use_segments = i % 2 == 1 and not opts.get("normalize")
        kwargs = _kwargs(data, True, use_segments, i % 3 == 0)
        ours = functools.partial(getattr(jr, loss), lambdaweight_fn=functools.partial(getattr(jr, lw), **opts))
        theirs = functools.partial(getattr(rax, loss), lambdaweight_fn=functools.partial(getattr(rax, lw), **opts))
        _compare(ours, theirs, data["scores"], data["labels"], kwargs)


@pytest.mark.parametrize("lw", LAMBDAWEIGHTS)
def test_lambdaweights_match_rax_on_valid_pairs(lw):
    data = _lists(5, segments=True)
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    where = jnp.asarray(data["where"])
    for use_segments, use_weights in itertools.product([False, True], [False, True]):
        kwargs = _kwargs(data, True, use_segments, use_weights)
        want = np.asarray(getattr(rax, lw)(s, y, **kwargs))
        got = np.asarray(getattr(jr, lw)(s, y, **kwargs))
        # rax's labeldiff keeps |y_i - y_j| on pairs of two invalid items; jaxrank gives 0
        pairs = np.asarray(where[..., :, None] & where[..., None, :]).reshape(want.shape)
        np.testing.assert_allclose(got[pairs], want[pairs], **TOL)
        assert np.all(got[~pairs] == 0)


def test_rax_normalised_segments_quirk():
    # rax's normalised DCG lambdaweights with segments divide the gains of the first item
    # of each segment only by the segment's ideal DCG (the others' ideal DCG reads 0,
    # replaced by 1); jaxrank normalises every item, so that packing equals padding apart.
    s = jnp.array([1.0, 0.0, 2.0, 0.5])
    y = jnp.array([2.0, 1.0, 1.0, 3.0])
    seg = jnp.array([0, 0, 1, 1])
    ours = jr.dcg_lambdaweight(s, y, segments=seg, normalize=True).reshape(4, 4)
    first = jr.dcg_lambdaweight(s[:2], y[:2], normalize=True).reshape(2, 2)
    second = jr.dcg_lambdaweight(s[2:], y[2:], normalize=True).reshape(2, 2)
    # rax scales by the padded list size: 4 packed, 2 apart
    np.testing.assert_allclose(np.asarray(ours[:2, :2]), 2 * np.asarray(first), **TOL)
    np.testing.assert_allclose(np.asarray(ours[2:, 2:]), 2 * np.asarray(second), **TOL)
    theirs = rax.dcg_lambdaweight(s, y, segments=seg, normalize=True).reshape(4, 4)
    assert not np.allclose(np.asarray(theirs[:2, :2]), 2 * np.asarray(first))


@pytest.mark.parametrize("name", ["softmax_loss", "pairwise_logistic_loss", "listmle_loss", "unique_softmax_loss"])
def test_jit_and_vmap_match_rax(name):
    data = _lists(21, segments=True)
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    where, segs = jnp.asarray(data["where"]), jnp.asarray(data["segments"])
    ours, theirs = getattr(jr, name), getattr(rax, name)
    per_list = jax.vmap(lambda a, b, w, g: ours(a, b, where=w, segments=g))
    want = jax.vmap(lambda a, b, w, g: theirs(a, b, where=w, segments=g))(s, y, where, segs)
    np.testing.assert_allclose(np.asarray(jax.jit(per_list)(s, y, where, segs)), np.asarray(want), **TOL)
    g_ours = jax.jit(jax.grad(lambda a: jnp.sum(per_list(a, y, where, segs))))(s)
    g_theirs = jax.grad(
        lambda a: jnp.sum(jax.vmap(lambda a, b, w, g: theirs(a, b, where=w, segments=g))(a, y, where, segs))
    )(s)
    finite = np.isfinite(np.asarray(g_theirs))  # as in _compare
    assert np.all(np.isfinite(np.asarray(g_ours)))
    np.testing.assert_allclose(np.asarray(g_ours)[finite], np.asarray(g_theirs)[finite], **TOL)


def test_rank_helpers_match_rax():
    data = _lists(2, segments=True)
    s = jnp.asarray(data["scores"]).at[0, 3].set(data["scores"][0, 5])  # a tie
    where, segs = jnp.asarray(data["where"]), jnp.asarray(data["segments"])
    for kwargs in (dict(), dict(where=where), dict(segments=segs), dict(where=where, segments=segs)):
        np.testing.assert_array_equal(np.asarray(jr.utils.ranks(s, **kwargs)), np.asarray(rax.utils.ranks(s, **kwargs)))
        for n in (None, 3):
            np.testing.assert_array_equal(
                np.asarray(jr.utils.cutoff(s, n, **kwargs)), np.asarray(rax.utils.cutoff(s, n, **kwargs))
            )
        got, want = jr.utils.approx_ranks(s, **kwargs), rax.utils.approx_ranks(s, **kwargs)
        valid = np.asarray(where) if "where" in kwargs else np.ones(s.shape, bool)
        np.testing.assert_allclose(np.asarray(got)[valid], np.asarray(want)[valid], **TOL)
    key = jax.random.PRNGKey(4)
    np.testing.assert_array_equal(np.asarray(jr.utils.ranks(s, key=key)), np.asarray(rax.utils.ranks(s, key=key)))
    y = jnp.asarray(data["labels"]) * jnp.asarray(data["labels"] > 1)  # lists of zeros too
    for kwargs in (dict(), dict(where=where), dict(where=where, segments=segs)):
        # on valid items: rax leaves label / total on masked items, jaxrank 0
        valid = np.asarray(where) if "where" in kwargs else np.ones(s.shape, bool)
        np.testing.assert_allclose(
            np.asarray(jr.utils.normalize_probabilities(y, **kwargs))[valid],
            np.asarray(rax.utils.normalize_probabilities(y, **kwargs))[valid],
            **TOL,
        )
    with pytest.raises(ValueError, match="step_fn"):
        jr.utils.approx_ranks(s, step_fn=jax.nn.relu)


def test_approx_cutoff_matches_rax():
    """Values and gradients of rax's soft top-n, with the step functions of approx_t12n and
    bound_t12n, every combination of where and segments, n from none to past the list."""
    data = _lists(5, segments=True)
    s = jnp.asarray(data["scores"]).at[1, 2].set(data["scores"][1, 4])  # a tie
    where, segs = jnp.asarray(data["where"]), jnp.asarray(data["segments"])
    steps = (jax.nn.sigmoid, lambda x: jax.nn.sigmoid(x / 0.5), lambda x: 1.0 - jax.nn.relu(1.0 - x))
    for kwargs in (dict(), dict(where=where), dict(segments=segs), dict(where=where, segments=segs)):
        for n in (None, 0, 1, 3, 7):
            for step in steps:
                ours = jax.jit(lambda a, n=n, step=step, kw=kwargs: jr.utils.approx_cutoff(a, n, step_fn=step, **kw))
                theirs = lambda a, n=n, step=step, kw=kwargs: rax.utils.approx_cutoff(a, n, step_fn=step, **kw)
                np.testing.assert_allclose(ours(s), theirs(s), **TOL, err_msg=f"{kwargs.keys()} {n}")
                weights = jnp.arange(s.size, dtype=s.dtype).reshape(s.shape) / s.size
                grad = lambda f: jax.grad(lambda a: jnp.sum(weights * f(a)))(s)
                np.testing.assert_allclose(grad(ours), grad(theirs), **TOL, err_msg=f"grad {kwargs.keys()} {n}")


def test_transformations_match_rax():
    data = _lists(9, segments=True)
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    where, segs = jnp.asarray(data["where"]), jnp.asarray(data["segments"])
    key = jax.random.PRNGKey(1)
    for smoothing in (None, 0.1):
        ours = jr.gumbel_t12n(jr.softmax_loss, samples=3, smoothing_factor=smoothing)
        theirs = rax.gumbel_t12n(rax.softmax_loss, samples=3, smoothing_factor=smoothing)
        np.testing.assert_allclose(
            float(ours(s, y, where=where, key=key)), float(theirs(s, y, where=where, key=key)), **TOL
        )
    # a listmle inside takes a key of its own: the split must match too
    ours = jr.gumbel_t12n(jr.listmle_loss, samples=2)
    theirs = rax.gumbel_t12n(rax.listmle_loss, samples=2)
    np.testing.assert_allclose(float(ours(s, y, key=key)), float(theirs(s, y, key=key)), **TOL)

    # segment_t12n: a function without segments= gets the [..., n, n] rows
    def plain(scores, labels, *, where=None, reduce_fn=jnp.mean):
        return jr.softmax_loss(scores, labels, where=where, reduce_fn=reduce_fn)

    def plain_rax(scores, labels, *, where=None, reduce_fn=jnp.mean):
        return rax.softmax_loss(scores, labels, where=where, reduce_fn=reduce_fn)

    got = jr.segment_t12n(plain)(s, y, segments=segs, where=where)
    want = rax.segment_t12n(plain_rax)(s, y, segments=segs, where=where)
    np.testing.assert_allclose(float(got), float(want), **TOL)
    np.testing.assert_allclose(float(got), float(jr.softmax_loss(s, y, segments=segs, where=where)), **TOL)
    assert jr.segment_t12n(jr.softmax_loss) is jr.softmax_loss


def test_every_rax_loss_lambdaweight_and_helper_has_rax_signature():
    import inspect

    for name in LOSSES + LAMBDAWEIGHTS + ["gumbel_t12n", "segment_t12n"]:
        ours, theirs = inspect.signature(getattr(jr, name)), inspect.signature(getattr(rax, name))
        assert list(ours.parameters) == list(theirs.parameters), name
        for p in theirs.parameters.values():
            q = ours.parameters[p.name]
            assert q.kind == p.kind, (name, p.name)
            if p.default is not inspect.Parameter.empty and not callable(p.default):
                assert q.default == p.default, (name, p.name)
    for name in ("ranks", "approx_ranks", "cutoff", "normalize_probabilities", "safe_reduce", "compute_pairs"):
        ours, theirs = inspect.signature(getattr(jr.utils, name)), inspect.signature(getattr(rax.utils, name))
        assert list(ours.parameters) == list(theirs.parameters), name


@pytest.mark.parametrize("temperature", [1.0, 0.3])
def test_jaxrank_approx_ndcg_is_rax_approx_t12n_ndcg(temperature):
    # no topn: rax's approx_t12n(ndcg_metric) is jaxrank.ndcg with approx ranks in score units
    import jaxrank

    data = _lists(13)
    s, y, where = jnp.asarray(data["scores"]), jnp.asarray(data["labels"]), jnp.asarray(data["where"])
    ranker = jaxrank.approx(temperature, units="score")

    def ours(a):
        return -jnp.mean(jaxrank.ndcg(a, y, where=where, ranker=ranker, gain="exp"))

    def theirs(a):
        return rax.approx_t12n(rax.ndcg_metric, temperature=temperature)(a, y, where=where)

    np.testing.assert_allclose(float(ours(s)), float(theirs(s)), **TOL)
    np.testing.assert_allclose(np.asarray(jax.grad(ours)(s)), np.asarray(jax.grad(theirs)(s)), **TOL)
