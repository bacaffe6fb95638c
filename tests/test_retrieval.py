"""jaxrank.retrieval: blockwise search against brute force, join against a dict, metrics end to end."""

import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from devices import run_with_host_devices

import jaxrank
from jaxrank.retrieval import _search, join, search

ROOT = Path(__file__).resolve().parents[1]


def brute_force(queries, corpus, k):
    """Every score, then (score descending, id ascending), by numpy."""
    full = np.asarray(queries, np.float64) @ np.asarray(corpus, np.float64).T
    ids = np.broadcast_to(np.arange(full.shape[1]), full.shape)
    order = np.lexsort((ids, -full), axis=-1)[:, :k]
    return np.take_along_axis(full, order, -1), order


def tied_embeddings(rng, rows, d=3):
    # Small integers: every product is exact in float32 and many scores tie.
    return rng.integers(-2, 3, (rows, d)).astype(np.float32)


@pytest.mark.parametrize(
    "k, block_size",
    [
        (5, 16),  # ragged last block (203 = 16 + 11 * 16 + 11)
        (40, 16),  # k larger than a block
        (10, 203),  # one block, the whole corpus
        (10, None),  # default block size
        (7, 29),  # blocks that divide the corpus exactly (203 = 7 x 29)
    ],
)
def test_search_equals_brute_force_with_ties(k, block_size):
    rng = np.random.default_rng(k)
    queries, corpus = tied_embeddings(rng, 7), tied_embeddings(rng, 203)
    scores, ids = search(queries, corpus, k, block_size=block_size)
    want_scores, want_ids = brute_force(queries, corpus, k)
    assert ids.dtype == jnp.int32 and scores.shape == ids.shape == (7, k)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(scores, want_scores)


def screens(num_queries, num_docs, k, block):
    """Whether search screens some blocks by group maxima (the path the tests below are about)."""
    first = max(block, min(k, num_docs))
    plan = _search._epochs(first, (num_docs - first) // block, block, min(k, num_docs))
    return any(cap is not None for _, _, cap in plan)


@pytest.mark.parametrize(
    "k, num_docs, block_size, screened",
    [
        (1, 10_011, 1024, True),  # corpus not a multiple of the block nor of the group
        (10, 10_011, 1024, True),
        (100, 40_013, 4096, True),
        (1500, 10_011, 1024, False),  # k beyond a block: merged whole
        (2997, 3000, 1024, False),  # k close to N
    ],
)
def test_screened_search_equals_brute_force(k, num_docs, block_size, screened):
    rng = np.random.default_rng(k)
    # Integers: every product is exact in float32, ties are rare but present.
    queries = rng.integers(-50, 51, (7, 8)).astype(np.float32)
    corpus = rng.integers(-50, 51, (num_docs, 8)).astype(np.float32)
    assert screens(7, num_docs, k, block_size) == screened
    scores, ids = search(queries, corpus, k, block_size=block_size)
    want_scores, want_ids = brute_force(queries, corpus, k)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(scores, want_scores)


@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16, np.float16])
def test_screened_search_with_many_ties_and_half_precision(dtype):
    # Small integers (exact in every dtype here). d=4 in -2..2: groups tie with the running
    # k-th best in numbers, every screened block overflows and is merged whole; d=8 in
    # -3..3: the screened blocks stay within capacity, with several documents per query
    # tied with the final k-th best.
    rng = np.random.default_rng(6)
    for high, d in ((2, 4), (3, 8)):
        queries = rng.integers(-high, high + 1, (7, d)).astype(np.float32)
        corpus = rng.integers(-high, high + 1, (10_011, d)).astype(np.float32)
        assert screens(7, 10_011, 10, 1024)
        scores, ids = search(queries.astype(dtype), corpus.astype(dtype), 10, block_size=1024)
        want_scores, want_ids = brute_force(queries, corpus, 10)
        np.testing.assert_array_equal(ids, want_ids)
        np.testing.assert_array_equal(scores, want_scores)


