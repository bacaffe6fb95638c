"""segments= on every metric: each packed list equals the same list padded apart."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.metrics import segment_slots
from tests.devices import run_with_host_devices

pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)

# name -> keywords; every metric that takes segments=
METRICS = {
    "precision": dict(k=(1, 3)),
    "recall": dict(k=(2, 5)),
    "fallout": dict(k=3),
    "success": dict(k=(1, 2)),
    "reciprocal_rank": dict(),
    "average_precision": dict(),
    "r_precision": dict(mult=(0.5, 1.0)),
    "dcg": dict(k=3, gain="exp"),
    "ndcg": dict(k=(2, 4)),
    "err": dict(k=4),
    "rbp": dict(p=0.7),
    "num_ret": dict(k=2),
    "num_rel": dict(),
    "num_rel_ret": dict(k=3),
    "precision_recall_curve": dict(max_k=4),
    "recall_at_fixed_precision": dict(min_precision=0.5, max_k=4),
    "roc_auc": dict(),
    "spearman": dict(),
    "kendall_tau": dict(),
    "graded_average_precision": dict(),
    "ordered_pair_accuracy": dict(),
}
SMOOTH = ["recall", "reciprocal_rank", "average_precision", "ndcg", "err", "spearman", "ordered_pair_accuracy"]
IDS = np.array([-4, 0, 7, 2**20, 3])  # any integers, not sorted, not contiguous


def packed(seed, rows=5, n=9, n_ids=4):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.standard_normal((rows, n)), 1)  # ties too
    labels = rng.integers(0, 4, (rows, n))
    segments = rng.choice(IDS[:n_ids], (rows, n))
    where = rng.random((rows, n)) < 0.85
    return scores, labels, segments, where


def apart(scores, labels, segments, where, width):
    """Each row's lists one per row, their items in input order, padded to ``width`` with
    masked junk; the slot of each list (ascending id) and the item positions."""
    rng = np.random.default_rng(1)
    s_out, y_out, w_out, index, items = [], [], [], [], []
    for b in range(scores.shape[0]):
        for slot, sid in enumerate(np.unique(segments[b][where[b]])):
            pos = np.flatnonzero(where[b] & (segments[b] == sid))
            pad = width - len(pos)
            s_out.append(np.concatenate([scores[b, pos], rng.standard_normal(pad)]))
            y_out.append(np.concatenate([labels[b, pos], rng.integers(0, 4, pad)]))
            w_out.append(np.arange(width) < len(pos))
            index.append((b, slot))
            items.append(pos)
    return np.array(s_out), np.array(y_out), np.array(w_out), index, items


def call(name, scores, labels, where, segments=None, **kw):
    """The metric under jit (one compilation instead of many eager ops)."""

    def f(x, y, m, seg):
        out = getattr(jaxrank, name)(x, y, where=m, segments=seg, **METRICS[name], **kw)
        return out[:2] if isinstance(out, tuple) and name == "precision_recall_curve" else out

    return jax.jit(f)(jnp.asarray(scores), jnp.asarray(labels), jnp.asarray(where), segments)


def leaves(out):
    return [np.asarray(v) for v in jax.tree_util.tree_leaves(out)]


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_metric_on_packed_lists_equals_the_lists_padded_apart(name):
    scores, labels, segments, where = packed(0)
    s, y, w, index, _ = apart(scores, labels, segments, where, width=12)
    got = leaves(call(name, scores, labels, where=where, segments=segments))
    # the lists apart, and last an empty list (the value of the slots without a list)
    w = np.concatenate([w, np.zeros_like(w[:1])])
    want = leaves(call(name, np.concatenate([s, s[:1]]), np.concatenate([y, y[:1]]), where=w))
    empty = [v[-1:] for v in want]
    present = np.asarray(segment_slots(segments, where).present)
    assert present.sum() == len(index)
    for g, v, e in zip(got, want, empty):
        assert g.shape[:2] == scores.shape  # [rows, S = n, ...]
        for i, (b, slot) in enumerate(index):
            np.testing.assert_allclose(g[b, slot], v[i], rtol=1e-12, atol=1e-12, err_msg=f"{name} {b} {slot}")
        np.testing.assert_array_equal(g[~present], np.broadcast_to(e[0], g[~present].shape))


@pytest.mark.parametrize("name", SMOOTH)
def test_smooth_values_and_gradients_on_packed_lists_equal_the_lists_apart(name):
    ranker = jaxrank.approx(0.5)
    scores, labels, segments, where = packed(1, rows=3, n=8)
    s, y, w, index, items = apart(scores, labels, segments, where, width=10)

    def total(x, yy, mask, **kw):
        return jnp.sum(call(name, x, yy, where=mask, ranker=ranker, **kw))

    v, g = jax.jit(jax.value_and_grad(total))(jnp.asarray(scores), labels, where, segments=segments)
    v_apart, g_apart = jax.jit(jax.value_and_grad(total))(jnp.asarray(s), y, w)
    np.testing.assert_allclose(v, v_apart, rtol=1e-10)
    want = np.zeros_like(scores)
    for i, (b, _) in enumerate(index):
        want[b, items[i]] = g_apart[i, : len(items[i])]
    assert np.abs(want).sum() > 0
    np.testing.assert_allclose(g, want, rtol=1e-8, atol=1e-12)


def test_slots_follow_ascending_ids_and_skip_invalid_items():
    seg = jnp.array([[9, -1, 9, 5, 2**31 - 1], [3, 3, 3, 3, 3]], jnp.int32)
    where = jnp.array([[True, True, True, False, True], [True, True, False, True, True]])
    s = jax.jit(segment_slots, static_argnames="num_segments")(seg, where, num_segments=4)
    assert s.slot.tolist() == [[1, 0, 1, -1, 2], [0, 0, -1, 0, 0]]
    assert s.present.tolist() == [[True, True, True, False], [True, False, False, False]]
    assert s.count.tolist() == [3, 1]
    # the largest int32 id (whose sort key is the padding's) among invalid items
    s = segment_slots(jnp.array([0, 2**31 - 1, 2**31 - 1, 0]), jnp.array([False, True, False, True]))
    assert s.slot.tolist() == [-1, 1, -1, 0]
    assert segment_slots(jnp.array([True, False, True])).slot.tolist() == [1, 0, 1]


def test_jit_vmap_and_num_segments():
    scores, labels, segments, where = packed(2)

    def f(x, y, m, seg, num_segments=4):
        return jaxrank.ndcg(x, y, where=m, segments=seg, num_segments=num_segments, k=3)

    batched = jax.jit(f)(scores, labels, where, segments)
    assert batched.shape == (5, 4)
    np.testing.assert_allclose(jax.jit(jax.vmap(f))(scores, labels, where, segments), batched, rtol=1e-12)
    full = jax.jit(f, static_argnames="num_segments")(scores, labels, where, segments, num_segments=None)
    np.testing.assert_allclose(full[:, :4], batched, rtol=1e-12)
    assert np.all(np.asarray(full[:, 4:]) == 0)


def test_more_lists_than_num_segments():
    scores, labels = jnp.array([0.1, 0.2, 0.3]), jnp.array([1, 0, 1])
    seg = jnp.array([1, 2, 3])
    with pytest.raises(ValueError, match="a row holds 3 lists, more than num_segments=2"):
        jaxrank.ndcg(scores, labels, segments=seg, num_segments=2)
    # under jit the ids are unknown while tracing: the row's values are NaN, not wrong numbers
    out = jax.jit(lambda s: jaxrank.ndcg(scores, labels, segments=s, num_segments=2))(seg)
    assert np.all(np.isnan(out))
    ok = jax.jit(lambda s: jaxrank.ndcg(scores, labels, segments=s, num_segments=3))(seg)
    assert np.asarray(ok).tolist() == [1.0, 0.0, 1.0]  # one-item lists: relevant or not


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(segments=jnp.zeros(4, jnp.int32)), r"segments must have the shape of scores \(3,\)"),
        (dict(segments=jnp.zeros(3)), "segments must hold integer segment ids, got float"),
        (dict(num_segments=2), "num_segments was given without segments"),
        (dict(segments=jnp.zeros(3, jnp.int32), num_segments=0), "num_segments must be a positive integer"),
        (dict(segments=jnp.zeros(3, jnp.int32), judgments=jnp.ones(5)), "segments cannot be combined with judgments"),
        (
            dict(segments=jnp.zeros(3, jnp.int32), ranker=jaxrank.hard()(jnp.ones(3))),
            "segments needs a ranker",
        ),
    ],
)
def test_bad_segments_are_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        jaxrank.average_precision(jnp.array([0.3, 0.2, 0.1]), jnp.array([1, 0, 1]), **kwargs)


def test_segments_under_shard_map_and_sharded_jit_equal_the_unsharded_values():
    code = r"""
