"""Labels given as indexed positives, and losses.retrieval_loss: equal to the dense labels
they stand for (values and gradients, ties, padding, masks), blocks, shard_map over 8 host
devices, memory that never holds the [Q, M] scores, and errors that name the argument."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import jaxrank
from jaxrank import losses
from tests.devices import run_with_host_devices

pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)

Q, M, R = 6, 240, 3


def _lists(seed: int, ties: bool):
    """float32 scores [Q, M] (rounded: many ties), a mask with one short list, positives with
    padding, a repeated index and grades 0..3 (a grade 0 names an item that is not relevant)."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=(Q, M))
    scores = np.round(scores, 1) if ties else scores
    where = rng.random((Q, M)) < 0.85
    where[0, 6:] = False
    idx = rng.integers(0, M, (Q, R))
    idx[0] = [2, 4, -1]
    idx[1, 2] = idx[1, 0]
    grades = rng.integers(0, 4, (Q, R))
    return jnp.asarray(scores, jnp.float32), jnp.asarray(where), jaxrank.positives(idx, grades)


@functools.partial(jax.jit, static_argnames=("metric", "ranker", "kw"))
def _value_and_grad_jit(scores, labels, where, metric, ranker, kw):
    kw = dict(kw)
    value = metric(scores, labels, where=where, ranker=ranker, **kw)
    return jax.value_and_grad(lambda s: metric(s, labels, where=where, ranker=ranker, **kw).sum())(scores), value


def _value_and_grad(metric, scores, labels, where, ranker, **kw):
    # One compiled program per case (the labels' form, positives or dense, is part of its
    # signature) instead of the ops dispatched one by one: a quarter less CPU time over the
    # comparisons below.
    return _value_and_grad_jit(scores, labels, where, metric, ranker, tuple(sorted(kw.items())))


def _assert_equal_to_dense(metric, ranker, kw, seed, ties):
    scores, where, pos = _lists(seed, ties)
    dense = pos.dense(M)
    (_, g_pos), v_pos = _value_and_grad(metric, scores, pos, where, ranker=ranker, **kw)
    (_, g_dense), v_dense = _value_and_grad(metric, scores, dense, where, ranker=ranker, **kw)
    np.testing.assert_allclose(np.asarray(v_pos), np.asarray(v_dense), rtol=1e-6, atol=1e-7)
    scale = float(jnp.max(jnp.abs(g_dense)))
    assert scale > 0
    np.testing.assert_allclose(np.asarray(g_pos) / scale, np.asarray(g_dense) / scale, rtol=0, atol=1e-6)


# Metrics that read the relevant items only, with the rankers that rank them alone
RELEVANT_ONLY = [
    (jaxrank.ndcg, dict(k=10)),
    (jaxrank.ndcg, dict(k=(1, 5, 20), gain="exp")),
    (jaxrank.dcg, dict(k=10)),
    (jaxrank.recall, dict(k=(5, 20))),
    (jaxrank.precision, dict(k=5)),
    (jaxrank.average_precision, dict(k=10)),
    (jaxrank.reciprocal_rank, dict(k=10)),
    (jaxrank.success, dict(k=3)),
    (jaxrank.err, dict(k=10)),
    (jaxrank.rbp, dict(k=10, rel=2)),
]


