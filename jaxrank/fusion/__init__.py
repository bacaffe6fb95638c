"""Run fusion as ranx fuses runs: :func:`fuse` and the array form :func:`fuse_scores`
(:mod:`jaxrank.fusion._fuse`), and the trained methods' training and
:func:`optimize_fusion` (:mod:`jaxrank.fusion._trained`).
"""

from jaxrank.fusion._fuse import METHODS, NORMS, RANK_BASED, TRAINED, fuse, fuse_scores
from jaxrank.fusion._trained import METRICS, optimize_fusion, train

__all__ = ["METHODS", "METRICS", "NORMS", "RANK_BASED", "TRAINED", "fuse", "fuse_scores", "optimize_fusion", "train"]
