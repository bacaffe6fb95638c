"""Learning-to-rank files; they are read by :mod:`jaxrank.lists`."""

from jaxrank.lists import SvmlightData, pad_queries, read_svmlight

__all__ = ["SvmlightData", "read_svmlight", "pad_queries"]
