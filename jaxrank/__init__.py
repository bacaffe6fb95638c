"""jaxrank: ranking metrics for JAX, exact and differentiable, over one ranking primitive.

The names below are what users call. Implementation classes (the ``Ranks`` of each
ranker, the accumulator's state, the TREC file types) live in their modules:
:mod:`jaxrank.ranking`, :mod:`jaxrank.measures.accumulate`, :mod:`jaxrank.trec`.
"""

from jaxrank import losses, metrics, retrieval, stats
from jaxrank.fusion import fuse, optimize_fusion
from jaxrank.lists import group_by_query
from jaxrank.measures import accumulator, aggregate, compute
from jaxrank.metrics import *  # noqa: F403  (the metrics: jaxrank.metrics.__all__)
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
from jaxrank.stats import compare
from jaxrank.trec.evaluate import evaluate

__version__ = "0.1.0"

__all__ = [
    "Ranker",
    "Ranks",
    "accumulator",
    "aggregate",
    "approx",
    "compare",
    "compute",
    "evaluate",
    "fuse",
    "group_by_query",
    "gumbel",
    "hard",
    "losses",
    "neuralsort",
    "optimize_fusion",
    "retrieval",
    "score_spread",
    "soft_cutoff",
    "soft_ranks",
    "softrank",
    "softsort",
    "stats",
]
__all__ += metrics.__all__  # the metrics are listed once, there
__all__.sort()
