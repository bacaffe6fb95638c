"""Data to padded lists: flat ``preds, target, indexes`` grouped by query
(:func:`group_by_query`), retrieved ids joined with the qrels (:func:`join`), svmlight /
LETOR files read into ``[query, doc, feature]`` arrays (:func:`read_svmlight`,
:func:`pad_queries`). Every metric and loss takes what they return.
"""

from jaxrank.lists._grouping import Grouped, group_by_query
from jaxrank.lists._join import join
from jaxrank.lists._svmlight import SvmlightData, pad_queries, read_svmlight

__all__ = ["Grouped", "SvmlightData", "group_by_query", "join", "pad_queries", "read_svmlight"]
