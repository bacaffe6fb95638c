"""The pairwise losses' lambdaweights; they live in :mod:`jaxrank.losses.lambdaweights`."""

from jaxrank.losses.lambdaweights import PairWeight, dcg, dcg2, labeldiff, pair_weight

__all__ = ["PairWeight", "dcg", "dcg2", "labeldiff", "pair_weight"]
