"""Counts of a ranked list: retrieved, relevant, relevant retrieved (trec_eval's
num_ret, num_rel, num_rel_ret)."""

from __future__ import annotations

from jaxrank.metrics import common as _c
from jaxrank.metrics.common import Array, Cutoff
from jaxrank.metrics.segments import segmented

_DEFAULT_RANKER = _c.DEFAULT_RANKER


@segmented()
def num_ret(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
) -> Array:
    """Number of items retrieved (within the top ``k``): :math:`\\min(n, k)`.

    ``rel``, ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> int(jaxrank.num_ret([0.3, 0.2, 0.1], [1, 0, 0], k=2))
      2
    """
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    return p.finish(p.at_cutoffs(p.valid.astype(p.labels.dtype)))


@segmented()
def num_rel(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
) -> Array:
    """Number of relevant documents of the query: from ``judgments`` when given
    (trec_eval), else from the list.

    ``k`` and ``ranker`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> int(jaxrank.num_rel([0.3, 0.2], [1, 0], judgments=[1, 2, 0, 1]))
      3
    """
    return _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where, rank=False).num_relevant(rel)


@segmented()
def num_rel_ret(
    scores,
    labels,
    *,
    k: Cutoff = None,
    where=None,
    rel=1,
    ranker=_DEFAULT_RANKER,
    judgments=None,
    judgments_where=None,
) -> Array:
    """Number of relevant items within the top ``k``:
    :math:`\\sum_i [y_i \\ge rel]\\,[r_i \\le k]`.

    ``judgments`` and ``judgments_where`` cannot change the value: they are
    accepted (and checked) so that every metric takes the same keywords.

    Example:
      >>> import jaxrank
      >>> int(jaxrank.num_rel_ret([0.3, 0.2, 0.1], [0, 1, 1], k=2))
      1
    """
    p = _c.prepare(scores, labels, k, where, ranker, judgments, judgments_where)
    return p.finish(p.at_cutoffs(p.relevant(rel)))