@pytest.mark.parametrize("metric, kw", RELEVANT_ONLY, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize(
    "ranker, ties",
    [(jaxrank.softsort(), False), (jaxrank.softsort(), True), (jaxrank.softsort(0.05, units="score"), True)],
    ids=["default", "default-ties", "score-ties"],
)
def test_softsort_at_the_positives_equals_the_dense_labels(metric, kw, ranker, ties):
    _assert_equal_to_dense(metric, ranker, kw, seed=len(kw), ties=ties)


@pytest.mark.parametrize("metric, kw", RELEVANT_ONLY, ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_laplace_at_the_positives_equals_the_dense_labels(metric, kw, ties):
    # the positives path sums the steps over the list (and AP's, RR's counts over the pairs of
    # relevant items); the dense path runs the recurrences over the sorted list
    _assert_equal_to_dense(metric, jaxrank.laplace(), kw, seed=len(kw) + 7, ties=ties)


@pytest.mark.parametrize("ranker", [jaxrank.bound(0.5), jaxrank.bound(top=10)], ids=["score_units", "top_gaps"])
@pytest.mark.parametrize("metric, kw", RELEVANT_ONLY, ids=lambda v: getattr(v, "__name__", str(v)))
def test_bound_at_the_positives_equals_the_dense_labels(metric, kw, ranker):
    _assert_equal_to_dense(metric, ranker, kw, seed=len(kw) + 11, ties=True)


@pytest.mark.parametrize(
    "metric, kw",
    [
        (jaxrank.ndcg, {}),
        (jaxrank.average_precision, {}),
        (jaxrank.reciprocal_rank, {}),
        (jaxrank.err, {}),
        (jaxrank.rbp, {}),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
@pytest.mark.parametrize(
    "ranker, ties", [(jaxrank.approx(), True), (jaxrank.approx(0.2, units="std"), False)], ids=["default-ties", "std"]
)
def test_approx_at_the_positives_equals_the_dense_labels(metric, kw, ranker, ties):
    _assert_equal_to_dense(metric, ranker, kw, seed=3, ties=ties)


@pytest.mark.parametrize(
    "metric, kw, ranker",
    [
        (jaxrank.ndcg, dict(k=10), jaxrank.softrank()),
        (jaxrank.ndcg, dict(k=10), jaxrank.neuralsort()),
        (jaxrank.ndcg, dict(k=10), jaxrank.approx()),  # a soft cutoff reads every rank
        (jaxrank.ndcg, {}, jaxrank.softsort()),  # no cutoff: every position
        (jaxrank.ndcg, dict(k=10), jaxrank.softsort(sinkhorn=2)),
        (jaxrank.precision, {}, jaxrank.softsort()),  # reads the non-relevant items
        (jaxrank.fallout, dict(k=10), jaxrank.softsort()),
        (jaxrank.r_precision, {}, jaxrank.approx()),
        (jaxrank.ndcg, dict(k=10), jaxrank.hard()),
        (jaxrank.average_precision, {}, jaxrank.hard("expected")),
    ],
    ids=lambda v: getattr(v, "__name__", None) or type(v).__name__,
)
def test_other_rankers_and_metrics_take_the_dense_labels(metric, kw, ranker):
    scores, where, pos = _lists(5, ties=True)
    # both in one compiled program (eagerly, every operation would compile alone)
    got, want = jax.jit(
        lambda s, p, w: (
            metric(s, p, where=w, ranker=ranker, **kw),
            metric(s, p.dense(M), where=w, ranker=ranker, **kw),
        )
    )(scores, pos, where)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_positives_name_each_item_once_with_its_largest_grade():
    pos = jaxrank.positives([[3, 1, 3, -1], [0, 0, 0, 2]], grades=[[1, 2, 3, 9], [2, 2, 1, 1]])
    assert pos.dense(5).tolist() == [[0, 2, 0, 3, 0], [2, 0, 1, 0, 0]]
    assert pos.valid.tolist() == [[False, True, True, False], [True, False, False, True]]


@pytest.mark.parametrize(
    "ranker, ties, k",
    [
        (jaxrank.softsort(), False, 10),
        (jaxrank.laplace(), True, 10),
        (jaxrank.bound(), True, 10),
        # no cutoff: at k=10 the top-gap bound reads 0 on the tied list, which would hide its branch
        (jaxrank.bound(top=10), True, None),
    ],
    ids=["softsort", "laplace-ties", "bound", "bound-top-ties"],
)
def test_positives_under_jit_and_vmap_equal_eager(ranker, ties, k):
    # a temperature from the list's top takes a branch (lax.cond) for a tied top: a select under vmap
    scores, where, pos = _lists(7, ties=ties)
    if ties:
        scores = scores.at[1, :20].set(3.0)  # a list whose top 11 are tied
    eager = jaxrank.ndcg(scores, pos, k=k, where=where, ranker=ranker)
    jitted = jax.jit(lambda s, p, w: jaxrank.ndcg(s, p, k=k, where=w, ranker=ranker))(scores, pos, where)
    # (vmap under jit: the same batching rules, one program instead of every operation alone)
    mapped = jax.jit(jax.vmap(lambda s, p, w: jaxrank.ndcg(s, p, k=k, where=w, ranker=ranker)))(scores, pos, where)
    np.testing.assert_allclose(np.asarray(jitted), np.asarray(eager), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(mapped), np.asarray(eager), rtol=1e-6)


def test_metric_loss_takes_positives():
    scores, where, pos = _lists(8, ties=False)
    got = losses.metric_loss(scores, pos, where=where, k=10)
    want = losses.metric_loss(scores, pos.dense(M), where=where, k=10)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-7)


# retrieval_loss -------------------------------------------------------------------------
def _values_and_grads(f, q, d):
    """``f(q, d)`` (a loss per query) and the gradients of its sum in both embeddings, in one
    compiled program: eagerly, every operation of the blocks and their gradients would
    dispatch alone (several times the CPU time)."""

    def total(q, d):
        values = f(q, d)
        return values.sum(), values

    (_, values), grads = jax.jit(jax.value_and_grad(total, argnums=(0, 1), has_aux=True))(q, d)
    return values, grads


def _embeddings(seed, n_queries=32, n_docs=160, dim=16):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(n_queries, dim)).astype(np.float32)
    d = rng.normal(size=(n_docs, dim)).astype(np.float32)
    idx = rng.integers(-1, n_docs, (n_queries, 3))
    idx[:, 0] = np.arange(n_queries)  # in-batch: query i's positive is document i
    grades = rng.integers(1, 4, (n_queries, 3))
    return jnp.asarray(q), jnp.asarray(d), idx, grades


@pytest.mark.parametrize(
    "ranker, k",
    [(None, 10), (jaxrank.approx(), None), (jaxrank.softrank(), 10)],
    ids=["default", "approx", "softrank"],
)
def test_retrieval_loss_equals_the_metric_loss_of_the_dense_lists(ranker, k):
    q, d, idx, grades = _embeddings(0)
    where = jnp.asarray(np.random.default_rng(1).random(d.shape[0]) < 0.9)
    expected_ranker = losses.retrieval._DEFAULT_RANKER if ranker is None else ranker

    def dense(q, d):
        labels = jaxrank.positives(idx, grades).dense(d.shape[0])
        w = jnp.broadcast_to(where, (q.shape[0], d.shape[0]))
        return losses.metric_loss(q @ d.T, labels, where=w, ranker=expected_ranker, k=k)

    def blocked(q, d):
        return losses.retrieval_loss(
            q, d, idx, grades=grades, ranker=ranker, k=k, where=where, block=8, per_positive=False
        )

    got_values, got = _values_and_grads(blocked, q, d)
    want_values, want = _values_and_grads(dense, q, d)
    # a block's matmul may round a score's last bit unlike the whole matrix's; the metric
    # itself is held to 1e-6 above
    np.testing.assert_allclose(np.asarray(got_values), np.asarray(want_values), rtol=1e-6, atol=1e-6)
    for g, w in zip(got, want):
        scale = float(jnp.max(jnp.abs(w)))
        np.testing.assert_allclose(np.asarray(g) / scale, np.asarray(w) / scale, rtol=0, atol=1e-5)


def test_retrieval_loss_blocks_and_per_query_masks_change_nothing_but_the_masked():
    q, d, idx, _ = _embeddings(2)
    # each call one compiled program (eagerly, every operation of the blocks would compile alone)
    loss = jax.jit(functools.partial(losses.retrieval_loss, q, d, idx), static_argnames="block")
    whole = loss(block=32)
    np.testing.assert_allclose(np.asarray(loss(block=4)), np.asarray(whole), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(loss()), np.asarray(whole), rtol=1e-6)
    # a per-query mask that hides one query's best negative changes that query alone
    scores = np.array(q @ d.T)
    scores[0, idx[0][idx[0] >= 0]] = -np.inf
    where = np.ones((q.shape[0], d.shape[0]), bool)
    where[0, int(np.argmax(scores[0]))] = False
    masked = loss(where=where)
    assert float(masked[0]) != float(whole[0])
    np.testing.assert_allclose(np.asarray(masked[1:]), np.asarray(whole[1:]), rtol=1e-6)
    # at a fixed temperature, one negative fewer lowers the loss (the default's temperature
    # follows the list's top gaps, which the mask changes too)
    fixed = functools.partial(loss, temperature=1.0)
    assert float(fixed(where=where)[0]) < float(fixed()[0])


def test_a_document_relevant_to_two_queries_is_each_ones_positive_and_the_others_negative():
    q, d, _, _ = _embeddings(3, n_queries=4, n_docs=40)
    shared = jnp.asarray([[7], [7], [1], [2]])
    labels = jnp.zeros((4, 40)).at[0, 7].set(1).at[1, 7].set(1).at[2, 1].set(1).at[3, 2].set(1)
    loss, want = jax.jit(  # one compiled program for both
        lambda q, d: (
            losses.retrieval_loss(q, d, shared),
            losses.metric_loss(q @ d.T, labels, k=None, ranker=losses.retrieval._DEFAULT_RANKER),
        )
    )(q, d)
    np.testing.assert_allclose(np.asarray(loss), np.asarray(want), rtol=1e-6)


def test_retrieval_loss_never_holds_the_query_by_document_scores():
    n_queries, n_docs, dim = 4096, 4096, 8
    q = jnp.zeros((n_queries, dim), jnp.float32)
    d = jnp.zeros((n_docs, dim), jnp.float32)
    idx = jnp.zeros((n_queries, 1), jnp.int32)
    step = jax.jit(jax.grad(lambda q, d, i: losses.retrieval_loss(q, d, i).mean(), argnums=(0, 1)))
    temp = step.lower(q, d, idx).compile().memory_analysis().temp_size_in_bytes
    assert temp < n_queries * n_docs * 4 / 2, temp  # the [Q, M] float32 scores alone would be 64 MiB


def test_retrieval_loss_with_documents_sharded_over_8_devices_equals_one_device():
    out = run_with_host_devices(
        """
        import jax, jax.numpy as jnp, numpy as np, jaxrank
        from jax.sharding import Mesh, PartitionSpec as P
        from jaxrank import losses
        mesh = Mesh(np.array(jax.devices()), ("d",))
        rng = np.random.default_rng(0)
        q = jnp.asarray(rng.normal(size=(16, 8)).astype(np.float32))
        d = jnp.asarray(rng.normal(size=(256, 8)).astype(np.float32))
        idx = rng.integers(-1, 256, (16, 3)); idx[:, 0] = rng.integers(0, 256, 16)
        grades = rng.integers(1, 4, (16, 3))
        where = jnp.asarray(rng.random(256) < 0.9)
        d48 = d[:48]  # 6 documents a device: fewer than the cutoff
        idx48 = np.where(idx < 48, idx, -1)
        # 32 copies of one document, 4 a device: the top of about half the lists is tied, so
        # laplace's temperature falls back on the list's spread (a branch with collectives)
        d_tied = d.at[::8].set(5 * jnp.ones(8))
        programs = {}
        for ranker, k, d, idx in [
            (None, 10, d, idx), (jaxrank.approx(), None, d, idx), (jaxrank.softrank(), 10, d, idx),
            (None, 10, d48, idx48), (None, 10, d_tied, idx), (jaxrank.bound(), None, d, idx),
            ("pairs", None, d, idx), ("log", None, d, idx), ("pooled", None, d, idx),
        ]:
            where_d = where[: d.shape[0]]
            kw = {
                "pairs": dict(ranker=jaxrank.bound(), per_positive=True),
                "log": dict(metric=jaxrank.reciprocal_rank, log=True),
                # the softmax's rank at the batch's one temperature: pooled over every device's top
                "pooled": dict(
                    ranker=jaxrank.bound(2.0, top=10, exponential=True, per_list=False),
                    metric=jaxrank.reciprocal_rank, log=True),
            }.get(ranker, dict(ranker=ranker))
            def one(q, d, idx=idx, where_d=where_d, kw=kw, k=k):
                return losses.retrieval_loss(q, d, idx, grades=grades, k=k, where=where_d, **kw)
            def sharded(q, d, idx=idx, where_d=where_d, kw=kw, k=k):
                body = lambda q, d, w: losses.retrieval_loss(
                    q, d, idx, grades=grades, k=k, where=w, block=4, axis_name="d", **kw)
                return jax.shard_map(body, mesh=mesh, in_specs=(P(), P("d"), P("d")), out_specs=P())(q, d, where_d)
            def values_and_grads(f):  # one program a side: values and gradients together
                def mean(q, d):
                    values = f(q, d)
                    return values.mean(), values
                return jax.jit(jax.value_and_grad(mean, argnums=(0, 1), has_aux=True))
            # the tied documents take the programs of the first case (the same shapes, positives
            # and mask): compiled once
            key = (repr(ranker), k, d.shape)
            if key not in programs:
                programs[key] = (values_and_grads(one), values_and_grads(sharded))
            ((_, a), ga), ((_, b), gb) = (program(q, d) for program in programs[key])
            np.testing.assert_allclose(np.asarray(b), np.asarray(a), rtol=1e-5, atol=1e-6)
            for x, y in zip(ga, gb):
                scale = float(jnp.max(jnp.abs(x)))
                np.testing.assert_allclose(np.asarray(y) / scale, np.asarray(x) / scale, rtol=0, atol=2e-5)
        print("ok")
        """
    )
    assert out.strip().endswith("ok")


@pytest.mark.parametrize("log", [False, True], ids=["one_minus", "log"])
@pytest.mark.parametrize("ranker, k", [(jaxrank.bound(), None), (jaxrank.laplace(), 10)], ids=["bound", "laplace"])
def test_per_positive_is_one_list_per_pair_without_the_other_relevant_candidates(ranker, k, log):
    rng = np.random.default_rng(5)
    q = jnp.asarray(rng.normal(size=(6, 8)), jnp.float32)
    d = jnp.asarray(rng.normal(size=(50, 8)), jnp.float32)
    idx = np.array([[0, 1, 2], [3, -1, -1], [4, 4, 5], [6, 7, -1], [-1, -1, -1], [8, 9, 10]])
    grades = np.array([[1, 2, 3], [2, 1, 1], [1, 3, 2], [0, 2, 1], [1, 1, 1], [3, 3, 1]])  # 6: grade 0, a negative
    where = jnp.asarray(rng.random(50) < 0.9).at[:11].set(True)

    def pairs(q, d):
        return losses.retrieval_loss(
            q, d, idx, grades=grades, ranker=ranker, k=k, where=where, per_positive=True, log=log
        )

    # each (query, relevant document) pair as its own query, its other relevant documents
    # masked: one single-query retrieval_loss per pair, mapped over the pairs (one program)
    pair_query, pair_doc, pair_grade, pair_where = [], [], [], []
    for i in range(6):
        named = {}
        for j, g in zip(idx[i], grades[i]):
            if j >= 0:
                named[j] = max(named.get(j, 0), g)
        for j, g in named.items():
            if g == 0:  # weight 0 (its log-loss is that of a metric of 0)
                continue
            pair_query.append(i)
            pair_doc.append(j)
            pair_grade.append(g)
            pair_where.append(~np.isin(np.arange(50), [o for o, h in named.items() if o != j and h > 0]))
    pair_grade = np.asarray(pair_grade)
    of_query = np.asarray(pair_query)[None, :] == np.arange(6)[:, None]  # [queries, pairs]
    total = of_query @ pair_grade

    def explicit(q, d):
        def one(qi, j, g, w):
            return losses.retrieval_loss(qi[None], d, j[None, None], grades=g[None, None], ranker=ranker, k=k, where=w)[
                0
            ]

        loss = jax.vmap(one)(
            q[np.asarray(pair_query)],
            jnp.asarray(pair_doc),
            jnp.asarray(pair_grade),
            where & jnp.asarray(np.stack(pair_where)),
        )
        loss = -jnp.log(1 - loss) if log else loss
        weighted = jnp.asarray(of_query, loss.dtype) @ (jnp.asarray(pair_grade, loss.dtype) * loss)
        return jnp.where(total > 0, weighted / np.maximum(total, 1), jnp.float32(0.0 if log else 1.0))

    v_pairs, g_pairs = _values_and_grads(pairs, q, d)
    v_explicit, g_explicit = _values_and_grads(explicit, q, d)
    np.testing.assert_allclose(np.asarray(v_pairs), np.asarray(v_explicit), rtol=1e-5, atol=1e-6)
    for a, b in zip(g_pairs, g_explicit):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)
    one = idx[:, :1].copy()  # one relevant document each: the pairs are the queries
    np.testing.assert_allclose(
        np.asarray(losses.retrieval_loss(q, d, one, ranker=ranker, k=k, per_positive=True, log=log)),
        np.asarray(losses.retrieval_loss(q, d, one, ranker=ranker, k=k, log=log)),
        rtol=1e-6,
    )


@pytest.mark.parametrize("metric", [jaxrank.ndcg, jaxrank.reciprocal_rank], ids=["ndcg", "rr"])
def test_log_is_the_metrics_log_loss_an_upper_bound_of_one_minus_it(metric):
    rng = np.random.default_rng(7)
    q = jnp.asarray(rng.normal(size=(8, 16)), jnp.float32)
    d = jnp.asarray(rng.normal(size=(300, 16)), jnp.float32)
    one = np.arange(8)[:, None] * 7
    # each call one compiled program (eagerly, every operation of the blocks would compile alone)
    loss = jax.jit(functools.partial(losses.retrieval_loss, metric=metric), static_argnames="log")
    plain, logged = loss(q, d, one), loss(q, d, one, log=True)
    np.testing.assert_allclose(np.asarray(logged), -np.log(1 - np.asarray(plain)), rtol=1e-5)
    assert (np.asarray(logged) >= np.asarray(plain)).all()
    # a relevant document ranked at the bottom: 1 - metric saturates, its log-loss does not
    far = loss(q, jnp.concatenate([d, -q]), 300 + np.arange(8)[:, None], log=True)
    assert (np.asarray(far) > np.asarray(logged)).all() and (np.asarray(far) > 2).all()
    # no relevant document: 0, and no gradient from it; under jit the gradient is finite
    none = np.full((8, 2), -1)
    assert (np.asarray(loss(q, d, none, log=True)) == 0).all()
    g = jax.jit(jax.grad(lambda q: loss(q, d, one, log=True).mean()))(q)
    assert np.isfinite(np.asarray(g)).all() and float(jnp.abs(g).sum()) > 0
    # under vmap over two batches of queries: each batch's values
    mapped = jax.jit(jax.vmap(lambda q, p: loss(q, d, p, log=True)))(q.reshape(2, 4, 16), one.reshape(2, 4, 1))
    np.testing.assert_allclose(np.asarray(mapped).ravel(), np.asarray(logged), rtol=1e-5)


def test_the_exponential_bound_makes_the_log_of_reciprocal_rank_infonce():
    rng = np.random.default_rng(8)
    q, d = (
        x / np.linalg.norm(x, axis=-1, keepdims=True) for x in (rng.normal(size=(8, 16)), rng.normal(size=(300, 16)))
    )
    q, d = jnp.asarray(q, jnp.float32), jnp.asarray(d, jnp.float32)  # cosines: within 20 T of each other
    one = np.arange(8)[:, None] * 7
    loss = jax.jit(
        lambda q, d, p: losses.retrieval_loss(
            q, d, p, ranker=jaxrank.bound(0.5, exponential=True), metric=jaxrank.reciprocal_rank, log=True
        )
    )
    # InfoNCE: the softmax cross-entropy of each query's list over T, value and gradient
    infonce = jax.jit(lambda q: optax.softmax_cross_entropy_with_integer_labels((q @ d.T) / 0.5, one[:, 0]))
    np.testing.assert_allclose(np.asarray(loss(q, d, one)), np.asarray(infonce(q)), rtol=1e-5)
    g, want = jax.grad(lambda q: loss(q, d, one).sum())(q), jax.grad(lambda q: infonce(q).sum())(q)
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-4, atol=1e-6)
    # each term is at least the indicator: the ranks bound the hard ones from above
    scores = q @ d.T
    soft = jaxrank.bound(0.5, exponential=True)(scores).ranks
    s = np.asarray(scores)
    hard = (s[:, None, :] >= s[:, :, None]).sum(-1)  # 1 + the others at or above
    assert (np.asarray(soft) >= hard - 1e-4).all()
    # a relevant document about 1,000 temperatures below the rest: its rank grows along the
    # tangent past 20 T, the value finite, the gradient pushing it up
    far = jnp.concatenate([d, -500 * q])
    value = loss(q, far, 300 + np.arange(8)[:, None])
    gd = jax.grad(lambda f: loss(q, f, 300 + np.arange(8)[:, None]).sum())(far)
    assert np.isfinite(np.asarray(value)).all() and (np.asarray(value) > 20).all()
    assert np.isfinite(np.asarray(gd)).all() and (np.asarray(jnp.sum(gd[300:] * q, axis=-1)) < 0).all()


