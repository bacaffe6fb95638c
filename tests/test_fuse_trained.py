"""ranx's trained fusion: jaxrank.fuse's trained methods, jaxrank.fusion.train and
jaxrank.optimize_fusion against ranx (fused runs, trained params, chosen params, reports)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import ranx
from ranx.fusion import probfuse_train
from ranx.normalization import norm_switch

import jaxrank
from jaxrank.fusion import TRAINED, fuse_scores, train

R = 3
NORMS = ["min-max", "min-max-inverted", None, "zmuv", "rank"]
TRAINED_ONLY = ["bayesfuse", "mapfuse", "posfuse", "segfuse"]


def _make(seed: int = 0, n_queries: int = 24, pool: int = 60) -> tuple[dict, list[dict]]:
    """Graded qrels and three runs of 20-45 documents a query, continuous scores (no ties
    within a run: ranx orders ties of long lists by quicksort), overlapping documents; run 0
    is the best, run 2 mostly noise, so that weights and windows matter."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:03d}" for i in range(pool)]
    qrels, runs = {}, [{} for _ in range(R)]
    for q in range(n_queries):
        qid = f"q{q:02d}"
        judged = rng.choice(pool, size=16, replace=False)
        grades = rng.integers(0, 3, size=16)
        grades[0] = max(grades[0], 1)  # every query has a relevant document
        qrels[qid] = {docs[d]: int(g) for d, g in zip(judged, grades)}
        relevance = np.zeros(pool)
        relevance[judged] = grades
        for r in range(R):
            n = int(rng.integers(20, 46))
            chosen = rng.choice(pool, size=n, replace=False)
            signal = (1.5, 0.8, 0.1)[r] * relevance[chosen]
            scores = np.round(signal + rng.normal(0, 1, n) + 5 * r, 9)
            runs[r][qid] = {docs[d]: float(s) for d, s in zip(chosen, scores)}
    return qrels, runs


@pytest.fixture(scope="module")
def data():
    return _make()


def _ranx_runs(runs: list[dict]) -> list[ranx.Run]:
    return [ranx.Run(r, name=f"r{i}") for i, r in enumerate(runs)]


def _ranx_dict(run: ranx.Run) -> dict:
    return {q: dict(run[q]) for q in run.keys() if len(run[q])}


def _assert_same(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for q in want:
        assert got[q].keys() == want[q].keys(), q
        np.testing.assert_allclose([got[q][d] for d in want[q]], list(want[q].values()), rtol=1e-9, atol=1e-12)


def _ranx_trained(qrels: dict, runs: list[dict], method: str, norm) -> dict:
    """ranx's params for a trained method, trained on the normalised runs as ranx does."""
    if method == "probfuse":
        norm_runs = [norm_switch(norm)(r) for r in _ranx_runs(runs)] if norm else _ranx_runs(runs)
        return {"probs": probfuse_train(ranx.Qrels(qrels), norm_runs, 7)}
    if method == "slidefuse":
        return {**ranx.optimize_fusion(ranx.Qrels(qrels), _ranx_runs(runs), norm=norm, method="posfuse"), "w": 3}
    if method == "mixed":
        return {"weights": [0.5, 0.3, 0.2]}
    return ranx.optimize_fusion(ranx.Qrels(qrels), _ranx_runs(runs), norm=norm, method=method)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("method", TRAINED)
def test_trained_methods_fuse_as_ranx_given_ranx_params(data, method, norm):
    qrels, runs = data
    params = _ranx_trained(qrels, runs, method, norm)
    want = _ranx_dict(ranx.fuse(_ranx_runs(runs), norm=norm, method=method, params=params))
    _assert_same(jaxrank.fuse(runs, method=method, norm=norm, params=params).to_dict(), want)


@pytest.mark.parametrize("norm", ["min-max", "min-max-inverted"])
@pytest.mark.parametrize("method", ["probfuse", "slidefuse", *TRAINED_ONLY])
def test_train_equals_ranx_training(data, method, norm):
    qrels, runs = data
    want = _ranx_trained(qrels, runs, method, norm)
    got = train(qrels, runs, method=method, norm=norm, n_segments=7 if method == "probfuse" else None)
    for name, value in got.items():
        for mine, theirs in zip(value, want[name], strict=True):
            np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-15)


def _rectangular(tables) -> np.ndarray:
    """Per-run tables as one ``[R, L]`` array, zeros past a shorter table's end."""
    longest = max(len(t) for t in tables)
    return np.stack([np.pad(np.asarray(t, float), (0, longest - len(t))) for t in tables])


def test_trained_methods_run_under_jit_with_traced_params(data):
    """The array form of every trained method compiles once and takes its tables traced."""
    qrels, runs = data
    docs = sorted({d for r in runs for d in r["q00"]}, reverse=True)
    scores = jnp.asarray([[[r["q00"].get(d, 0.0) for d in docs]] for r in runs])
    where = jnp.asarray([[[d in r["q00"] for d in docs]] for r in runs])
    for method in TRAINED:
        params = _ranx_trained(qrels, runs, method, "min-max")
        traced = {k: jnp.asarray(_rectangular(v) if k in ("probs", "log_odds") else v) for k, v in params.items()}
        want = fuse_scores(scores, where, method, "min-max", params)
        got = jax.jit(lambda s, w, p, m=method: fuse_scores(s, w, m, "min-max", p))(scores, where, traced)
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=method)


