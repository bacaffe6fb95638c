"""ranx 0.3's metric names in jaxrank.evaluate (jaxrank/measures/_ranx.py): every name ranx's
``evaluate`` accepts, with its ``@k``, ``-lN`` and persistence forms, equal to ranx per
query; bad parameters as one-line errors naming the measure and the parameter.

ranx ranks tied documents in an order that changes between Python processes (string
hashing), so the runs here are tie-free.
"""

import numpy as np
import pytest

import jaxrank
from jaxrank.measures import MeasureError, parse_measures

pytestmark = pytest.mark.usefixtures("quick_compiles")

# every ranx metric, bare and at a cutoff, with levels, k = 0 and k past the run's end
NAMES = [
    *("hits", "hits@5", "hit_rate", "hit_rate@5", "precision", "precision@5", "recall@10", "recall@0"),
    *("f1", "f1@10", "f1@200", "r-precision", "mrr", "mrr@10", "map", "map@100", "dcg", "dcg@10"),
    *("dcg_burges", "dcg_burges@10", "ndcg", "ndcg@10", "ndcg_burges", "ndcg_burges@10", "rbp.95", "rbp@8"),
    *("ndcg@10-l2", "hits@10-l2", "dcg_burges@10-l3", "rbp.8-l2", "precision@5-l3", "map-l2", "recall-l2"),
]


def _generated(seed=7, n_queries=30):
    """Graded qrels (0-3) with unjudged retrieved documents, queries without a relevant
    document (every 5th) and short runs (every 7th: 4 documents); distinct scores."""
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for q in range(n_queries):
        n = 100 if q % 7 else 4
        scores = rng.permutation(1000)[:n] / 10.0 + 1.0
        run[f"q{q:02d}"] = {f"d{i}": float(s) for i, s in zip(rng.permutation(150)[:n], scores)}
        labels = rng.integers(0, 4, 60) if q % 5 else np.zeros(60, int)
        qrels[f"q{q:02d}"] = {f"d{i}": int(g) for i, g in zip(rng.permutation(150)[:60], labels)}
    return qrels, run


def test_every_ranx_name_equals_ranx_per_query():
    ranx = pytest.importorskip("ranx")
    qrels, run = _generated()
    mine = jaxrank.evaluate(qrels, run, NAMES, per_query=True)  # one compiled program
    want = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), NAMES, return_mean=False)
    qids = sorted(run)
    printed = {name: m.columns[0].name for name in NAMES for m in parse_measures([name])}  # ndcg@10: nDCG@10
    assert sum(printed[n] != n for n in NAMES) == 6
    for name in NAMES:
        got = [mine["per_query"][q][printed[name]] for q in qids]
        np.testing.assert_allclose(got, want[name], rtol=0, atol=1e-12, err_msg=name)
        assert mine["all"][printed[name]] == pytest.approx(float(np.mean(want[name])), abs=1e-12), name


def test_names_trec_eval_has_keep_trec_eval_meaning():
    """bare map, ndcg, dcg, bpref, recall, rbp (and rbp.p=x) are trec_eval's; bpref is
    trec_eval's in every form."""
    by = {m.source: m for m in parse_measures(["map", "ndcg", "bpref", "recall", "rbp", "rbp.p=0.5", "bpref-l2"])}
    assert [c.name for c in by["recall"].columns][:2] == ["recall_5", "recall_10"]
    assert by["rbp.p=0.5"].family == "rbp" and by["bpref-l2"].family == "bpref" and by["bpref-l2"].level == 2
    assert {by[n].family for n in ("map", "ndcg", "bpref")} == {"map", "ndcg", "bpref"}


@pytest.mark.parametrize(
    "text, says",
    [
        ("rbp.1.5", "the persistence p of rbp is the digits after 0. (rbp.95 is p=0.95), got '1.5'"),
        ("rbp@x", "the persistence p of rbp"),
        ("rbp-l2", "rbp needs its persistence p"),
        ("hits@-1", "the cutoff k of hits must be an integer >= 0 (0: the whole run), got '-1'"),
        ("f1@x", "the cutoff k of f1 must be an integer >= 0 (0: the whole run), got 'x'"),
        ("dcg_burges@2.5", "the cutoff k of dcg_burges"),
        ("ndcg@10-lx", "the relevance level of ndcg (after -l) must be an integer >= 0, got 'x'"),
        ("hit_rate@5-l-1", "the relevance level of hit_rate"),
        ("r-precision@5", "r-precision takes no cutoff"),
        ("bpref@10", "bpref takes no cutoff"),
    ],
)
def test_bad_parameters_name_the_measure_and_the_parameter(text, says):
    with pytest.raises(MeasureError) as e:
        parse_measures([text])
    assert str(e.value).startswith(f"{text!r}: ") and says in str(e.value) and "\n" not in str(e.value)
