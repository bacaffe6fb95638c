"""jaxrank.compat.rax against rax 0.4 itself: values and gradients on random lists, every
keyword combination rax takes, under jit, vmap and grad. Inputs are float32 (rax's dtype)."""

import functools
import itertools
import types
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import rax

from jaxrank.compat import rax as jr

TOL = dict(rtol=2e-5, atol=2e-5)
pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)


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


def _values_and_grads(calls, s, y):
    """For each ``(f, kwargs)`` of ``calls``: ``f(s, y, **kwargs)`` and, where it is a scalar,
    its gradient in the scores; all in one compiled program (run eagerly, every operation of
    the backward pass compiles alone; each program costs a compilation)."""

    def run(s):
        out = []
        for f, kwargs in calls:
            value, vjp = jax.vjp(lambda x, f=f, kwargs=kwargs: f(x, y, **kwargs), s)
            out.append((value, vjp(jnp.ones_like(value))[0] if value.ndim == 0 else None))
        return out

    return jax.jit(run)(s)


def _compare(cases, scores, labels):
    """``ours`` against ``theirs`` for each ``(ours, theirs, kwargs)`` of ``cases``: values
    and, where scalar, gradients."""
    calls = [(f, kwargs) for ours, theirs, kwargs in cases for f in (ours, theirs)]
    results = _values_and_grads(calls, jnp.asarray(scores), jnp.asarray(labels))
    for (_, _, kwargs), (got, g_got), (want, g_want) in zip(cases, results[::2], results[1::2]):
        msg = str(kwargs)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL, err_msg=msg)
        if np.ndim(want) == 0:
            assert np.all(np.isfinite(g_got)), msg
            # rax's segmented ListMLE has NaN gradients on lists with masked items; elsewhere equal
            finite = np.isfinite(np.asarray(g_want))
            np.testing.assert_allclose(np.asarray(g_got)[finite], np.asarray(g_want)[finite], **TOL, err_msg=msg)


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
    data = _lists(zlib.crc32(name.encode()) % 1000, segments=True)  # str hash: another per process
    flags = itertools.product([False, True], [False, True], [False, name not in NO_WEIGHTS])
    cases = []
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
        cases.append((ours, theirs, kwargs))
    _compare(cases, data["scores"], data["labels"])


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
    keys = [jax.random.PRNGKey(seed) for seed in range(3)]

    @jax.jit  # every key, both libraries, in one program (eagerly, each operation compiles alone)
    def both(s, y):
        return [
            (jr.listmle_loss(s, y, key=k, reduce_fn=None), rax.listmle_loss(s, y, key=k, reduce_fn=None)) for k in keys
        ]

    for got, want in both(s, y):
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
    cases = []
    for i, (loss, opts) in enumerate(itertools.product(PAIRWISE, options)):
        # segments with normalize: rax divides only the first item of each segment
        # by its ideal DCG (see test_rax_normalised_segments_quirk)
        use_segments = i % 2 == 1 and not opts.get("normalize")
        kwargs = _kwargs(data, True, use_segments, i % 3 == 0)
        ours = functools.partial(getattr(jr, loss), lambdaweight_fn=functools.partial(getattr(jr, lw), **opts))
        theirs = functools.partial(getattr(rax, loss), lambdaweight_fn=functools.partial(getattr(rax, lw), **opts))
        cases.append((ours, theirs, kwargs))
    _compare(cases, data["scores"], data["labels"])


@pytest.mark.parametrize("lw", LAMBDAWEIGHTS)
def test_lambdaweights_match_rax_on_valid_pairs(lw):
    data = _lists(5, segments=True)
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    where = jnp.asarray(data["where"])
    every = [_kwargs(data, True, *flags) for flags in itertools.product([False, True], [False, True])]

    @jax.jit  # both libraries on every combination in one program (eagerly, each operation compiles alone)
    def both(s, y):
        return [(getattr(jr, lw)(s, y, **kw), getattr(rax, lw)(s, y, **kw)) for kw in every]

    for got, want in both(s, y):
        got, want = np.asarray(got), np.asarray(want)
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

    @jax.jit  # one program (eagerly, each operation compiles alone)
    def weights(s, y, seg):
        return (
            jr.dcg_lambdaweight(s, y, segments=seg, normalize=True).reshape(4, 4),
            jr.dcg_lambdaweight(s[:2], y[:2], normalize=True).reshape(2, 2),
            jr.dcg_lambdaweight(s[2:], y[2:], normalize=True).reshape(2, 2),
            rax.dcg_lambdaweight(s, y, segments=seg, normalize=True).reshape(4, 4),
        )

    ours, first, second, theirs = weights(s, y, seg)
    # rax scales by the padded list size: 4 packed, 2 apart
    np.testing.assert_allclose(np.asarray(ours[:2, :2]), 2 * np.asarray(first), **TOL)
    np.testing.assert_allclose(np.asarray(ours[2:, 2:]), 2 * np.asarray(second), **TOL)
    assert not np.allclose(np.asarray(theirs[:2, :2]), 2 * np.asarray(first))


