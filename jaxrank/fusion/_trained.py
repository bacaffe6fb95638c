"""ranx's trained fusion: the training of the trained methods and ``optimize_fusion``.

:func:`train` computes a trained method's params from qrels and runs as ranx's
``<method>_train`` functions do, on the runs normalised by ``norm`` (ranx trains on the
normalised runs); :func:`jaxrank.fuse` takes them. :func:`optimize_fusion` searches ranx's
grid of a method's params and returns those with the best value of a ranx metric.

Per query, a run's *hit list* is :math:`h_i = 1` when its document at position :math:`i`
(0-based, in the order of the normalised run) is judged relevant (rel >= 1), else 0; sums
over :math:`q` run over the qrels' :math:`|Q|` queries:

* ``probfuse`` (``n_segments`` :math:`S`): :math:`P_k = \\frac{1}{|Q|}\\sum_q
  \\operatorname{mean}(h_{kz}, \\dots, h_{(k+1)z - 1})`, :math:`z = \\lceil n_q / S \\rceil`
  (empty segments count 0);
* ``segfuse``: :math:`P_k = \\frac{1}{|Q|}\\sum_q \\sum_{i \\in [b_k, b_{k+1})} h_i /
  (b_{k+1} - b_k)`, :math:`b = 0, 5, 15, 35, \\dots, 5115` (:math:`b_k = 10 \\cdot 2^{k-1} - 5`);
* ``posfuse``, ``slidefuse``: :math:`P_i` = the mean of :math:`h_i` over the queries whose run
  reaches position :math:`i`;
* ``bayesfuse``: per segment :math:`[c_j, c_{j+1})` of :math:`c = 0, 5, 10, 15, 20, 30, 100,
  200, 500, 1000`, :math:`p` = the mean precision of the segment (0 → 0.001, 1 → 0.999 on the
  other side) and :math:`\\log(p / (1 - p))` at each of its positions;
* ``mapfuse``: each run's MAP (ranx's ``map``).

The metrics are ranx's definitions (``ranx.evaluate``'s names: ``ndcg``, ``ndcg@10``,
``map@100``, ``precision@5``, ``recall``, ``f1``, ``mrr``, ``hits``, ``hit_rate``,
``r-precision``, ``dcg``, ``dcg_burges``, ``ndcg_burges``, ``rbp.95``, with ``-l2`` for a
relevance level of 2; not ``bpref``, whose ranx value is NaN on a query without a judged
non-relevant document), computed in ranx's order of operations (sums in rank order, the mean over the queries
sorted), so that settings whose fused runs rank alike tie exactly, as in ranx.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np

from jaxrank.fusion._fuse import METHODS, TRAINED, _Aligned, _as_runs, _check_names
from jaxrank.trec import files as trec

__all__ = ["METRICS", "optimize_fusion", "train"]

#: ranx's metric names that :func:`optimize_fusion` computes.
METRICS: tuple[str, ...] = (
    "dcg",
    "dcg_burges",
    "f1",
    "hit_rate",
    "hits",
    "map",
    "mrr",
    "ndcg",
    "ndcg_burges",
    "precision",
    "r-precision",
    "rbp",
    "recall",
)
_BAYES_CUTS = (0, 5, 10, 15, 20, 30, 100, 200, 500, 1000)
_SEG_BOUNDS = (0, 5, 15, 35, 75, 155, 315, 635, 1275, 2555, 5115)
_WEIGHT_GRID = ("wsum", "wmnz", "w_bordafuse", "w_condorcet", "mixed")
#: Each method's grid options with ranx's defaults (``None``: trained only, no grid).
_OPTIONS: dict[str, Optional[dict[str, Any]]] = {
    **{m: {"step": 0.1, "show_progress": True} for m in _WEIGHT_GRID},
    "rrf": {"min_k": 10, "max_k": 100, "step": 10, "show_progress": True},
    "rbc": {"min_phi": 0.01, "max_phi": 1.0, "step": 0.01, "show_progress": True},
    "gmnz": {"min_gamma": 0.01, "max_gamma": 1.0, "step": 0.01, "show_progress": True},
    "logn_isr": {"min_sigma": 0.01, "max_sigma": 1.0, "step": 0.01, "show_progress": True},
    "probfuse": {"min_n_segments": 1, "max_n_segments": 100, "show_progress": True},
    "slidefuse": {"min_w": 1, "max_w": 100, "show_progress": True},
    **dict.fromkeys(("bayesfuse", "mapfuse", "posfuse", "segfuse")),
}


# ----------------------------------------------------------------------------- ranx's metrics


def _parse_metric(metric: Any) -> tuple[str, Any, int]:
    """``(name, k, rel_lvl)`` as ranx's ``extract_metric_and_params`` reads ``metric``
    (``rbp``: ``k`` is the persistence, ``rbp.95`` or ``rbp@95`` p = 0.95)."""
    if not isinstance(metric, str):
        raise ValueError(f"metric={metric!r} must be a ranx metric name such as 'ndcg@10'")
    name, rel_lvl = metric, "1"
    if "-l" in name:
        name, rel_lvl = name.split("-l", 1)
    if name.startswith("rbp") and name[3:4] in (".", "@"):
        p = name[4:]
        if not (p.isascii() and p.isdigit()) or not rel_lvl.isdigit():
            raise ValueError(
                f"metric={metric!r}: rbp's persistence p is the digits after 'rbp.' (rbp.95 is p=0.95), "
                "and the level after -l an integer"
            )
        return "rbp", float(f"0.{p}"), int(rel_lvl)
    if name == "rbp":
        raise ValueError(f"metric={metric!r}: rbp needs its persistence p, e.g. rbp.95 (p=0.95)")
    name, _, k = name.partition("@")
    if name not in METRICS:
        raise ValueError(
            f"metric={metric!r}: {name!r} is not one of ranx's metrics that jaxrank computes ({', '.join(METRICS)})"
        )
    if not (k == "" or k.isdigit()) or not rel_lvl.isdigit():
        raise ValueError(f"metric={metric!r}: expected NAME, NAME@K or NAME@K-lLEVEL with integers K and LEVEL")
    return name, int(k or 0), int(rel_lvl)


def _seqsum(x: np.ndarray) -> float:
    """A sum in order, as ranx's numba loops add."""
    return float(np.cumsum(x)[-1]) if x.size else 0.0


