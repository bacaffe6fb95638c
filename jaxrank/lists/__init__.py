"""Data to padded lists: flat ``preds, target, indexes`` grouped by query
(:mod:`~jaxrank.lists._grouping`), retrieved ids joined with the qrels
(:mod:`~jaxrank.lists._join`), svmlight / LETOR files read into ``[query, doc, feature]``
arrays (:mod:`~jaxrank.lists._svmlight`). Every metric and loss takes what they return.
"""

from jaxrank.lists._grouping import Grouped, group_by_query
from jaxrank.lists._join import join
from jaxrank.lists._svmlight import SvmlightData, pad_queries, read_svmlight

__all__ = ["Grouped", "SvmlightData", "group_by_query", "join", "pad_queries", "read_svmlight"]
