"""Run fusion: ranx's methods and normalisations over runs, and the same math over arrays.

:func:`fuse` takes runs as :func:`jaxrank.evaluate` does (files, ``{qid: {docno: score}}``
dicts, records, DataFrames, :class:`~jaxrank.trec.Run`) and returns a fused
:class:`~jaxrank.trec.Run` with the documents and scores of ``ranx.fuse`` on the same runs.
:func:`fuse_scores` is the array form: ``scores[R, ..., n]`` of ``R`` runs aligned on the
same ``n`` candidate documents, ``where[R, ..., n]`` saying which run retrieved which
candidate; it runs under ``jit`` and ``vmap``, and :func:`fuse` is built on it.

Notation, per query: run :math:`r` retrieved the documents :math:`D_r` (scores
:math:`s_{rd}`, 1-based ranks :math:`\\rho_{rd}`, :math:`n_r = |D_r|`); the candidates are
:math:`C = \\bigcup_r D_r`; :math:`m_d = |\\{r : d \\in D_r\\}|`. Ranks are exact
(:func:`jaxrank.hard`, ties in input order; :func:`fuse` lays candidates out by docno
descending, so tied scores rank as trec_eval ranks them).

Normalisations (per run and query, over :math:`D_r`; :math:`\\epsilon = 10^{-9}` as in ranx):

* ``"min-max"``: :math:`(s - \\min s) / \\max(\\max s - \\min s, \\epsilon)` (a query whose
  scores are all equal gets 0 everywhere);
* ``"min-max-inverted"`` (distances: the smallest gets 1):
  :math:`(\\max s - s) / \\max(\\max s - \\min s, \\epsilon)` (all equal: 0 everywhere), and
  each run is re-ranked by it (ranx sorts the normalised run), so rank-based methods rank by
  ascending distance;
* ``"max"``: :math:`s / \\max(\\max s, \\epsilon)`;
* ``"sum"``: :math:`(s - \\min s) / \\max(\\sum s - n_r \\min s, \\epsilon)`;
* ``"zmuv"``: :math:`(s - \\bar s) / \\max(\\sigma, \\epsilon)`, :math:`\\sigma` the population
  standard deviation;
* ``"rank"``: :math:`1 - (\\rho - 1) / n_r`;
* ``"borda"``: :math:`1 - (\\rho - 1) / |C|`, and every candidate the run missed gets
  :math:`1/2 - (n_r - 1) / (2 |C|)` and counts as retrieved from then on;
* ``None``: the scores as they are.

Methods (:math:`\\tilde s` the normalised scores, sums over the runs that retrieved
:math:`d` unless said otherwise, :math:`w_r` the weights):

* ``sum``: :math:`\\sum_r \\tilde s_{rd}`; ``mnz``: :math:`m_d \\sum_r \\tilde s_{rd}`;
  ``gmnz``: :math:`m_d^{\\gamma} \\sum_r \\tilde s_{rd}`;
* ``anz`` / ``med``: mean / median of the :math:`\\tilde s_{rd}`;
* ``max`` / ``min``: over all runs, a missed document counting :math:`-10^9` / :math:`10^9`;
* ``wsum``: :math:`\\sum_r w_r \\tilde s_{rd}`; ``wmnz``:
  :math:`\\big(\\sum_r \\tilde s_{rd}\\big)\\big(\\sum_r w_r\\big)`;
* ``rrf``: :math:`\\sum_r 1 / (k + \\rho_{rd})`; ``rbc``: :math:`\\sum_r (1 - \\phi)\\, \\phi^{\\rho_{rd} - 1}`;
* ``isr``: :math:`m_d \\sum_r \\rho_{rd}^{-2}`; ``log_isr``: :math:`\\log(m_d) \\sum_r \\rho_{rd}^{-2}`;
  ``logn_isr``: :math:`\\log(m_d + \\sigma) \\sum_r \\rho_{rd}^{-2}`;
* ``bordafuse``: :math:`\\sum_r b_{rd}` over all runs, :math:`b_{rd} = |C| - \\rho_{rd} + 1` if
  retrieved, else :math:`(|C| - n_r + 1) / 2`; ``w_bordafuse``: :math:`\\sum_r w_r b_{rd}`;
* ``condorcet``: :math:`|C| - |\\{e \\in C : e \\text{ beats } d\\}|`; :math:`e` beats :math:`d`
  when the runs preferring :math:`e` outweigh those preferring :math:`d` (a run prefers a
  retrieved document to a missed one, the better rank between two retrieved ones, and abstains
  when it missed both); ``w_condorcet`` weighs each run's vote by :math:`w_r`.

Rank-based methods (``rrf``, ``isr``, ``log_isr``, ``logn_isr``, ``rbc``, ``bordafuse``,
``w_bordafuse``, ``condorcet``, ``w_condorcet``) use the ranks of the raw scores: every
normalisation but ``"borda"`` and ``"min-max-inverted"`` keeps each run's order, so they
ignore ``norm``; ``"min-max-inverted"`` reverses it (ranks of the inverted scores, ties in
input order); ``"borda"`` is
refused with them (ranx then ranks the candidates in Python's set order, which changes with
``PYTHONHASHSEED``). Condorcet scores equal ranx's whenever ranx's pairwise comparison is a
strict total order; where it is not (a tie or a cycle of majorities), ranx's result depends on
Python's set order and jaxrank gives tied documents equal scores (docs/fuse.md).

Trained methods (:data:`TRAINED`; :math:`i = \\rho_{rd} - 1`; params from
:func:`jaxrank.fusion.train` or :func:`jaxrank.optimize_fusion`):

* ``probfuse``: :math:`\\sum_r P_r[k] / (k + 1)`, :math:`k = \\lfloor i / \\lceil n_r / S \\rceil \\rfloor`;
* ``segfuse``: :math:`\\sum_r P_r[k(i)] (\\tilde s_{rd} + 1)`, segments bounded by 0, 5, 15, 35, ..., 5115;
* ``slidefuse``: :math:`\\sum_r \\operatorname{mean}(P_r[\\max(i - w, 0) .. \\min(i + w, n_r - 1)])`;
* ``posfuse``: :math:`\\sum_r P_r[i]`; ``mapfuse``: :math:`\\sum_r \\mathrm{MAP}_r / (i + 1)`;
* ``bayesfuse``: :math:`\\sum_r L_r[i]` over all runs, :math:`\\log(0.001/0.999)` for a run that
  missed :math:`d`; ``mixed``: :math:`\\sqrt{m_d} \\sum_r w_r \\tilde s_{rd}`.

``params`` per method (ranx's names): ``rrf``: ``k`` (60); ``logn_isr``: ``sigma`` (0.01);
``rbc``: ``phi`` (required); ``gmnz``: ``gamma`` (required); ``wsum``, ``wmnz``,
``w_bordafuse``, ``w_condorcet``: ``weights``, one per run (ranx requires them; default here
``1 / R`` each); ``probfuse``, ``segfuse``, ``posfuse``: ``probs``; ``slidefuse``:
``probs`` and ``w``; ``bayesfuse``: ``log_odds``; ``mapfuse``: ``map_scores``; ``mixed``:
``weights``.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _checks
from jaxrank.losses.lists import positions
from jaxrank.ranking.backend import divide
from jaxrank.trec import files as trec
from jaxrank.trec.join import ranges, run_order

__all__ = ["METHODS", "NORMS", "RANK_BASED", "TRAINED", "fuse", "fuse_scores"]

#: ranx's fusion methods that jaxrank implements (ranx's names).
METHODS: tuple[str, ...] = (
    "anz",
    "bordafuse",
    "condorcet",
    "gmnz",
    "isr",
    "log_isr",
    "logn_isr",
    "max",
    "med",
    "min",
    "mnz",
    "rbc",
    "rrf",
    "sum",
    "w_bordafuse",
    "w_condorcet",
    "wmnz",
    "wsum",
)
#: ranx's trained methods: their params come from qrels (:func:`jaxrank.fusion.train`,
#: :func:`jaxrank.optimize_fusion`).
TRAINED: tuple[str, ...] = ("bayesfuse", "mapfuse", "mixed", "posfuse", "probfuse", "segfuse", "slidefuse")
#: ranx's normalisations (``None``: none).
NORMS: tuple[Optional[str], ...] = ("min-max", "min-max-inverted", "max", "sum", "zmuv", "rank", "borda", None)
#: Methods that use only each run's ranking.
RANK_BASED = frozenset(
    {"rrf", "isr", "log_isr", "logn_isr", "rbc", "bordafuse", "w_bordafuse", "condorcet", "w_condorcet"}
)
#: Trained methods that score a document by its position in each run: ranx then needs each
#: run's order, which its borda normalisation does not keep (Python's set order).
_POSITIONAL = frozenset(TRAINED) - {"mixed"}
_WEIGHTED = frozenset({"wsum", "wmnz", "w_bordafuse", "w_condorcet", "mixed"})
_REQUIRED = object()
_PARAMS: dict[str, dict[str, Any]] = {m: {} for m in METHODS + TRAINED}
_PARAMS.update(
    rrf={"k": 60},
    logn_isr={"sigma": 0.01},
    rbc={"phi": _REQUIRED},
    gmnz={"gamma": _REQUIRED},
    **{m: {"weights": None} for m in _WEIGHTED},
    probfuse={"probs": _REQUIRED},
    segfuse={"probs": _REQUIRED},
    posfuse={"probs": _REQUIRED},
    slidefuse={"probs": _REQUIRED, "w": _REQUIRED},
    bayesfuse={"log_odds": _REQUIRED},
    mapfuse={"map_scores": _REQUIRED},
)
#: Per-run tables of a trained method, indexed by position (0-based) in the run.
_TABLES = ("probs", "log_odds")
_SEGFUSE_BOUNDS = (0, 5, 15, 35, 75, 155, 315, 635, 1275, 2555, 5115)  # ranx's 10 segments: 10 * 2^(k-1) - 5
_MIN_ODD = math.log(0.001 / 0.999)  # bayesfuse: log-odds of a run that missed the document
_EPS = 1e-9  # ranx's floor on every normalisation's denominator
_BIG = 1e9  # ranx's score for a missed document in max / min


# ----------------------------------------------------------------------------- arguments


def _check_names(method: Any, norm: Any) -> tuple[str, Optional[str]]:
    if not isinstance(method, str) or method not in METHODS + TRAINED:
        names = ", ".join(sorted(METHODS + TRAINED))
        raise ValueError(f"method={method!r} is not a fusion method; expected one of {names}")
    if norm in ("min_max", "min_max_inverted"):  # ranx's other spellings
        norm = norm.replace("_", "-")
    if norm is not None and (not isinstance(norm, str) or norm not in NORMS):
        names = ", ".join(repr(n) for n in NORMS)
        raise ValueError(f"norm={norm!r} is not a normalisation; expected one of {names}")
    if norm == "borda" and (method in RANK_BASED or method in _POSITIONAL):
        raise ValueError(
            f"norm='borda' with the rank-based method={method!r}: ranx then ranks each run's candidates "
            "in Python's set order (it changes with PYTHONHASHSEED); rank-based methods use the "
            "runs' rankings, so pass any other norm (or None)"
        )
    return method, norm


def _number(params: dict, name: str, low: float, high: float) -> Any:
    v = params[name]
    if isinstance(v, jax.core.Tracer):
        return v
    if isinstance(v, (np.ndarray, jax.Array)) and v.shape == ():
        v = v.item()
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or not low <= v <= high:
        raise ValueError(f"params[{name!r}] must be a number in [{low}, {high}], got {v!r}")
    return v


def _check_params(method: str, params: Optional[Mapping], n_runs: int) -> dict[str, Any]:
    """The method's parameters with ranx's defaults, checked (values only when concrete)."""
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict or None, got {type(params).__name__}")
    accepted = _PARAMS[method]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        takes = ", ".join(repr(k) for k in accepted) or "no params"
        raise ValueError(f"params {unknown} are not parameters of method={method!r} (it takes {takes})")
    out = {k: params.get(k, default) for k, default in accepted.items()}
    missing = [k for k, v in out.items() if v is _REQUIRED]
    if missing:
        raise ValueError(f"method={method!r} needs params[{missing[0]!r}] (ranx has no default for it)")
    if "k" in out:
        out["k"] = _number(out, "k", 0, math.inf)
    if "sigma" in out:
        out["sigma"] = _number(out, "sigma", 0, 1)  # ranx asserts this range
    if "phi" in out:
        out["phi"] = _number(out, "phi", 0, 1)
    if "gamma" in out:
        out["gamma"] = _number(out, "gamma", -math.inf, math.inf)
    if "weights" in out:
        w = out["weights"]
        if w is None:
            w = np.full(n_runs, 1.0 / n_runs)
        out["weights"] = _per_run(w, "weights", n_runs)
    if "map_scores" in out:
        out["map_scores"] = _per_run(out["map_scores"], "map_scores", n_runs)
    if "w" in out:
        out["w"] = _number(out, "w", 0, math.inf)
    for name in _TABLES:
        if name in out:
            out[name] = _table(out[name], name, n_runs, equal_lengths=method == "probfuse")
    return out


def _per_run(v: Any, name: str, n_runs: int) -> Any:
    """One finite number per run (checked when concrete)."""
    v = jnp.asarray(v) if isinstance(v, jax.Array) else np.asarray(v, dtype=float)
    if v.shape != (n_runs,):
        raise ValueError(f"params[{name!r}] must hold one value per run ({n_runs}), got shape {v.shape}")
    if not isinstance(v, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(v))):
        raise ValueError(f"params[{name!r}] must be finite")
    return v


def _table(v: Any, name: str, n_runs: int, equal_lengths: bool) -> Any:
    """Per-run tables by position, ``[R, L]``: a 2-d array (may be traced), or one sequence
    per run (ranx's form) padded with zeros (ranx's posfuse, segfuse and slidefuse read 0 past
    a table's end)."""
    if isinstance(v, jax.Array):
        if v.ndim != 2 or v.shape[0] != n_runs:
            raise ValueError(f"params[{name!r}] must be [runs ({n_runs}), positions], got shape {v.shape}")
        return v
    if not isinstance(v, (Sequence, np.ndarray)) or len(v) != n_runs:
        raise ValueError(f"params[{name!r}] must hold one table per run ({n_runs}), got {type(v).__name__}")
    rows = [np.asarray(row, dtype=float) for row in v]
    if any(row.ndim != 1 or row.size == 0 for row in rows):
        raise ValueError(f"params[{name!r}] must hold one non-empty 1-d table per run")
    lengths = sorted({row.size for row in rows})
    if equal_lengths and len(lengths) > 1:
        raise ValueError(f"params[{name!r}]: every run needs the same number of segments, got {lengths}")
    out = np.zeros((n_runs, lengths[-1]))
    for r, row in enumerate(rows):
        out[r, : row.size] = row
    if not np.all(np.isfinite(out)):
        raise ValueError(f"params[{name!r}] must be finite")
    return out


# ----------------------------------------------------------------------------- array form


def _masked(x: jax.Array, present: jax.Array, fill) -> jax.Array:
    return jnp.where(present, x, jnp.asarray(fill, x.dtype))


def _normalise(s: jax.Array, p: jax.Array, rank: jax.Array, norm: Optional[str]) -> tuple[jax.Array, jax.Array]:
    """Normalised scores and the new "retrieved" mask; reductions over the last axis."""
    count = jnp.sum(p, axis=-1, keepdims=True).astype(s.dtype)
    some = count > 0
    if norm is None:
        return s, p
    if norm in ("min-max", "min-max-inverted", "sum"):
        lo = jnp.where(some, jnp.min(_masked(s, p, jnp.inf), axis=-1, keepdims=True), 0)
        if norm != "sum":
            hi = jnp.where(some, jnp.max(_masked(s, p, -jnp.inf), axis=-1, keepdims=True), 0)
            if norm == "min-max-inverted":  # distances: the smallest gets 1
                return divide(hi - s, jnp.maximum(hi - lo, _EPS)), p
            return divide(s - lo, jnp.maximum(hi - lo, _EPS)), p
        total = jnp.sum(_masked(s, p, 0), axis=-1, keepdims=True)
        return divide(s - lo, jnp.maximum(total - lo * count, _EPS)), p
    if norm == "max":
        hi = jnp.where(some, jnp.max(_masked(s, p, -jnp.inf), axis=-1, keepdims=True), 0)
        return divide(s, jnp.maximum(hi, _EPS)), p
    if norm == "zmuv":
        n = jnp.maximum(count, 1)
        mean = jnp.sum(_masked(s, p, 0), axis=-1, keepdims=True) / n
        std = jnp.sqrt(jnp.sum(_masked((s - mean) ** 2, p, 0), axis=-1, keepdims=True) / n)
        return divide(s - mean, jnp.maximum(std, _EPS)), p
    if norm == "rank":
        return 1 - (rank - 1) / jnp.maximum(count, 1), p
    # borda: over the candidates of all runs; a run's misses fill in at the mean remaining score
    candidate = jnp.any(p, axis=0)
    n_c = jnp.maximum(jnp.sum(candidate, axis=-1, keepdims=True), 1).astype(s.dtype)
    missed = 0.5 - (count - 1) / (2 * n_c)
    return jnp.where(p, 1 - (rank - 1) / n_c, missed), jnp.broadcast_to(candidate, p.shape)


def _median(s: jax.Array, p: jax.Array) -> jax.Array:
    """Median over axis 0 of the retrieved scores (the two middle ones averaged)."""
    v, q = jnp.moveaxis(s, 0, -1), jnp.moveaxis(p, 0, -1)
    pos = positions(-v, q)  # 1-based ascending position among the retrieved
    m = jnp.sum(q, axis=-1, keepdims=True)
    lo, hi = (m + 1) // 2, m // 2 + 1
    at = lambda k: jnp.sum(jnp.where(q & (pos == k), v, 0), axis=-1)  # noqa: E731
    return (at(lo) + at(hi)) / 2


def _condorcet(p: jax.Array, rank: jax.Array, w: jax.Array) -> jax.Array:
    """``|C|`` minus the number of candidates that beat each one in a weighted pairwise vote."""
    votes = 0
    for r in range(p.shape[0]):  # one [..., n, n] slab per run, not [R, ..., n, n]
        x, y = p[r][..., :, None], p[r][..., None, :]
        prefers = x & (~y | (rank[r][..., :, None] < rank[r][..., None, :]))  # [.., d, e]: d over e
        votes = votes + w[r] * prefers.astype(w.dtype)
    beaten = jnp.sum(jnp.swapaxes(votes, -1, -2) > votes, axis=-1)  # e beats d
    n_c = jnp.sum(jnp.any(p, axis=0), axis=-1, keepdims=True)
    return (n_c - beaten).astype(votes.dtype)


def _lookup(table: jax.Array, index: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``table[r, index[r, ...]]`` per run, and whether the index is inside the table."""
    size = table.shape[-1]
    inside = (index >= 0) & (index < size)
    return jax.vmap(lambda t, i: t[i])(table, jnp.clip(index, 0, size - 1)), inside


def _trained(method: str, s: jax.Array, p: jax.Array, rank: jax.Array, params: dict) -> jax.Array:
    """The trained methods (ranx's): a score per run from the document's position ``i``
    (0-based) in it, summed over the runs that retrieved the document (bayesfuse: over all)."""
    dtype = s.dtype
    i = rank.astype(jnp.int32) - 1
    n = jnp.sum(p, axis=-1, keepdims=True)  # the run's length on the query
    if method == "mixed":
        w = jnp.asarray(params["weights"], dtype).reshape((-1,) + (1,) * (s.ndim - 1))
        return jnp.sum(_masked(w * s, p, 0), axis=0) * jnp.sqrt(jnp.sum(p, axis=0).astype(dtype))
    if method == "mapfuse":
        maps = jnp.asarray(params["map_scores"], dtype).reshape((-1,) + (1,) * (s.ndim - 1))
        return jnp.sum(_masked(maps / (i + 1).astype(dtype), p, 0), axis=0)
    table = jnp.asarray(params["log_odds" if method == "bayesfuse" else "probs"], dtype)
    if method == "bayesfuse":  # ranx reads past the end of its table there: NaN, not a number
        odds, inside = _lookup(table, i)
        return jnp.sum(jnp.where(p, jnp.where(inside, odds, jnp.nan), _MIN_ODD), axis=0)
    if method == "posfuse":
        prob, inside = _lookup(table, i)
        return jnp.sum(_masked(prob, p & inside, 0), axis=0)
    if method == "probfuse":  # n_segments equal segments of ceil(n / n_segments) positions
        n_segments = table.shape[-1]
        k = i // jnp.maximum(-(-n // n_segments), 1)
        prob, _ = _lookup(table, k)
        return jnp.sum(_masked(prob / (k + 1).astype(dtype), p, 0), axis=0)
    if method == "segfuse":
        k = jnp.searchsorted(jnp.asarray(_SEGFUSE_BOUNDS[1:]), i, side="right")
        prob, inside = _lookup(table, k)
        return jnp.sum(_masked(prob * (s + 1), p & inside, 0), axis=0)
    # slidefuse: the mean of the probabilities in the window [i - w, i + w] cut to the run,
    # summed in order as ranx (a cumulative sum would break its exact ties)
    w = jnp.asarray(params["w"], jnp.int32)
    a, b = jnp.maximum(i - w, 0), jnp.minimum(i + w, n - 1)

    def add(t, total):
        prob, inside = _lookup(table, a + t)
        return total + jnp.where(inside & (a + t <= b), prob, 0)

    window = jax.lax.fori_loop(0, 2 * w + 1, add, jnp.zeros(i.shape, dtype))
    return jnp.sum(_masked(window / (b - a + 1).astype(dtype), p, 0), axis=0)


def _combine(method: str, s: jax.Array, p: jax.Array, rank: jax.Array, params: dict) -> jax.Array:
    if method in TRAINED:
        return _trained(method, s, p, rank, params)
    dtype = s.dtype
    m = jnp.sum(p, axis=0).astype(dtype)
    total = jnp.sum(_masked(s, p, 0), axis=0)
    if method in ("sum", "mnz", "anz", "gmnz"):
        return {
            "sum": lambda: total,
            "mnz": lambda: total * m,
            "anz": lambda: total / jnp.maximum(m, 1),
            "gmnz": lambda: total * m ** jnp.asarray(params.get("gamma", 1), dtype),
        }[method]()
    if method == "max":
        return jnp.max(_masked(s, p, -_BIG), axis=0)
    if method == "min":
        return jnp.min(_masked(s, p, _BIG), axis=0)
    if method == "med":
        return _median(s, p)
    if method in ("wsum", "wmnz", "w_bordafuse", "w_condorcet"):
        w = jnp.asarray(params["weights"], dtype).reshape((-1,) + (1,) * (s.ndim - 1))
    else:
        w = jnp.ones((s.shape[0],) + (1,) * (s.ndim - 1), dtype)
    if method == "wsum":
        return jnp.sum(w * _masked(s, p, 0), axis=0)
    if method == "wmnz":
        return total * jnp.sum(_masked(jnp.broadcast_to(w, s.shape), p, 0), axis=0)
    rank = rank.astype(dtype)
    if method == "rrf":
        return jnp.sum(_masked(1 / (jnp.asarray(params["k"], dtype) + rank), p, 0), axis=0)
    if method == "rbc":
        phi = jnp.asarray(params["phi"], dtype)
        return jnp.sum(_masked((1 - phi) * phi ** (rank - 1), p, 0), axis=0)
    if method in ("isr", "log_isr", "logn_isr"):
        inv_sq = jnp.sum(_masked(1 / rank**2, p, 0), axis=0)
        factor = {
            "isr": lambda: m,
            "log_isr": lambda: jnp.log(jnp.maximum(m, 1)),
            "logn_isr": lambda: jnp.log(m + jnp.asarray(params["sigma"], dtype)),
        }[method]()
        return inv_sq * factor
    if method in ("bordafuse", "w_bordafuse"):
        n_c = jnp.sum(jnp.any(p, axis=0), axis=-1, keepdims=True).astype(dtype)
        n_r = jnp.sum(p, axis=-1, keepdims=True).astype(dtype)
        points = jnp.where(p, n_c - rank + 1, (n_c - n_r + 1) / 2)
        return jnp.sum(w * points, axis=0)
    return _condorcet(p, rank, w.reshape(-1))


def fuse_scores(
    scores: jax.Array,
    where: Optional[jax.Array] = None,
    method: str = "wsum",
    norm: Optional[str] = "min-max",
    params: Optional[Mapping] = None,
) -> jax.Array:
    """Fused scores of ``R`` runs aligned on the same candidate documents.

    Args:
        scores: ``[R, ..., n]``, run ``r``'s score of each candidate (any value where the run
            did not retrieve it).
        where: ``[R, ..., n]`` bool, run ``r`` retrieved the candidate; None: every run
            retrieved every item. A column no run retrieved is padding.
        method, norm, params: as :func:`fuse` (module docstring); ``method`` and ``norm`` are
            static under ``jit``, ``params`` values may be traced.

    Returns:
        ``[..., n]``: the fused score of each candidate, 0 on padding. Rank-based methods
        rank each run's scores with :func:`jaxrank.hard` (ties: the earlier column first).
        Every method has this form; ``condorcet`` and ``w_condorcet`` cost ``O(R n^2)``.

    >>> s = jnp.array([[[3.0, 2.0, 1.0]], [[1.0, 0.0, 2.0]]])  # 2 runs, 1 query, 3 docs
    >>> fuse_scores(s, method="sum", norm="min-max").tolist()
    [[1.5, 0.5, 1.0]]
    >>> np.round(np.asarray(fuse_scores(s, s > 0.5, method="rrf", params={"k": 0}), float), 4).tolist()
    [[1.5, 0.5, 1.3333]]
    """
    method, norm = _check_names(method, norm)
    scores = jnp.asarray(scores)
    if scores.ndim < 2:
        raise ValueError(f"scores must be [R, ..., n] (runs first), got shape {scores.shape}")
    if not jnp.issubdtype(scores.dtype, jnp.floating):
        scores = scores.astype(jnp.result_type(float))
    if where is None:
        p = jnp.ones(scores.shape, bool)
    else:
        p = jnp.asarray(where)
        if p.shape != scores.shape or p.dtype != jnp.bool_:
            raise ValueError(
                f"where must be a bool array of the shape of scores {scores.shape}, got {p.dtype}{p.shape}"
            )
    params = _check_params(method, params, scores.shape[0])
    rank = positions(scores, p)
    s, present = _normalise(scores, p, rank, norm)
    if norm == "min-max-inverted":  # ranx re-sorts each run by the inverted scores: ranks follow them
        rank = positions(s, p)
    fused = _combine(method, s, present, rank, params)
    return jnp.where(jnp.any(p, axis=0), fused, jnp.zeros((), fused.dtype))


# ----------------------------------------------------------------------------- runs


def _as_runs(runs: Any) -> list[trec.Run]:
    """The runs of a list or of a dict ``{name: run}`` (in its order), read; a bad one is
    named as the caller wrote it: ``runs[1]``, ``runs['bm25']``."""
    if isinstance(runs, Mapping):
        items = [(repr(name), run) for name, run in _checks.named_runs(runs).items()]  # not one run
    elif isinstance(runs, (str, bytes, os.PathLike)) or not isinstance(runs, Sequence):
        raise TypeError(f"runs must be a list of runs or a dict {{name: run}}, got {type(runs).__name__}")
    else:
        items = [(str(i), run) for i, run in enumerate(runs)]  # unnamed: the same run may come twice
    if not items:
        raise ValueError("runs is empty: fusion needs at least one run")
    out = []
    for label, run in items:
        if isinstance(run, trec.Run):
            out.append(run)
            continue
        try:
            out.append(trec.read_run(run))
        except TypeError as e:
            raise TypeError(f"runs[{label}]: {e}") from None
        except ValueError as e:  # TrecFormatError names the file and line; say which run too
            raise ValueError(f"runs[{label}]: {e}") from None
    return out


def _weights_by_name(runs: Any, params: Optional[Mapping]) -> Optional[Mapping]:
    """``params`` with ``weights`` given as ``{name: weight}`` (runs given as a dict) turned
    into the list, in the order of the runs."""
    weights = None if params is None else params.get("weights")
    if not isinstance(weights, Mapping):
        return params
    if not isinstance(runs, Mapping) or set(map(str, weights)) != set(map(str, runs)):
        raise ValueError("params['weights'] as a dict must name every run of a dict of runs, and only those")
    by_name = {str(k): w for k, w in weights.items()}
    return {**params, "weights": [by_name[str(name)] for name in runs]}


def _align(runs: list[trec.Run]):
    """Candidates per query (union of the runs' documents) and each run's entries on them.

    Returns ``qids`` (sorted as trec_eval sorts them), ``starts[Q + 1]`` of each query's
    candidates, the candidates' ``docnos`` (within a query: docno descending), and per
    entry of all runs: its run, its candidate index and its score.
    """
    key = lambda q: q.encode("utf-8", "surrogateescape")  # noqa: E731 - strcmp order, as trec files
    qids = sorted(set().union(*(r.qids.tolist() for r in runs)), key=key)
    index = {q: i for i, q in enumerate(qids)}
    width = max(r.docnos.dtype.itemsize for r in runs)
    entry_q, entry_d, entry_r, entry_s = [], [], [], []
    for i, r in enumerate(runs):
        at = np.array([index[q] for q in r.qids.tolist()], dtype=np.int64)
        entry_q.append(np.repeat(at, np.diff(r.offsets)))
        entry_d.append(r.docnos.astype(f"S{width}"))
        entry_r.append(np.full(r.docnos.size, i, dtype=np.int64))
        entry_s.append(r.scores)
    pairs = np.empty(sum(d.size for d in entry_d), dtype=[("q", np.int64), ("d", f"S{width}")])
    pairs["q"], pairs["d"] = np.concatenate(entry_q), np.concatenate(entry_d)
    unique, inverse = np.unique(pairs, return_inverse=True)  # by query, docno ascending
    starts = np.concatenate(([0], np.cumsum(np.bincount(unique["q"], minlength=len(qids)))))
    # Within each query, reverse to docno descending: stable ties then rank as trec_eval does.
    q = unique["q"]
    flip = starts[q] + starts[q + 1] - 1 - np.arange(q.size)  # an involution
    docnos = unique["d"][flip]
    candidate = flip[inverse.reshape(-1)]
    return qids, starts, docnos, np.concatenate(entry_r), candidate, np.concatenate(entry_s)


def _chunks(counts: np.ndarray, method: str, n_runs: int):
    """Groups of queries with a common padded width (a power of two) and a row count that
    keeps each call's arrays near 2^24 elements."""
    width = np.maximum(8, 2 ** np.ceil(np.log2(np.maximum(counts, 1)))).astype(np.int64)
    for w in np.unique(width):
        qs = np.flatnonzero(width == w)
        per_row = n_runs * int(w) * (int(w) if method in ("condorcet", "w_condorcet") else 1)
        rows = int(min(max(1, 2**24 // per_row), 2 ** math.ceil(math.log2(qs.size))))
        for i in range(0, qs.size, rows):
            yield int(w), rows, qs[i : i + rows]


def fuse(
    runs: Sequence[Any] | Mapping[str, Any],
    *,
    method: str = "wsum",
    norm: Optional[str] = "min-max",
    params: Optional[Mapping] = None,
) -> trec.Run:
    """Fuse runs as ``ranx.fuse(runs, norm=norm, method=method, params=params)`` does.

    Args:
        runs: a list of runs (ranx's form) or a dict ``{name: run}`` (``jaxrank.compare``'s;
            its order is the runs' order), each run as :func:`jaxrank.evaluate` takes it (a
            run file path, a ``{qid: {docno: score}}`` dict, records, a DataFrame, a
            :class:`jaxrank.trec.Run`). A query missing from a run is one the run retrieved
            nothing for (ranx requires every run to have the same queries).
        method: one of :data:`METHODS` or :data:`TRAINED` (ranx's names; formulas in the
            module docstring).
        norm: one of :data:`NORMS`, applied to each run per query before fusing.
        params: the method's parameters, ranx's names (``k``, ``sigma``, ``phi``, ``gamma``,
            ``weights``: a list in the runs' order, or ``{name: weight}`` for a dict of runs).

    Returns:
        A :class:`jaxrank.trec.Run` holding every candidate of every query (the union of the
        runs' documents; nothing is cut), ranked by fused score, ties by docno descending;
        ``to_dict()`` gives ``{qid: {docno: score}}``, and :func:`jaxrank.evaluate` takes it.

    Raises:
        ValueError: an unknown ``method`` or ``norm``, ``norm="borda"`` with a rank-based
            method, a missing, unknown or out-of-range parameter, no runs or no documents.
        TypeError: ``runs`` is not a list or dict of runs (a dict that is itself one run,
            ``{qid: {docno: score}}``, is refused).

    >>> a = {"q1": {"d1": 3.0, "d2": 1.0}}
    >>> b = {"q1": {"d2": 2.0, "d3": 1.0}}
    >>> fuse([a, b], method="rrf", params={"k": 1}).to_dict()
    {'q1': {'d2': 0.8333333333333333, 'd1': 0.5, 'd3': 0.3333333333333333}}
    >>> fuse({"bm25": a, "dense": b}, method="wsum", params={"weights": {"bm25": 0.7, "dense": 0.3}}).to_dict()
    {'q1': {'d1': 0.7, 'd2': 0.3, 'd3': 0.0}}
    """
    method, norm = _check_names(method, norm)
    params = _weights_by_name(runs, params)
    aligned = _Aligned(_as_runs(runs))
    fused = aligned.fuse(method, norm, params)
    return aligned.run(fused, method)


class _Aligned:
    """Runs aligned on their candidates (:func:`_align`), ready to fuse many times (the grid of
    :func:`jaxrank.optimize_fusion`)."""

    def __init__(self, runs: list[trec.Run]):
        self.n_runs = len(runs)
        self.qids, self.starts, self.docnos, self.entry_r, self.candidate, self.entry_s = _align(runs)
        self.counts = np.diff(self.starts)
        self.q_of = np.repeat(np.arange(len(self.qids)), self.counts)  # query of each candidate
        self.col = np.arange(self.docnos.size) - self.starts[self.q_of]  # its column in its query's row
        # Entries grouped by query, so that each chunk takes its own without a pass over all.
        self.entry_q = self.q_of[self.candidate]
        self.by_query = np.argsort(self.entry_q, kind="stable")
        self.entry_starts = np.concatenate(([0], np.cumsum(np.bincount(self.entry_q, minlength=len(self.qids)))))
        self.longest = max(int(np.max(np.diff(r.offsets), initial=0)) for r in runs)

    def fuse(self, method: str, norm: Optional[str], params: Optional[Mapping]) -> np.ndarray:
        """The fused score of every candidate (float64)."""
        params = _check_params(method, params, self.n_runs)
        if method == "bayesfuse" and self.longest > params["log_odds"].shape[-1]:
            raise ValueError(
                f"params['log_odds'] has {params['log_odds'].shape[-1]} positions and a run retrieves "
                f"{self.longest} documents for a query: ranx reads past the end of its table there; "
                "cut the runs or train on runs as long"
            )
        fused = np.zeros(self.docnos.size)
        with jax.enable_x64(True):
            args = {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}
            for width, rows, qs in _chunks(self.counts, method, self.n_runs):
                e = self.by_query[ranges(self.entry_starts[qs], np.diff(self.entry_starts)[qs])]
                c = ranges(self.starts[qs], self.counts[qs])  # the chunk's candidates
                row = np.repeat(np.arange(qs.size), self.counts[qs])
                scores = np.zeros((self.n_runs, rows, width))
                where = np.zeros((self.n_runs, rows, width), dtype=bool)
                at = (self.entry_r[e], np.searchsorted(qs, self.entry_q[e]), self.col[self.candidate[e]])
                scores[at], where[at] = self.entry_s[e], True
                out = np.asarray(fuse_scores(jnp.asarray(scores), jnp.asarray(where), method, norm, args))
                fused[c] = out[row, self.col[c]]
        return fused

    def order(self, fused: np.ndarray) -> Optional[np.ndarray]:
        """The candidates in ranking order (score descending, docno descending), None when
        they already are."""
        return run_order(self.q_of, len(self.qids), fused, self.docnos)

    def run(self, fused: np.ndarray, name: str) -> trec.Run:
        docnos, order = self.docnos, self.order(fused)
        if order is not None:
            docnos, fused = docnos[order], fused[order]
        return trec.Run(np.array(self.qids, dtype=str), self.starts.astype(np.int64), docnos, fused, name)
