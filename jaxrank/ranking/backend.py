"""The only module of jaxrank that knows platforms: sorts, top-k, cumulative and row sums.

Everything here computes the same numbers on every platform and under every
transformation; what differs is how. The paths and the rule that picks them:

* **Full sort** (:func:`argsort_descending`). On the CPU backend XLA's sort is
  15-80x slower than numpy's (jax issue #10434), so the rows are sorted in numpy
  through ``jax.pure_callback`` on a small thread pool -- but only where the
  callback sees exactly the rows it must sort:

  - the process has one CPU device (a plain ``jit``, ``vmap`` or ``grad`` on CPU), or
  - the operand varies over ``shard_map``'s manual axes (each shard calls back
    with its own rows; the result is marked as varying like the operand).

  Anywhere else -- several CPU devices or processes outside ``shard_map``, where
  ``jit`` may get sharded inputs and XLA would gather every shard to device 0 for
  the callback (then stall in a cross-device rendezvous), or a ``shard_map`` with
  ``check_vma=False``, which hides the manual axes -- the sort is ``lax.sort``,
  which XLA partitions along the batch axes like any other op. GPU and TPU
  always use ``lax.sort`` (``lax.platform_dependent`` picks at lowering).
* **Top-k** (:func:`top_k_order`): on CPU ``lax.top_k`` on the integer keys cast to
  floats of the same total order; elsewhere ``lax.sort`` of the keys, because the
  keys of NaN and invalid items are NaN floats and XLA:GPU's ``top_k`` ranks NaN
  first on long rows (docs/accelerators.md). No ``optimization_barrier``
  around it: XLA's TopK decomposer aborts the process on one under
  ``shard_map``. Without a mask, :func:`top_k_order_of_scores` runs it on the
  float32/float64 scores themselves and takes the keyed path only for a batch
  whose first ``k`` values hold a zero or a NaN (one pass over the list fewer).
  On GPU and TPU a long row's ``lax.top_k`` runs through :func:`screened_top_k` (the
  maximum of each chunk of the row first, then ``lax.top_k`` over the few chunks that can
  hold the answer): XLA's top-k of a row is one block's sequential work there.
* **Cumulative sums** (:func:`cumsum`): two small triangular matmuls on CPU,
  where XLA's cumsum is several times slower; ``jnp.cumsum`` elsewhere. Both are
  plain XLA ops, valid under every transformation.
* **Row sums** (:func:`row_sum`): a matrix-vector product on every platform
  (float32 and below), which XLA:CPU runs several times faster than a row
  reduction.
"""

from __future__ import annotations

import concurrent.futures
import os
from collections.abc import Callable
from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank._npsort import argsort_high_bits
from jaxrank.ranking.ranks import float_dtype

# Above this prefix depth a full sort beats ``lax.top_k`` (XLA:CPU's TopK cost
# grows quickly with k; benchmarks/bench_core.py).
TOP_K_MAX_DEPTH = 64


# Keys ------------------------------------------------------------------------------
def sort_key(scores: jax.Array, where: jax.Array) -> jax.Array:
    """Integers that order like ``scores``, with NaN below every number and
    invalid items below NaN; equal keys mean tied scores (``-0.0 == 0.0``).

    Low-precision floats are widened to float32 first, which is exact.
    """
    x = scores
    if x.dtype not in (jnp.float32, jnp.float64):
        x = x.astype(jnp.float32)
    itype = jnp.int64 if x.dtype == jnp.float64 else jnp.int32
    info = jnp.iinfo(itype)
    bits = lax.bitcast_convert_type(x, itype)
    key = jnp.where(bits < 0, bits ^ jnp.array(info.max, itype), bits)
    # -0.0 and 0.0 get one key by a comparison, which no algebraic rewrite drops
    # (XLA may fold the bit-level trick ``x + 0.0`` to ``x``).
    key = jnp.where(x == 0, jnp.zeros((), itype), key)
    key = jnp.where(jnp.isnan(x), jnp.array(info.min + 1, itype), key)
    return jnp.where(where, key, jnp.array(info.min, itype))


