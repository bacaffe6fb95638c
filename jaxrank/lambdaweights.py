"""The pairwise losses' lambdaweights; they live in :mod:`jaxrank.losses.lambdaweights`."""

from jaxrank.losses.lambdaweights import *  # noqa: F403
from jaxrank.losses.lambdaweights import __all__  # noqa: F401