def test_a_pooled_temperature_is_the_mean_of_the_lists_top_gaps_for_any_block():
    rng = np.random.default_rng(9)
    q = jnp.asarray(rng.normal(size=(12, 8)), jnp.float32)
    d = jnp.asarray(rng.normal(size=(300, 8)), jnp.float32)
    idx = np.array([[i, 20 + i if i % 3 == 0 else -1] for i in range(12)])
    where = rng.random(300) < 0.9
    where[:32] = True
    scores = np.where(where, np.asarray(q @ d.T, np.float64), -np.inf)
    top = -np.sort(-scores, axis=-1)[:, :11]
    t = 2 * np.mean((top[:, 0] - top[:, 10]) / 10)  # one temperature: the mean over the 12 lists
    pooled = jaxrank.bound(2.0, top=10, exponential=True, per_list=False)
    loss = jax.jit(
        lambda q, ranker, block: losses.retrieval_loss(q, d, idx, where=where, ranker=ranker, block=block),
        static_argnums=(1, 2),
    )
    want = loss(q / t, jaxrank.bound(1.0, exponential=True), None)
    for block in (None, 3):
        np.testing.assert_allclose(np.asarray(loss(q, pooled, block)), np.asarray(want), rtol=1e-5)
    # under vmap over two batches of queries: each batch pools its own lists, as called alone
    halves = jax.jit(jax.vmap(lambda q, p: losses.retrieval_loss(q, d, p, where=where, ranker=pooled)))
    each = [losses.retrieval_loss(q[i : i + 6], d, idx[i : i + 6], where=where, ranker=pooled) for i in (0, 6)]
    np.testing.assert_allclose(
        np.asarray(halves(q.reshape(2, 6, 8), idx.reshape(2, 6, 2))).ravel(), np.concatenate(each), rtol=1e-5
    )
    # the ranker alone pools over the batch of lists it is given
    dense = jnp.asarray(np.where(where, scores, 0), jnp.float32)
    np.testing.assert_allclose(
        np.asarray(pooled(dense, where).ranks),
        np.asarray(jaxrank.bound(1.0, exponential=True)(dense / t, where).ranks),
        rtol=1e-5,
    )
    with pytest.raises(ValueError, match="per_list=False pools the lists' top gaps: give top"):
        jaxrank.bound(2.0, per_list=False)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda q, d: losses.retrieval_loss(q, d, [[0], [40]]), "positives: index 40 is outside the list of 40"),
        (lambda q, d: losses.retrieval_loss(q, d, [[0], [1]], grades=[[1, 2]]), "grades must have the shape"),
        (
            lambda q, d: losses.retrieval_loss(q, d, jaxrank.positives([[0], [1]]), grades=[[1], [1]]),
            "grades: give them inside jaxrank.positives",
        ),
        (lambda q, d: losses.retrieval_loss(q, d, [[0], [1]], block=3), "block must divide the number of queries 2"),
        (
            lambda q, d: losses.retrieval_loss(q, d[:, :3], [[0], [1]]),
            "queries and documents must share the embedding size d, got 4 and 3",
        ),
        (lambda q, d: losses.retrieval_loss(q, d, [0, 1]), r"positives must be int\[Q, r\]"),
        (lambda q, d: losses.retrieval_loss(q, d, [[0], [1], [2]]), r"positives must be \[Q, r\] with Q = 2"),
        (lambda q, d: losses.retrieval_loss(q, d, [[0], [1]], where=np.ones(7, bool)), "where must have shape"),
        (lambda q, d: losses.retrieval_loss(q, d, [[0], [1]], ranker=jaxrank.hard()), "needs a smooth ranker"),
        (lambda q, d: jaxrank.ndcg(q @ d.T, jaxrank.positives([[0], [99]])), "labels: index 99 is outside"),
        (lambda q, d: jaxrank.ndcg(q @ d.T, jaxrank.positives([[0, 1]])), "positives must have the batch axes"),
        (lambda q, d: jaxrank.positives([[0.5]]), "indices must be integers"),
    ],
)
def test_bad_input_raises_naming_the_argument(call, match):
    q = jnp.ones((2, 4), jnp.float32)
    d = jnp.ones((40, 4), jnp.float32)
    with pytest.raises(ValueError, match=match):
        call(q, d)


