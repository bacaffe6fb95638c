"""The one ranking primitive: exact ranks and the contract every ranker meets.

* :mod:`jaxrank.ranking.ranks`: :class:`Ranks` (the four operations every metric is
  written with) and :class:`Ranker` (what ``ranker=`` accepts).
* :mod:`jaxrank.ranking.hard`: :func:`hard`, exact ranks with a tie policy.
* :mod:`jaxrank.ranking._backend`: the only module that knows platforms (host
  sort, top-k, cumulative and row sums), with the rule that picks each path.

The smooth rankers are in :mod:`jaxrank.soft`.
"""

from jaxrank.ranking.hard import HardRanker, HardRanks, hard
from jaxrank.ranking.ranks import TIE_POLICIES, PositionFn, Ranker, Ranks, Ties

__all__ = ["HardRanker", "HardRanks", "PositionFn", "Ranker", "Ranks", "TIE_POLICIES", "Ties", "hard"]