def _discounts(n: int) -> np.ndarray:
    return np.array([math.log2(i + 1) for i in range(1, n + 1)])


def _query_value(name: str, k: int, hit: np.ndarray, gain: np.ndarray, ideal: np.ndarray, n_judged: int) -> float:
    """ranx's value of one query: ``hit``/``gain`` of the ranked documents, ``ideal`` the
    relevant documents' grades descending, ``n_judged`` the query's judged documents."""
    n, n_rel = hit.size, ideal.size
    if name == "precision":
        kp = k or n
        return 0.0 if kp == 0 or n_rel == 0 else float(np.sum(hit[: min(kp, n)])) / kp
    if n_rel == 0:
        return 0.0
    if name == "rbp":  # the grades as gains, over the whole run
        return (1 - k) * _seqsum(gain * _int_powers(k, n))
    kk = n if k == 0 or k > n else k
    top = hit[:kk]
    if name in ("hits", "recall", "f1"):
        hits = float(np.sum(top))
        if name == "hits":
            return hits
        kp = k or n
        if kp == 0:
            return 0.0
        if name == "recall":
            return hits / n_rel
        p, r = hits / kp, hits / n_rel
        return 0.0 if p + r == 0 else 2 * ((p * r) / (p + r))
    if name == "r-precision":
        return float(np.sum(hit[: min(n_rel, n)])) / n_rel
    if name in ("mrr", "hit_rate"):
        first = np.flatnonzero(top)
        return 0.0 if first.size == 0 else (1 / (first[0] + 1) if name == "mrr" else 1.0)
    if name == "map":
        precisions = np.where(top, np.cumsum(top) / np.arange(1, kk + 1), 0.0)
        return _seqsum(precisions) / n_rel
    burges = name.endswith("_burges")
    dcg = _dcg(gain[:kk], burges)
    if name.startswith("dcg"):
        return dcg
    ideal_k = n_judged if k == 0 or k > n_judged else k
    idcg = _dcg(ideal[:ideal_k], burges)
    return dcg / (idcg if idcg != 0.0 else 1.0)