@pytest.mark.parametrize("name", ["softmax_loss", "pairwise_logistic_loss", "listmle_loss", "unique_softmax_loss"])
def test_jit_and_vmap_match_rax(name):
    data = _lists(21, segments=True)
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    where, segs = jnp.asarray(data["where"]), jnp.asarray(data["segments"])
    ours, theirs = getattr(jr, name), getattr(rax, name)
    per_list = jax.vmap(lambda a, b, w, g: ours(a, b, where=w, segments=g))
    theirs_per_list = jax.vmap(lambda a, b, w, g: theirs(a, b, where=w, segments=g))
    np.testing.assert_allclose(  # rax's compiled too: vmapped eagerly, each of its operations compiles alone
        np.asarray(jax.jit(per_list)(s, y, where, segs)), np.asarray(jax.jit(theirs_per_list)(s, y, where, segs)), **TOL
    )
    g_ours = jax.jit(jax.grad(lambda a: jnp.sum(per_list(a, y, where, segs))))(s)
    g_theirs = jax.jit(jax.grad(lambda a: jnp.sum(theirs_per_list(a, y, where, segs))))(s)  # one program, not eager ops
    finite = np.isfinite(np.asarray(g_theirs))  # as in _compare
    assert np.all(np.isfinite(np.asarray(g_ours)))
    np.testing.assert_allclose(np.asarray(g_ours)[finite], np.asarray(g_theirs)[finite], **TOL)


def test_rank_helpers_match_rax():
    data = _lists(2, segments=True)
    s = jnp.asarray(data["scores"]).at[0, 3].set(data["scores"][0, 5])  # a tie
    where, segs = jnp.asarray(data["where"]), jnp.asarray(data["segments"])
    every = (dict(), dict(where=where), dict(segments=segs), dict(where=where, segments=segs))
    masked = (dict(), dict(where=where), dict(where=where, segments=segs))  # normalize_probabilities
    y = jnp.asarray(data["labels"]) * jnp.asarray(data["labels"] > 1)  # lists of zeros too
    key = jax.random.PRNGKey(4)
    # any step function, as rax's (bound_t12n's relu(x + 1), here on a list with ties)
    step = lambda x: jax.nn.relu(x + 1.0)  # noqa: E731

    @jax.jit  # both libraries' helpers in one program (eagerly, each operation compiles alone)
    def helpers(s, y):
        def both(name, *args, **kwargs):
            return getattr(jr.utils, name)(*args, **kwargs), getattr(rax.utils, name)(*args, **kwargs)

        return dict(
            ranks=[both("ranks", s, **kw) for kw in every] + [both("ranks", s, key=key)],
            cutoff=[both("cutoff", s, n, **kw) for kw in every for n in (None, 3)],
            approx_ranks=[both("approx_ranks", s, **kw) for kw in every],
            probabilities=[both("normalize_probabilities", y, **kw) for kw in masked],
            step=[both("approx_ranks", s, step_fn=step, **kw) for kw in every],
        )

    out = helpers(s, y)
    for got, want in out["ranks"] + out["cutoff"]:
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # on valid items: rax's approximate ranks of masked items differ, and rax leaves
    # label / total on masked items, jaxrank 0
    for kwargs, (got, want) in [*zip(every, out["approx_ranks"]), *zip(masked, out["probabilities"])]:
        valid = np.asarray(where) if "where" in kwargs else np.ones(s.shape, bool)
        np.testing.assert_allclose(np.asarray(got)[valid], np.asarray(want)[valid], **TOL)
    for got, want in out["step"]:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL)