import json
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import jaxrank
mesh = Mesh(jax.devices(), ("d",))
rng = np.random.default_rng(0)
B, N = 16, 12
scores = rng.standard_normal((B, N)).astype(np.float32)
labels = rng.integers(0, 3, (B, N)).astype(np.int32)
segments = rng.choice(np.array([5, -2, 40]), (B, N)).astype(np.int32)
where = rng.random((B, N)) < 0.9
def f(s, y, m, seg):
    hard = jaxrank.dcg(s, y, where=m, segments=seg, num_segments=3, k=(1, 5))
    soft = jaxrank.average_precision(s, y, where=m, segments=seg, num_segments=3, ranker=jaxrank.approx(0.5))
    opa = jaxrank.ordered_pair_accuracy(s, y, where=m, segments=seg, num_segments=3)
    return hard, soft, opa
want = f(scores, labels, where, segments)
rows = NamedSharding(mesh, P("d"))
args = [jax.device_put(x, rows) for x in (scores, labels, where, segments)]
jitted = jax.jit(f)(*args)
mapped = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P("d"), out_specs=P("d")))(*args)
err = lambda got: max(float(np.max(np.abs(np.asarray(g) - np.asarray(w)))) for g, w in zip(got, want))
grad = jax.grad(lambda s: jnp.sum(f(s, labels, where, segments)[1]))
g_want = grad(scores)
g_sharded = jax.jit(grad)(args[0])
print("REPORT" + json.dumps(dict(
    jit=err(jitted), shard_map=err(mapped), sharded=jitted[0].sharding.spec[0] == "d",
    grad=float(np.max(np.abs(g_sharded - g_want))), grad_norm=float(np.abs(g_want).sum()),
    finite=bool(all(np.isfinite(np.asarray(w)).all() for w in want)))))
"""
    report = json.loads(run_with_host_devices(code, devices=8).split("REPORT", 1)[1])
    assert report["finite"] and report["sharded"]
    assert report["jit"] <= 1e-6 and report["shard_map"] <= 1e-6
    assert report["grad_norm"] > 0 and report["grad"] <= 1e-6
