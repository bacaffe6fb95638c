"""Ranking metrics, each written once over :class:`jaxrank.ranking.Ranks`.

Modules: :mod:`~jaxrank.metrics.ir` (the trec_eval family), :mod:`~jaxrank.metrics.counts`
(num_ret, num_rel, num_rel_ret), :mod:`~jaxrank.metrics.diversity` (alpha-nDCG, ERR-IA and
the other intent-aware measures of ndeval), :mod:`~jaxrank.metrics.curves` (precision-recall curve,
ROC AUC), :mod:`~jaxrank.metrics.correlation` (Spearman, Kendall),
:mod:`~jaxrank.metrics.sets` (retrieved id sets, the PR-curve area), and the measures of
ir_measures that trec_eval lacks: :mod:`~jaxrank.metrics.cwl` (cwl-eval's C/W/L measures INST,
INSQ, BPM, SDCG, NERR) and :mod:`~jaxrank.metrics.agreement` (Accuracy, Compat).

Conventions shared by every metric (see ``docs/conventions.rst``):

* ``scores``, ``labels``, ``where``: ``[..., n]``; leading axes are batch axes.
  The result has shape ``[...]``, plus a trailing axis when ``k`` is a sequence.
* An item is *relevant* when its label is ``>= rel``.
* ``judgments`` (``[..., m]``, with its own mask ``judgments_where``) holds the
  labels of every judged document of the query, retrieved or not; the number of
  relevant documents (recall, AP, R-precision) and the ideal ranking of nDCG come
  from it, as in trec_eval. Without it the list itself is taken as complete, as
  in rax and torchmetrics.
* A query without relevant documents scores 0 (trec_eval); choose what it means
  for a mean in :func:`jaxrank.aggregate`.
* ``segments`` (``int[..., n]``) packs several lists in one row (rax's convention):
  the value is then per list, ``[..., S]`` (:func:`segment_slots` says which slots
  hold a list; ``docs/segments.rst``).
* ``ranker`` is :func:`jaxrank.hard` (default: exact ranks, ties ``"stable"``)
  or a smooth ranker; a precomputed :class:`~jaxrank.ranking.Ranks` may be passed
  to share one ranking pass between several metrics.
"""

from jaxrank.metrics.agreement import accuracy, compatibility
from jaxrank.metrics.common import log2_discount as log2_discount  # a helper
from jaxrank.metrics.correlation import kendall_tau, ordered_pair_accuracy, spearman
from jaxrank.metrics.counts import num_rel, num_rel_ret, num_ret
from jaxrank.metrics.curves import precision_recall_curve, recall_at_fixed_precision, roc_auc
from jaxrank.metrics.curves import recall_at_precision_from_curve as recall_at_precision_from_curve  # a helper
from jaxrank.metrics.cwl import bpm, insq, inst, nerr8, nerr9, nerr10, nerr11, sdcg
from jaxrank.metrics.diversity import (
    alpha_dcg,
    alpha_ndcg,
    ap_ia,
    err_ia,
    nerr_ia,
    nnrbp,
    nrbp,
    precision_ia,
    subtopic_recall,
)
from jaxrank.metrics.diversity import greedy_ideal_ranks as greedy_ideal_ranks  # a helper
from jaxrank.metrics.ir import (
    average_precision,
    dcg,
    err,
    fallout,
    ndcg,
    precision,
    r_precision,
    rbp,
    recall,
    reciprocal_rank,
    success,
)
from jaxrank.metrics.segments import SegmentSlots as SegmentSlots  # a helper
from jaxrank.metrics.segments import segment_slots as segment_slots  # a helper
from jaxrank.metrics.sets import graded_average_precision, pr_auc, set_precision, set_recall

# The metrics (helpers, imported "as" themselves above, are not): jaxrank exports this list.
__all__ = [
    "accuracy",
    "alpha_dcg",
    "alpha_ndcg",
    "ap_ia",
    "average_precision",
    "bpm",
    "compatibility",
    "dcg",
    "err",
    "err_ia",
    "fallout",
    "graded_average_precision",
    "insq",
    "inst",
    "kendall_tau",
    "ndcg",
    "nerr10",
    "nerr11",
    "nerr8",
    "nerr9",
    "nerr_ia",
    "nnrbp",
    "nrbp",
    "num_rel",
    "num_rel_ret",
    "num_ret",
    "ordered_pair_accuracy",
    "pr_auc",
    "precision",
    "precision_ia",
    "precision_recall_curve",
    "r_precision",
    "rbp",
    "recall",
    "recall_at_fixed_precision",
    "reciprocal_rank",
    "roc_auc",
    "sdcg",
    "set_precision",
    "set_recall",
    "spearman",
    "subtopic_recall",
    "success",
]