def test_approx_cutoff_matches_rax():
    """Values and gradients of rax's soft top-n, with the step functions of approx_t12n and
    bound_t12n, every combination of where and segments, n from none to past the list."""
    data = _lists(5, segments=True)
    s = jnp.asarray(data["scores"]).at[1, 2].set(data["scores"][1, 4])  # a tie
    where, segs = jnp.asarray(data["where"]), jnp.asarray(data["segments"])
    steps = (jax.nn.sigmoid, lambda x: jax.nn.sigmoid(x / 0.5), lambda x: 1.0 - jax.nn.relu(1.0 - x))
    weights = jnp.arange(s.size, dtype=s.dtype).reshape(s.shape) / s.size
    ns = (None, 0, 1, 3, 7)

    # every n, values and gradients, in one compiled program per cutoff, step and keywords
    @functools.partial(jax.jit, static_argnames=("cutoff", "step", "keys"))
    def every_n(a, where, segs, cutoff, step, keys):
        kw = {k: v for k, v in (("where", where), ("segments", segs)) if k in keys}
        grads = [jax.grad(lambda x, n=n: jnp.sum(weights * cutoff(x, n, step_fn=step, **kw)))(a) for n in ns]
        return [cutoff(a, n, step_fn=step, **kw) for n in ns], grads

    for keys in ((), ("where",), ("segments",), ("where", "segments")):
        for step in steps:
            got = every_n(s, where, segs, jr.utils.approx_cutoff, step, keys)
            want = every_n(s, where, segs, rax.utils.approx_cutoff, step, keys)
            for n, value, grad, want_value, want_grad in zip(ns, *got, *want):
                np.testing.assert_allclose(value, want_value, **TOL, err_msg=f"{keys} {n}")
                np.testing.assert_allclose(grad, want_grad, **TOL, err_msg=f"grad {keys} {n}")


def test_transformations_match_rax():
    data = _lists(9, segments=True)
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    where, segs = jnp.asarray(data["where"]), jnp.asarray(data["segments"])
    key = jax.random.PRNGKey(1)

    # segment_t12n: a function without segments= gets the [..., n, n] rows
    def without_segments(lib):
        def plain(scores, labels, *, where=None, reduce_fn=jnp.mean):
            return lib.softmax_loss(scores, labels, where=where, reduce_fn=reduce_fn)

        return plain

    @jax.jit  # both libraries in one program (eagerly, each operation compiles alone)
    def transformed(s, y):
        out = {}
        for side, lib in (("ours", jr), ("theirs", rax)):
            out[side] = {
                f"gumbel softmax smoothing={smoothing}": lib.gumbel_t12n(
                    lib.softmax_loss, samples=3, smoothing_factor=smoothing
                )(s, y, where=where, key=key)
                for smoothing in (None, 0.1)
            }
            # a listmle inside takes a key of its own: the split must match too
            out[side]["gumbel listmle"] = lib.gumbel_t12n(lib.listmle_loss, samples=2)(s, y, key=key)
            out[side]["segment"] = lib.segment_t12n(without_segments(lib))(s, y, segments=segs, where=where)
        out["native segments"] = jr.softmax_loss(s, y, segments=segs, where=where)
        return out

    out = transformed(s, y)
    for name, want in out["theirs"].items():
        np.testing.assert_allclose(float(out["ours"][name]), float(want), **TOL, err_msg=name)
    np.testing.assert_allclose(float(out["ours"]["segment"]), float(out["native segments"]), **TOL)
    assert jr.segment_t12n(jr.softmax_loss) is jr.softmax_loss


def test_every_rax_loss_lambdaweight_and_helper_has_rax_signature():
    import inspect

    for name in LOSSES + LAMBDAWEIGHTS + METRICS + ["opa_metric", "gumbel_t12n", "segment_t12n", "approx_t12n"]:
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

    # one program (eagerly, every operation of the backward passes compiles alone)
    (got, g_got), (want, g_want) = jax.jit(lambda a: [jax.value_and_grad(f)(a) for f in (ours, theirs)])(s)
    np.testing.assert_allclose(float(got), float(want), **TOL)
    np.testing.assert_allclose(np.asarray(g_got), np.asarray(g_want), **TOL)


# Metrics and the approx / bound transformations ---------------------------------------------
METRICS = ["mrr_metric", "recall_metric", "precision_metric", "ap_metric", "dcg_metric", "ndcg_metric"]
WEIGHTED = {"dcg_metric", "ndcg_metric"}


def _metric_lists(seed, shape=(3, 7), ties=True, neginf=True):
    data = _lists(seed, shape, segments=True)
    rng = np.random.default_rng(seed + 100)
    s = data["scores"]
    if ties:
        s[..., 3] = s[..., 5]
        s[0, :] = np.round(s[0, :])  # many ties in one list
    if neginf:
        # rax: items scored -inf are not retrieved. Two of them in a list give approximate
        # ranks of NaN (-inf - -inf), in rax and here alike: one in the smooth tests.
        s[1, rng.choice(shape[-1], 2 if ties else 1, replace=False)] = -np.inf
    data["labels"][2, :] = 0  # a list without relevant items
    return data