# Grids as ranx's, cut where each trial retrains or re-fuses slowly (the test budget).
OPTIMIZE_CASES = [
    ("wsum", "min-max", "hit_rate@3", {}),
    ("wsum", "zmuv", "precision@5", {"step": 0.25}),
    ("mixed", "min-max", "precision@5", {}),
    ("probfuse", "min-max", "map@20", {"max_n_segments": 12}),
    ("slidefuse", "min-max", "ndcg@10", {"max_w": 6}),
    ("rbc", "min-max-inverted", "mrr@10", {"min_phi": 0.05, "step": 0.05}),
    ("gmnz", "min-max", "recall@10", {"step": 0.05}),
    ("wsum", "zmuv", "rbp.95-l2", {"step": 0.5}),  # numba's powers of p, to the last bit
]


@pytest.mark.parametrize("method,norm,metric,options", OPTIMIZE_CASES)
def test_optimize_fusion_chooses_as_ranx(method, norm, metric, options):
    """The same report (every trial's metric value, exactly: ties between settings tie as
    in ranx) and the same choice (the last best)."""
    qrels, runs = _make(seed=1, n_queries=16)
    want_params, want_report = ranx.optimize_fusion(
        ranx.Qrels(qrels),
        _ranx_runs(runs),
        norm=norm,
        method=method,
        metric=metric,
        show_progress=False,
        return_optimization_report=True,
        **options,
    )
    got_params, got_report = jaxrank.optimize_fusion(
        qrels, runs, norm=norm, method=method, metric=metric, return_optimization_report=True, **options
    )
    assert list(got_report) == list(want_report.configs)
    assert list(got_report.values()) == [float(v) for v in want_report.results]
    if method in ("wsum", "mixed", "gmnz") and norm == "min-max":
        assert len(set(got_report.values())) < len(got_report)  # settings tie: the last best is chosen
    assert got_params.keys() == want_params.keys()
    for name, theirs in want_params.items():
        mine = got_params[name]
        if name == "probs":  # one table per run, of different lengths for slidefuse
            for a, b in zip(mine, theirs, strict=True):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(np.asarray(mine, float), np.asarray(theirs, float))
    fused = jaxrank.fuse(runs, method=method, norm=norm, params=got_params).to_dict()
    _assert_same(fused, _ranx_dict(ranx.fuse(_ranx_runs(runs), norm=norm, method=method, params=want_params)))


@pytest.mark.parametrize("method", TRAINED_ONLY)
def test_optimize_fusion_of_a_trained_only_method_is_its_training(data, method):
    qrels, runs = data
    want = ranx.optimize_fusion(ranx.Qrels(qrels), _ranx_runs(runs), method=method)
    got = jaxrank.optimize_fusion(qrels, runs, method=method)
    for mine, theirs in zip(got[next(iter(want))], next(iter(want.values())), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"method": "combsum"}, "method='combsum'"),
        ({"method": "sum"}, "method='sum' has no params to optimize"),
        ({"norm": "l2"}, "norm='l2'"),
        ({"metric": "ndcg@ten"}, "metric='ndcg@ten'"),
        ({"metric": "bpref"}, "metric='bpref'"),
        ({"method": "wsum", "min_k": 3}, r"options \['min_k'\]"),
        ({"method": "bayesfuse", "return_optimization_report": True}, "return_optimization_report"),
        ({"method": "probfuse", "norm": "borda"}, "norm='borda'"),
    ],
)
def test_optimize_fusion_refuses_bad_arguments(data, kwargs, match):
    qrels, runs = data
    with pytest.raises(ValueError, match=match):
        jaxrank.optimize_fusion(qrels, runs, **kwargs)


def test_optimize_fusion_refuses_runs_and_qrels_of_different_queries(data):
    qrels, runs = data
    fewer = {q: v for q, v in qrels.items() if q != "q03"}
    with pytest.raises(ValueError, match=r"runs\[0\] and qrels hold different queries.*in the run only \['q03'\]"):
        jaxrank.optimize_fusion(fewer, runs)
    named = {"bm25": runs[0], "dense": {q: v for q, v in runs[1].items() if q != "q05"}}
    with pytest.raises(ValueError, match=r"runs\['dense'\] and qrels.*in the qrels only \['q05'\]"):
        jaxrank.optimize_fusion(qrels, named)
    with pytest.raises(ValueError, match="at least two runs"):
        jaxrank.optimize_fusion(qrels, [runs[0]])


@pytest.mark.parametrize(
    "method,missing", [("probfuse", "probs"), ("slidefuse", "w"), ("bayesfuse", "log_odds"), ("mapfuse", "map_scores")]
)
def test_fuse_refuses_a_trained_method_without_its_params(data, method, missing):
    _, runs = data
    params = {"probs": [[0.5, 0.1]] * R} if missing == "w" else None
    with pytest.raises(ValueError, match=rf"method='{method}' needs params\['{missing}'\]"):
        jaxrank.fuse(runs, method=method, params=params)


def test_bayesfuse_refuses_runs_longer_than_its_log_odds(data):
    """ranx reads past the end of its table there (an undefined number); jaxrank refuses."""
    _, runs = data
    with pytest.raises(ValueError, match=r"params\['log_odds'\] has 10 positions"):
        jaxrank.fuse(runs, method="bayesfuse", params={"log_odds": [np.zeros(10)] * R})


def test_train_refuses_what_ranx_cannot_train(data):
    qrels, runs = data
    with pytest.raises(ValueError, match="method='mixed' has nothing to train"):
        train(qrels, runs, method="mixed")
    with pytest.raises(ValueError, match="n_segments=None"):
        train(qrels, runs, method="probfuse")
    with pytest.raises(ValueError, match="norm='borda'"):
        train(qrels, runs, method="posfuse", norm="borda")
    with pytest.raises(ValueError, match=r"runs\[2\] and qrels hold different queries"):
        train(qrels, [*runs[:2], {"q99": {"d001": 1.0}}], method="segfuse")
