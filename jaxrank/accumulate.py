"""Streaming evaluation; it lives in :mod:`jaxrank.measures.accumulate`."""

from jaxrank.measures.accumulate import HOWS as HOWS
from jaxrank.measures.accumulate import Accumulator, State, accumulator, compute
from jaxrank.measures.accumulate import Measures as Measures

__all__ = ["Accumulator", "State", "accumulator", "compute"]
