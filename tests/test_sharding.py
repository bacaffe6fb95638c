"""The ranker and every metric under ``shard_map`` and ``jit`` on sharded inputs.

Two subprocesses with 8 CPU host devices each (tests/devices.py) run every public metric
with two exact rankers (``stable``, ``expected``), and one metric per ``Ranks`` operation with
the other tie policies and every smooth ranker, at
``k=None``, ``k=10`` (the top-k path) and ``k=100`` (longer than the lists: the full sort),
three ways -- unsharded, inside ``shard_map`` over the batch axis, and
under ``jit`` with inputs sharded over the batch axis -- and prints the largest
differences, which the tests here check. A ``shard_map`` body sees its own rows only, so
its reference is the unsharded call on each block of rows (the same numbers as the whole
batch, except for ``gumbel``, whose noise is drawn per call).
"""

import concurrent.futures
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from tests.devices import run_with_host_devices

CODE = r"""
import json, time
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import jaxrank

DEVICES = 8
mesh = Mesh(jax.devices(), ("d",))
rows = NamedSharding(mesh, P("d"))
rng = np.random.default_rng(0)
B, N = 32, 40
scores = np.round(rng.standard_normal((B, N)), 1).astype(np.float32)  # ties, and -0.0
labels = rng.integers(0, 4, (B, N)).astype(np.int32)
where = rng.random((B, N)) < 0.9
where[:, :3] = True

CUT = ["precision", "recall", "average_precision", "reciprocal_rank", "dcg", "ndcg", "success",
       "err", "rbp", "fallout", "num_ret", "num_rel_ret"]
ALL = {
    "hard-stable": jaxrank.hard("stable"),
    "hard-pessimistic": jaxrank.hard("pessimistic"),
    "hard-optimistic": jaxrank.hard("optimistic"),
    "hard-expected": jaxrank.hard("expected"),
    "approx": jaxrank.approx(0.5),
    "softrank": jaxrank.softrank(0.5),
    "neuralsort": jaxrank.neuralsort(1.0),
    "softsort": jaxrank.softsort(1.0),
    "gumbel": jaxrank.gumbel(jaxrank.approx(0.5), samples=2),
}
RANKERS = {name: ALL[name] for name in NAMES}

# Metrics differ only in the weights given to the ranker's operations: one metric per
# operation (linear, count_before, survival, cascade, prefix_sum) covers them at a fifth of
# the compile time of all of them. Every metric runs with two exact policies (a tie group
# kept whole, and ties broken); the other rankers run one metric per operation.
PER_OPERATION = ["ndcg", "average_precision", "reciprocal_rank", "err"]
EVERY_METRIC = ("hard-stable", "hard-expected")


def every_metric(name, ranker):
    # k=10 takes the exact ranker's top-k path, k=100 (past the lists' end) and None its full
    # sort; the smooth rankers have one path, so both cutoffs go in one call for them.
    cuts = (None, 10, (10, 100)) if not ranker.smooth else (None, (10, 100))
    names = CUT if name in EVERY_METRIC else PER_OPERATION
    def f(s, y, w):
        out = {}
        for name in names:
            for k in cuts:
                out[f"{name}@{k}"] = getattr(jaxrank, name)(s, y, k=k, where=w, ranker=ranker)
        if not ranker.smooth:
            # no mask: the top-k of the scores themselves (shifted: no zero in any top 10),
            # and the keyed fallback (the rounded scores hold zeros and -0.0)
            out["ndcg_unmasked@10"] = jaxrank.ndcg(s + 10.0, y, k=10, ranker=ranker)
            out["ndcg_unmasked_zeros@10"] = jaxrank.ndcg(s, y, k=10, ranker=ranker)
        out["r_precision"] = jaxrank.r_precision(s, y, where=w, ranker=ranker)
        # the C/W/L and agreement measures' own paths: INST's running sum (a loop over the
        # positions of exact ranks), NERR's two-column cascade, Compat's ideal prefix sums
        out["inst@20"] = jaxrank.inst(s, y, where=w, max_rel=3, k=20, ranker=ranker)
        out["nerr10"] = jaxrank.nerr10(s, y, where=w, max_rel=3, ranker=ranker)
        out["compatibility"] = jaxrank.compatibility(s, y, where=w, ranker=ranker)
        out["num_rel"] = jaxrank.num_rel(s, y, where=w)
        return out
    return f

def blockwise(f, *args):
    # what each shard computes: f on its own rows
    b = B // DEVICES
    parts = [f(*(a[i * b:(i + 1) * b] for a in args)) for i in range(DEVICES)]
    return jax.tree.map(lambda *p: np.concatenate(p), *parts)

def gap(a, b):
    return max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
               for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))

report = {"values": {}, "grads": {}}
args = (scores, labels, where)
sharded = tuple(jax.device_put(a, rows) for a in args)
for name, ranker in RANKERS.items():
    t0 = time.process_time()
    f = every_metric(name, ranker)
    whole = jax.jit(f)(*args)
    block = blockwise(jax.jit(f), *args) if name == "gumbel" else whole
    # both ways in one program: shard_map, and the same function on the sharded inputs
    both = jax.jit(lambda *a: (jax.shard_map(f, mesh=mesh, in_specs=P("d"), out_specs=P("d"))(*a), f(*a)))
    in_map, in_jit = both(*sharded)
    finite = all(np.isfinite(np.asarray(v)).all() for v in jax.tree.leaves(whole))
    spread = all(len(v.sharding.spec) > 0 and v.sharding.spec[0] == "d" for v in jax.tree.leaves(in_jit))
    report["values"][name] = dict(shard_map=gap(in_map, block), jit=gap(in_jit, whole), finite=finite,
                                  jit_output_sharded=spread)
    if ranker.smooth:
        def loss(s, y, w, r=ranker):
            return jnp.sum(jaxrank.ndcg(s, y, k=10, where=w, ranker=r))
        g = jax.grad(loss)
        whole_g = blockwise(jax.jit(g), *args) if name == "gumbel" else jax.jit(g)(*args)
        map_g = jax.jit(jax.shard_map(g, mesh=mesh, in_specs=P("d"), out_specs=P("d")))(*args)
        report["grads"][name] = dict(shard_map=gap(map_g, whole_g), norm=float(np.linalg.norm(whole_g)))
    print(name, f"{time.process_time() - t0:.1f} s", report["values"][name], report["grads"].get(name), flush=True)

if not CHECK_CALLBACKS:
    print("REPORT" + json.dumps(report))
    raise SystemExit(0)

# Where the host sort runs: inside shard_map (each shard its own rows), not under jit with
# several devices (XLA would gather the shards to one device for it), and not in a shard_map
# with check_vma=False (its manual axes are hidden); that one must also finish.
ndcg = lambda s, y: jaxrank.ndcg(s, y)
hlo = lambda f, *a: jax.jit(f).lower(*a).compile().as_text()
report["callback"] = dict(
    shard_map="callback" in hlo(jax.shard_map(ndcg, mesh=mesh, in_specs=P("d"), out_specs=P("d")), scores, labels),
    jit="callback" in hlo(ndcg, *sharded[:2]),
)
no_vma = jax.shard_map(ndcg, mesh=mesh, in_specs=P("d"), out_specs=P("d"), check_vma=False)
report["callback"]["shard_map_no_vma"] = "callback" in hlo(no_vma, scores, labels)
report["no_vma_gap"] = gap(jax.jit(no_vma)(scores, labels), ndcg(scores, labels))
print("REPORT" + json.dumps(report))
"""