def test_the_docs_recipe_runs_at_realistic_size():
    """docs/retrieval_loss.md's recipe as written, then its ``step_loss`` on a batch of 512
    queries against their 512 positives and 512 hard negatives (d = 128, unit vectors), two
    positives a query: finite loss and gradients, and the hard nDCG@10 of the same lists."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "retrieval_loss.md").read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    env = {}
    exec(block, env)
    assert np.isfinite(float(env["value"])) and 0 < float(env["value"]) < 1
    assert env["hard"].shape == (env["queries"].shape[0],)

    rng = np.random.default_rng(0)
    n_queries, dim = 512, 128

    def unit(x):
        return x / np.linalg.norm(x, axis=-1, keepdims=True)

    documents = jnp.asarray(unit(rng.normal(size=(2 * n_queries, dim))), jnp.float32)
    queries = jnp.asarray(unit(documents[:n_queries] + unit(rng.normal(size=(n_queries, dim)))), jnp.float32)
    positives = np.stack([np.arange(n_queries), rng.integers(n_queries, 2 * n_queries, n_queries)], axis=-1)
    positives[::3, 1] = -1
    env.update(positives=jnp.asarray(positives), grades=jnp.asarray(rng.integers(1, 4, positives.shape), jnp.float32))
    value, grads = jax.jit(jax.value_and_grad(env["step_loss"], argnums=(0, 1)))(queries, documents)
    assert np.isfinite(float(value)) and 0 < float(value) < 1
    for g in grads:
        assert np.all(np.isfinite(np.asarray(g))) and float(jnp.max(jnp.abs(g))) > 0
    hard = np.asarray(jaxrank.ndcg(queries @ documents.T, jaxrank.positives(env["positives"], env["grades"]), k=10))
    assert hard.shape == (n_queries,) and 0 < hard.mean() <= 1


def test_a_positive_index_past_the_list_under_jit_is_reported_through_checkify():
    from jax.experimental import checkify

    q = jnp.ones((64, 8))
    d = jnp.ones((100, 8))
    loss = jax.jit(lambda p: losses.retrieval_loss(q, d, p).mean())
    err, _ = checkify.checkify(loss)(jnp.full((64, 1), 500))
    with pytest.raises(checkify.JaxRuntimeError, match="positives: index 500 is outside the list of 100 items"):
        err.throw()
    err, _ = checkify.checkify(loss)(jnp.full((64, 1), 99))
    assert err.get() is None
    with pytest.raises(ValueError, match="positives: index 500 is outside"):  # outside jit: at once
        losses.retrieval_loss(q, d, jnp.full((64, 1), 500))


def test_the_defaults_pairs_share_their_querys_temperature_four_times_the_mean_of_its_top_10_gaps():
    rng = np.random.default_rng(6)
    q = jnp.asarray(rng.normal(size=(6, 8)), jnp.float32)
    d = jnp.asarray(rng.normal(size=(300, 8)), jnp.float32)
    idx = np.array([[0, 1, 2], [3, -1, -1], [4, 5, -1], [6, 7, 8], [9, -1, -1], [10, 11, 12]])
    grades = rng.integers(1, 4, idx.shape)
    where = rng.random(300) < 0.9
    where[:13] = True
    scores = np.asarray(q @ d.T, np.float64)
    top = -np.sort(-np.where(where, scores, -np.inf), axis=-1)[:, :11]
    t = 4 * (top[:, 0] - top[:, 10]) / 10  # over the whole list, the query's relevant candidates in it
    want = losses.retrieval_loss(q / t[:, None], d, idx, grades=grades, where=where, ranker=jaxrank.bound(1.0))
    got = losses.retrieval_loss(q, d, idx, grades=grades, where=where)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def test_a_temperature_is_the_bound_on_the_scores_over_it_and_may_be_traced():
    q, d, idx, grades = _embeddings(7)
    want, got = jax.jit(  # one compiled program for both (eagerly, every operation would compile alone)
        lambda q: (
            losses.retrieval_loss(q / 0.05, d, idx, grades=grades, ranker=jaxrank.bound(), k=None, per_positive=True),
            losses.retrieval_loss(q, d, idx, grades=grades, temperature=0.05),
        )
    )(q)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    traced = jax.jit(lambda t: losses.retrieval_loss(q, d, idx, grades=grades, temperature=t))(0.05)
    np.testing.assert_allclose(np.asarray(traced), np.asarray(want), rtol=1e-6)
    # the gradient reaches a learned temperature (as CLIP's)
    g = jax.jit(jax.grad(lambda t: losses.retrieval_loss(q, d, idx, temperature=t).mean()))(0.05)
    assert np.isfinite(float(g)) and float(g) != 0


@pytest.mark.parametrize("temperature", [0.05, None], ids=["infonce_temperature", "default"])
def test_the_default_trains_a_projection_on_cosines(temperature):
    # the recipe at a realistic size: 64 queries against 1,024 unit documents, 1-3 relevant
    # each, cosines (over InfoNCE's temperature, or as they are); plain gradient steps on a
    # projection
    rng = np.random.default_rng(0)
    docs = rng.normal(size=(1024, 32)).astype(np.float32)
    idx = np.full((64, 3), -1)
    for i in range(64):
        idx[i, : 1 + i % 3] = rng.choice(1024, 1 + i % 3, replace=False)
    target = np.stack([docs[[j for j in row if j >= 0]].mean(0) for row in idx])
    queries = jnp.asarray(target + rng.normal(size=target.shape) * 2.0, jnp.float32)  # noisy views
    d = jnp.asarray(docs)

    def unit(x):
        return x / jnp.linalg.norm(x, axis=-1, keepdims=True)

    def loss(w):
        q, D = unit(queries @ w), unit(d @ w)
        return losses.retrieval_loss(q, D, idx, temperature=temperature).mean()

    def hard(w):
        scores = unit(queries @ w) @ unit(d @ w).T
        return float(jaxrank.ndcg(scores, jaxrank.positives(idx), k=10).mean())

    w = jnp.eye(32)
    step = jax.jit(jax.value_and_grad(loss))
    before, (value, grad) = hard(w), step(w)
    assert np.isfinite(float(value)) and np.all(np.isfinite(np.asarray(grad))) and float(jnp.abs(grad).max()) > 0
    for _ in range(60):
        _, grad = step(w)
        w = w - 0.05 * grad / (jnp.linalg.norm(grad) + 1e-12)
    assert hard(w) > before + 0.05, (before, hard(w))
