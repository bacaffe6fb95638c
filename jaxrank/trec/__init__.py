"""The TREC layer: trec_eval-compatible evaluation of qrels and runs.

Modules, bottom up: :mod:`~jaxrank.trec.files` (qrels and run files <-> arrays; the byte
parser in ``_parse.py``, ordering and matching in ``_join.py``),
:mod:`~jaxrank.trec.measures` (measure strings -> descriptions),
:mod:`~jaxrank.trec.kernels` (one computation per measure family, over the shared ranking;
those outside the ``Ranks`` operations in ``_ranked_list.py``),
:mod:`~jaxrank.trec.engine` (the jitted stages, compilation, batch shapes) and
:mod:`~jaxrank.trec.evaluate` (:func:`evaluate` and :class:`Report`). The command line
(``jaxrank eval``) is :mod:`jaxrank.cli`. Diversity (subtopic qrels, ndeval's measures and
output): :mod:`~jaxrank.trec.diversity`.

>>> from jaxrank import trec
>>> round(trec.evaluate(*trec.demo_paths(), "map")["map"], 4) > 0
True
"""

from jaxrank.trec.diversity import read_subtopic_qrels
from jaxrank.trec.evaluate import Report, evaluate, report
from jaxrank.trec.files import (
    Batch,
    Qrels,
    Run,
    TrecFormatError,
    demo_paths,
    read_qrels,
    read_run,
    to_batch,
    write_run,
)
from jaxrank.trec.measures import MeasureError, measure_names, parse_measures

__all__ = [
    "Batch",
    "MeasureError",
    "Qrels",
    "Report",
    "Run",
    "TrecFormatError",
    "demo_paths",
    "evaluate",
    "measure_names",
    "parse_measures",
    "read_qrels",
    "read_run",
    "read_subtopic_qrels",
    "report",
    "to_batch",
    "write_run",
]
