"""ir_measures' Accuracy, Compat and C/W/L measures (INST, INSQ, BPM, SDCG, NERR8-11) against
ir_measures' own providers (``accuracy``, ``compat``, ``cwl_eval`` with the cwl-eval package),
per query, on one generated set: graded qrels (0..3, some -1), unjudged retrieved documents,
tied scores, short runs, a run past cwl-eval's 1000 documents, relevant documents never
retrieved, queries without a relevant document, and a query whose gains add up to BPM's T
only in exact arithmetic (1/3 + 1 + 1/3 + 1/3 is 1.9999999999999998 in doubles).

Ties: the accuracy and cwl_eval providers sort a query's documents by score with Python's
stable sort, so tied documents keep the order of the run they are given: they get the run
with each query's documents in trec_eval's order (score, then docno, descending), which is
jaxrank's. The compat provider sorts tied documents by docno ascending, and orders one
grade's documents of its ideal by score: it gets the run with scores made strictly
decreasing in trec_eval's order (all positive, so that the retrieved documents of a grade
come before the unretrieved ones, which it scores 0.0). Its accuracy provider divides by
zero when the top k holds relevant documents only: every run has a non-relevant document
in its top 5.
"""

import ir_measures
import numpy as np
import pytest

import jaxrank
from jaxrank.measures.parse import MeasureError, parse_measures

pytestmark = pytest.mark.usefixtures("quick_compiles")  # one program of many small kernels

MEASURES = {
    "accuracy": ["Accuracy", "Accuracy@5", "Accuracy(rel=2)@10"],
    "compat": ["Compat", "Compat(p=0.5, normalize=False)"],
    "cwl_eval": [
        "INST(max_rel=3)",
        "INST(T=2.0, max_rel=3)",
        "INSQ(T=2.0, max_rel=3)",
        "BPM(T=2.0, max_rel=3)@20",
        "BPM(T=1.0, max_rel=2)@5",
        "SDCG(max_rel=3)@10",
        "SDCG(min_rel=1, max_rel=2)@5",
        "NERR8(max_rel=3)@10",
        "NERR9(max_rel=3)@10",
        "NERR10(p=0.8, max_rel=3)",
        "NERR11(T=2.0, max_rel=3)",
    ],
}


def _trec_order(docs: dict) -> list:
    """Documents by score, then docno, descending (trec_eval's order, jaxrank's)."""
    return sorted(sorted(docs, reverse=True), key=lambda d: -docs[d])


def _data(seed=11, n_queries=24):
    rng = np.random.default_rng(seed)
    qrels, run = {}, {}
    for i in range(n_queries):
        qid = f"q{i:02d}"
        size = 1100 if i == 0 else (int(rng.integers(1, 4)) if i % 5 == 1 else int(rng.integers(4, 40)))
        pool = [f"D{j:04d}" for j in rng.permutation(max(size + 10, 60))]
        retrieved = pool[:size]
        if i % 6 != 4:  # 4, 10, 16, 22: only in the run
            judged = [d for d in pool if rng.random() < 0.6]
            grades = [0, 0, 0, -1] if i % 7 == 2 else [-1, 0, 0, 0, 1, 1, 2, 3]  # 2, 9, 16, 23: nothing relevant
            qrels[qid] = {d: int(rng.choice(grades)) for d in sorted(judged)}
        if i % 6 != 5:  # 5, 11, 17, 23: only in the qrels
            run[qid] = {d: float(rng.integers(0, 5)) / 4 + 0.25 for d in retrieved}  # ties, all > 0
    # BPM's T = 2 reached at the 4th document in exact arithmetic, not in doubles
    qrels["q99"] = {"a": 1, "b": 3, "c": 1, "d": 1, "e": 3, "f": 0}
    run["q99"] = {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.6, "e": 0.5, "f": 0.4}
    for qid, docs in run.items():  # a non-relevant document in every top 5 (see the docstring)
        top = _trec_order(docs)[:5]
        if qid in qrels and all(qrels[qid].get(d, 0) >= 1 for d in top):
            qrels[qid][top[-1]] = 0
    return qrels, run