@pytest.mark.parametrize("name", METRICS)
def test_metrics_match_rax_on_every_keyword_combination(name):
    """Exact ranks (rax's defaults): every combination of where, segments, weights, topn
    and reduce_fn, with tied scores, -inf scores and a list without relevant items."""
    data = _metric_lists(zlib.crc32(name.encode()) % 1000)
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    flags = itertools.product([False, True], [False, True], [False, name in WEIGHTED])
    topns = itertools.cycle([None, 1, 3, 7, 10])  # 7: the list size; 10: past it
    every = []
    for i, (use_where, use_segments, use_weights) in enumerate(sorted(set(flags))):
        kwargs = _kwargs(data, use_where, use_segments, use_weights)
        kwargs.update(topn=next(topns), reduce_fn=list(REDUCE.values())[i % 3])
        every.append(kwargs)
    every.append(dict(key=jax.random.PRNGKey(3), reduce_fn=None))  # random tie-breaking, as rax's

    @jax.jit  # both libraries on every combination in one program (eagerly, each operation compiles alone)
    def both(s, y):
        return [(getattr(jr, name)(s, y, **kw), getattr(rax, name)(s, y, **kw)) for kw in every]

    for kwargs, (got, want) in zip(every, both(s, y)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL, err_msg=str(sorted(kwargs)))


def test_metric_options_match_rax():
    data = _metric_lists(17)
    s, y, where = jnp.asarray(data["scores"]), jnp.asarray(data["labels"]), jnp.asarray(data["where"])
    options = dict(gain_fn=lambda a: a, discount_fn=lambda r: 1.0 / r, topn=3)

    @jax.jit  # both libraries in one program (eagerly, each operation compiles alone)
    def both(s, y, where):
        weighted = [
            tuple(getattr(lib, name)(s, y, where=where, reduce_fn=None, **options) for lib in (jr, rax))
            for name in WEIGHTED
        ]
        # opa: tied scores count as wrongly ordered
        opa = [
            [(lib.opa_metric(s, y, where=w, reduce_fn=None), lib.opa_metric(s, y, where=w)) for lib in (jr, rax)]
            for w in (None, where)
        ]
        return weighted, opa

    weighted, opa = both(s, y, where)
    for got, want in weighted:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL)
    for (got, got_mean), (want, want_mean) in opa:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL)
        np.testing.assert_allclose(float(got_mean), float(want_mean))


T12NS = {
    "approx": (jr.approx_t12n, rax.approx_t12n, {}),
    "approx T=0.5": (jr.approx_t12n, rax.approx_t12n, dict(temperature=0.5)),
    "bound": (jr.bound_t12n, rax.bound_t12n, {}),
}


@pytest.mark.parametrize("t12n", list(T12NS))
@pytest.mark.parametrize("name", METRICS)
def test_approx_and_bound_t12n_match_rax(name, t12n):
    """Values and gradients of the smooth metrics on tie-free lists, with segments,
    weights and topn; rax's own t12n needs the jax.util shim (fixture above)."""
    ours_t, theirs_t, opts = T12NS[t12n]
    ours, theirs = ours_t(getattr(jr, name), **opts), theirs_t(getattr(rax, name), **opts)
    # bound_t12n's ranks of an item scored -inf are inf: rax's value is NaN (0 * -inf in its
    # retrieved items), compat's finite (test_bound_t12n_with_an_item_scored_minus_inf)
    data = _metric_lists(zlib.crc32(f"{name} {t12n}".encode()) % 1000, ties=False, neginf=t12n != "bound")
    flags = [(False, False, None), (True, False, 1), (False, name in WEIGHTED, 3), (True, name in WEIGHTED, 3)]
    cases = [
        (ours, theirs, dict(_kwargs(data, False, use_segments, use_weights), topn=topn))
        for use_segments, use_weights, topn in flags
    ]
    _compare(cases, data["scores"], data["labels"])


def _values_and_grad_of_total(f, scores, labels):
    """``f(scores, labels)`` and the gradient of its sum (one backward pass)."""
    values, vjp = jax.vjp(lambda x: f(x, labels), scores)
    return values, vjp(jnp.ones_like(values))[0]


def _compacted(data, row):
    """Row ``row`` with its masked items dropped (rax's list padded apart)."""
    keep = data["where"][row]
    return {name: None if v is None else jnp.asarray(v[row][keep]) for name, v in data.items() if name != "where"}