def _int_powers(p: float, n: int) -> np.ndarray:
    """``p ** i`` for ``i = 0..n-1`` as numba computes a float to an integer power (by
    squaring: ``p ** 3`` is ``p * (p * p)``, not C's ``pow``), so that ranx's rbp is matched
    to the last bit."""
    e = np.arange(n)
    out, base = np.ones(n), p
    while e.any():
        out = np.where(e & 1, out * base, out)
        e >>= 1
        base *= base
    return out


def _dcg(gain: np.ndarray, burges: bool) -> float:
    return _seqsum(((2**gain - 1) if burges else gain) / _discounts(gain.size))


class _Judgments:
    """The qrels by query: each judged document's grade, the relevant grades descending."""

    def __init__(self, qrels: trec.Qrels, rel_lvl: int = 1):
        self.qids = qrels.qids.tolist()
        docnos, rels = qrels.docnos.tolist(), qrels.rels.tolist()
        self.grades = [dict(zip(docnos[a:b], rels[a:b])) for a, b in zip(qrels.offsets[:-1], qrels.offsets[1:])]
        self.rel_lvl = rel_lvl

    def ideal(self, q: int) -> np.ndarray:
        return np.sort([g for g in self.grades[q].values() if g >= self.rel_lvl])[::-1].astype(float)

    def marks(self, q: int, docnos: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """Hits and gains of ranked documents."""
        g = np.array([self.grades[q].get(d, -1) for d in docnos], dtype=float)
        hit = g >= self.rel_lvl
        return hit, np.where(hit, g, 0.0)


def _mean_metric(parsed: tuple[str, int, int], judged: _Judgments, ranked: Sequence[Sequence[bytes]]) -> float:
    """ranx's mean over the qrels' queries (ranked lists in the same order)."""
    name, k, rel_lvl = parsed
    judged.rel_lvl = rel_lvl
    values = [
        _query_value(name, k, *judged.marks(q, docs), judged.ideal(q), len(judged.grades[q]))
        for q, docs in enumerate(ranked)
    ]
    return float(np.mean(values))


# ----------------------------------------------------------------------------- training


def _ranked(run: trec.Run, norm: Optional[str]) -> list[list[bytes]]:
    """Each query's documents in the order of the normalised run: the run's (score
    descending, docno descending), except ``min-max-inverted``: score ascending."""
    docnos = run.docnos
    if norm == "min-max-inverted":  # ties keep their order (docno descending), as the fused ranks
        q = np.repeat(np.arange(len(run.qids)), np.diff(run.offsets))
        docnos = docnos[np.lexsort((np.arange(docnos.size), run.scores, q))]
    d = docnos.tolist()
    return [d[a:b] for a, b in zip(run.offsets[:-1], run.offsets[1:])]


def _hit_lists(judged: _Judgments, run: trec.Run, norm: Optional[str]) -> list[np.ndarray]:
    judged.rel_lvl = 1
    return [judged.marks(q, docs)[0].astype(float) for q, docs in enumerate(_ranked(run, norm))]


def _probfuse(hits: list[np.ndarray], n_segments: int) -> np.ndarray:
    probs = np.zeros(n_segments)
    for h in hits:
        z = math.ceil(h.size / n_segments)
        for k in range(n_segments):
            segment = h[k * z : (k + 1) * z]
            if segment.size:
                probs[k] += _seqsum(segment) / segment.size
    return probs / len(hits)


def _segfuse(hits: list[np.ndarray]) -> np.ndarray:
    probs = np.zeros(len(_SEG_BOUNDS) - 1)
    for h in hits:
        for k, (a, b) in enumerate(itertools.pairwise(_SEG_BOUNDS)):
            probs[k] += _seqsum(h[a:b]) / (b - a)
    return probs / len(hits)


def _positions(hits: list[np.ndarray]) -> np.ndarray:
    longest = max(h.size for h in hits)
    num, den = np.zeros(longest), np.zeros(longest)
    for h in hits:
        num[: h.size] += h
        den[: h.size] += 1
    return num / den


def _log_odds(hits: list[np.ndarray]) -> np.ndarray:
    odds = np.zeros(_BAYES_CUTS[-1])
    for a, b in itertools.pairwise(_BAYES_CUTS):
        p = 0.0
        for h in hits:
            p += (_seqsum(h[a:b]) / (b - a)) / len(hits)
        p = p if p != 0 else 0.001
        q = 1 - p if 1 - p != 0 else 0.001
        odds[a:b] = math.log(p / q)
    return odds


def _check_queries(judged: _Judgments, runs: list[trec.Run], labels: list[str]) -> None:
    """ranx's rule: every run holds exactly the qrels' queries."""
    want = set(judged.qids)
    for label, run in zip(labels, runs):
        got = set(run.qids.tolist())
        if got != want:
            only_run, only_qrels = sorted(got - want)[:3], sorted(want - got)[:3]
            raise ValueError(
                f"runs[{label}] and qrels hold different queries (ranx requires the same): "
                f"in the run only {only_run}, in the qrels only {only_qrels}"
            )


def _labels(runs: Any) -> list[str]:
    return [repr(k) for k in runs] if isinstance(runs, Mapping) else [str(i) for i in range(len(runs))]


def _trained_params(method: str, judged: _Judgments, runs: list[trec.Run], norm: Optional[str], **kw) -> dict:
    if method == "mapfuse":
        parsed = _parse_metric("map")
        return {"map_scores": [_mean_metric(parsed, judged, _ranked(r, norm)) for r in runs]}
    hits = [_hit_lists(judged, r, norm) for r in runs]
    if method == "probfuse":
        return {"probs": np.stack([_probfuse(h, kw["n_segments"]) for h in hits])}
    if method == "segfuse":
        return {"probs": [_segfuse(h) for h in hits]}
    if method == "bayesfuse":
        return {"log_odds": [_log_odds(h) for h in hits]}
    return {"probs": [_positions(h) for h in hits]}  # posfuse, slidefuse


def train(
    qrels: Any,
    runs: Sequence[Any] | Mapping[str, Any],
    *,
    method: str,
    norm: Optional[str] = "min-max",
    n_segments: Optional[int] = None,
) -> dict[str, Any]:
    """The params of a trained method, as ranx's ``<method>_train(qrels, norm_runs)``.

    Args:
        qrels: judgments, any form :func:`jaxrank.evaluate` takes.
        runs: a list or dict of runs, as :func:`jaxrank.fuse` takes them; every run must hold
            exactly the qrels' queries (ranx's rule).
        method: ``probfuse``, ``segfuse``, ``slidefuse``, ``posfuse``, ``bayesfuse`` or
            ``mapfuse`` (formulas in the module docstring).
        norm: the normalisation the runs will be fused with (ranx trains on the normalised
            runs; it changes the positions only for ``min-max-inverted``).
        n_segments: ``probfuse``'s number of segments (required there, as in ranx).

    Returns:
        ``{"probs": ...}`` (``log_odds`` for bayesfuse, ``map_scores`` for mapfuse), which
        :func:`jaxrank.fuse` takes as ``params`` (slidefuse also needs ``w``).

    >>> qrels = {"q1": {"a": 1}, "q2": {"c": 1}}
    >>> runs = [{"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 1.0, "d": 0.5}}, {"q1": {"b": 2.0, "a": 1.0}, "q2": {"d": 3.0, "c": 1.0}}]
    >>> [p.tolist() for p in train(qrels, runs, method="posfuse")["probs"]]
    [[1.0, 0.0], [0.0, 1.0]]
    """
    method, norm = _check_names(method, norm)
    if method not in TRAINED or method == "mixed":
        trainable = ", ".join(m for m in TRAINED if m != "mixed")
        raise ValueError(f"method={method!r} has nothing to train; expected one of {trainable}")
    if method == "probfuse" and (isinstance(n_segments, bool) or not isinstance(n_segments, int) or n_segments < 1):
        raise ValueError(f"n_segments={n_segments!r}: probfuse needs a positive number of segments")
    judged = _Judgments(trec.read_qrels(qrels))
    labels, runs = _labels(runs), _as_runs(runs)
    _check_queries(judged, runs, labels)
    return _trained_params(method, judged, runs, norm, n_segments=n_segments)


# ----------------------------------------------------------------------------- optimize_fusion


def _rounded_grid(low: float, high: float, step: float) -> list:
    """ranx's float grid: ``np.arange(low, high + step, step)`` rounded to ``step``'s digits."""
    digits = str(step)[::-1].find(".")
    return [round(x, digits) for x in np.arange(low, high + step, step)]


def _weight_trials(step: float, n_runs: int) -> list[tuple]:
    """ranx's weights: every tuple of multiples of ``step`` in [0, 1] whose float sum is 1."""
    weights = _rounded_grid(0, 1, step)
    return [seq for seq in itertools.product(*[weights] * n_runs) if sum(seq) == 1.0]


def _grid(method: str, options: dict, n_runs: int) -> list[tuple[str, Any]]:
    """``(config, value)`` per trial, in ranx's order; ``str(config)`` names it in the report."""
    if method in _WEIGHT_GRID:
        return [(w, w) for w in _weight_trials(options["step"], n_runs)]
    if method == "rrf":
        return [(k, k) for k in range(options["min_k"], options["max_k"] + 1, options["step"])]
    if method == "probfuse":
        return [(n, n) for n in range(options["min_n_segments"], options["max_n_segments"] + 1)]
    if method == "slidefuse":
        return [(w, w) for w in range(options["min_w"], options["max_w"] + 1)]
    name = {"rbc": "phi", "gmnz": "gamma", "logn_isr": "sigma"}[method]
    return [(v, v) for v in _rounded_grid(options[f"min_{name}"], options[f"max_{name}"], options["step"])]


_PARAM_NAME = {"rrf": "k", "rbc": "phi", "gmnz": "gamma", "logn_isr": "sigma", "slidefuse": "w"}


def optimize_fusion(
    qrels: Any,
    runs: Sequence[Any] | Mapping[str, Any],
    *,
    norm: Optional[str] = "min-max",
    method: str = "wsum",
    metric: str = "ndcg",
    return_optimization_report: bool = False,
    **options: Any,
) -> dict[str, Any] | tuple[dict[str, Any], dict[str, float]]:
    """The params of ``method`` that ``ranx.optimize_fusion`` chooses: the best ``metric``
    over ranx's grid, the last best in grid order when settings tie (ranx keeps a setting
    whose value is ``>=`` the best so far).

    Grids (``options``, ranx's names and defaults): weights (``wsum``, ``wmnz``,
    ``w_bordafuse``, ``w_condorcet``, ``mixed``): every tuple of multiples of ``step=0.1``
    whose float sum is exactly 1, in ``itertools.product`` order; ``rrf``: ``k`` in
    ``range(min_k=10, max_k + 1=101, step=10)``; ``rbc``, ``gmnz``, ``logn_isr``: ``phi``,
    ``gamma``, ``sigma`` from ``min_*=0.01`` to ``max_*=1.0`` by ``step=0.01``; ``probfuse``:
    ``n_segments`` from ``min_n_segments=1`` to ``max_n_segments=100`` (probabilities trained
    for each); ``slidefuse``: ``w`` from ``min_w=1`` to ``max_w=100`` (probabilities trained
    once). ``bayesfuse``, ``mapfuse``, ``posfuse``, ``segfuse`` are only trained
    (:func:`train`).

    Args:
        qrels: judgments, any form :func:`jaxrank.evaluate` takes.
        runs: two or more runs, a list or dict as :func:`jaxrank.fuse` takes them, each
            holding exactly the qrels' queries.
        norm: the normalisation (ranx's names), applied before training and fusing.
        method: a method with params (above).
        metric: a ranx metric name (:data:`METRICS`, with ``@k`` and ``-lN``), ranx's
            definition: the mean over the qrels' queries.
        return_optimization_report: also return ``{str(config): value}`` of every trial, in
            grid order (ranx's ``OptimizationReport`` configs and results); refused for the
            methods without a grid, as ranx refuses it.
        options: the method's grid options (above); ``show_progress`` is accepted for ranx's
            signature on the grid methods (nothing is shown).

    Returns:
        The params :func:`jaxrank.fuse` takes (ranx's values: a weights tuple, ``k``,
        ``phi``, ..., trained tables), or ``(params, report)``.

    Raises:
        ValueError: fewer than two runs, runs and qrels of different queries, an unknown
            ``method``, ``norm`` or ``metric``, a method without params, an unknown option.

    Objective, per setting :math:`\\theta`: :math:`\\frac{1}{|Q|}\\sum_q
    M(\\mathrm{fuse}_\\theta(\\mathrm{runs})_q, \\mathrm{qrels}_q)`.

    >>> import jaxrank
    >>> qrels = {"q1": {"a": 1}, "q2": {"d": 1}}
    >>> runs = [{"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"c": 3.0, "e": 2.0, "d": 1.0}},
    ...         {"q1": {"b": 3.0, "c": 2.0, "a": 1.0}, "q2": {"d": 3.0, "c": 2.0, "e": 1.0}}]
    >>> params, report = jaxrank.optimize_fusion(
    ...     qrels, runs, method="wsum", metric="mrr", step=0.5, return_optimization_report=True
    ... )
    >>> [round(v, 4) for v in report.values()]  # weights (0, 1), (0.5, 0.5), (1, 0)
    [0.6667, 0.5, 0.6667]
    >>> [float(w) for w in params["weights"]]  # a tie: the last best, as ranx
    [1.0, 0.0]
    >>> jaxrank.fuse(runs, method="wsum", params=params).to_dict()["q1"]
    {'a': 1.0, 'b': 0.5, 'c': 0.0}
    """
    method, norm = _check_names(method, norm)
    if method in METHODS and method not in _OPTIONS:
        with_params = ", ".join(sorted(_OPTIONS))
        raise ValueError(f"method={method!r} has no params to optimize; expected one of {with_params}")
    parsed = _parse_metric(metric)
    accepted = _OPTIONS[method]
    unknown = sorted(set(options) - set(accepted or {}))
    if unknown:
        takes = ", ".join(accepted or {}) or "no options: it is only trained"
        raise ValueError(f"options {unknown} are not options of method={method!r} (it takes {takes})")
    if return_optimization_report and accepted is None:
        raise ValueError(f"return_optimization_report: method={method!r} has no grid to report (ranx refuses it too)")
    labels = _labels(runs)
    runs = _as_runs(runs)
    if len(runs) < 2:
        raise ValueError(f"runs: optimize_fusion needs at least two runs, got {len(runs)}")
    judged = _Judgments(trec.read_qrels(qrels))
    _check_queries(judged, runs, labels)
    if accepted is None:
        return _trained_params(method, judged, runs, norm)
    return _search(method, norm, parsed, judged, runs, {**accepted, **options}, return_optimization_report)


def _search(method, norm, parsed, judged, runs, options, with_report):
    aligned = _Aligned(runs)
    inserted = _insertion_order(aligned, runs, norm)
    hits = [_hit_lists(judged, r, norm) for r in runs] if method in ("probfuse", "slidefuse") else None
    fixed = {"probs": [_positions(h) for h in hits]} if method == "slidefuse" else {}
    best_score, best, report = 0.0, None, {}
    for config, value in _grid(method, options, len(runs)):
        if method in _WEIGHT_GRID:
            params = {"weights": value}
        elif method == "probfuse":
            params = {"probs": np.stack([_probfuse(h, value) for h in hits])}
        else:
            params = {**fixed, _PARAM_NAME[method]: value}
        fused = aligned.fuse(method, norm, params)
        score = _mean_metric(parsed, judged, _ranx_ranking(aligned, fused, inserted, judged))
        report[str(config)] = score
        if score >= best_score:  # ranx's rule: the last best wins ties
            best_score, best = score, params
    return (best, report) if with_report else best


def _insertion_order(aligned: _Aligned, runs: list[trec.Run], norm: Optional[str]) -> list[np.ndarray]:
    """Per query, the candidates in the order ranx's fused dict receives them: the first
    run's documents in its (normalised) order, then each next run's new ones."""
    index = {}
    for q, qid in enumerate(aligned.qids):
        a, b = aligned.starts[q], aligned.starts[q + 1]
        index[qid] = dict(zip(aligned.docnos[a:b].tolist(), range(a, b)))
    order: dict[str, dict[int, None]] = {qid: {} for qid in aligned.qids}
    for run in runs:
        for qid, docs in zip(run.qids.tolist(), _ranked(run, norm)):
            order[qid].update(dict.fromkeys(index[qid][d] for d in docs))
    return [np.fromiter(order[qid], dtype=np.int64) for qid in aligned.qids]


def _ranx_ranking(aligned: _Aligned, fused: np.ndarray, inserted: list[np.ndarray], judged: _Judgments):
    """The fused run's documents per qrels query as ranx ranks them: numba's quicksort
    argsort of the negated scores in insertion order (it decides the order of tied scores)."""
    where = {q: i for i, q in enumerate(aligned.qids)}
    out = []
    for qid in judged.qids:
        cands = inserted[where[qid]]
        out.append(aligned.docnos[cands[_numba_argsort(-fused[cands])]].tolist())
    return out


_SMALL_QUICKSORT = 15  # numba's: ranges this short are insertion-sorted


def _numba_argsort(a: np.ndarray) -> np.ndarray:
    """``np.argsort(a)`` as numba compiles it (numba.misc.quicksort, the order of equal keys
    included); NaN-free input. Distinct keys have one order: numpy's, much faster."""
    if np.unique(a).size == a.size:
        return np.argsort(a, kind="stable")
    v, r = a.tolist(), list(range(len(a)))
    stack = [(0, len(a) - 1)]
    while stack:
        low, high = stack.pop()
        while high - low >= _SMALL_QUICKSORT:
            i = _partition(v, r, low, high)
            if high - i > i - low:  # push the larger side, go on with the smaller
                if high > i:
                    stack.append((i + 1, high))
                high = i - 1
            else:
                if i > low:
                    stack.append((low, i - 1))
                low = i + 1
        for i in range(low + 1, high + 1):  # insertion sort of [low, high]
            k, j = r[i], i
            while j > low and v[k] < v[r[j - 1]]:
                r[j] = r[j - 1]
                j -= 1
            r[j] = k
    return np.array(r, dtype=np.int64)


def _partition(v: list, r: list, low: int, high: int) -> int:
    """numba's partition of ``r[low:high + 1]``: median-of-three pivot, Hoare scheme."""
    mid = (low + high) >> 1
    if v[r[mid]] < v[r[low]]:
        r[low], r[mid] = r[mid], r[low]
    if v[r[high]] < v[r[mid]]:
        r[high], r[mid] = r[mid], r[high]
    if v[r[mid]] < v[r[low]]:
        r[low], r[mid] = r[mid], r[low]
    pivot = v[r[mid]]
    r[high], r[mid] = r[mid], r[high]
    i, j = low, high - 1
    while True:
        while i < high and v[r[i]] < pivot:
            i += 1
        while j >= low and pivot < v[r[j]]:
            j -= 1
        if i >= j:
            break
        r[i], r[j] = r[j], r[i]
        i += 1
        j -= 1
    r[i], r[high] = r[high], r[i]
    return i