def test_equal_to_ir_measures_providers_per_query():
    qrels, run = _data()
    in_order = {q: {d: docs[d] for d in _trec_order(docs)} for q, docs in run.items()}
    strict = {q: {d: float(len(docs) - i) for i, d in enumerate(_trec_order(docs))} for q, docs in run.items()}
    strings = [s for group in MEASURES.values() for s in group]
    got = jaxrank.evaluate(qrels, run, strings, per_query=True)["per_query"]
    assert set(got) == set(qrels) & set(run)
    want = {}
    for provider, group in MEASURES.items():
        parsed = {ir_measures.parse_measure(s): s for s in group}
        given = strict if provider == "compat" else in_order
        for metric in getattr(ir_measures, provider).iter_calc(list(parsed), qrels, given):
            want[metric.query_id, parsed[metric.measure]] = float(metric.value)
    bad = []
    for qid, values in got.items():
        for s in strings:
            # the accuracy provider reports nothing without a relevant document in the top k
            expected = want.pop((qid, s), None if s.startswith("Accuracy") else "missing")
            if expected is None:
                expected = 0.0
            if expected == "missing" or not abs(values[s] - expected) <= 1e-9:
                bad.append((s, qid, values[s], expected))
    assert not bad, bad[:10]
    assert all(v == 0 for v in want.values())  # queries the run lacks: the providers' default


@pytest.mark.parametrize(
    "text, says",
    [
        ("INST(T=1.0)", "max_rel=..."),
        ("INSQ(T=-1.0, max_rel=3)", "T must be a positive number"),
        ("BPM(max_rel=3)", "needs @cutoff"),
        ("NERR10(p=1.5, max_rel=3)", "p must be in (0, 1]"),
        ("NERR8(p=0.8, max_rel=3)@10", "has no parameter 'p'"),
        ("SDCG(dcg='exp-log2', max_rel=3)@10", "dcg must be 'log2'"),
        ("NERR11(min_rel=2, max_rel=2)", "min_rel must be below max_rel"),
        ("NERR9(max_rel=2.5)@5", "max_rel must be an integer"),
        ("INST(max_rel=3)@10", "takes no '@'"),
        ("Compat(normalize=1)", "normalize must be True or False"),
        ("Compat(p=0)", "p must be in (0, 1]"),
        ("Accuracy@0", "cutoff must be a positive integer"),
    ],
)
def test_bad_parameters_name_the_measure_and_the_parameter(text, says):
    with pytest.raises(MeasureError) as e:
        parse_measures([text])
    message = str(e.value)
    assert text in message and says in message and "\n" not in message, message


def test_a_smooth_ranker_gives_their_relaxation():
    """The three ways the measures are written over the ranks (prefix sums at every depth:
    INST; a cascade and its normaliser: NERR10; one prefix sum per ideal position: Compat)
    under jaxrank.approx: near the exact value at a low temperature, with a finite, non-zero
    gradient in the scores (one compiled program)."""
    import jax
    import jax.numpy as jnp

    scores = jnp.array([[0.5, 0.9, 0.3, 0.1, 0.7], [0.1, 0.2, 0.3, 0.4, 0.5]])
    labels = jnp.array([[3, 0, 1, 0, 2], [1, 0, 2, 0, 0]])
    calls = {"inst": dict(max_rel=3, k=10), "nerr10": dict(max_rel=3), "compatibility": dict(p=0.8)}

    def values(s, ranker):
        return jnp.stack([getattr(jaxrank, name)(s, labels, ranker=ranker, **kw) for name, kw in calls.items()])

    def total(s):
        v = values(s, jaxrank.approx(0.01))
        return v.sum(), (v, values(s, jaxrank.hard()))

    (_, (soft, exact)), grad = jax.jit(jax.value_and_grad(total, has_aux=True))(scores)
    assert jnp.allclose(soft, exact, atol=0.02), (soft, exact)
    assert jnp.all(jnp.isfinite(grad)) and jnp.abs(grad).sum() > 0