@pytest.mark.parametrize("name", METRICS)
def test_smooth_metrics_with_masks_equal_rax_on_the_lists_padded_apart(name):
    """With ``where``, compat's approx / bound metrics are rax's on each list with its
    masked items dropped (rax's own values with masks differ: next test)."""
    data = _metric_lists(zlib.crc32(name.encode()) % 997, ties=False, neginf=False)
    where = jnp.asarray(data["where"])
    cases = [("approx", False, None), ("approx", True, 3), ("approx T=0.5", False, 1), ("bound", True, 1)]

    def both_ways(t12n, use_segments, topn):
        ours_t, theirs_t, opts = T12NS[t12n]
        ours, theirs = ours_t(getattr(jr, name), **opts), theirs_t(getattr(rax, name), **opts)
        kwargs = dict(topn=topn, reduce_fn=None)
        if use_segments:
            kwargs["segments"] = jnp.asarray(data["segments"])

        def per_list(a, y):
            return ours(a, y, where=where, **kwargs)

        got = _values_and_grad_of_total(per_list, jnp.asarray(data["scores"]), jnp.asarray(data["labels"]))
        apart = []
        for row in range(where.shape[0]):
            lists = _compacted(data, row)
            kw = dict(kwargs, segments=lists["segments"]) if use_segments else kwargs
            apart.append(
                _values_and_grad_of_total(lambda a, y, kw=kw: theirs(a, y, **kw), lists["scores"], lists["labels"])
            )
        return got, apart

    # every case, compat's on the batch and rax's on each list, in one program (each costs a compilation)
    results = jax.tree.map(np.asarray, jax.jit(lambda: [both_ways(*case) for case in cases])())
    for (t12n, use_segments, topn), ((got, grads), apart) in zip(cases, results):
        assert np.all(grads[~np.asarray(where)] == 0)
        for row, (want, want_grad) in enumerate(apart):
            # per list without segments; with them, at each segment's first (valid) item
            keep = np.asarray(where[row]) if use_segments else ()
            msg = f"{t12n} segments={use_segments} topn={topn} row={row}"
            np.testing.assert_allclose(got[row][keep], want, **TOL, err_msg=msg)
            keep = np.asarray(where[row])
            np.testing.assert_allclose(grads[row][keep], want_grad, **TOL, err_msg=msg)


def test_metrics_under_vmap_match_rax():
    data = _metric_lists(29, ties=False)
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    where, segs = jnp.asarray(data["where"]), jnp.asarray(data["segments"])

    # one program per metric and library, rax's compiled too (vmapped eagerly, each of its
    # operations compiles alone)
    @functools.partial(jax.jit, static_argnames=("metric", "approx_t12n"))
    def variants(metric, approx_t12n):
        return dict(
            # without segments too: exact ranks read off, not sorted again
            where=jax.vmap(lambda a, b, w: metric(a, b, where=w, topn=3))(s, y, where),
            segments=jax.vmap(lambda a, b, g: metric(a, b, segments=g, topn=3))(s, y, segs),
            approx=jax.vmap(lambda a, b, g: approx_t12n(metric)(a, b, segments=g, topn=3))(s, y, segs),
        )

    for name in METRICS:
        got, want = variants(getattr(jr, name), jr.approx_t12n), variants(getattr(rax, name), rax.approx_t12n)
        for variant in got:
            np.testing.assert_allclose(got[variant], want[variant], **TOL, err_msg=f"{name} {variant}")


def test_transformed_metrics_keep_rax_names():
    assert jr.approx_t12n(jr.ndcg_metric).__name__ == "approx_ndcg_metric"
    assert jr.bound_t12n(jr.mrr_metric).__name__ == "bounded_mrr_metric"
    import inspect

    assert list(inspect.signature(jr.approx_t12n(jr.ap_metric)).parameters) == list(
        inspect.signature(rax.ap_metric).parameters
    )


def test_bound_t12n_with_an_item_scored_minus_inf_is_finite():
    s = jnp.array([0.5, -jnp.inf, 1.0, -0.3])
    y = jnp.array([1.0, 0.0, 2.0, 0.0])
    others = jnp.array([0, 2, 3])
    for name in METRICS:
        loss = jr.bound_t12n(getattr(jr, name))

        @jax.jit  # one program a metric (eagerly, each operation compiles alone)
        def value_grad_and_without(a, loss=loss):
            value, grad = jax.value_and_grad(lambda x: loss(x, y, topn=1))(a)
            return value, grad, loss(a[others], y[others], topn=1)

        value, grad, without = value_grad_and_without(s)
        assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad))), name
        # the item scored -inf (label 0) counts as not retrieved: the value of the list without it
        np.testing.assert_allclose(float(value), float(without), err_msg=name)
    assert np.isnan(float(jax.jit(lambda a: rax.bound_t12n(rax.ndcg_metric)(a, y, topn=1))(s)))


