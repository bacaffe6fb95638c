"""jaxrank.fuse against ranx.fuse; the array form (jaxrank.fusion.fuse_scores) against the dict form."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import ranx

import jaxrank
from jaxrank.fusion import METHODS, NORMS, RANK_BASED, fuse_scores
from jaxrank.trec import read_run, write_run

pytestmark = pytest.mark.usefixtures("quick_compiles")  # many small programs (tests/conftest.py)

R = 3
WEIGHTS = [0.5, 0.3, 0.15]  # no two subsets weigh the same: weighted Condorcet votes never tie
PARAMS = {
    "rrf": {"k": 5},
    "rbc": {"phi": 0.7},
    "gmnz": {"gamma": 0.5},
    "logn_isr": {"sigma": 0.2},
    **{m: {"weights": WEIGHTS} for m in ("wsum", "wmnz", "w_bordafuse", "w_condorcet")},
}
# Every combination ranx computes independently of Python's hash seed (borda normalisation
# puts a rank-based method's candidates in set order: jaxrank refuses it, tested below).
GRID = [(m, n) for m in METHODS for n in NORMS if not (n == "borda" and m in RANK_BASED)]
DOCS = [f"d{i}" for i in range(14)]  # "d10" < "d2": docno order is strcmp's, not numeric
CONSENSUS = ("q0", "q1", "q2")


def _make_runs(seed: int = 0) -> list[dict]:
    """Three runs: queries where every run retrieves the same documents in nearly the same
    order (ranx's Condorcet comparison is then usually a total order), and queries with
    partial overlap, tied scores, a single document (min-max of equal scores), negative
    scores (max-normalisation's floor), and a query one run lacks."""
    rng = np.random.default_rng(seed)
    runs: list[dict] = [{} for _ in range(R)]
    for q in range(9):
        qid = f"q{q}"
        if qid in CONSENSUS:
            docs = rng.choice(DOCS, size=int(rng.integers(3, 7)), replace=False).tolist()
            base = rng.permutation(len(docs)).astype(float)
            for r in range(R):
                runs[r][qid] = dict(zip(docs, np.round(base + rng.normal(0, 0.4, len(docs)), 3).tolist()))
            continue
        for r in range(R):
            if qid == "q8" and r == 1:
                continue  # a query missing from a run
            n = 1 if (qid == "q7" and r == 0) else int(rng.integers(1, 13))  # ranx sorts <= 15 stably
            docs = rng.choice(DOCS, size=n, replace=False).tolist()
            scores = rng.integers(0, 4, n) * 0.5 - (3.0 if r == 2 else 0.0)  # ties; run 2 negative
            runs[r][qid] = dict(zip(docs, scores.tolist()))
    return runs


def _ranx_run(run: dict, qids: list[str], name: str) -> ranx.Run:
    """The run for ranx: every query (``{}`` where the run lacks it, as ranx needs the same
    queries in every run), documents in jaxrank's order (score desc, docno desc). ranx keeps
    the input order of tied scores (numba sorts lists of <= 15 by insertion)."""
    ordered = {}
    for q in qids:
        docs = run.get(q, {})
        ordered[q] = dict(sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True))
    return ranx.Run(ordered, name=name)


@pytest.fixture(scope="module")
def runs():
    dicts = _make_runs()
    qids = sorted(set().union(*dicts))
    return dicts, [_ranx_run(r, qids, f"r{i}") for i, r in enumerate(dicts)]


def _ranx_dict(run: ranx.Run) -> dict:
    return {q: dict(run[q]) for q in run.keys() if len(run[q])}


def _ranx_total_order(dicts: list[dict], qid: str, weights, inverted: bool = False) -> bool:
    """Whether ranx's Condorcet comparison on ``qid`` is a strict total order, so that its
    sort has one result: ranx puts x first when the runs ranking x above y (a missing
    document at index 1e6) weigh at least as much as the rest. ``inverted``: the runs as
    min-max-inverted re-sorts them (score ascending, ties in input order: docno descending)."""
    sign = -1 if inverted else 1
    lists = [sorted(d.get(qid, {}).items(), key=lambda kv: (sign * kv[1], kv[0]), reverse=True) for d in dicts]
    index = [{doc: i for i, (doc, _) in enumerate(lst)} for lst in lists]
    cands = sorted(set().union(*index))

    def first(x, y):
        votes = sum(w for w, ix in zip(weights, index) if ix.get(x, 10**6) < ix.get(y, 10**6))
        return votes >= sum(weights) - votes

    if any(first(x, y) == first(y, x) for x, y in itertools.combinations(cands, 2)):
        return False
    wins = [sum(first(x, y) for y in cands if y != x) for x in cands]
    return len(set(wins)) == len(cands)  # a tournament is transitive iff its win counts differ


def _assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for q in want:
        assert got[q].keys() == want[q].keys(), q
        np.testing.assert_allclose([got[q][d] for d in want[q]], list(want[q].values()), rtol=1e-9, atol=1e-6)


@pytest.mark.parametrize("method,norm", GRID)
def test_fuse_equals_ranx(runs, method, norm):
    dicts, ranx_runs = runs
    params = PARAMS.get(method, {})
    want = _ranx_dict(ranx.fuse(ranx_runs, norm=norm, method=method, params=params))
    got = jaxrank.fuse(dicts, method=method, norm=norm, params=params).to_dict()
    if method in ("condorcet", "w_condorcet"):
        weights = WEIGHTS if method == "w_condorcet" else [1] * R
        defined = [q for q in want if _ranx_total_order(dicts, q, weights, norm == "min-max-inverted")]
        assert len(defined) >= 2  # the consensus queries
        got, want = {q: got[q] for q in defined}, {q: want[q] for q in defined}
    _assert_same(got, want)


def test_default_weights_are_equal(runs):
    dicts, ranx_runs = runs
    want = _ranx_dict(ranx.fuse(ranx_runs, method="wsum", params={"weights": [1 / R] * R}))
    _assert_same(jaxrank.fuse(dicts).to_dict(), want)


def test_condorcet_cycle_ties():
    # a > b > c, b > c > a, c > a > b: each document is beaten by one other 2 votes to 1.
    runs = [
        {"q": {"a": 3.0, "b": 2.0, "c": 1.0}},
        {"q": {"b": 3.0, "c": 2.0, "a": 1.0}},
        {"q": {"c": 3.0, "a": 2.0, "b": 1.0}},
    ]
    assert jaxrank.fuse(runs, method="condorcet").to_dict() == {"q": {"c": 2.0, "b": 2.0, "a": 2.0}}
    # A run that missed both documents of a pair abstains: a beats b 1 vote to 0 (ranx: 1 to 1,
    # b counting the second run's vote); a-c and b-c tie 1 to 1.
    assert jaxrank.fuse([{"q": {"a": 1.0, "b": 0.0}}, {"q": {"c": 1.0}}], method="condorcet").to_dict() == {
        "q": {"a": 3.0, "c": 3.0, "b": 2.0}
    }


def _aligned(dicts: list[dict]):
    """``scores[R, Q, n]``, ``where`` and the candidates, laid out by docno descending."""
    qids = sorted(set().union(*dicts))
    cands = {q: sorted(set().union(*(d.get(q, {}) for d in dicts)), reverse=True) for q in qids}
    n = max(len(c) for c in cands.values())
    scores, where = np.zeros((len(dicts), len(qids), n)), np.zeros((len(dicts), len(qids), n), bool)
    for r, d in enumerate(dicts):
        for i, q in enumerate(qids):
            for j, doc in enumerate(cands[q]):
                if doc in d.get(q, {}):
                    scores[r, i, j], where[r, i, j] = d[q][doc], True
    return qids, cands, jnp.asarray(scores), jnp.asarray(where)


# One case per code path of the array form (the grid above covers every method through fuse).
ARRAY_CASES = [
    ("med", "zmuv"),
    ("wmnz", "borda"),
    ("max", None),
    ("bordafuse", "min-max"),
    ("rbc", "rank"),
    ("condorcet", "sum"),
    ("rrf", "min-max-inverted"),
    ("wsum", "min-max-inverted"),
]


@pytest.mark.parametrize("method,norm", ARRAY_CASES)
def test_array_form_equals_dict_form(runs, method, norm):
    dicts, _ = runs
    params = PARAMS.get(method, {})
    qids, cands, scores, where = _aligned(dicts)
    out = np.asarray(fuse_scores(scores, where, method, norm, params))
    got = {q: {d: float(out[i, j]) for j, d in enumerate(cands[q])} for i, q in enumerate(qids)}
    _assert_same(got, jaxrank.fuse(dicts, method=method, norm=norm, params=params).to_dict())
    assert np.all(out[~np.asarray(where).any(0)] == 0)  # padding


@pytest.mark.parametrize(
    "method,norm",
    [("med", "zmuv"), ("w_condorcet", None), ("wmnz", "borda"), ("rbc", "min-max-inverted")],
)
def test_array_form_jit_vmap_padding(runs, method, norm):
    dicts, _ = runs
    _, _, scores, where = _aligned(dicts)
    params = PARAMS.get(method, {})
    want = fuse_scores(scores, where, method, norm, params)
    # params traced: the weights are an argument of the compiled function
    jitted = jax.jit(lambda s, w, p: fuse_scores(s, w, method, norm, p))
    traced = {k: jnp.asarray(v) for k, v in params.items()}
    np.testing.assert_allclose(jitted(scores, where, traced), want, rtol=1e-12, atol=1e-12)
    per_query = jax.vmap(lambda s, w: fuse_scores(s, w, method, norm, params), in_axes=1)(scores, where)
    np.testing.assert_allclose(per_query, want, rtol=1e-12, atol=1e-12)
    # Padding: columns no run retrieved change nothing.
    pad = ((0, 0), (0, 0), (0, 3))
    padded = fuse_scores(jnp.pad(scores, pad, constant_values=7.0), jnp.pad(where, pad), method, norm, params)
    np.testing.assert_allclose(padded[..., : want.shape[-1]], want, rtol=1e-12, atol=1e-12)
    assert np.all(np.asarray(padded[..., want.shape[-1] :]) == 0)


def _distance_runs(seed: int = 1) -> list[dict]:
    """Runs of distances (smaller is better, as a dense retriever's L2 distances): 40
    documents a query, continuous (no ties: ranx's quicksort order of ties above 15 documents
    does not arise), partial overlap, plus a query whose distances are all equal in one run
    and a one-document query (min-max-inverted gives them 0)."""
    rng = np.random.default_rng(seed)
    docs = [f"p{i:03d}" for i in range(70)]
    runs: list[dict] = [{} for _ in range(R)]
    for q in range(6):
        for r in range(R):
            chosen = rng.choice(docs, size=40, replace=False).tolist()
            runs[r][f"q{q}"] = dict(zip(chosen, (rng.gamma(2.0, 0.5, 40) + 0.1 * r).round(6).tolist()))
    runs[0]["q6"] = dict.fromkeys(docs[:5], 0.7)  # constant distances
    runs[1]["q6"] = {"p010": 0.2, "p000": 0.9, "p003": 0.4}
    runs[2]["q6"] = {"p001": 1.5}  # one document
    return runs


@pytest.mark.parametrize("method", ["wsum", "rrf", "mnz", "isr", "rbc", "bordafuse", "w_condorcet", "med"])
def test_min_max_inverted_on_distances_equals_ranx(method):
    """Distance scores (``norm="min-max-inverted"``, ranx's normalisation for them): the
    smallest distance of each run and query gets 1, the largest 0, and rank-based methods rank
    by ascending distance, as ranx's fuse (it re-sorts each normalised run)."""
    dicts = _distance_runs()
    qids = sorted(set().union(*dicts))
    ranx_runs = [_ranx_run(d, qids, f"r{i}") for i, d in enumerate(dicts)]
    params = PARAMS.get(method, {})
    want = _ranx_dict(ranx.fuse(ranx_runs, norm="min-max-inverted", method=method, params=params))
    got = jaxrank.fuse(dicts, method=method, norm="min_max_inverted", params=params).to_dict()  # either spelling
    if method == "w_condorcet":
        defined = [q for q in want if _ranx_total_order(dicts, q, WEIGHTS, inverted=True)]
        got, want = {q: got[q] for q in defined}, {q: want[q] for q in defined}
    _assert_same(got, want)
    if method == "wsum":  # the constant run and the single document contribute 0
        one = jaxrank.fuse([dicts[0]], method="sum", norm="min-max-inverted").to_dict()
        assert set(one["q6"].values()) == {0.0}
        assert jaxrank.fuse([dicts[2]], method="sum", norm="min-max-inverted").to_dict()["q6"] == {"p001": 0.0}
        closest = min(dicts[1]["q0"], key=dicts[1]["q0"].get)
        assert jaxrank.fuse([dicts[1]], method="sum", norm="min-max-inverted").to_dict()["q0"][closest] == 1.0


def test_inputs_and_outputs(runs, tmp_path):
    dicts, _ = runs
    paths = [write_run(read_run(d), tmp_path / f"r{i}.run") for i, d in enumerate(dicts)]
    from_files = jaxrank.fuse(paths, method="rrf")
    mixed = jaxrank.fuse([paths[0], dicts[1], read_run(dicts[2])], method="rrf")
    assert from_files.to_dict() == mixed.to_dict() == jaxrank.fuse(dicts, method="rrf").to_dict()
    qrels = {q: {d: 1 for d in list(docs)[:2]} for q, docs in dicts[0].items()}
    assert jaxrank.evaluate(qrels, from_files, ["map"]) == jaxrank.evaluate(qrels, from_files.to_dict(), ["map"])
    # The fused run is ranked: score descending, then docno descending.
    for q, docs in from_files.to_dict().items():
        keys = [(s, d) for d, s in docs.items()]
        assert keys == sorted(keys, reverse=True), q


def test_a_dict_of_runs_fuses_as_the_list_of_its_values(runs):
    """``{name: run}`` (compare's form) fuses its runs in the dict's order; its weights may be
    given by name."""
    dicts, _ = runs
    named = dict(zip(("bm25", "dense", "splade"), dicts))
    weights = [0.5, 0.2, 0.3]
    want = jaxrank.fuse(dicts, method="wsum", params={"weights": weights}).to_dict()
    assert jaxrank.fuse(named, method="wsum", params={"weights": weights}).to_dict() == want
    by_name = {"splade": 0.3, "bm25": 0.5, "dense": 0.2}
    assert jaxrank.fuse(named, method="wsum", params={"weights": by_name}).to_dict() == want
    assert jaxrank.fuse(named, method="rrf").to_dict() == jaxrank.fuse(dicts, method="rrf").to_dict()
    once, twice = (jaxrank.fuse([dicts[0]] * r, method="rrf").to_dict() for r in (1, 2))  # a list may repeat a run
    assert twice == {q: {d: 2 * v for d, v in docs.items()} for q, docs in once.items()}
    with pytest.raises(ValueError, match=r"params\['weights'\] as a dict must name every run"):
        jaxrank.fuse(named, method="wsum", params={"weights": {"bm25": 1.0}})
    with pytest.raises(ValueError, match=r"params\['weights'\] as a dict"):
        jaxrank.fuse(dicts, method="wsum", params={"weights": by_name})


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"method": "combsum"}, "method='combsum'"),
        ({"norm": "l2"}, "norm='l2'"),
        ({"method": "rrf", "norm": "borda"}, "norm='borda'"),
        ({"method": "rbc"}, r"params\['phi'\]"),
        ({"method": "gmnz"}, r"params\['gamma'\]"),
        ({"method": "rrf", "params": {"phi": 0.5}}, "phi"),
        ({"method": "rrf", "params": {"k": -1}}, r"params\['k'\]"),
        ({"method": "logn_isr", "params": {"sigma": 2.0}}, r"params\['sigma'\]"),
        ({"method": "wsum", "params": {"weights": [1.0]}}, r"params\['weights'\]"),
        ({"method": "wsum", "params": {"weights": [1.0, float("nan")]}}, r"params\['weights'\]"),
    ],
)
def test_bad_arguments(kwargs, match):
    two = [{"q": {"a": 1.0}}, {"q": {"b": 1.0}}]
    with pytest.raises(ValueError, match=match):
        jaxrank.fuse(two, **kwargs)
    if "params" in kwargs or kwargs.get("method") in ("rbc", "gmnz", "combsum") or "norm" in kwargs:
        with pytest.raises(ValueError, match=match):
            fuse_scores(
                jnp.ones((2, 1, 2)),
                None,
                kwargs.get("method", "wsum"),
                kwargs.get("norm", "min-max"),
                kwargs.get("params"),
            )


def test_bad_runs():
    with pytest.raises(ValueError, match="runs is empty"):
        jaxrank.fuse([])
    with pytest.raises(ValueError, match=r"runs\[0\]: <dict>: no entries"):
        jaxrank.fuse([{}, {}])
    with pytest.raises(TypeError, match="runs must be a list of runs or a dict .* got one run"):
        jaxrank.fuse({"q": {"a": 1.0}})
    with pytest.raises(TypeError, match="runs must be a list"):
        jaxrank.fuse("a.run")
    with pytest.raises(TypeError, match=r"runs\['x'\]"):
        jaxrank.fuse({"w": {"q": {"a": 1.0}}, "x": 3.5})
    with pytest.raises(TypeError, match=r"runs\[1\]"):
        jaxrank.fuse([{"q": {"a": 1.0}}, 3.5])
    with pytest.raises(ValueError, match="where must be"):
        fuse_scores(jnp.ones((2, 3)), jnp.ones((2, 4), bool))
    with pytest.raises(ValueError, match=r"scores must be \[R"):
        fuse_scores(jnp.ones(3))