def test_screened_search_when_every_block_overflows(monkeypatch, request):
    # A capacity of one group: every screened block takes the whole-block merge, after
    # some pool slots were written (they must not be merged twice).
    monkeypatch.setattr(_search, "_screen_capacity", lambda k, block, seen: 1)
    monkeypatch.setattr(_search, "_GROUP", 8)
    # The compiled search is cached by its static arguments: trace it afresh, here and after.
    _search._search_jit.clear_cache()
    request.addfinalizer(_search._search_jit.clear_cache)
    rng = np.random.default_rng(7)
    queries = rng.standard_normal((5, 8)).astype(np.float32)
    corpus = rng.standard_normal((3000, 8)).astype(np.float32)
    assert screens(5, 3000, 10, 256)
    scores, ids = jax.jit(lambda q, c: search(q, c, 10, block_size=256))(queries, corpus)
    full = np.asarray(jnp.asarray(queries) @ jnp.asarray(corpus).T)  # float32, as search computes them
    order = np.lexsort((np.broadcast_to(np.arange(3000), full.shape), -full), axis=-1)[:, :10]
    np.testing.assert_array_equal(ids, order)


def test_search_tiles_queries():
    # More queries than one tile: the last tile is padded with zero rows, dropped after.
    rng = np.random.default_rng(8)
    tile = _search._QUERY_TILE[_search._platform(jnp.zeros(1))]
    queries, corpus = tied_embeddings(rng, 2 * tile + 3), tied_embeddings(rng, 300)
    assert _search._tile_rows(queries.shape[0], tile) < queries.shape[0]
    scores, ids = search(queries, corpus, 5, block_size=64)
    want_scores, want_ids = brute_force(queries, corpus, 5)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(scores, want_scores)


def test_search_with_k_beyond_corpus_fills_with_minus_one():
    rng = np.random.default_rng(1)
    queries, corpus = tied_embeddings(rng, 4), tied_embeddings(rng, 9)
    scores, ids = search(queries, corpus, 12, block_size=4)
    want_scores, want_ids = brute_force(queries, corpus, 9)
    np.testing.assert_array_equal(ids[:, :9], want_ids)
    np.testing.assert_array_equal(scores[:, :9], want_scores)
    np.testing.assert_array_equal(ids[:, 9:], -1)
    assert np.all(np.isneginf(scores[:, 9:]))


def test_search_under_jit_and_with_half_precision_embeddings():
    rng = np.random.default_rng(2)
    queries, corpus = tied_embeddings(rng, 7), tied_embeddings(rng, 203)
    want = search(queries, corpus, 5, block_size=16)
    got = jax.jit(lambda q, c: search(q, c, 5, block_size=16))(queries, corpus)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[0], want[0])
    # bfloat16 holds these small integers exactly; scores accumulate in float32.
    half = search(queries.astype(jnp.bfloat16), corpus.astype(jnp.bfloat16), 5, block_size=16)
    assert half[0].dtype == jnp.float32
    np.testing.assert_array_equal(half[1], want[1])


def test_search_rejects_bad_arguments():
    q, c = np.ones((2, 3), np.float32), np.ones((5, 3), np.float32)
    with pytest.raises(ValueError, match="queries"):
        search(np.ones(3, np.float32), c, 2)
    with pytest.raises(ValueError, match="embedding size"):
        search(q, np.ones((5, 4), np.float32), 2)
    with pytest.raises(ValueError, match="k must"):
        search(q, c, 0)
    with pytest.raises(ValueError, match="block_size"):
        search(q, c, 2, block_size=0)
    with pytest.raises(ValueError, match="recall_target"):
        search(q, c, 2, recall_target=1.5)
    with pytest.raises(ValueError, match="corpus must be floating"):
        search(q, np.ones((5, 3), np.int32), 2)


def test_approx_search_recall_against_exact():
    rng = np.random.default_rng(3)
    queries = rng.standard_normal((50, 16)).astype(np.float32)
    corpus = rng.standard_normal((4000, 16)).astype(np.float32)
    _, exact = search(queries, corpus, 10, block_size=1000)
    _, approx = search(queries, corpus, 10, block_size=1000, recall_target=0.9)
    recall = np.mean([len(set(a) & set(e)) / 10 for a, e in zip(np.asarray(approx), np.asarray(exact))])
    assert recall >= 0.9
    if jax.default_backend() == "cpu":
        # XLA's CPU backend runs approx_max_k as an exact top-k.
        assert recall == 1.0