def test_rax_approx_metrics_change_with_masked_items():
    """rax's approximate ranks put masked items at rank 1: its approx AP counts a masked
    relevant item above every item, and its soft top-n gives masked items places. compat
    gives the value of the list without them (docs/compat/rax.md)."""
    s, y = jnp.array([2.0, 1.0, 0.0, 0.5]), jnp.array([0.0, 1.0, 1.0, 1.0])
    where = jnp.array([True, True, True, False])
    keep = jnp.array([0, 1, 2])
    for name, kwargs in (("ap_metric", {}), ("ndcg_metric", dict(topn=1))):
        theirs, ours = rax.approx_t12n(getattr(rax, name)), jr.approx_t12n(getattr(jr, name))

        @jax.jit  # one program a metric (eagerly, each operation compiles alone)
        def values(s, y, where, theirs=theirs, ours=ours, kwargs=kwargs):
            return (
                theirs(s[keep], y[keep], **kwargs),
                theirs(s, y, where=where, **kwargs),
                ours(s, y, where=where, **kwargs),
            )

        apart, theirs_masked, ours_masked = (float(v) for v in values(s, y, where))
        assert abs(theirs_masked - apart) > 1e-3, name
        np.testing.assert_allclose(ours_masked, apart, **TOL)


@pytest.mark.parametrize(
    "loss, lambdaweight",
    [
        ("pairwise_logistic_loss", None),
        ("pairwise_logistic_loss", "dcg_lambdaweight"),
        ("pairwise_hinge_loss", "dcg2_lambdaweight"),
        ("pairwise_mse_loss", "labeldiff_lambdaweight"),
    ],
)
def test_pairwise_losses_in_many_row_blocks_match_rax(monkeypatch, loss, lambdaweight):
    """The blocked path of the pairwise losses (jaxrank.losses.pairwise._pair_totals) at 7 rows per
    block over lists of 300 (43 blocks, the last padded), against rax, which holds every pair."""
    from jaxrank import losses

    monkeypatch.setattr(losses.pairwise, "PAIRS_PER_LIST", 7 * 300)
    data = _lists(17, shape=(3, 300), segments=True)
    ours, theirs = getattr(jr, loss), getattr(rax, loss)
    if lambdaweight is not None:
        ours = functools.partial(ours, lambdaweight_fn=getattr(jr, lambdaweight))
        theirs = functools.partial(theirs, lambdaweight_fn=getattr(rax, lambdaweight))
    s, y = jnp.asarray(data["scores"]), jnp.asarray(data["labels"])
    every = [
        dict(_kwargs(data, *flags), reduce_fn=reduce_fn)
        for flags in ((False, False, False), (True, False, True), (True, True, True))
        for reduce_fn in (jnp.mean, jnp.sum)
    ]
    results = _values_and_grads([(f, kwargs) for kwargs in every for f in (ours, theirs)], s, y)
    for kwargs, (got, g_got), (want, g_want) in zip(every, results[::2], results[1::2]):
        np.testing.assert_allclose(float(got), float(want), **TOL, err_msg=str(kwargs))
        # float32 sums of 300 terms in another order: rounding scales with the largest
        np.testing.assert_allclose(g_got, g_want, rtol=2e-5, atol=2e-5 * max(1.0, np.max(np.abs(g_want))))


def test_listmle_gradient_is_finite_where_rax_is_nan():
    """docs/compat/rax.md: rax's ListMLE with where= and segments= has a NaN gradient
    (every item's) once a segment holds a masked item; jaxrank's is finite, and it is the
    gradient of the segments padded apart, where rax's own is finite."""
    s = jnp.array([[0.5, -1.0, 2.0, 0.3, 1.1, -0.2]])
    y = jnp.array([[2.0, 0.0, 1.0, 1.0, 0.0, 2.0]])
    where = jnp.array([[True, False, True, True, True, False]])
    seg = jnp.array([[0, 0, 0, 1, 1, 1]])
    kwargs = dict(where=where, segments=seg)
    (got, g_ours), (want, g_theirs) = _values_and_grads([(jr.listmle_loss, kwargs), (rax.listmle_loss, kwargs)], s, y)
    np.testing.assert_allclose(float(got), float(want), **TOL)
    assert np.all(np.isnan(np.asarray(g_theirs)))
    assert np.all(np.isfinite(np.asarray(g_ours)))
    # each segment as its own row, its other items masked: rax's gradient is finite there
    rows = jnp.concatenate([where & (seg == k) for k in (0, 1)])
    apart = jax.jit(jax.grad(lambda x: rax.listmle_loss(jnp.repeat(x, 2, 0), jnp.repeat(y, 2, 0), where=rows)))(s)
    assert np.all(np.isfinite(np.asarray(apart)))
    np.testing.assert_allclose(np.asarray(g_ours), np.asarray(apart), **TOL)


