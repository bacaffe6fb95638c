"""Input validation shared by metrics, rankers, losses, comparison and fusion.

Every check runs on static information (shapes, dtypes, Python numbers) before
any tracing, and raises a ``ValueError`` that names the argument; a check of traced
values (:func:`indices_within` under ``jit``) is a ``checkify.debug_check``.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

Cutoff = Union[None, int, Sequence[int]]


def scores(x, name: str = "scores") -> jax.Array:
    """``x`` as an array of floats with at least one axis (the list)."""
    x = jnp.asarray(x)
    if x.ndim == 0:
        raise ValueError(f"{name} must have at least one axis (the list), got a scalar")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"{name} must be floating point, got {x.dtype}")
    return x


def same_shape(x, shape: tuple[int, ...], name: str, like: str = "scores") -> jax.Array:
    """``x`` as an array of exactly ``shape``."""
    x = jnp.asarray(x)
    if x.shape != shape:
        raise ValueError(f"{name} must have the shape of {like} {shape}, got {x.shape}")
    return x


def mask(m, shape: tuple[int, ...], name: str = "where", like: str = "scores", broadcast: bool = False) -> jax.Array:
    """A boolean mask of ``shape``: all true when ``m`` is None; with ``broadcast``, any
    shape that broadcasts to ``shape`` is accepted."""
    if m is None:
        return jnp.ones(shape, bool)
    m = jnp.asarray(m)
    if broadcast:
        try:
            return jnp.broadcast_to(m, shape).astype(bool)
        except ValueError:
            raise ValueError(f"{name} must broadcast to the shape of {like} {shape}, got {m.shape}") from None
    return same_shape(m, shape, name, like).astype(bool)


def segment_ids(x, shape: Optional[tuple[int, ...]] = None, name: str = "segments") -> jax.Array:
    """Integer (or bool) segment ids with at least one axis, of ``shape`` when given."""
    x = jnp.asarray(x)
    if shape is not None:
        x = same_shape(x, shape, name)
    elif x.ndim == 0:
        raise ValueError(f"{name} must have at least one axis (the list), got a scalar")
    if not (jnp.issubdtype(x.dtype, jnp.integer) or x.dtype == jnp.bool_):
        raise ValueError(f"{name} must hold integer segment ids, got {x.dtype}")
    return x


def judgments(j, j_where, scores_shape: tuple[int, ...]) -> tuple[Optional[jax.Array], Optional[jax.Array]]:
    """``judgments[..., m]`` (the batch axes of scores, any ``m``) and its mask."""
    if j is None:
        if j_where is not None:
            raise ValueError("judgments_where was given without judgments")
        return None, None
    j = jnp.asarray(j)
    if j.ndim != len(scores_shape) or j.shape[:-1] != scores_shape[:-1]:
        raise ValueError(f"judgments must have shape {scores_shape[:-1]} + (m,), got {j.shape}")
    return j, mask(j_where, j.shape, "judgments_where", "judgments")


def embeddings(queries, other, other_name: str, other_rows: str = "N") -> tuple[jax.Array, jax.Array]:
    """``queries [Q, d]`` and ``other [N, d]`` (a corpus, the documents) as float arrays of
    one embedding size."""
    queries, other = jnp.asarray(queries), jnp.asarray(other)
    for name, x, shape in (("queries", queries, "[Q, d]"), (other_name, other, f"[{other_rows}, d]")):
        if x.ndim != 2:
            raise ValueError(f"{name} must have shape {shape}, got {x.shape}")
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise ValueError(f"{name} must be floating point, got {x.dtype}")
    if queries.shape[1] != other.shape[1]:
        raise ValueError(
            f"queries and {other_name} must share the embedding size d, got {queries.shape[1]} and {other.shape[1]}"
        )
    return queries, other


def indices_within(indices, n: int, name: str) -> None:
    """Refuse an index past a list of ``n`` items or below -1 (the padding): at once when the
    values are known (outside ``jit``); under ``jit``, through :func:`jax.experimental.checkify.checkify`
    when the caller asks for it (a ``debug_check``: dropped, at no cost, otherwise)."""
    if indices.size == 0:
        return
    if isinstance(indices, jax.core.Tracer):
        outside = (indices >= n) | (indices < -1)
        bad = jnp.where(jnp.any(indices >= n), jnp.max(indices), jnp.min(indices))
        checkify.debug_check(
            ~jnp.any(outside),
            f"{name}: index {{}} is outside the list of {n} items (valid: 0..{n - 1}, and -1 pads)",
            bad,
        )
        return
    values = np.asarray(indices)  # numpy: under a trace, jnp would stage the reduction
    low, high = int(values.min()), int(values.max())
    if high >= n or low < -1:
        bad = high if high >= n else low
        raise ValueError(f"{name}: index {bad} is outside the list of {n} items (valid: 0..{n - 1}, and -1 pads)")


def is_int(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (numbers.Integral, np.integer))


def cutoffs(k: Cutoff, name: str = "k") -> Optional[tuple[int, ...]]:
    """``None``, or the positive integer cutoffs of ``k`` (an integer or a non-empty sequence)."""
    if k is None:
        return None
    many = isinstance(k, (list, tuple))
    values = tuple(k) if many else (k,)
    if many and not values:
        raise ValueError(f"{name} must be a positive integer or a non-empty sequence of them")
    for v in values:
        if not is_int(v) or v <= 0:
            raise ValueError(f"{name} must be a positive integer or a sequence of them, got {k!r}")
    return tuple(int(v) for v in values)


def positive_int(value, name: str, allow_zero: bool = False) -> int:
    """A (non-negative with ``allow_zero``) Python integer; bools are refused."""
    if not is_int(value) or value < (0 if allow_zero else 1):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a {kind} integer, got {value!r}")
    return int(value)


def positive(value, name: str) -> float:
    """A positive, finite Python number (traced values are refused)."""
    try:
        number = float(value)
    except (TypeError, ValueError, jax.errors.ConcretizationTypeError) as e:
        raise ValueError(f"{name} must be a positive Python number, got {value!r}") from e
    if isinstance(value, bool) or not (number > 0 and math.isfinite(number)):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return number


def in_range(value, name: str, low: float, high: float, closed_low: bool = False, closed_high: bool = False) -> float:
    """A Python number between ``low`` and ``high`` (each bound excluded unless closed)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = ok and (low <= value if closed_low else low < value) and (value <= high if closed_high else value < high)
    if not ok:
        interval = f"{'[' if closed_low else '('}{low}, {high}{']' if closed_high else ')'}"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return float(value)


