"""Many hosts on JAX's own runtime: two local processes joined by ``jax.distributed``
(CPU collectives over gloo) evaluate halves of the queries, and halves of a corpus, and get
the single-process numbers."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np

import jaxrank
from tests.test_accumulate import trec_dicts

MEASURES = ["map", "gm_map", "ndcg_cut.10", "bpref", "num_rel_ret", "num_q"]
DENSE_MEASURES = ["nDCG@10", "AP", "bpref", "num_rel_ret"]

WORKER = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    pid, port = int(sys.argv[1]), sys.argv[2]
    jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2, process_id=pid)
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from jaxrank.measures.accumulate import accumulator
    from jaxrank.retrieval import join, search
    from tests.test_accumulate import trec_arrays, trec_dicts
    from tests.test_distributed import MEASURES, DENSE_MEASURES, dense_case

    assert jax.process_count() == 2 and len(jax.devices()) == 2
    mesh = Mesh(np.array(jax.devices()), ("hosts",))
    rows = NamedSharding(mesh, P("hosts"))
    out = {}

    # 1. half of the queries on each process
    qids, lists, judg = trec_arrays(*trec_dicts(0))
    arrays = [lists["scores"], lists["labels"], lists["where"], judg["judgments"], judg["judgments_where"]]
    half = len(qids) // 2
    mine = [a[pid * half : (pid + 1) * half] for a in arrays]
    acc = accumulator(MEASURES)
    # (a) each process updates its own state; the states are gathered and merged
    local = acc.update(acc.init(), mine[0], mine[1], where=mine[2], judgments=mine[3], judgments_where=mine[4])
    gathered = multihost_utils.process_allgather(local)
    merged = acc.init()
    for i in range(jax.process_count()):
        merged = acc.merge(merged, jax.tree_util.tree_map(lambda x: x[i], gathered))
    out["gathered"] = {k: float(v) for k, v in acc.compute(merged).items()}
    # (b) one global batch sharded over the processes; update and psum under shard_map
    glob = [jax.make_array_from_process_local_data(rows, a) for a in mine]

    def step(s, y, w, j, jw):
        return jax.lax.psum(acc.update(acc.init(), s, y, where=w, judgments=j, judgments_where=jw), "hosts")

    state = jax.jit(jax.shard_map(step, mesh=mesh, in_specs=(P("hosts"),) * 5, out_specs=P()))(*glob)
    state = jax.tree_util.tree_map(lambda x: np.asarray(x.addressable_data(0)), state)
    out["sharded"] = {k: float(v) for k, v in acc.compute(state).items()}

    # 2. half of the corpus on each process: search where it lies, then evaluate
    queries, corpus, judged_ids, judged_labels = dense_case()
    n = corpus.shape[0] // 2
    corpus = jax.make_array_from_process_local_data(rows, corpus[pid * n : (pid + 1) * n])
    scores, ids = search(queries, corpus, 10)
    labels, judged = join(ids, judged_ids, judged_labels)
    dense = accumulator(DENSE_MEASURES)
    state = dense.update(dense.init(), scores, jnp.where(judged, labels, -1), judgments=judged_labels)
    out["corpus"] = {k: float(v) for k, v in dense.compute(state).items()}
    out["ids"] = np.asarray(ids).tolist()
    print("RESULT", json.dumps(out))
    """
)


def dense_case():
    """Queries, a corpus, and each query's judged document ids and labels."""
    rng = np.random.default_rng(11)
    queries = rng.standard_normal((16, 8))
    corpus = rng.standard_normal((64, 8))
    judged_ids = np.stack([rng.choice(64, 12, replace=False) for _ in range(16)])
    judged_labels = rng.integers(0, 3, (16, 12))
    return queries, corpus, judged_ids, judged_labels


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_get_the_single_process_numbers():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)
    port = str(free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(pid), port],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for pid in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=400) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (stdout, stderr) in zip(procs, outputs):
        assert p.returncode == 0, f"process exited {p.returncode}\n{stdout[-3000:]}\n{stderr[-5000:]}"
    results = [json.loads(stdout.split("RESULT ", 1)[1]) for stdout, _ in outputs]

    # the queries: trec_eval's numbers (jaxrank.evaluate on the dicts, one process)
    qrels, run = trec_dicts(0)
    want = jaxrank.evaluate(qrels, run, MEASURES)
    for r in results:
        for way in ("gathered", "sharded"):
            assert set(r[way]) == set(want)
            for name, value in want.items():
                np.testing.assert_allclose(r[way][name], value, rtol=1e-9, atol=1e-12, err_msg=f"{way} {name}")

    # the corpus: the exact top 10 of the whole score matrix, then compute() in this process
    queries, corpus, judged_ids, judged_labels = dense_case()
    s = queries @ corpus.T
    top = np.argsort(-s, axis=1, kind="stable")[:, :10]
    hit = top[:, :, None] == judged_ids[:, None, :]
    labels = np.where(hit.any(-1), (hit * judged_labels[:, None, :]).sum(-1), -1)
    per_query = jaxrank.compute(np.take_along_axis(s, top, 1), labels, DENSE_MEASURES, judgments=judged_labels)
    for r in results:
        assert r["ids"] == top.tolist()
        for name in DENSE_MEASURES:
            want = per_query[name].sum() if name == "num_rel_ret" else per_query[name].mean()
            np.testing.assert_allclose(r["corpus"][name], want, rtol=1e-9, err_msg=name)
