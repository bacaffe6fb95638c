"""Runs a :class:`~jaxrank.measures.parse.Plan` on padded batches: two jitted stages (the
stage that sorts, and the rest), their lowering and compilation for one batch shape, the
batch shapes themselves (sizes rounded up so that similar calls share compiled code, and
queries split into slices of bounded memory), and a cache of compiled computations by
(plan, shape), in this process and, when :func:`program_cache` names a directory (the command
line does), on disk between processes. Kernels come from :mod:`jaxrank.measures.kernels`.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import io
import os
import pickle
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
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


def _sort_body(plan: Plan, scores, rr, where, judg, jmask):
    first, _, pairs = _split(plan)
    ctx = _Ctx(plan, _scores(plan, scores), rr, where, judg, jmask)
    ideals = tuple(ctx.ideal(p) for p in pairs)
    return ctx.ranks, ideals, tuple(_FAMILIES[plan.measures[i].family](ctx, plan.measures[i]) for i in first)


def _rest_body(plan: Plan, ranks, ideals, scores, rr, where, judg, jmask):
    _, rest, pairs = _split(plan)
    ctx = _Ctx(plan, _scores(plan, scores), rr, where, judg, jmask, ranks=ranks, ideals=dict(zip(pairs, ideals)))
    return tuple(_FAMILIES[plan.measures[i].family](ctx, plan.measures[i]) for i in rest)


@functools.lru_cache(maxsize=64)
def _stages(tag: str = "") -> tuple[Callable, Callable]:
    """The two stages, jitted; with a ``tag``, under names that hold it (the program's name in
    XLA, and so in JAX's compilation cache key: see :func:`executable`)."""

    def stage_sort(plan: Plan, scores, rr, where, judg, jmask):
        return _sort_body(plan, scores, rr, where, judg, jmask)

    def stage_rest(plan: Plan, ranks, ideals, scores, rr, where, judg, jmask):
        return _rest_body(plan, ranks, ideals, scores, rr, where, judg, jmask)

    for f in (stage_sort, stage_rest):
        f.__name__ = f.__qualname__ = f"_{f.__name__}{'_' + tag if tag else ''}"
    return jax.jit(stage_sort, static_argnames=("plan",)), jax.jit(stage_rest, static_argnames=("plan",))


_stage_sort, _stage_rest = _stages()


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

    def __init__(self, plan: Plan, sort_stage, rest_stage, again: Optional[Callable[[], Compiled]] = None):
        self.plan, self._sort, self._rest = plan, sort_stage, rest_stage
        self._again = again  # a program loaded from disk: how to compile it instead, should it fail

    def __call__(self, scores, rr, where, judgments, judgments_where) -> list[np.ndarray]:
        # Waits for the result: two executions holding the sort's host callback, in flight
        # at once, deadlocked in an experiment (docs/trec_internals.md); overlapping them gained nothing.
        arrays = (scores, rr, where, judgments, judgments_where)
        try:
            ranks, ideals, first_out = self._sort(*arrays)
            rest_out = self._rest(ranks, ideals, *arrays) if self._rest is not None else ()
            out = [np.asarray(x) for x in _merge(self.plan, first_out, rest_out)]
        except Exception:
            if self._again is None:
                raise
            fresh, self._again = self._again(), None
            self._sort, self._rest = fresh._sort, fresh._rest
            return self(*arrays)
        self._again = None  # it works
        return out


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


def _specs(queries: int, n: int, m: int) -> list:
    shapes = [(queries, n)] * 3 + [(queries, m)] * 2
    return [jax.ShapeDtypeStruct(s, d) for s, d in zip(shapes, _DTYPES)]


def lower_plan(plan: Plan, queries: int, n: int, m: int, tag: str = "") -> Lowered:
    """Trace and lower the two stages of ``plan`` for ``[queries, n]`` lists and ``[queries, m]``
    judgments (float64 scores, int32 relevance values): Python work, under the GIL. Needs
    ``jax_enable_x64`` (e.g. within ``with jax.enable_x64(True)``), as the calls of the
    compiled result do. ``tag`` names the programs (:func:`_stages`)."""
    specs = _specs(queries, n, m)
    stage_sort, stage_rest = _stages(tag)
    sort_lowered = stage_sort.lower(plan, *specs)
    ranks, ideals, _ = sort_lowered.out_info
    rest_lowered = stage_rest.lower(plan, ranks, ideals, *specs) if _split(plan)[1] else None
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
    compilation elsewhere (the command line's background thread); by default it runs here.
    With :func:`program_cache` on, a program an earlier process compiled is loaded instead,
    and one compiled here is stored."""
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

    path = _program_path(plan, shape)
    if path is not None and path.is_file():
        stored = _load_program(plan, shape, path)
        if stored is not None:  # compiled by an earlier process: no tracing, no XLA
            future.set_result(stored)
            return future
        path = _retire(path)
    # Lowering is Python under the GIL: done here, it does not slow the parsing of the run
    # that a background compilation overlaps. Programs that will be stored are named after
    # their file, so that JAX's compilation cache, which holds other processes' programs,
    # does not answer for them: an executable loaded from there does not serialize whole.
    try:
        with jax.enable_x64(True):
            lowered = lower_plan(plan, *shape, tag=_tag(path))
    except Exception as e:  # noqa: BLE001 - handed to whoever waits
        fail(e)
        return future

    def work():
        hits = _jax_cache_hits()
        try:
            with jax.enable_x64(True):
                compiled = lowered.compile()
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits
            fail(e)
            return
        future.set_result(compiled)
        if path is not None and _jax_cache_hits() == hits:  # compiled here, not loaded from JAX's cache
            _store_program(path, lowered, compiled)

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


# ----------------------------------------------------------------------------- programs on disk
#
# JAX's persistent compilation cache saves XLA's compilation, not the tracing and lowering
# that come before it (its key is the lowered program), and it skips programs with host
# callbacks: the sorting stage's numpy sort. For a small run those were most of
# ``jaxrank eval``'s time beyond JAX's import (docs/reports/trec_eval.md). So the command line also
# keeps each compiled (plan, shape) in a file, both stages serialized as
# ``jax.experimental.serialize_executable`` does. The sorting stage's host callbacks are
# Python functions, which cannot be stored: loading lowers that stage again (its tracing is
# small), checks that it lowers to the same program, and binds the callbacks of that
# lowering to the stored executable. The file's name is a hash of the plan and shape and of
# everything else the programs depend on: the Python, JAX and jaxlib versions, the
# platform, its devices and CPU flags, the JAX and XLA settings in the environment, and the
# source of the engine and the packages below it. Only programs compiled in the process
# are stored (XLA:CPU does not serialize an executable it deserialized whole); anything
# unexpected while storing or loading is a miss, and a stored program that cannot be loaded
# or fails when called is removed and compiled again, stored as the next generation.

_PROGRAMS: Optional[Path] = None
_ENGINE_SOURCES = ("measures", "metrics", "ranking", "_checks.py", "_npsort.py")  # what the stages run
_HITS = threading.local()  # JAX's compilation-cache hits in each thread


def program_cache(directory: Optional[str]) -> None:
    """Keep compiled programs in ``directory`` between processes (None: only in this one).
    Loading runs code stored there, as JAX's compilation cache does: a directory of the
    user's own."""
    global _PROGRAMS
    if directory is not None and _PROGRAMS is None:
        jax.monitoring.register_event_listener(_count_hits)
    _PROGRAMS = None if directory is None else Path(directory)


def _count_hits(event: str, **_) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _HITS.count = _jax_cache_hits() + 1


def _jax_cache_hits() -> int:
    return getattr(_HITS, "count", 0)


@functools.cache
def _environment() -> bytes:
    import jaxlib.version

    h = hashlib.sha256()
    device = jax.devices()[0]
    settings = sorted((k, v) for k, v in os.environ.items() if k.startswith(("JAX_", "XLA_")))
    try:
        with open("/proc/cpuinfo", "rb") as f:
            flags = next((line for line in f if line.startswith(b"flags")), b"")
    except OSError:
        flags = b""
    for part in (sys.version, jax.__version__, jaxlib.version.__version__, device.client.platform_version):
        h.update(f"{part}\n".encode())
    h.update(repr((device.platform, device.device_kind, jax.device_count(), settings)).encode() + flags)
    root = Path(__file__).resolve().parent.parent
    for name in _ENGINE_SOURCES:
        for path in sorted((root / name).rglob("*.py")) if (root / name).is_dir() else [root / name]:
            h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.digest()


def _program_path(plan: Plan, shape: tuple) -> Optional[Path]:
    """Where the program of (plan, shape) is kept, ``KEY-GENERATION.program`` (the newest
    generation stored, else generation 0); None with :func:`program_cache` off."""
    if _PROGRAMS is None:
        return None
    try:
        key = hashlib.sha256(_environment() + repr((plan, tuple(map(int, shape)))).encode()).hexdigest()[:40]
        kept = [int(p.stem.rpartition("-")[2]) for p in _PROGRAMS.glob(f"{key}-*.program")]
    except Exception:  # noqa: BLE001 - no program kept
        return None
    return _PROGRAMS / f"{key}-{max(kept, default=0)}.program"


def _retire(path: Path) -> Path:
    """Remove an unusable stored program; where its replacement goes: the next generation,
    whose programs JAX's compilation cache has not seen under their name (a program that
    cache answers for is not stored, so the same name would never be stored again)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass  # then the next generation is looked up first, and stands in for it
    key, _, generation = path.stem.rpartition("-")
    return path.with_name(f"{key}-{int(generation) + 1}.program")


def _tag(path: Optional[Path]) -> str:
    if path is None:
        return ""
    key, _, generation = path.stem.rpartition("-")
    return f"{key[:16]}_{generation}"


def _sort_text_hash(lowered_sort) -> str:
    return hashlib.sha256(lowered_sort.as_text().encode()).hexdigest()


def _store_program(path: Path, lowered: Lowered, compiled: Compiled) -> None:
    """Write ``compiled`` where :func:`_load_program` finds it; nothing on any failure."""
    try:
        stages = [_serialized(compiled._sort)]
        stages.append(None if compiled._rest is None else _serialized(compiled._rest))
        data = pickle.dumps((_sort_text_hash(lowered.sort_stage), stages))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - a program not stored is compiled again next time
        return


def _load_program(plan: Plan, shape: tuple, path: Path) -> Optional[Compiled]:
    """The programs :func:`_store_program` wrote for (plan, shape), or None."""
    try:
        if not path.is_file():
            return None
        text_hash, stages = pickle.loads(path.read_bytes())
        with jax.enable_x64(True):
            sort_lowered = _stages(_tag(path))[0].lower(plan, *_specs(*shape))
        if _sort_text_hash(sort_lowered) != text_hash:
            return None
        callbacks = list(sort_lowered._lowering.compile_args["host_callbacks"])
        sort = _deserialized(stages[0], callbacks)
        rest = None if stages[1] is None else _deserialized(stages[1], [])
    except Exception:  # noqa: BLE001 - compiled again instead
        return None

    def again() -> Compiled:
        fresh = _retire(path)
        hits = _jax_cache_hits()
        with jax.enable_x64(True):
            lowered = lower_plan(plan, *shape, tag=_tag(fresh))
            compiled = lowered.compile()
        if _jax_cache_hits() == hits:
            _store_program(fresh, lowered, compiled)
        return compiled

    return Compiled(plan, sort, rest, again=again)


def _serialized(stage) -> tuple:
    """One compiled stage as bytes and its argument and result trees."""
    from jax.experimental import serialize_executable

    unloaded = stage._executable._unloaded_executable
    callbacks = {id(c): i for i, c in enumerate(unloaded.host_callbacks)}

    class Pickler(serialize_executable._JaxPjrtPickler):
        def persistent_id(self, obj):
            if id(obj) in callbacks:
                return ("jaxrank-callback", callbacks[id(obj)])
            return super().persistent_id(obj)

    args_flat, in_tree = jax.tree_util.tree_flatten(stage.args_info)
    with io.BytesIO() as f:
        Pickler(f).dump((unloaded, args_flat, stage._no_kwargs))
        return f.getvalue(), in_tree, stage.out_tree


def _deserialized(stored: tuple, callbacks: list):
    """:func:`_serialized`'s stage, loaded with these host callbacks."""
    from jax.experimental import serialize_executable

    data, in_tree, out_tree = stored
    backend = jax.devices()[0].client

    class Unpickler(serialize_executable._JaxPjrtUnpickler):
        def persistent_load(self, pid):
            if pid[0] == "jaxrank-callback":
                return callbacks[pid[1]]
            if pid[0] == "exec":
                return self.backend.deserialize_executable(
                    pid[1], executable_devices=self.execution_devices, host_callbacks=callbacks
                )
            return super().persistent_load(pid)

    unloaded, args_flat, no_kwargs = Unpickler(io.BytesIO(data), backend).load()
    return jax.stages.Compiled(unloaded.load(), [], in_tree.unflatten(args_flat), out_tree, no_kwargs=no_kwargs)
