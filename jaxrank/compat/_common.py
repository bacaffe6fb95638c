"""Pieces two peers share."""

from __future__ import annotations

import jax.numpy as jnp

from jaxrank import metrics


def average_precision_over_retrieved(scores, labels, *, k, where, ranker):
    """AP divided by the relevant items within the top ``k`` instead of all of them
    (torchmetrics, autointent): jaxrank's AP (over all :math:`R`) times :math:`R` / hits."""
    ranks = ranker(scores, where, depth=k if k is not None and k < scores.shape[-1] else None)
    ap = metrics.average_precision(scores, labels, k=k, where=where, ranker=ranks)
    hits = metrics.num_rel_ret(scores, labels, k=k, where=where, ranker=ranks)
    total = metrics.num_rel(scores, labels, where=where)
    return jnp.where(hits > 0, ap * total / jnp.where(hits > 0, hits, 1), 0.0)
