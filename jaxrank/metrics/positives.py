"""Metrics of lists whose labels are :class:`~jaxrank.ranking.positives.Positives`.

A metric whose every per-item weight is 0 on the items below ``rel`` (the gains of
nDCG, the hits of recall, AP, RR, ...) reads the non-relevant items only through the
ranks of the relevant ones. Given positives, such a metric runs on the relevant items
alone, ``[..., r]``, with the ranks a ranker's ``at_positives`` gives them among the whole
list: the same metric code, on the same :class:`~jaxrank.ranking.Ranks` operations.
Any other metric, ranker or keyword takes the dense labels the positives stand for.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Optional

import jax.numpy as jnp

from jaxrank import _checks
from jaxrank.ranking import Ranks
from jaxrank.ranking.positives import ListAxis, Positives, check

#: Which call of a metric reads the relevant items only (by the metric's name).
_RELEVANT_ONLY: dict[str, Callable[[dict], bool]] = {
    "dcg": lambda kw: kw.get("weights") is None,
    "ndcg": lambda kw: kw.get("weights") is None and kw.get("ideal_ranks") is None,
    "recall": lambda kw: True,
    "precision": lambda kw: kw.get("k") is not None and not kw.get("adaptive", False),
    "average_precision": lambda kw: not kw.get("threshold_ties", False),
    "reciprocal_rank": lambda kw: True,
    "success": lambda kw: True,
    "err": lambda kw: True,
    "rbp": lambda kw: True,
}


def relevant_only(metric: Callable, kwargs: dict) -> bool:
    """Whether ``metric(..., **kwargs)`` gives every item below ``rel`` zero weight."""
    rule = _RELEVANT_ONLY.get(getattr(metric, "__name__", ""))
    return rule is not None and rule(kwargs)


def _default_ranker(metric: Callable):
    parameter = inspect.signature(metric).parameters.get("ranker")
    return None if parameter is None else parameter.default


def evaluate(metric: Callable, scores, pos: Positives, kwargs: dict, axis_name: Optional[str] = None):
    """``metric(scores, pos.dense(n), **kwargs)``, on the relevant items alone where the
    metric and the ranker allow it (module docstring). ``axis_name``: the lists are sharded
    over that ``shard_map`` axis (``scores`` is this device's block; indices are global)."""
    scores = _checks.scores(scores)
    axis = ListAxis(axis_name, scores.shape[-1])
    if axis_name is None:
        check(pos, scores.shape)
    ranker = kwargs.get("ranker", _default_ranker(metric))
    if isinstance(ranker, Ranks):
        raise ValueError("labels given as positives need a ranker (e.g. jaxrank.softsort()), not precomputed Ranks")
    where = kwargs.get("where")
    if where is not None:
        where = _checks.mask(where, scores.shape, broadcast=True)
    at_positives = getattr(ranker, "at_positives", None)
    if at_positives is not None and relevant_only(metric, kwargs):
        ks = _checks.cutoffs(kwargs.get("k"))
        ranks = at_positives(scores, where, pos, None if ks is None else max(ks), axis_name)
        if ranks is not None:
            valid = pos.valid
            if where is not None:
                valid &= axis.at(where.astype(jnp.int32), pos.indices) > 0
            relevant_scores = axis.at(scores, pos.indices)
            rest = {name: v for name, v in kwargs.items() if name not in ("where", "ranker")}
            return metric(relevant_scores, pos.grades, where=valid, ranker=ranks, **rest)
    # the dense labels the positives stand for, over the whole list
    full = axis.gather(scores)
    if where is not None:
        kwargs = dict(kwargs, where=axis.gather(where))
    return metric(full, pos.dense(full.shape[-1]), **kwargs)
