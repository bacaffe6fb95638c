"""The TREC layer: trec_eval's and ndeval's files, modes and output over the measure engine.

Modules, bottom up: :mod:`~jaxrank.trec.files` (qrels and run files <-> arrays, BEIR's
qrels among them; the byte parser in ``_parse.py``, trec_eval's order and matching in
``join.py``), :mod:`~jaxrank.trec.beir` (a collection in BEIR's layout: corpus, queries, qrels),
``_report.py`` (:class:`Report`, trec_eval's summary, ``-Z``'s conversion),
:mod:`~jaxrank.trec.evaluate` (:func:`evaluate`, :func:`report`: each mode's reader and
the engine of :mod:`jaxrank.measures`), trec_eval's other modes
(:mod:`~jaxrank.trec.zscores` ``-Z``, :mod:`~jaxrank.trec.judgment_groups` ``-R qrels_jg``,
:mod:`~jaxrank.trec.preferences` ``-R prefs``), and diversity: subtopic qrels and ndeval
runs (:mod:`~jaxrank.trec.subtopics`), ir_measures' diversity names
(:mod:`~jaxrank.trec.diversity`) and ndeval's table and text
(:mod:`~jaxrank.trec.ndeval`). The command line (``jaxrank eval``) is :mod:`jaxrank.cli`.

>>> from jaxrank import trec
>>> round(trec.evaluate(*trec.demo_paths(), "map")["map"], 4) > 0
True
"""

from jaxrank.measures import MeasureError, measure_names, parse_measures
from jaxrank.trec._report import Report
from jaxrank.trec.beir import Beir, read_beir
from jaxrank.trec.evaluate import evaluate, report
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
from jaxrank.trec.subtopics import read_subtopic_qrels

__all__ = [
    "Batch",
    "Beir",
    "MeasureError",
    "Qrels",
    "Report",
    "Run",
    "TrecFormatError",
    "demo_paths",
    "evaluate",
    "measure_names",
    "parse_measures",
    "read_beir",
    "read_qrels",
    "read_run",
    "read_subtopic_qrels",
    "report",
    "to_batch",
    "write_run",
]
