"""Ranking losses in the shape of optax's: one value per list, masks, no reduction.

Every function takes ``scores[..., n]`` and ``labels[..., n]`` (graded
relevance), an optional validity mask ``where[..., n]``, and returns the loss
of each list, shape ``[...]``; averaging over lists (or weighting them) is left
to the caller, e.g. ``jnp.mean(ndcg_loss(scores, labels, where=mask))``.
Masked items never contribute and get zero gradient; a list without valid
items has loss 0 (or 1 for the metric losses, whose metric is 0 there).

The baselines also take ``segments[..., n]`` (integer ids: several lists packed
in one row, rax's convention; items interact only within their segment) and
``num_segments`` (``S``, default ``n``), and return then ``[..., S]``: one loss per
list, slot ``s`` holding the list of the ``s``-th smallest id, as the metrics do
(docs/segments.rst); each equals the loss of the same list padded apart. ``weights[..., n]`` weighs the
items where rax does (the label distribution of the softmax losses, the terms
of the others, the first item of each pair), and the pairwise losses take a
``lambdaweight=`` from :mod:`jaxrank.lambdaweights`.

*Metric losses* are ``1 - metric`` with a smooth ranker from
:mod:`jaxrank.ranking.smooth`: the same metric code as evaluation, relaxed by the ranker.
*Baselines* are the classic surrogate losses, written directly.
"""

from jaxrank.losses._metric import ap_loss, metric_loss, mrr_loss, ndcg_loss
from jaxrank.losses.gbdt import gbdt_objective
from jaxrank.losses.listwise import listmle, poly1_softmax, softmax_cross_entropy, unique_softmax
from jaxrank.losses.pairwise import (
    PairLoss as PairLoss,
)
from jaxrank.losses.pairwise import (
    lambda_loss,
    pairwise_hinge,
    pairwise_logistic,
    pairwise_mse,
    pairwise_qr,
    pairwise_soft_zero_one,
)
from jaxrank.losses.pointwise import pointwise_mse, pointwise_sigmoid
from jaxrank.losses.retrieval import retrieval_loss

__all__ = [
    "ap_loss",
    "gbdt_objective",
    "lambda_loss",
    "listmle",
    "metric_loss",
    "mrr_loss",
    "ndcg_loss",
    "pairwise_hinge",
    "pairwise_logistic",
    "pairwise_mse",
    "pairwise_qr",
    "pairwise_soft_zero_one",
    "pointwise_mse",
    "pointwise_sigmoid",
    "poly1_softmax",
    "retrieval_loss",
    "softmax_cross_entropy",
    "unique_softmax",
]