def _key_as_float(key: jax.Array) -> jax.Array:
    """Floats whose total order (the one ``lax.top_k`` uses, NaN payloads
    included) is the order of the integer keys."""
    ftype = jnp.float64 if key.dtype == jnp.int64 else jnp.float32
    flip = jnp.array(jnp.iinfo(key.dtype).max, key.dtype)
    return lax.bitcast_convert_type(jnp.where(key < 0, key ^ flip, key), ftype)


def _float_as_key(x: jax.Array) -> jax.Array:
    """Inverse of :func:`_key_as_float` (bit for bit: no -0.0 folding here)."""
    itype = jnp.int64 if x.dtype == jnp.float64 else jnp.int32
    bits = lax.bitcast_convert_type(x, itype)
    return jnp.where(bits < 0, bits ^ jnp.array(jnp.iinfo(itype).max, itype), bits)


# The host sort ------------------------------------------------------------------------
_POOL: Optional[concurrent.futures.ThreadPoolExecutor] = None
_THREADS = max(1, min(8, os.cpu_count() or 1))


def _in_threads(fn, x: np.ndarray) -> np.ndarray:
    """``fn`` over row blocks of ``x`` on a few threads (numpy's sort releases the GIL)."""
    global _POOL
    rows = x.reshape(-1, x.shape[-1])
    if _THREADS == 1 or rows.shape[0] < 2 * _THREADS or x.size < 1 << 16:
        return fn(x)
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(_THREADS, thread_name_prefix="jaxrank-sort")
    parts = np.array_split(rows, _THREADS)
    return np.concatenate(list(_POOL.map(fn, parts))).reshape(x.shape)


def _host_order(key: np.ndarray) -> np.ndarray:
    # Callbacks may receive jax arrays; any jax op from inside a callback can
    # deadlock the CPU runtime, so everything here is numpy.
    return _in_threads(_host_order_rows, np.asarray(key))


def _host_order_rows(key: np.ndarray) -> np.ndarray:
    n = key.shape[-1]
    if key.dtype == np.int32:
        # Sorting one int64 per item (key, index) is a plain value sort, which
        # numpy vectorises; it is stable by construction and faster than
        # np.argsort on the floats themselves.
        comp = (np.invert(key).astype(np.int64) << 32) | np.arange(n, dtype=np.int64)
        comp.sort(axis=-1)
        return (comp & 0xFFFFFFFF).astype(np.int32)
    # 64-bit keys leave no room for the index, so the index replaces the key's lowest
    # bits: the value sort orders by the rest of the key, then by index. Keys that differ
    # only in those bits (scores within ~n * 2^-52 of each other) can come out of order;
    # rows where that happened are sorted again, exactly.
    if n <= 1:
        return np.zeros(key.shape, np.int32)
    inv = np.invert(key).reshape(-1, n)
    order = argsort_high_bits(inv)
    sorted_keys = np.take_along_axis(inv, order, axis=-1)
    bad = np.flatnonzero((sorted_keys[:, 1:] < sorted_keys[:, :-1]).any(axis=-1))
    if len(bad):
        order[bad] = np.argsort(inv[bad], axis=-1, kind="stable")
    return order.astype(np.int32).reshape(key.shape)


