"""Runs a :class:`~jaxrank.measures.parse.Plan` on padded batches: two jitted stages (the
stage that sorts, and the rest), their lowering and compilation for one batch shape, the
batch shapes themselves (sizes rounded up so that similar calls share compiled code, and
queries split into slices of bounded memory), and a cache of compiled computations by
(plan, shape). Kernels come from :mod:`jaxrank.measures.kernels`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank.measures._ctx import _Ctx
from jaxrank.measures.kernels import _FAMILIES
from jaxrank.measures.parse import Plan
from jaxrank.ranking.backend import (
    bucket as bucket,
)  # the one shape rule; the TREC layer and the CLI call it engine.bucket

__all__ = ["Compiled", "Lowered", "lower_plan"]


# Two jitted stages. The first holds everything that sorts -- the one ranking of the run and
# the ideal ordering of the judgments per gain map (``_Ctx.ideal_ranks``, shared by ndcg,
# ndcg_cut, G, ndcg_rel, Rndcg) -- which on CPU are host callbacks (numpy sorts). The second,
# everything else, gets the ranks as an argument; having no host callback, its compiled code
# can be kept in JAX's persistent compilation cache across processes (``jaxrank eval`` turns
# that cache on).
_SORTING = frozenset({"ndcg_exp", "compat"})  # call metrics.ndcg, or rank the judgments (Compat)
_IDEAL = frozenset({"ndcg", "ndcg_cut", "G", "ndcg_rel", "Rndcg", "ideal_dcg"})  # use ctx.ideal


def _split(plan: Plan):
    first = tuple(i for i, m in enumerate(plan.measures) if m.family in _SORTING)
    rest = tuple(i for i, m in enumerate(plan.measures) if m.family not in _SORTING)
    pairs = tuple(sorted({m.pairs for m in plan.measures if m.family in _IDEAL}))
    return first, rest, pairs


def _scores(plan: Plan, scores):
    if plan.version == "9":  # trec_eval 9 compares scores as C floats
        return scores.astype(jnp.float32).astype(scores.dtype)
    return scores


@functools.partial(jax.jit, static_argnames=("plan",))
def _stage_sort(plan: Plan, scores, rr, where, judg, jmask):
    first, _, pairs = _split(plan)
    ctx = _Ctx(plan, _scores(plan, scores), rr, where, judg, jmask)
    ideals = tuple(ctx.ideal(p) for p in pairs)
    return ctx.ranks, ideals, tuple(_FAMILIES[plan.measures[i].family](ctx, plan.measures[i]) for i in first)


@functools.partial(jax.jit, static_argnames=("plan",))
def _stage_rest(plan: Plan, ranks, ideals, scores, rr, where, judg, jmask):
    _, rest, pairs = _split(plan)
    ctx = _Ctx(plan, _scores(plan, scores), rr, where, judg, jmask, ranks=ranks, ideals=dict(zip(pairs, ideals)))
    return tuple(_FAMILIES[plan.measures[i].family](ctx, plan.measures[i]) for i in rest)


def _merge(plan: Plan, first_out, rest_out) -> list:
    first, rest, _ = _split(plan)
    out = [None] * len(plan.measures)
    for i, v in zip(first, first_out):
        out[i] = v
    for i, v in zip(rest, rest_out):
        out[i] = v
    return out


_DTYPES = (jnp.float64, jnp.int32, jnp.bool_, jnp.int32, jnp.bool_)


class Compiled:
    """The compiled computation of a :class:`Plan` for one batch shape (see
    :meth:`Lowered.compile`): all measures of the plan, one ranking, two stages.

    Called with, for ``Q`` queries, ``n`` documents and ``m`` judgments per query:
    ``scores`` ``[Q, n]`` floats, documents pre-ordered by docno descending within ties;
    ``rr`` ``[Q, n]`` ints, trec_eval relevance values (rel if judged, -1 not in the qrels,
    -2 pooled but unjudged); ``where`` ``[Q, n]`` bool, retrieved documents;
    ``judgments``, ``judgments_where`` ``[Q, m]``, the qrels rels of each query and their
    mask. Returns one ``[Q, C]`` float array per measure (``relstring``: relevance codes).
    """

    def __init__(self, plan: Plan, sort_stage, rest_stage):
        self.plan, self._sort, self._rest = plan, sort_stage, rest_stage

    def __call__(self, scores, rr, where, judgments, judgments_where) -> list[np.ndarray]:
        # Waits for the result: two executions holding the sort's host callback, in flight
        # at once, deadlocked in an experiment (docs/trec.md); overlapping them gained nothing.
        arrays = (scores, rr, where, judgments, judgments_where)
        ranks, ideals, first_out = self._sort(*arrays)
        rest_out = self._rest(ranks, ideals, *arrays) if self._rest is not None else ()
        return [np.asarray(x) for x in _merge(self.plan, first_out, rest_out)]


@dataclasses.dataclass(frozen=True)
class Lowered:
    """The two stages of a :class:`Plan` lowered for one batch shape, not yet compiled
    (see :func:`lower_plan`)."""

    plan: Plan
    sort_stage: Any
    rest_stage: Any

    def compile(self) -> Compiled:
        """XLA's compilation: C++ that releases the GIL, so it can overlap Python work."""
        rest = self.rest_stage.compile() if self.rest_stage is not None else None
        return Compiled(self.plan, self.sort_stage.compile(), rest)