def boolean(value, name: str) -> bool:
    """A Python bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _one_run(runs: Mapping) -> bool:
    """Whether a dict is itself one run, ``{qid: {docno: score}}``, rather than runs by name
    (whose dict values are runs: paths, ``{qid: {...}}`` dicts, Run objects, ...)."""
    return any(isinstance(v, Mapping) and any(not isinstance(x, Mapping) for x in v.values()) for v in runs.values())


def named_runs(runs) -> dict[str, Any]:
    """``runs``, a list of runs or a dict ``{name: run}``, as ``{name: run}`` (in order).

    A list's runs get the names ``jaxrank compare`` gives its files: a path is named by its
    file name (by the path itself when two file names clash), any other run ``run_1``,
    ``run_2``, ... by its position (ranx's names for unnamed runs). A dict that is itself one
    run (``{qid: {docno: score}}``) is refused.

    >>> list(named_runs(["a/bm25.run", {"q1": {"d1": 1.0}}]))
    ['bm25.run', 'run_2']
    >>> list(named_runs(["a/x.run", "b/x.run"]))
    ['a/x.run', 'b/x.run']
    """
    if isinstance(runs, Mapping):
        if _one_run(runs):
            raise TypeError("runs must be a list of runs or a dict {name: run}, got one run {qid: {docno: score}}")
        out = {str(name): run for name, run in runs.items()}
    elif isinstance(runs, (str, bytes, os.PathLike)) or not isinstance(runs, Sequence):
        raise TypeError(f"runs must be a list of runs or a dict {{name: run}}, got {type(runs).__name__}")
    else:
        paths = [isinstance(r, (str, os.PathLike)) for r in runs]
        names = [Path(r).name if p else f"run_{i + 1}" for i, (r, p) in enumerate(zip(runs, paths))]
        if len(set(names)) < len(names):  # same file names in different folders: the paths name them
            names = [os.fspath(r) if p else n for r, p, n in zip(runs, paths, names)]
        if len(set(names)) < len(names):
            clash = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"runs: {clash!r} is given twice; give each run once, or a dict {{name: run}}")
        out = dict(zip(names, runs))
    return out
