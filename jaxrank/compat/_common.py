"""Pieces the peer modules share: the tie policies they use, array conversion, checks."""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _checks, metrics
from jaxrank.ranking import hard

Array = jax.Array

# Ties in input order (peers that sort with an unspecified order among ties) and ties
# averaged (peers that define the metric over tied scores).
STABLE = hard("stable")
EXPECTED = hard("expected")


def as_array(x) -> Array:
    """``x`` as a JAX array; a ``jax.Array`` (or a tracer) is kept as it is."""
    return x if isinstance(x, jax.Array) else jnp.asarray(np.asarray(x))


def cutoff(k, name: str = "k") -> Optional[int]:
    """None or a positive Python integer (bools refused)."""
    return None if k is None else _checks.positive_int(k, name)


def average_precision_over_retrieved(scores, labels, *, k, where, ranker):
    """AP divided by the relevant items within the top ``k`` instead of all of them
    (torchmetrics, autointent): jaxrank's AP (over all :math:`R`) times :math:`R` / hits."""
    ranks = ranker(scores, where, depth=k if k is not None and k < scores.shape[-1] else None)
    ap = metrics.average_precision(scores, labels, k=k, where=where, ranker=ranks)
    hits = metrics.num_rel_ret(scores, labels, k=k, where=where, ranker=ranks)
    total = metrics.num_rel(scores, labels, where=where)
    return jnp.where(hits > 0, ap * total / jnp.where(hits > 0, hits, 1), 0.0)