def _host_bounds(key_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = key_sorted.shape[-1]
    idx = np.broadcast_to(np.arange(n, dtype=np.int32), key_sorted.shape)
    differs = key_sorted[..., 1:] != key_sorted[..., :-1]
    edge = np.ones(key_sorted.shape[:-1] + (1,), bool)
    start = np.maximum.accumulate(np.where(np.concatenate([edge, differs], -1), idx, 0), axis=-1)
    last = np.concatenate([differs, edge], -1)
    end = np.minimum.accumulate(np.where(last, idx + 1, n)[..., ::-1], axis=-1)[..., ::-1]
    return start.astype(np.int32), np.ascontiguousarray(end, dtype=np.int32)


def _host_order_and_bounds(key: np.ndarray):
    key = np.asarray(key)
    order = _host_order(key)
    return (order,) + _host_bounds(np.take_along_axis(key, order, -1))


def _joined(host_fn):
    """``host_fn`` on int64 keys passed as int32 pairs (see :func:`_cpu_argsort`)."""
    return lambda pairs: host_fn(np.ascontiguousarray(pairs, np.int32).view(np.int64)[..., 0])


def _varying_axes(x: jax.Array) -> frozenset:
    """The ``shard_map`` manual axes ``x`` varies over (empty outside, or with ``check_vma=False``)."""
    manual = getattr(jax.typeof(x), "manual_axis_type", None)
    return frozenset(getattr(manual, "varying", ()))


def vary_like(value: jax.Array, x: jax.Array) -> jax.Array:
    """``value`` typed as varying over the ``shard_map`` axes ``x`` varies over (a scan's
    initial carry must have the type of the carry the body computes from ``x``); the axes
    ``value`` already varies over stay as they are."""
    axes = _varying_axes(x) - _varying_axes(value)
    return lax.pcast(value, tuple(sorted(axes)), to="varying") if axes else value


def host_sort_allowed(x: jax.Array) -> bool:
    """Whether the CPU lowering of a sort of ``x`` may call back to numpy (module docstring)."""
    return bool(_varying_axes(x)) or len(jax.devices("cpu")) == 1


def _cpu_argsort(key: jax.Array, bounds: bool = False):
    out = jax.ShapeDtypeStruct(key.shape, jnp.int32)
    host_fn = _host_order_and_bounds if bounds else _host_order
    like = key
    if key.dtype == jnp.int64:
        # XLA may run the callback on a thread where a `with jax.enable_x64(True)` block is
        # not in force; int64 operands would reach it truncated to int32. Int32 pairs do not.
        host_fn, key = _joined(host_fn), lax.bitcast_convert_type(key, jnp.int32)
    result = jax.pure_callback(host_fn, (out, out, out) if bounds else out, key, vmap_method="expand_dims")
    # Each shard sorted its own rows: say so, or the platform switch sees branches of
    # different types (the callback's result is typed as replicated).
    return jax.tree.map(lambda r: vary_like(r, like), result)


def _device_argsort(key: jax.Array, bounds: bool = False):
    iota = lax.broadcasted_iota(jnp.int32, key.shape, key.ndim - 1)
    order = lax.sort((~key, iota), dimension=key.ndim - 1, num_keys=1, is_stable=True)[1]
    if not bounds:
        return order
    start, end = segment_bounds(jnp.take_along_axis(key, order, -1))
    return order, start.astype(jnp.int32), end.astype(jnp.int32)


def argsort_descending(key: jax.Array, bounds: bool = False):
    """Stable descending argsort of integer keys along the last axis.

    With ``bounds``, also the start (inclusive) and end (exclusive) position of
    the tie group at each position. numpy through a host callback on CPU where
    :func:`host_sort_allowed`, ``lax.sort`` elsewhere.
    """
    if not host_sort_allowed(key):
        return _device_argsort(key, bounds)
    return lax.platform_dependent(
        key,
        cpu=lambda k: _cpu_argsort(k, bounds),
        default=lambda k: _device_argsort(k, bounds),
    )


def cpu_or_elsewhere(*args: jax.Array, cpu: Callable, elsewhere: Callable) -> tuple:
    """``cpu(*args)`` on the CPU backend, ``elsewhere(*args)`` on any other, chosen when the
    program is lowered (``lax.platform_dependent``: valid under ``vmap``, ``grad``,
    ``shard_map`` and sharded ``jit``). Both return tuples of the same structure."""
    return lax.platform_dependent(*args, cpu=lambda *a: tuple(cpu(*a)), default=lambda *a: tuple(elsewhere(*a)))


def inverse_permutation(order: jax.Array) -> jax.Array:
    """``inv`` with ``inv[..., order[..., p]] = p``: the 0-based position of each item,
    for an ``order`` holding a permutation of ``0..n-1`` along its last axis."""
    n = order.shape[-1]
    flat = order.reshape(-1, n)
    rows = jnp.arange(flat.shape[0])[:, None]
    inv = jnp.zeros_like(flat).at[rows, flat].set(lax.broadcasted_iota(flat.dtype, flat.shape, 1))
    return inv.reshape(order.shape)


def bucket(x: int, minimum: int = 8) -> int:
    """``x`` rounded up to a size from a short list (at most 1/8 larger), so that calls of
    similar sizes share a compiled function."""
    if x <= minimum:
        return minimum
    p = 1 << (x - 1).bit_length()
    step = max(p // 8, 1)
    return -(-x // step) * step


def linear_recurrence(a: jax.Array, b: jax.Array, reverse: bool = False) -> jax.Array:
    """``x_i = b_i + a_i x_{i-1}`` along the last axis (``x_{i+1}`` with ``reverse``), from
    ``x = 0`` before the first element.

    On CPU a ``lax.scan`` over the positions (a few microseconds a step, and a small
    program); elsewhere ``lax.associative_scan`` (log-depth, one kernel per level, where a
    sequential loop would launch one per position). Both are plain XLA: valid under
    ``vmap``, ``grad``, ``shard_map`` and sharded ``jit``.
    """
    if jax.default_backend() == "cpu":
        return _scanned_recurrence(a, b, reverse)
    return _associative_recurrence(a, b, reverse)


def _scanned_recurrence(a: jax.Array, b: jax.Array, reverse: bool) -> jax.Array:
    def step(x, ab):
        x = ab[1] + ab[0] * x
        return x, x

    at, bt = jnp.moveaxis(a, -1, 0), jnp.moveaxis(b, -1, 0)
    _, out = lax.scan(step, jnp.zeros_like(bt[0]), (at, bt), reverse=reverse)
    return jnp.moveaxis(out, 0, -1)


def _associative_recurrence(a: jax.Array, b: jax.Array, reverse: bool) -> jax.Array:
    def combine(first, second):
        (a1, b1), (a2, b2) = first, second
        return a1 * a2, b2 + a2 * b1

    return lax.associative_scan(combine, (a, b), reverse=reverse, axis=a.ndim - 1)[1]


def take(x: jax.Array, idx: jax.Array) -> jax.Array:
    """``x`` gathered at ``idx`` along the last axis."""
    return jnp.take_along_axis(x, idx, axis=-1)


def opaque(x: jax.Array) -> jax.Array:
    """``x``, as a value that XLA cannot see into (no constant folding, no rewrite by the
    kind of operation that made it)."""
    return lax.optimization_barrier(x)


def runtime(x, traced: object):
    """``x`` as XLA must see it when ``traced`` is a tracer: a value known at run time only.

    An array closed over by a jitted function (or a list or NumPy array passed beside a
    traced one) becomes a constant of the program, and XLA folds whatever is computed from
    constants at compile time -- a sort of the labels for the ideal DCG took minutes at
    ``[1024, 1024]``. Behind an optimisation barrier nothing is folded. Outside a trace,
    and for ``None``, ``x`` is returned as it is; a pytree (such as
    :class:`~jaxrank.ranking.positives.Positives`) leaf by leaf.
    """
    if x is None or not isinstance(traced, jax.core.Tracer):
        return x
    if isinstance(x, (list, tuple)):
        # a nested list of numbers is one array, by numpy: under a trace jnp would build it
        # from the numbers with operations XLA folds (no leaf left to keep out of it)
        leaves = jax.tree.leaves(x)
        x = jnp.asarray(x) if any(isinstance(a, jax.core.Tracer) for a in leaves) else np.asarray(x)
    return jax.tree.map(lambda a: a if isinstance(a, jax.core.Tracer) else opaque(jnp.asarray(a)), x)


def divide(a, b) -> jax.Array:
    """``a / b`` rounded once, as C and NumPy divide (broadcast against each other).

    XLA rewrites a division by a constant or by a broadcast value into a multiplication by
    its reciprocal, one ulp off for many quotients (3 / 40 = 0.075, 3 * (1 / 40) =
    0.07500000000000001); the divisor behind an optimisation barrier is seen by no such
    rewrite. Plain XLA: valid under ``vmap``, ``grad``, ``shard_map`` and sharded ``jit``.
    """
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    return a / opaque(b)


def segment_bounds(key_sorted: jax.Array):
    """Start (inclusive) and end (exclusive) position of each position's tie group."""
    depth = key_sorted.shape[-1]
    idx = jnp.broadcast_to(jnp.arange(depth, dtype=jnp.int32), key_sorted.shape)
    differs = key_sorted[..., 1:] != key_sorted[..., :-1]
    edge = jnp.ones(key_sorted.shape[:-1] + (1,), bool)
    first = jnp.concatenate([edge, differs], axis=-1)
    last = jnp.concatenate([differs, edge], axis=-1)
    start = lax.cummax(jnp.where(first, idx, 0), axis=key_sorted.ndim - 1)
    end = lax.cummin(jnp.where(last, idx + 1, depth), axis=key_sorted.ndim - 1, reverse=True)
    return start, end


# Top-k ----------------------------------------------------------------------------------
def top_k_order(key: jax.Array, depth: int) -> tuple[jax.Array, jax.Array]:
    """First ``depth`` positions of the stable descending order of ``key``,
    and the keys at those positions.

    ``lax.top_k`` is fast only on floats; on CPU it orders them totally (NaN
    payloads too) and breaks ties by index, so it runs exactly on the keys cast
    to floats with the same order. Elsewhere the integer keys are sorted.
    """
    return lax.platform_dependent(
        key, cpu=lambda k: _top_k_of_key_floats(k, depth), default=lambda k: _sorted_prefix(k, depth)
    )


def _top_k_of_key_floats(key: jax.Array, depth: int) -> tuple[jax.Array, jax.Array]:
    values, order = lax.top_k(_key_as_float(key), depth)
    return order, _float_as_key(values)


def _sorted_prefix(key: jax.Array, depth: int) -> tuple[jax.Array, jax.Array]:
    # The keys of NaN and invalid items are NaN floats, and XLA:GPU's top_k of a short
    # depth over a long row ranks every NaN first (seen on an H200): sort the integers.
    order = _device_argsort(key)[..., :depth]
    return order, jnp.take_along_axis(key, order, axis=-1)


def top_k_order_of_scores(
    scores: jax.Array, depth: int, where: Optional[jax.Array] = None
) -> tuple[jax.Array, jax.Array]:
    """:func:`top_k_order` of ``sort_key(scores, where)`` (all valid without ``where``),
    without building the keys of the whole list when no row needs them.

    The keys order the scores as ``lax.top_k``'s float order does, except that they tie
    ``-0.0`` with ``0.0`` and put every NaN below every number. So where no row's first
    ``depth`` values (by float order) hold a zero or a NaN, ``lax.top_k`` on the scores
    themselves gives the keyed result exactly: every item it left out is below the
    ``depth``-th by the keys too, and in its prefix float order and key order agree (ties
    by index in both). With ``where``, invalid items are ``-inf`` to ``lax.top_k``, and a
    prefix holding a ``-inf`` takes the keyed path too. A batch where some row has one takes
    the keyed path. Float32 and float64 scores only. Off CPU this spares the keyed path's
    full sort of every row.
    """
    ones = jnp.ones((), bool)
    masked = scores if where is None else jnp.where(where, scores, jnp.array(-jnp.inf, scores.dtype))
    values, order = lax.platform_dependent(
        masked, cpu=lambda x: tuple(lax.top_k(x, depth)), default=lambda x: screened_top_k(x, depth)
    )
    exact = ~jnp.any((values == 0) | jnp.isnan(values) | (values == -jnp.inf))
    return lax.cond(
        exact,
        lambda: (order, sort_key(values, ones)),
        lambda: top_k_order(sort_key(scores, ones if where is None else where), depth),
    )


#: Chunk width of :func:`screened_top_k`.
SCREEN = 64


def screened_top_k(x: jax.Array, depth: int) -> tuple[jax.Array, jax.Array]:
    """``lax.top_k(x, depth)`` of float rows, exactly (ties by index), through the chunks
    that can hold the top ``depth``.

    Each row is cut into chunks of :data:`SCREEN` items (the tail padded with ``-inf``); the
    ``depth`` chunks of largest maximum (ties by chunk) hold every item of the top
    ``depth``: an item of another chunk has ``depth`` chunks ahead of it, each with an item
    above it or equal and earlier. ``lax.top_k`` then runs over those chunks, in index
    order, a row of ``depth * SCREEN`` items: on a GPU a row's top-k is one block's
    sequential work, and a long row (a retrieval list) makes it most of a loss's time; a
    row's maximum per chunk is one parallel pass. Rows shorter than ``4 * depth * SCREEN``
    take ``lax.top_k`` directly. Padding is never returned while the row has ``depth``
    items (it is ``-inf``, after every item)."""
    n = x.shape[-1]
    if n < 4 * depth * SCREEN:
        return tuple(lax.top_k(x, depth))
    chunks = -(-n // SCREEN)
    padded = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, chunks * SCREEN - n)], constant_values=-jnp.inf)
    grouped = padded.reshape(x.shape[:-1] + (chunks, SCREEN))
    _, best = lax.top_k(jnp.max(grouped, axis=-1), depth)
    best = jnp.sort(best, axis=-1)  # index order, so that lax.top_k below breaks ties by index
    candidates = jnp.take_along_axis(grouped, best[..., None], axis=-2).reshape(x.shape[:-1] + (depth * SCREEN,))
    values, at = lax.top_k(candidates, depth)
    chunk = jnp.take_along_axis(best, at // SCREEN, axis=-1)
    return values, chunk * SCREEN + at % SCREEN


#: The ``jax.ad_checkpoint.checkpoint_name`` of a ranker's per-list statistics (``[..., 1]``,
#: such as a temperature read off the list's top): a blocked loss saves them for its
#: backward pass, where recomputing them would take passes over every block's scores.
LIST_STATISTICS = "jaxrank.list_statistics"


def scores_per_block() -> int:
    """How many scores a blocked computation (``losses.retrieval_loss``) holds at once: on
    CPU, blocks that stay in cache; elsewhere, few large blocks (each block of a sequential
    loop costs kernel launches, and device memory is ample)."""
    return 1 << 20 if jax.default_backend() == "cpu" else 1 << 27


# Sums -----------------------------------------------------------------------------------
def _blocked_cumsum(x: jax.Array, block: int = 64) -> jax.Array:
    """Cumulative sum as two small triangular matmuls (blocks, then block offsets).

    A list length that is not a multiple of the block gets its tail summed
    apart: padding instead would fuse the producer of ``x`` into a pad, where
    XLA:CPU does not vectorise transcendental functions (log1p there is much slower).
    """
    n = x.shape[-1]
    # a block that divides n, when one is near ``block``, leaves no tail (a smaller program)
    b = next((d for d in range(block, block // 2, -1) if n % d == 0), min(block, n))
    m = n // b * b
    hi = lax.Precision.HIGHEST
    blocks = x[..., :m].reshape(x.shape[:-1] + (m // b, b))
    within = jnp.matmul(blocks, jnp.triu(jnp.ones((b, b), x.dtype)), precision=hi)
    offsets = jnp.matmul(within[..., -1], jnp.triu(jnp.ones((m // b, m // b), x.dtype), 1), precision=hi)
    head = (within + offsets[..., None]).reshape(x.shape[:-1] + (m,))
    if m == n:
        return head
    r = n - m
    tail = jnp.matmul(x[..., m:], jnp.triu(jnp.ones((r, r), x.dtype)), precision=hi)
    return jnp.concatenate([head, tail + head[..., -1:]], axis=-1)


def cumsum(x: jax.Array) -> jax.Array:
    """Inclusive cumulative sum along the last axis.

    XLA's CPU cumsum is several times slower than two blocked triangular matmuls,
    so the CPU backend uses those.
    """
    x = jnp.asarray(x)
    return lax.platform_dependent(x, cpu=_blocked_cumsum, default=lambda v: jnp.cumsum(v, axis=-1))


def row_sum(x: jax.Array, keepdims: bool = False) -> jax.Array:
    """Sum over the last axis as a matrix-vector product (in the float dtype).

    XLA's CPU row reductions are several times slower than a matvec; integer and
    boolean inputs are summed exactly as floats (up to 2**24 items in float32).
    Float64 rows are reduced: XLA:CPU emits a float64 matvec as a loop kernel of
    its own (no BLAS), which runs no faster than the reduction fused into its
    producer and costs compile time.
    """
    x = jnp.asarray(x)
    ftype = x.dtype if jnp.issubdtype(x.dtype, jnp.floating) else float_dtype()
    if ftype == jnp.float64:
        return jnp.sum(x.astype(ftype), axis=-1, keepdims=keepdims)
    ones = jnp.ones((x.shape[-1],), ftype)
    out = jnp.matmul(x.astype(ftype), ones, precision=lax.Precision.HIGHEST)
    return out[..., None] if keepdims else out


def computed_once(x: jax.Array) -> jax.Array:
    """``x``, behind an optimisation barrier: XLA would otherwise fuse the elementwise
    tail of a running sum into each gather that reads it and recompute it per element.
    Valid everywhere (only ``top_k``'s decomposer trips on a barrier)."""
    return lax.optimization_barrier(x)