def lower_plan(plan: Plan, queries: int, n: int, m: int) -> Lowered:
    """Trace and lower the two stages of ``plan`` for ``[queries, n]`` lists and ``[queries, m]``
    judgments (float64 scores, int32 relevance values): Python work, under the GIL. Needs
    ``jax_enable_x64`` (e.g. within ``with jax.enable_x64(True)``), as the calls of the
    compiled result do."""
    shapes = [(queries, n)] * 3 + [(queries, m)] * 2
    specs = [jax.ShapeDtypeStruct(s, d) for s, d in zip(shapes, _DTYPES)]
    sort_lowered = _stage_sort.lower(plan, *specs)
    ranks, ideals, _ = sort_lowered.out_info
    rest_lowered = _stage_rest.lower(plan, ranks, ideals, *specs) if _split(plan)[1] else None
    return Lowered(plan, sort_lowered, rest_lowered)


def relstring_text(codes: np.ndarray) -> list[str]:
    """trec_eval's relstring characters from ``[Q, w]`` relevance codes (-100: past the end)."""
    codes = np.asarray(codes)
    if codes.shape[-1] == 0:
        return [""] * codes.shape[0]
    c = codes.astype(np.int64)
    chars = np.where(
        c > 9,
        ord(">"),
        np.where(
            c >= 0, ord("0") + np.clip(c, 0, 9), np.where(c == -1, ord("-"), np.where(c == -2, ord("."), ord("<")))
        ),
    )
    chars = np.where(c == -100, 0, chars).astype(np.uint8)
    return np.ascontiguousarray(chars).view(f"S{chars.shape[-1]}")[:, 0].astype(str).tolist()


# ----------------------------------------------------------------------------- batch shapes


# Queries per compiled call: a batch of at most about this many (query, document) cells
# goes through XLA at once, bigger batches in slices of queries. This bounds the memory of
# XLA's intermediate arrays (a few dozen [rows, n] float64 arrays for all_trec) whatever
# the number of queries; the compiled function is shared by the slices.
_CELLS_PER_CALL = 1 << 17


def rows_per_call(n_q: int, n: int) -> int:
    return bucket(min(n_q, max(8, _CELLS_PER_CALL // max(n, 1))))


# Compiled computations, by (plan, queries, n, m): futures, so that a compilation started in
# the background (jaxrank.cli) is waited for, never repeated.
_EXECUTABLES: collections.OrderedDict[tuple, Future] = collections.OrderedDict()
_EXECUTABLES_LOCK = threading.Lock()
_EXECUTABLES_KEPT = 16


def executable(
    plan: Plan, shape: tuple[int, int, int], spawn: Optional[Callable[[Callable[[], None]], None]] = None
) -> Future:
    """The compiled computation of ``plan`` for ``shape``, as a future: cached, so that a
    compilation under way is waited for, never repeated. ``spawn(work)`` runs the
    compilation elsewhere (the command line's background thread); by default it runs here."""
    key = (plan,) + shape
    with _EXECUTABLES_LOCK:
        future = _EXECUTABLES.get(key)
        if future is not None:
            _EXECUTABLES.move_to_end(key)
            return future
        future = _EXECUTABLES[key] = Future()
        while len(_EXECUTABLES) > _EXECUTABLES_KEPT:
            _EXECUTABLES.popitem(last=False)

    def fail(e: BaseException) -> None:
        with _EXECUTABLES_LOCK:
            if _EXECUTABLES.get(key) is future:
                del _EXECUTABLES[key]
        future.set_exception(e)

    # Lowering is Python under the GIL: done here, it does not slow the parsing of the run
    # that a background compilation overlaps.
    try:
        with jax.enable_x64(True):
            lowered = lower_plan(plan, *shape)
    except Exception as e:  # noqa: BLE001 - handed to whoever waits
        fail(e)
        return future

    def work():
        try:
            with jax.enable_x64(True):
                future.set_result(lowered.compile())
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits
            fail(e)

    if spawn is not None:
        spawn(work)
    else:
        work()
    return future


def _fits(guess: tuple, shape: tuple) -> bool:
    """Can a batch of ``shape`` be padded to ``guess`` at a small cost?"""
    if any(g < s for g, s in zip(guess, shape)):
        return False
    return guess[0] * guess[1] <= 2 * shape[0] * shape[1] + (1 << 16)


def reuse(plan: Plan, shape: tuple, guess: Optional[tuple]) -> tuple:
    """The shape to compute ``shape`` at: the background guess, or a shape already compiled
    for this plan, when padding to it is cheap; else ``shape`` itself."""
    if guess is not None and _fits(guess, shape):
        return guess
    with _EXECUTABLES_LOCK:
        known = [key[1:] for key in _EXECUTABLES if key[0] == plan and _fits(key[1:], shape)]
    return min(known, key=lambda k: k[0] * (k[1] + k[2])) if known else shape
