"""What a parsed measure is: :class:`Measure` (a computation family with static
parameters), the :class:`Column` s it prints, the :class:`Plan` of one evaluation, and
:class:`MeasureError`. :mod:`jaxrank.measures.parse` builds them from strings.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from jaxrank.measures._aggregate import GMEAN_FLOOR

#: trec_eval's floor for geometric means (``MIN_GEO_MEAN`` in trec_eval.h).
MIN_GEO_MEAN = GMEAN_FLOOR
#: trec_eval's ``INFAP_EPSILON``.
INFAP_EPSILON = 1e-5


class MeasureError(ValueError):
    """An unknown or malformed measure string."""


# ----------------------------------------------------------------------------- descriptions


@dataclasses.dataclass(frozen=True)
class Column:
    """One printed value per query (and/or one summary value).

    Attributes:
        name: the printed name (``P_10``, ``nDCG@10``).
        kind: ``"float"`` (printed ``%6.4f``), ``"int"`` (printed ``%ld``) or ``"str"``.
        per_query: printed for each query with ``-q``.
        summary: printed in the summary (``all``).
        agg: ``"mean"``, ``"sum"``, ``"gmean"`` (trec_eval's floored geometric mean),
            ``"count"`` (number of queries), ``"num_rel"`` (sum; with ``-c`` the number of
            qrels entries with rel > 0, as trec_eval), ``"runid"`` or ``"none"``.
        bogus_zero: with ``-c``, trec_eval 10 evaluates a query missing from the run as a run
            of one unjudged document and then clears these values (num_ret, utility, unj,
            rbp_resid, relstring, by exact name).
    """

    name: str
    kind: str = "float"
    per_query: bool = True
    summary: bool = True
    agg: str = "mean"
    bogus_zero: bool = False


@dataclasses.dataclass(frozen=True)
class Measure:
    """One requested measure: a computation family with static parameters.

    Attributes:
        family: the computation (trec_eval's measure name, or an ir_measures-only one such as
            ``"err"``, ``"judged"``, ``"rr_cut"``, ``"ndcg_exp"``, ``"rbp_bin"``; ranx's
            ``"f1"``, ``"dcg_cut"``, ``"dcg_exp"``, ``"rbp_gain"``).
        columns: the values it produces, in order.
        cuts: cutoffs (int), recall or multiplier cutoffs (float) or float parameters.
        pairs: ``(name, value)`` parameters (gains ``"2"=9.0``, ``"p"=0.8``).
        level: relevance level; None means the evaluation's level (``-l``).
        judged_only: evaluate on judged documents only (ir_measures' ``judged_only``).
        source: the string it was parsed from.
    """

    family: str
    columns: tuple[Column, ...]
    cuts: tuple = ()
    pairs: tuple[tuple[str, float], ...] = ()
    level: Optional[int] = None
    judged_only: bool = False
    source: str = ""


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything :func:`compute` needs besides the arrays (hashable: a jit static argument).

    Attributes:
        measures: the measures, in output order.
        level: trec_eval ``-l``: rel >= level is relevant.
        num_docs: trec_eval ``-N``: documents in the collection (``utility``).
        version: ``"10"`` (trec_eval 10.0, the reference outputs) or ``"9"`` (trec_eval 9.x
            as bundled in pytrec_eval: interpolated-precision cutoffs ``(long)(x R + 0.9)``
            instead of ``lround(x R)``, and scores compared as float32).
    """

    measures: tuple[Measure, ...]
    level: int = 1
    num_docs: int = 0
    version: str = "10"
