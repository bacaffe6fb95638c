"""The one ranking primitive: the contract every ranker meets, exact ranks, smooth ranks.

* :mod:`jaxrank.ranking.ranks`: :class:`Ranks` (the operations every metric is
  written with) and :class:`Ranker` (what ``ranker=`` accepts).
* :mod:`jaxrank.ranking.hard`: :func:`hard`, exact ranks with a tie policy
  (tie-group algebra in :mod:`jaxrank.ranking._ties`).
* Smooth rankers, same contract (overview in :mod:`jaxrank.ranking.smooth`):
  :mod:`~jaxrank.ranking.pairwise` (:func:`approx`, :func:`bound`), :mod:`~jaxrank.ranking.projection`
  (:func:`softrank`), :mod:`~jaxrank.ranking.laplace` (:func:`laplace`, the losses'
  default), :mod:`~jaxrank.ranking.permutation` (:func:`neuralsort`,
  :func:`softsort`), :mod:`~jaxrank.ranking.sampling` (:func:`gumbel`).
* :mod:`jaxrank.ranking.positives`: :func:`positives`, the relevant items of each list by
  index, as a metric's labels; the rankers' ``at_positives`` rank them alone.
* :mod:`jaxrank.ranking.given`: :func:`given`, ranks computed elsewhere (rax's ``rank_fn``),
  as a ranker.
* :mod:`jaxrank.ranking.backend`: the only module that knows platforms (host
  sort, top-k, cumulative and row sums), with the rule that picks each path.
"""

from jaxrank.ranking.given import GivenRanker, GivenRanks, given
from jaxrank.ranking.hard import HardRanker, HardRanks, hard
from jaxrank.ranking.laplace import LaplaceRanker, LaplaceRanks, laplace
from jaxrank.ranking.pairwise import (
    ApproxRanker,
    ApproxRanks,
    BoundRanker,
    BoundRanks,
    PointRanks,
    approx,
    bound,
    pairwise_ranks,
)
from jaxrank.ranking.permutation import NeuralSortRanker, PermutationRanks, SoftSortRanker, neuralsort, softsort
from jaxrank.ranking.positives import Positives, positives
from jaxrank.ranking.projection import SoftRanker, SoftRanks, soft_ranks, softrank
from jaxrank.ranking.ranks import TIE_POLICIES, PositionFn, Ranker, Ranks, Ties
from jaxrank.ranking.sampling import GumbelRanker, GumbelRanks, gumbel
from jaxrank.ranking.smooth import bounded_temperature, score_spread, soft_cutoff

__all__ = [
    "TIE_POLICIES",
    "ApproxRanker",
    "ApproxRanks",
    "BoundRanker",
    "BoundRanks",
    "GivenRanker",
    "GivenRanks",
    "GumbelRanker",
    "GumbelRanks",
    "HardRanker",
    "HardRanks",
    "LaplaceRanker",
    "LaplaceRanks",
    "NeuralSortRanker",
    "PermutationRanks",
    "PointRanks",
    "Positives",
    "PositionFn",
    "Ranker",
    "Ranks",
    "SoftRanker",
    "SoftRanks",
    "SoftSortRanker",
    "Ties",
    "approx",
    "bound",
    "bounded_temperature",
    "given",
    "gumbel",
    "hard",
    "laplace",
    "neuralsort",
    "pairwise_ranks",
    "positives",
    "score_spread",
    "soft_cutoff",
    "soft_ranks",
    "softrank",
    "softsort",
]
