"""The measure engine: measure strings to values on padded arrays, with no file in sight.

Bottom up: :mod:`~jaxrank.measures.names` (trec_eval's measure table, as data),
:mod:`~jaxrank.measures.plan` (what a parsed measure is: ``Measure``, ``Column``,
``Plan``, ``MeasureError``), :mod:`~jaxrank.measures.parse` (strings, in trec_eval's and
ir_measures' spellings, to measures), the kernels (``kernels.py``, ``_ranked_list.py``; one
per family, over the one ranking of a call, in trec_eval's double arithmetic,
``_exact.py``), :mod:`~jaxrank.measures.engine` (the jitted stages, batch shapes and the
cache of compiled programs), :mod:`~jaxrank.measures.accumulate` (:func:`compute` and the
mergeable :func:`accumulator`) and :mod:`~jaxrank.measures._aggregate` (over queries, with
an empty-query policy). The TREC file layer (:mod:`jaxrank.trec`), the command line and
:func:`jaxrank.evaluate` are built on it.

Internal API (what other jaxrank packages use by name): ``names``, ``plan``, ``parse``,
``engine.bucket`` / ``rows_per_call`` / ``reuse`` / ``executable`` / ``relstring_text``.

>>> import jax.numpy as jnp
>>> from jaxrank import measures
>>> v = measures.compute(jnp.array([[0.3, 0.9, 0.1]]), jnp.array([[1, 0, 1]]), ["P@2", "RR"])
>>> [round(float(x), 3) for x in (v["P@2"][0], v["RR"][0])]
[0.5, 0.5]
"""

from jaxrank.measures._aggregate import aggregate
from jaxrank.measures.accumulate import Accumulator, State, accumulator, compute
from jaxrank.measures.parse import MeasureError, measure_names, parse_measures
from jaxrank.measures.plan import Column, Measure, Plan

__all__ = [
    "Accumulator",
    "Column",
    "Measure",
    "MeasureError",
    "Plan",
    "State",
    "accumulator",
    "aggregate",
    "compute",
    "measure_names",
    "parse_measures",
]
