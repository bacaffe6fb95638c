"""jaxrank's mergeable metric state as a ``clu.metrics.Metric``, for Flax training loops.

Needs clu (``pip install "jaxrank[clu]"``). :func:`metric` turns one measure string into a
metric class that a ``clu.metrics.Collection`` holds like any other::

    @flax.struct.dataclass
    class EvalMetrics(clu.metrics.Collection):
        ndcg: jaxrank.compat.clu.metric("nDCG@10")
        ap: jaxrank.compat.clu.metric("AP", ties="expected")

    metrics = EvalMetrics.single_from_model_output(scores=s, labels=y, where=w, mask=m)

The state is :class:`jaxrank.measures.accumulate.State` (sums, O(1) in the number of queries), so
``merge`` adds, ``Collection.gather_from_model_output`` (``all_gather`` then ``reduce``)
merges across devices, and the values are those of :func:`jaxrank.accumulator`. Unlike
google/metrax's ranking metrics, padding is masked (``where`` per item, ``mask`` per
query) and equal scores follow a chosen tie policy (metrax breaks them by index).
"""

from __future__ import annotations

from typing import Optional

import clu.metrics
import flax.struct
import jax
import jax.numpy as jnp

from jaxrank.measures.accumulate import State, accumulator

__all__ = ["metric"]


def metric(
    measure: str,
    *,
    how: str = "mean",
    empty: Optional[str] = None,
    rel: int = 1,
    ties: str = "stable",
    num_docs: int = 0,
) -> type[clu.metrics.Metric]:
    """A ``clu.metrics.Metric`` class for one measure, over :func:`jaxrank.accumulator`.

    ``from_model_output(scores, labels, *, where=None, judgments=None,
    judgments_where=None, mask=None, weights=None)`` takes ``[B, n]`` lists as
    :func:`jaxrank.compute` does; ``mask`` is clu's mask: ``bool[B]`` marks the rows that
    are queries (False: padding rows), or ``bool[B, n]`` the valid items (and-ed with
    ``where``). Other model outputs are ignored, as clu passes every output to every metric.
    ``compute()`` gives the scalar value:

    .. math:: \\frac{\\sum_q u_q v_q}{\\sum_q u_q} \\quad (\\text{how="mean"; see } :func:`jaxrank.accumulator`)

    Args:
      measure: one measure string with one output (``"nDCG@10"``, ``"map"``,
        ``"P(rel=2)@5"``; not ``"P.5,10"``, which has two).
      how, empty, rel, ties, num_docs: as :func:`jaxrank.accumulator`.

    Returns:
      A ``flax.struct.dataclass`` subclass of ``clu.metrics.Metric`` with one field,
      ``state``.

    Raises:
      ValueError: a measure with no or several outputs, or a bad option.

    Example:
      >>> from jaxrank.compat import clu as jclu
      >>> NDCG = jclu.metric("nDCG@2")
      >>> m = NDCG.from_model_output(scores=[[0.9, 0.8, 0.1]], labels=[[1, 0, 1]])
      >>> m = m.merge(NDCG.from_model_output(scores=[[0.2, 0.7], [0.5, 0.1]], labels=[[0, 1], [1, 1]], mask=[True, False]))
      >>> round(float(m.compute()), 4)
      0.8066
    """
    acc = accumulator(measure, how=how, empty=empty, rel=rel, ties=ties, num_docs=num_docs)
    if len(acc.names) != 1:
        raise ValueError(
            f"measure {measure!r} has {len(acc.names)} outputs {list(acc.names)}; give one measure per metric"
        )
    (name,) = acc.names

    @flax.struct.dataclass
    class RankingMetric(clu.metrics.Metric):
        state: State

        @classmethod
        def empty(cls) -> RankingMetric:
            return cls(acc.init())

        @classmethod
        def from_model_output(
            cls, scores, labels, *, where=None, judgments=None, judgments_where=None, mask=None, weights=None, **_
        ) -> RankingMetric:
            scores = jnp.asarray(scores)
            query_where = None
            if mask is not None:
                mask = jnp.asarray(mask, bool)
                if mask.shape == scores.shape:
                    where = mask if where is None else mask & jnp.asarray(where, bool)
                elif mask.shape == scores.shape[:-1]:
                    query_where = mask
                else:
                    raise ValueError(
                        f"mask must have the batch shape {scores.shape[:-1]} or the shape of scores "
                        f"{scores.shape}, got {mask.shape}"
                    )
            state = acc.update(
                acc.init(),
                scores,
                labels,
                where=where,
                judgments=judgments,
                judgments_where=judgments_where,
                query_where=query_where,
                weights=weights,
            )
            return cls(state)

        def merge(self, other: RankingMetric) -> RankingMetric:
            return type(self)(acc.merge(self.state, other.state))

        def compute(self) -> jax.Array:
            return acc.compute(self.state)[name]

    RankingMetric.__name__ = RankingMetric.__qualname__ = f"RankingMetric[{name}]"
    return RankingMetric
