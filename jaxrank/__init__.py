"""jaxrank: ranking metrics for JAX, exact and differentiable, over one ranking primitive."""

from jaxrank.aggregate import aggregate
from jaxrank.metrics import (
    average_precision,
    dcg,
    err,
    fallout,
    ndcg,
    num_rel,
    num_rel_ret,
    num_ret,
    precision,
    r_precision,
    rbp,
    recall,
    reciprocal_rank,
    success,
)
from jaxrank.ranking import HardRanker, HardRanks, Ranks, hard

__version__ = "0.1.0"

__all__ = [
    "HardRanker",
    "HardRanks",
    "Ranks",
    "aggregate",
    "average_precision",
    "dcg",
    "err",
    "fallout",
    "hard",
    "ndcg",
    "num_rel",
    "num_rel_ret",
    "num_ret",
    "precision",
    "r_precision",
    "rbp",
    "recall",
    "reciprocal_rank",
    "success",
]
