"""Dense retrieval evaluation without the query x corpus matrix.

:func:`search` finds the ``k`` documents of highest inner product for every
query, one block of the corpus at a time, keeping only a running top-``k``;
:func:`join` reads the labels of the retrieved ids from the qrels. Every metric
then applies to the result, with ``judgments=`` for trec_eval semantics::

    scores, ids = jaxrank.retrieval.search(queries, corpus, k=100)
    labels, judged = jaxrank.retrieval.join(ids, judged_ids, judged_labels)
    jaxrank.ndcg(scores, labels, k=10, where=ids >= 0,
                 judgments=judged_labels, judgments_where=judged_ids >= 0)

The top-``k`` of :func:`search` is *retrieval*: it chooses which documents
enter the list. Ranking that list for a metric is the metric's business, through
the ranking primitive (:func:`jaxrank.hard` or a soft ranker); the order that
:func:`search` returns (score descending, lower id first) is the order the
stable hard ranker gives the same scores, so the two agree.

Memory and sharding are described in ``docs/scale.md``.
"""

from jaxrank.lists import join
from jaxrank.retrieval._search import Array as Array
from jaxrank.retrieval._search import AxisName as AxisName
from jaxrank.retrieval._search import search

__all__ = ["join", "search"]