def test_moving_from_compat_to_native_changes_the_gain_the_units_and_the_sign():
    """docs/compat/rax.md, "From compat.rax to jaxrank's own functions": the same list
    through rax's names and through jaxrank's defaults, and the settings that agree."""
    import jaxrank
    from jaxrank import losses

    s = jnp.array([0.9, 0.8, 0.3, 0.1, 0.0])
    y = jnp.array([0.0, 1.0, 0.0, 4.0, 2.0])

    @jax.jit  # every value in one program (eagerly, each operation compiles alone)
    def values(s, y):
        return dict(
            compat_ndcg=jr.ndcg_metric(s, y),
            ndcg=jaxrank.ndcg(s, y),
            ndcg_exp=jaxrank.ndcg(s, y, gain="exp"),
            rax_ndcg=rax.ndcg_metric(s, y),
            compat_approx=jr.approx_t12n(jr.ndcg_metric)(s, y),
            loss=losses.ndcg_loss(s, y, ranker=jaxrank.approx()),
            same=losses.ndcg_loss(s, y, gain="exp", ranker=jaxrank.approx(1.0, units="score")),
        )

    v = {name: float(value) for name, value in values(s, y).items()}
    # nDCG: rax's gain is 2^y - 1, jaxrank's default is linear (trec_eval's)
    assert round(v["compat_ndcg"], 4) == 0.4744
    assert round(v["ndcg"], 4) == 0.5428
    np.testing.assert_allclose(v["ndcg_exp"], v["compat_ndcg"], **TOL)
    np.testing.assert_allclose(v["compat_ndcg"], v["rax_ndcg"], **TOL)
    # the approx loss: rax's is -nDCG with T in score units; jaxrank's is 1 - nDCG with
    # the linear gain and T in "bounded" units (scaled to the spread of the scores)
    theirs = v["compat_approx"]
    assert round(theirs, 4) == -0.5155
    assert round(v["loss"], 4) == 0.4031
    np.testing.assert_allclose(v["same"], 1 + theirs, **TOL)


def test_the_rax_md_recipe_runs_at_realistic_size():
    """docs/compat/rax.md's switch, on [32, 500] lists with masks, segments and weights at
    a model's score scale; its values against rax's."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "compat" / "rax.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    rng = np.random.default_rng(0)
    shape = (32, 500)
    inputs = dict(
        scores=jnp.asarray(rng.normal(size=shape) * 3, jnp.float32),
        labels=jnp.asarray(rng.integers(0, 5, size=shape), jnp.float32),
        mask=jnp.asarray(rng.random(shape) < 0.9),
        segments=jnp.asarray(np.sort(rng.integers(0, 4, size=shape), axis=-1)),
        weights=jnp.asarray(rng.uniform(0.5, 2, size=shape), jnp.float32),
        key=jax.random.PRNGKey(0),
    )

    # under jit, as in a training step (run eagerly, each of its operations compiles alone)
    @jax.jit
    def recipe(inputs):
        env = dict(inputs, jnp=jnp)
        exec(block, env)
        return {name: env[name] for name in ("loss", "noisy", "ndcg10", "r")}

    out = recipe(inputs)
    for name, value in out.items():
        assert np.all(np.isfinite(np.asarray(value))), name
    s, y, m = inputs["scores"], inputs["labels"], inputs["mask"]
    want = jax.jit(lambda s, y, m: rax.ndcg_metric(s, y, where=m, topn=10))(s, y, m)
    np.testing.assert_allclose(float(out["ndcg10"]), float(want), **TOL)
    # the approx nDCG@10 loss, per list: rax's own on each list with its masked items dropped
    approx_ndcg = functools.partial(jr.approx_t12n(jr.ndcg_metric, temperature=0.5), topn=10)
    per_list = jax.jit(lambda s, y, m: approx_ndcg(s, y, where=m, reduce_fn=None))(s, y, m)
    np.testing.assert_allclose(float(out["loss"]), float(jnp.mean(per_list)), **TOL)
    theirs = jax.jit(functools.partial(rax.approx_t12n(rax.ndcg_metric, temperature=0.5), topn=10))
    m_np = np.asarray(m)
    for i in range(3):
        np.testing.assert_allclose(float(per_list[i]), float(theirs(s[i][m_np[i]], y[i][m_np[i]])), **TOL)


SHARDED = r"""
import json
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from jaxrank.compat import rax

mesh = Mesh(jax.devices(), ("d",))
rng = np.random.default_rng(0)
B, N = 16, 24
s = rng.normal(size=(B, N)).astype(np.float32)
y = rng.integers(0, 4, (B, N)).astype(np.float32)
w = rng.random((B, N)) < 0.9
g = np.sort(rng.integers(0, 3, (B, N)), axis=-1)