def random_qrels(rng, num_queries, num_docs, m):
    """Padded qrels: distinct judged ids per query, -1 padding, labels 0..3, a mask."""
    judged_ids = np.full((num_queries, m), -1, np.int64)
    labels = np.zeros((num_queries, m), np.int32)
    for q in range(num_queries):
        count = rng.integers(0, m + 1)
        judged_ids[q, :count] = rng.choice(num_docs, count, replace=False)
        labels[q, :count] = rng.integers(0, 4, count)
    where = rng.random((num_queries, m)) < 0.9
    return judged_ids, labels, where


@pytest.mark.parametrize("k, m", [(6, 9), (120, 300)])  # pairwise comparison / sort + search
def test_join_equals_dict_lookup(k, m):
    rng = np.random.default_rng(k)
    judged_ids, judged_labels, where = random_qrels(rng, 5, 300, m)
    ids = rng.integers(-1, 300, (5, k))
    labels, judged = jax.jit(join)(ids, judged_ids, judged_labels, where)
    for q in range(5):
        table = {int(i): int(y) for i, y, w in zip(judged_ids[q], judged_labels[q], where[q]) if i >= 0 and w}
        assert judged[q].tolist() == [int(i) in table for i in ids[q]]
        assert labels[q].tolist() == [table.get(int(i), 0) for i in ids[q]]
    assert labels.dtype == judged_labels.dtype


def test_join_first_of_repeated_judged_ids_counts_on_both_paths():
    small = join([[4, 5]], [[4, 4, -1]], [[2, 1, 3]])
    wide = join(np.tile([[4, 5]], (1, 100)), np.tile([[4, 4, -1]], (1, 100)), np.tile([[2, 1, 3]], (1, 100)))
    assert small[0].tolist() == [[2, 0]] and small[1].tolist() == [[True, False]]
    assert wide[0].tolist() == [[2, 0] * 100] and wide[1].tolist() == [[True, False] * 100]


def test_join_rejects_bad_arguments():
    with pytest.raises(ValueError, match="judged_labels"):
        join([[1]], [[1, 2]], [[1]])
    with pytest.raises(ValueError, match="judged_ids"):
        join([[1]], [[1.0]], [[1]])
    with pytest.raises(ValueError, match="judged_where"):
        join([[1]], [[1]], [[1]], [[True, False]])


