"""Data set files: learning-to-rank svmlight / LETOR files (read by :mod:`jaxrank.lists`) and
retrieval collections in BEIR's layout (read by :mod:`jaxrank.trec.beir`)."""

from jaxrank.lists import SvmlightData, pad_queries, read_svmlight
from jaxrank.trec.beir import Beir, read_beir

__all__ = ["Beir", "SvmlightData", "pad_queries", "read_beir", "read_svmlight"]