def f(s, y, w, g):
    return dict(
        ndcg=rax.ndcg_metric(s, y, where=w, segments=g, topn=5, reduce_fn=None),
        ap=rax.approx_t12n(rax.ap_metric)(s, y, where=w, segments=g, topn=5, reduce_fn=None),
        mrr=rax.bound_t12n(rax.mrr_metric)(s, y, where=w, reduce_fn=None),
        ap_exact=rax.ap_metric(s, y, where=w, topn=5, reduce_fn=None),
        grad=jax.grad(lambda a: jnp.sum(rax.approx_t12n(rax.ndcg_metric)(a, y, where=w, topn=5, reduce_fn=None)))(s),
    )

whole = jax.jit(f)(s, y, w, g)
in_map = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P("d"), out_specs=P("d")))(s, y, w, g)
sharded = [jax.device_put(a, NamedSharding(mesh, P("d"))) for a in (s, y, w, g)]
in_jit = jax.jit(f)(*sharded)
gap = lambda a, b: max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)
print("REPORT" + json.dumps(dict(shard_map=gap(in_map, whole), jit=gap(in_jit, whole),
      finite=all(bool(np.isfinite(np.asarray(v)).all()) for v in whole.values()))))
"""


def test_metrics_and_transformations_under_shard_map_and_sharded_jit_on_8_devices():
    import json

    from tests.devices import run_with_host_devices

    report = json.loads(run_with_host_devices(SHARDED, devices=8).split("REPORT", 1)[1])
    assert report["finite"]
    assert report["shard_map"] <= 2e-6 and report["jit"] <= 2e-6, report


def test_issue_35_any_callable_empty_lambdaweights_and_exact_normalisation():
    """rax users' defects of issue 35: t12n of a partial / lambda / jitted metric (rax takes
    any callable), lambdaweights of an empty list (rax: an empty array), and
    normalize_probabilities dividing exactly (5 / 12, not 5 * (1 / 12)); one program."""
    s = jnp.array([[0.0, 1.0, 3.0, 2.0], [1.0, -1.0, 0.5, 2.0]], jnp.float32)
    y = jnp.array([[0.0, 1.0, 0.0, 2.0], [1.0, 0.0, 0.0, 1.0]], jnp.float32)
    x = np.asarray([[0, 1, 2], [3, 4, 5]], np.float32)
    empty = [jnp.zeros(shape, jnp.float32) for shape in ((0,), (2, 0))]
    names = ("dcg_lambdaweight", "dcg2_lambdaweight", "labeldiff_lambdaweight")

    @jax.jit
    def both(s, y, x):
        out = {}
        for lib in (jr, rax):
            metric = lib.ndcg_metric
            callables = dict(
                partial=functools.partial(metric, topn=2),
                lambda_=lambda a, b, metric=metric, **kw: metric(a, b, topn=2, **kw),
                jitted=jax.jit(metric, static_argnames=("topn", "rank_fn", "cutoff_fn")),
            )
            for name, fn in callables.items():
                for t12n in ("approx_t12n", "bound_t12n"):
                    out[f"{lib.__name__} {name} {t12n}"] = getattr(lib, t12n)(fn)(s, y)
            out[f"{lib.__name__} empty"] = [getattr(lib, n)(e, e) for n in names for e in empty]
        out["gumbel"] = jr.gumbel_t12n(functools.partial(jr.ndcg_metric, topn=2))(s, y, key=jax.random.PRNGKey(0))
        out["normalised"] = jr.utils.normalize_probabilities(x)
        return out

    out = both(s, y, x)
    for key in [k for k in out if k.startswith(jr.__name__ + " ") and k.endswith("t12n")]:
        want = out[key.replace(jr.__name__, rax.__name__, 1)]
        np.testing.assert_allclose(out[key], want, **TOL, err_msg=key)
    for got, want in zip(out[f"{jr.__name__} empty"], out[f"{rax.__name__} empty"]):
        assert got.shape == want.shape and got.size == 0
    assert out["gumbel"].shape == () and np.isfinite(out["gumbel"])
    assert jr.approx_t12n(functools.partial(jr.ndcg_metric, topn=10)).__name__ == "approx_ndcg_metric"
    assert jr.bound_t12n(functools.partial(jr.mrr_metric)).__name__ == "bounded_mrr_metric"
    p = np.asarray(out["normalised"])
    assert p.dtype == np.float32 and p[1, 2] == np.float32(5) / np.float32(12)  # 0.41666666, not 0.41666669
    np.testing.assert_array_equal(p, x / np.asarray([[3], [12]], np.float32))
    eager = np.asarray(jr.utils.normalize_probabilities(jnp.asarray(x)))  # outside jit too (XLA, alone)
    np.testing.assert_array_equal(eager, p)