RANKERS = [
    "hard-stable",
    "hard-pessimistic",
    "hard-optimistic",
    "hard-expected",
    "approx",
    "softrank",
    "neuralsort",
    "softsort",
    "gumbel",
]
# Two subprocesses at once (one per core of a small CI machine), about equal in compile time.
HALVES = [
    ["hard-expected", "hard-optimistic", "neuralsort", "softsort"],
    ["hard-stable", "hard-pessimistic", "approx", "softrank", "gumbel"],
]


@pytest.fixture(scope="module")
def report():
    def run(names, check_callbacks):
        code = f"NAMES = {names!r}\nCHECK_CALLBACKS = {check_callbacks}\n" + CODE
        out = run_with_host_devices(code, devices=8, timeout=600)
        return json.loads(out.split("REPORT", 1)[1])

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first, second = pool.map(run, HALVES, [True, False])
    for key in ("values", "grads"):
        first[key].update(second[key])
    return first


@pytest.mark.parametrize("ranker", RANKERS)
def test_every_metric_under_shard_map_equals_the_unsharded_values(report, ranker):
    values = report["values"][ranker]
    assert values["finite"]
    assert values["shard_map"] <= 1e-5, values


@pytest.mark.parametrize("ranker", RANKERS)
def test_every_metric_under_jit_on_sharded_inputs_equals_the_unsharded_values_and_stays_sharded(report, ranker):
    values = report["values"][ranker]
    assert values["jit"] <= 1e-5, values
    assert values["jit_output_sharded"]


@pytest.mark.parametrize("ranker", ["approx", "softrank", "neuralsort", "softsort", "gumbel"])
def test_soft_ranker_gradients_under_shard_map_equal_the_unsharded_ones(report, ranker):
    grads = report["grads"][ranker]
    assert grads["norm"] > 0
    assert grads["shard_map"] <= 1e-5 * max(1.0, grads["norm"]), grads


def test_host_sort_runs_per_shard_in_shard_map_and_never_on_sharded_jit(report):
    assert report["callback"] == dict(shard_map=True, jit=False, shard_map_no_vma=False)
    assert report["no_vma_gap"] <= 1e-6


def test_single_device_jit_on_cpu_sorts_on_the_host():
    # the fast path of the one-device case: numpy's sort through a callback, not XLA's sort
    scores = jnp.asarray(np.random.default_rng(0).standard_normal((4, 300)), jnp.float32)
    labels = jnp.zeros((4, 300), jnp.int32)
    assert jax.device_count() == 1
    text = jax.jit(lambda s, y: jaxrank.ndcg(s, y)).lower(scores, labels).compile().as_text()
    assert "callback" in text
