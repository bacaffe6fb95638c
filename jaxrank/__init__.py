"""jaxrank: ranking metrics for JAX, exact and differentiable, over one ranking primitive.

The names below are what users call. Implementation classes (the ``Ranks`` of each
ranker, the accumulator's state, the TREC file types) live in their modules:
:mod:`jaxrank.ranking`, :mod:`jaxrank.accumulate`, :mod:`jaxrank.trec`.
"""

from jaxrank import losses, retrieval
from jaxrank.accumulate import accumulator, compute
from jaxrank.aggregate import aggregate
from jaxrank.grouping import group_by_query
from jaxrank.metrics import (
    average_precision,
    dcg,
    err,
    fallout,
    graded_average_precision,
    kendall_tau,
    ndcg,
    num_rel,
    num_rel_ret,
    num_ret,
    pr_auc,
    precision,
    precision_recall_curve,
    r_precision,
    rbp,
    recall,
    recall_at_fixed_precision,
    reciprocal_rank,
    roc_auc,
    set_precision,
    set_recall,
    spearman,
    success,
)
from jaxrank.ranking import (
    Ranker,
    Ranks,
    approx,
    gumbel,
    hard,
    neuralsort,
    score_spread,
    soft_cutoff,
    soft_ranks,
    softrank,
    softsort,
)
from jaxrank.trec.evaluate import evaluate

__version__ = "0.1.0"

__all__ = [
    "Ranker",
    "Ranks",
    "accumulator",
    "aggregate",
    "approx",
    "average_precision",
    "compute",
    "dcg",
    "err",
    "evaluate",
    "fallout",
    "graded_average_precision",
    "group_by_query",
    "gumbel",
    "hard",
    "kendall_tau",
    "losses",
    "ndcg",
    "neuralsort",
    "num_rel",
    "num_rel_ret",
    "num_ret",
    "pr_auc",
    "precision",
    "precision_recall_curve",
    "r_precision",
    "rbp",
    "recall",
    "recall_at_fixed_precision",
    "reciprocal_rank",
    "retrieval",
    "roc_auc",
    "score_spread",
    "set_precision",
    "set_recall",
    "soft_cutoff",
    "soft_ranks",
    "softrank",
    "softsort",
    "spearman",
    "success",
]
