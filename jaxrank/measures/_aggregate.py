"""Aggregation of per-query values over queries."""

from __future__ import annotations

from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

How = Literal["mean", "median", "min", "max", "gmean"]
Empty = Literal["zero", "one", "skip", "nan", "error"]
HOWS: tuple[str, ...] = ("mean", "median", "min", "max", "gmean")
EMPTIES: tuple[str, ...] = ("zero", "one", "skip", "nan", "error")

#: trec_eval's floor for geometric means (gm_map, gm_bpref): log(0) is avoided.
GMEAN_FLOOR = 1e-5


def aggregate(
    values,
    *,
    how: How = "mean",
    empty: Empty = "zero",
    is_empty=None,
    weights=None,
) -> jax.Array:
    """Aggregate per-query values over the first axis.

    .. math:: \\bar v = \\frac{\\sum_q u_q v_q}{\\sum_q u_q}, \\qquad
        \\mathrm{gmean} = \\exp\\Big(\\frac{\\sum_q u_q \\log \\max(v_q, 10^{-5})}{\\sum_q u_q}\\Big)

    Args:
      values: ``[Q]`` or ``[Q, C]`` per-query values (e.g. one column per cutoff).
      how: ``"mean"``, ``"median"``, ``"min"``, ``"max"`` or ``"gmean"`` (geometric
        mean with trec_eval's floor of 1e-5, as in ``gm_map``).
      empty: what a query flagged by ``is_empty`` (no relevant document) counts as:
        ``"zero"`` (trec_eval, rax), ``"one"``, ``"skip"`` (left out), ``"nan"``
        (the aggregate becomes NaN) or ``"error"`` (raise; needs concrete values,
        so not under ``jit``).
      is_empty: ``bool[Q]``, e.g. ``jaxrank.num_rel(...) == 0``. ``None``: no query
        is empty.
      weights: optional ``[Q]`` non-negative query weights (``"mean"``/``"gmean"``).

    Returns:
      ``[]`` or ``[C]``.

    Example:
      >>> import jaxrank
      >>> float(jaxrank.aggregate([0.5, 1.0, 0.0], empty="skip", is_empty=[False, False, True]))
      0.75
    """
    if how not in HOWS:
        raise ValueError(f"how must be one of {HOWS}, got {how!r}")
    if empty not in EMPTIES:
        raise ValueError(f"empty must be one of {EMPTIES}, got {empty!r}")
    values = jnp.asarray(values, jnp.result_type(float))
    if values.ndim not in (1, 2):
        raise ValueError(f"values must have shape [Q] or [Q, C], got {values.shape}")
    n = values.shape[0]
    extra = (1,) * (values.ndim - 1)
    if is_empty is None:
        flags = jnp.zeros((n,), bool)
    else:
        flags = jnp.asarray(is_empty, bool)
        if flags.shape != (n,):
            raise ValueError(f"is_empty must have shape ({n},), got {flags.shape}")
    if weights is None:
        u = jnp.ones((n,), values.dtype)
    else:
        if how in ("median", "min", "max"):
            raise ValueError(f"weights are not supported with how={how!r}")
        u = jnp.asarray(weights, values.dtype)
        if u.shape != (n,):
            raise ValueError(f"weights must have shape ({n},), got {u.shape}")
    if empty == "error":
        try:
            concrete = np.asarray(flags)
        except jax.errors.TracerArrayConversionError as e:
            raise ValueError("empty='error' needs concrete values; under jit pick another policy") from e
        if concrete.any():
            raise ValueError(f"{int(concrete.sum())} queries have no relevant document (empty='error')")
    flags = flags.reshape((n,) + extra)
    if empty == "zero":
        values = jnp.where(flags, 0.0, values)
    elif empty == "one":
        values = jnp.where(flags, 1.0, values)
    elif empty == "nan":
        values = jnp.where(flags, jnp.nan, values)
    keep = jnp.broadcast_to(~flags if empty == "skip" else jnp.ones_like(flags), values.shape)
    if how in ("mean", "gmean"):
        x = jnp.log(jnp.maximum(values, GMEAN_FLOOR)) if how == "gmean" else values
        w = jnp.where(keep, u.reshape((n,) + extra), 0.0)
        total = jnp.sum(jnp.where(keep, w * x, 0.0), axis=0)
        mean = total / jnp.sum(w, axis=0)
        return jnp.exp(mean) if how == "gmean" else mean
    if how == "median":
        return (
            jnp.nanmedian(jnp.where(keep, values, jnp.nan), axis=0) if empty == "skip" else jnp.median(values, axis=0)
        )
    reduce = jnp.min if how == "min" else jnp.max
    fill = jnp.inf if how == "min" else -jnp.inf
    out = reduce(jnp.where(keep, values, fill), axis=0)
    return jnp.where(jnp.any(keep, axis=0), out, jnp.nan)