def test_metrics_after_search_and_join_equal_metrics_on_the_full_matrix():
    # The shapes of the example's test below, so that the two share compilations.
    rng = np.random.default_rng(4)
    num_queries, num_docs, k = 40, 3000, 100
    queries, corpus = tied_embeddings(rng, num_queries, 4), tied_embeddings(rng, num_docs, 4)
    judged_ids, judged_labels, where = random_qrels(rng, num_queries, num_docs, 8)
    judged_ids = judged_ids.astype(np.int32)
    judged_where = where & (judged_ids >= 0)
    dense = np.zeros((num_queries, num_docs), np.int32)  # the old way: labels of every document
    for q in range(num_queries):
        dense[q, judged_ids[q][judged_where[q]]] = judged_labels[q][judged_where[q]]
    full = jnp.asarray(queries) @ jnp.asarray(corpus).T

    scores, ids = search(queries, corpus, k, block_size=512)
    labels, _ = join(ids, judged_ids, judged_labels, judged_where)
    trec = dict(where=ids >= 0, judgments=judged_labels, judgments_where=judged_where)
    pairs = [
        (jaxrank.ndcg(scores, labels, k=10, **trec), jaxrank.ndcg(full, dense, k=10)),
        (jaxrank.recall(scores, labels, k=100, **trec), jaxrank.recall(full, dense, k=100)),
        (jaxrank.average_precision(scores, labels, k=100, **trec), jaxrank.average_precision(full, dense, k=100)),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert float(jnp.max(jaxrank.recall(scores, labels, k=100, **trec))) > 0


def test_sharded_corpus_equals_single_device():
    out = run_with_host_devices(
        """
        import jax, numpy as np
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        from jaxrank.retrieval import search

        rng = np.random.default_rng(5)
        q = rng.integers(-2, 3, (7, 3)).astype(np.float32)
        c = rng.integers(-2, 3, (400, 3)).astype(np.float32)  # 50 rows per device
        line = Mesh(np.array(jax.devices()), ("d",))
        grid = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
        on_line = jax.device_put(c, NamedSharding(line, P("d")))
        on_grid = jax.device_put(c, NamedSharding(grid, P(("x", "y"))))
        inside = jax.jit(jax.shard_map(
            lambda q, c: search(q, c, 30, block_size=16, axis_name="d"),
            mesh=line, in_specs=(P(), P("d")), out_specs=(P(), P()), check_vma=False))
        # Shards of 5120 rows searched in blocks of 1024: the screened path on every device.
        q8 = rng.integers(-50, 51, (7, 8)).astype(np.float32)
        c8 = rng.integers(-50, 51, (8 * 5120, 8)).astype(np.float32)
        got = search(q8, jax.device_put(c8, NamedSharding(line, P("d"))), 10, block_size=1024)
        want = search(q8, c8, 10, block_size=1024)
        np.testing.assert_array_equal(got[1], want[1])
        np.testing.assert_array_equal(got[0], want[0])
        for k, got in [
            (30, search(q, on_line, 30, block_size=16)),
            (30, search(q, on_grid, 30, block_size=16)),
            (80, search(q, on_line, 80, block_size=16)),  # k beyond one shard's 50 rows
            (30, inside(q, on_line)),
        ]:
            want = search(q, c, k, block_size=16)
            assert len(got[1].sharding.device_set) == 8
            np.testing.assert_array_equal(got[1], want[1])
            np.testing.assert_array_equal(got[0], want[0])
        print("ok")
        """
    )
    assert out.strip().endswith("ok")


def test_dense_retrieval_example_at_reduced_size():
    spec = importlib.util.spec_from_file_location("dense_retrieval", ROOT / "examples" / "dense_retrieval.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    data = example.synthetic_collection(num_queries=40, num_docs=3000, dim=32, seed=0)
    result = example.evaluate(data, k=100, block_size=512)
    # The old way, for the same numbers: every score and every label.
    full = jnp.asarray(data.queries) @ jnp.asarray(data.corpus).T
    dense = np.zeros(full.shape, np.int32)
    for q, (ids, labels) in enumerate(zip(data.judged_ids, data.judged_labels)):
        dense[q, ids[ids >= 0]] = labels[ids >= 0]
    np.testing.assert_allclose(result["nDCG@10"], float(jnp.mean(jaxrank.ndcg(full, dense, k=10))), rtol=1e-6)
    np.testing.assert_allclose(result["R@100"], float(jnp.mean(jaxrank.recall(full, dense, k=100))), rtol=1e-6)
    assert 0.1 < result["nDCG@10"] < 0.99


@pytest.mark.parametrize("k", [10, 1000])
def test_search_temporaries_do_not_grow_with_the_corpus(k):
    # The epochs are unrolled in Python (their number grows with log N); they share one pool,
    # at most about a block wide, so XLA's temporary buffers stay about the same size from
    # 1M to 3M documents (with a pool per epoch they grew from 353 to 499 MB at k = 1000).
    def temp_bytes(n):
        q, c = jax.ShapeDtypeStruct((1000, 128), jnp.float32), jax.ShapeDtypeStruct((n, 128), jnp.float32)
        block = _search._default_block(1000, k)
        compiled = _search._search_jit.lower(q, c, k, block, 512, None, None).compile()
        return compiled.memory_analysis().temp_size_in_bytes

    small, large = temp_bytes(1_000_000), temp_bytes(3_000_000)
    assert large <= 1.1 * small, (small, large)
