"""trec_eval's double arithmetic under XLA: the few operations the trec kernels compose their
values of, each giving the bits that trec_eval's C code gives.

A value that lies on a rounding tie of the 4th decimal (0.01125, with graded qrels and round
relevant counts these are common) prints differently if it is one ulp off, so each per-query
value must be formed as trec_eval forms it: the same operations, in the same order, each
rounded to double. XLA does not promise that. Measured on XLA:CPU (jaxlib 0.10), float64:

* a division by a constant or by a broadcast value becomes a multiplication by its reciprocal
  (``a / 40`` is not ``a * (1 / 40)``: 3 / 40 = 0.075, 3 * (1 / 40) = 0.07500000000000001);
* ``a * b + c`` becomes one fused multiply-add, rounded once where C rounds twice (trec_eval
  is built for x86-64 without FMA);
* sums (``jnp.sum``, ``jnp.cumsum``, matrix products) are reduced in a tree or in blocks, not
  left to right as trec_eval's running sums are;
* ``log2`` and ``exp`` are XLA's own polynomials, an ulp away from the C library's for about
  a third of the integers 2..20000 (``log`` agreed on every value tried);
* constants of a chain of additions are folded together (``x - 1 + 2e-5``).

The guards here: :func:`divide` (the divisor behind an optimisation barrier, which no
algebraic rewrite looks through), :func:`rounded` (a select between a product and what adds
it, which LLVM cannot contract; a barrier does not survive to LLVM and does not stop the FMA),
:func:`running_sum` and :func:`total` (loops over positions, left to right), and tables computed on
the host with the C library (:func:`log2_of`: Python's ``math.log2`` is the C library's
``log2``, which trec_eval calls; :func:`powers`: ``p^i`` as trec_eval's running product). Each
is plain XLA (no host callback), valid under ``vmap``, ``shard_map`` and sharded ``jit``.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxrank.ranking.backend import vary_like


def rounded(x: jax.Array) -> jax.Array:
    """``x`` (a product) rounded to its dtype before anything adds it: no FMA, no
    reassociation. A select that keeps every value (NaN stays NaN)."""
    return jnp.where(jnp.isnan(x), jnp.nan, x)


def running_sum(terms: jax.Array) -> jax.Array:
    """Inclusive running sums of ``terms`` along the last axis, added left to right
    (``s_i = s_{i-1} + t_i``, ``s_{-1} = 0.0``) as trec_eval's loops add. A zero term leaves
    the sum as it is, so terms trec_eval skips may be zeros here."""

    def step(i, carry):
        s, out = carry
        s = s + lax.dynamic_index_in_dim(terms, i, -1, keepdims=False)
        return s, lax.dynamic_update_index_in_dim(out, s, i, -1)

    init = (
        vary_like(jnp.zeros(terms.shape[:-1], terms.dtype), terms),
        vary_like(jnp.zeros(terms.shape, terms.dtype), terms),
    )
    return lax.fori_loop(0, terms.shape[-1], step, init)[1]


def total(terms: jax.Array) -> jax.Array:
    """The last of :func:`running_sum`: the left-to-right sum of ``terms`` along the last axis."""

    def step(i, s):
        return s + lax.dynamic_index_in_dim(terms, i, -1, keepdims=False)

    return lax.fori_loop(0, terms.shape[-1], step, vary_like(jnp.zeros(terms.shape[:-1], terms.dtype), terms))


@functools.lru_cache(maxsize=64)
def _log2_table(size: int) -> np.ndarray:
    return np.array([math.log2(i) if i > 0 else 0.0 for i in range(size)], np.float64)


def log2_of(x: jax.Array, size: int) -> jax.Array:
    """The C library's ``log2(x)`` for integral ``x`` in ``[1, size)`` (a table; other ``x``
    give 0). ``size`` is static."""
    table = jnp.asarray(_log2_table(size), x.dtype)
    return jnp.take(table, jnp.clip(x, 0, size - 1).astype(jnp.int32))


def log2_positions(n: int, dtype) -> jax.Array:
    """``log2(i + 2)`` for ``i = 0..n-1``: trec_eval's discount of rank ``i + 1``."""
    return jnp.asarray(_log2_table(n + 2)[2:], dtype)


@functools.lru_cache(maxsize=64)
def _powers(p: float, size: int) -> np.ndarray:
    out, cur = np.empty(size + 1), 1.0
    for i in range(size + 1):
        out[i] = cur
        cur = cur * p
    return out


def powers(p: float, n: int, dtype) -> jax.Array:
    """``p^i`` for ``i = 0..n`` as trec_eval forms them, one multiplication at a time."""
    return jnp.asarray(_powers(float(p), n), dtype)


def at(running: jax.Array, count) -> jax.Array:
    """A running sum read after ``count`` terms (0 for none, the total past the end):
    ``running[..., n]`` and integral ``count[..., C]`` (or ``[C]``, the same for every list)
    -> ``[..., C]``."""
    n = running.shape[-1]
    count = jnp.asarray(count, running.dtype)
    count = jnp.broadcast_to(count, running.shape[:-1] + count.shape[-1:])
    idx = jnp.clip(count, 1, n).astype(jnp.int32) - 1
    out = jnp.take_along_axis(running, idx, axis=-1)
    return jnp.where(count >= 1, out, jnp.zeros((), running.dtype))
