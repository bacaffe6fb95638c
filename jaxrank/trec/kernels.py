"""Measure strings -> metric calls, all computed in one jitted function.

Two spellings are accepted, and may be mixed:

* **trec_eval** names, with trec_eval's parameter syntax after the first dot: ``map``,
  ``P.5,10``, ``ndcg_cut.10``, ``ndcg.1=3,2=9``, ``iprec_at_recall..25,.5``, and the
  nicknames ``official`` (trec_eval's default), ``set`` and ``all_trec``. Every measure of
  ``trec_eval -m all_trec`` (version 10.0) is here, plus ``dcg`` and ``ideal_dcg``.
* **ir_measures** strings: ``nDCG@10``, ``nDCG(dcg='exp-log2')@10``, ``P(rel=2)@5``,
  ``R@100``, ``AP``, ``AP@100``, ``RR``, ``RR@10``, ``ERR@20``, ``Judged@10``, ``infAP``,
  ``IPrec@0.5``, ``Bpref``, ``Rprec``, ``Success@5``, ``SetP``, ``SetR``, ``SetF(beta=0.5)``,
  ``SetAP``, ``NumQ``, ``NumRel``, ``NumRet(rel=1)``, ``RBP(p=0.8)`` and the aliases ``MAP``,
  ``MRR``, ``NDCG``, ``BPref``, ``RPrec``, ``NumRelRet``, ``SetRelP``.

:func:`parse_measures` turns strings into a tuple of :class:`Measure`; :func:`compute` evaluates
them all on a padded batch inside **one** ``jax.jit`` (the measure list is static): the run is
ranked once with ``jaxrank.hard("stable")`` (documents come pre-ordered so that this is
trec_eval's order) and that :class:`~jaxrank.ranking.HardRanks` is passed to the functions of
:mod:`jaxrank.metrics` as ``ranker=``. Measures that :mod:`jaxrank.metrics` has (P, recall,
AP, R-precision, RR, nDCG, success, ERR, counts, ...) are those functions; the others are
written here over the same ranks: through the Ranks operations where the measure is linear in
the ranked items (rbp, unj, Judged), and over the ranked relevance values (``ranks.order``)
where it is not (bpref, infAP, interpolated precision, G, ndcg_rel, Rndcg: their terms depend
on prefix counts through min, max or a logarithm).

Relevance values follow trec_eval's ``form_res_rels``: a retrieved document has its qrels rel
when judged (rel >= 0), -1 when absent from the qrels and -2 when in the qrels with a negative
rel (pooled but unjudged); "relevant" means rel >= the level (``-l``), except that nDCG-style
gains use the raw rels and ignore the level, as trec_eval does.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import functools
import re
from collections.abc import Callable, Iterable
from typing import Any, Optional, Union

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import metrics
from jaxrank.aggregate import GMEAN_FLOOR
from jaxrank.ranking import HardRanks, hard
from jaxrank.ranking._backend import cumsum, row_sum

__all__ = [
    "Column",
    "Compiled",
    "Lowered",
    "Measure",
    "MeasureError",
    "Plan",
    "compute",
    "lower_plan",
    "measure_names",
    "parse_measures",
]

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
            ``"err"``, ``"judged"``, ``"rr_cut"``, ``"ndcg_exp"``, ``"rbp_bin"``).
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


# ----------------------------------------------------------------------------- trec_eval names

_LONG_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_TENTHS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

# name -> (parameter style, default). In trec_eval's table order, which is the print order.
_TREC: dict[str, tuple[str, object]] = {
    "runid": ("none", None),
    "num_q": ("none", None),
    "num_ret": ("none", None),
    "num_rel": ("none", None),
    "num_rel_ret": ("none", None),
    "map": ("none", None),
    "gm_map": ("none", None),
    "Rprec": ("none", None),
    "bpref": ("none", None),
    "recip_rank": ("none", None),
    "iprec_at_recall": ("dcut", _TENTHS),
    "P": ("lcut", _LONG_CUTS),
    "relstring": ("dparams", (10.0,)),
    "recall": ("lcut", _LONG_CUTS),
    "infAP": ("none", None),
    "gm_bpref": ("none", None),
    "Rprec_mult": ("dcut", (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)),
    "utility": ("dparams", (1.0, -1.0, 0.0, 0.0)),
    "11pt_avg": ("dparams", _TENTHS),
    "binG": ("none", None),
    "G": ("pairs", ()),
    "dcg": ("pairs", ()),
    "ideal_dcg": ("pairs", ()),
    "ndcg": ("pairs", ()),
    "ndcg_rel": ("pairs", ()),
    "Rndcg": ("pairs", ()),
    "ndcg_cut": ("lcut", _LONG_CUTS),
    "map_cut": ("lcut", _LONG_CUTS),
    "relative_P": ("lcut", _LONG_CUTS),
    "success": ("lcut", (1, 5, 10)),
    "set_P": ("none", None),
    "set_relative_P": ("none", None),
    "set_recall": ("none", None),
    "set_map": ("none", None),
    "set_F": ("dparams", (1.0,)),
    "num_nonrel_judged_ret": ("none", None),
    "rbp": ("pairs", ()),
    "rbp_resid": ("pairs", ()),
    "unj": ("lcut", (5, 10, 20)),
}
_TREC_ORDER = {name: i for i, name in enumerate(_TREC)}

# trec_eval measures that need other input formats (preferences, judgment groups).
_TREC_UNSUPPORTED = (
    "prefs_num_prefs_poss", "prefs_num_prefs_ful", "prefs_num_prefs_ful_ret", "prefs_simp",
    "prefs_pair", "prefs_avgjg", "prefs_avgjg_Rnonrel", "prefs_simp_ret", "prefs_pair_ret",
    "prefs_avgjg_ret", "prefs_avgjg_Rnonrel_ret", "prefs_simp_imp", "prefs_pair_imp",
    "prefs_avgjg_imp", "map_avgjg", "P_avgjg", "Rprec_mult_avgjg", "yaap",
)

_NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P"),
    "set": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_P",
            "set_recall", "set_relative_P", "set_map", "set_F"),
    "all_trec": ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map",
                 "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P", "relstring",
                 "recall", "unj", "rbp", "rbp_resid", "infAP", "gm_bpref", "utility",
                 "11pt_avg", "ndcg", "relative_P", "Rprec_mult", "success", "map_cut",
                 "ndcg_cut", "ndcg_rel", "Rndcg", "binG", "G", "set_P", "set_recall",
                 "set_relative_P", "set_map", "set_F", "num_nonrel_judged_ret"),
}

_LONG_KIND = ("num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")

_ATOF = re.compile(
    r"[ \t\n\v\f\r]*([+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan))", re.I
)
_ATOL = re.compile(r"[ \t\n\v\f\r]*([+-]?\d+)")


def _atof(text: str) -> float:
    """C ``atof``: the longest number at the start, 0.0 if none."""
    m = _ATOF.match(text)
    return float(m.group(1)) if m else 0.0


def _atol(text: str) -> int:
    """C ``atol``: the integer at the start, 0 if none."""
    m = _ATOL.match(text)
    return int(m.group(1)) if m else 0


def _valid_int(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    return bool(body) and all(c in "0123456789" for c in body)


def _trec_measure(name: str, params: Optional[str]) -> Measure:
    """A trec_eval measure with trec_eval's parameter parsing (``meas_init.c``)."""
    style, default = _TREC[name]
    printable = None
    cuts: tuple = ()
    pairs: tuple = ()
    if style == "lcut":
        cuts = tuple(default)
        if params is not None:
            values = sorted(_atol(p) for p in params.split(","))
            if values[0] <= 0:
                raise MeasureError(f"{name}.{params}: cutoffs must be positive")
            if len(set(values)) != len(values):
                raise MeasureError(f"{name}.{params}: duplicate cutoffs")
            cuts = tuple(values)
        names = tuple(f"{name}_{c}" for c in cuts)
    elif style == "dcut":
        cuts = tuple(default)
        if params is not None:
            values = sorted(_atof(p) for p in params.split(","))
            if len(set(values)) != len(values):
                raise MeasureError(f"{name}.{params}: duplicate cutoffs")
            cuts = tuple(values)
        names = tuple(f"{name}_{c:3.2f}" for c in cuts)
    elif style == "dparams":
        cuts = tuple(default)
        if params is not None:
            cuts = tuple(_atof(p) for p in params.split(","))
            printable = params
        names = (name if printable is None else f"{name}_{printable}",)
        if name == "utility" and len(cuts) != 4:
            raise MeasureError(f"{name}.{params}: utility takes 4 coefficients, got {len(cuts)}")
    elif style == "pairs":
        if params is not None:
            items = params.split(",")
            if any(item.count("=") != 1 or not item.split("=")[0] for item in items):
                raise MeasureError(f"{name}.{params}: parameters must be name=value pairs")
            pairs = tuple((k, _atof(v)) for k, v in (item.split("=") for item in items))
            printable = params
        names = (name if printable is None else f"{name}_{printable}",)
    else:
        names = (name,)
    if name == "runid":
        columns = (Column("runid", kind="str", per_query=False, agg="runid"),)
    elif name == "num_q":
        columns = (Column("num_q", kind="int", per_query=False, agg="count"),)
    elif name in ("gm_map", "gm_bpref"):
        columns = (Column(name, per_query=False, agg="gmean"),)
    elif name == "relstring":
        columns = (Column(names[0], kind="str", summary=False, agg="none",
                          bogus_zero=names[0] == "relstring"),)
    elif name in _LONG_KIND:
        agg = "num_rel" if name == "num_rel" else "sum"
        columns = (Column(name, kind="int", agg=agg, bogus_zero=name == "num_ret"),)
    else:
        columns = tuple(
            Column(n, bogus_zero=n in ("utility", "rbp_resid") or n.startswith("unj")) for n in names
        )
    return Measure(name, columns, cuts=cuts, pairs=pairs, source=name if params is None else f"{name}.{params}")


# ----------------------------------------------------------------------------- ir_measures names

_REQ = object()  # a required parameter


def _fixed(family: str) -> Callable[[dict, str], tuple]:
    """A measure computed by one trec family whatever its parameters."""
    return lambda p, text: (family, {})


def _by_cutoff(whole: str, cut: str) -> Callable[[dict, str], tuple]:
    """``whole`` without a cutoff, ``cut`` with one."""
    return lambda p, text: (whole if p["cutoff"] is None else cut, {})


def _ndcg_spec(p: dict, text: str) -> tuple:
    gains, pairs = p["gains"], ()
    if gains is not None:
        if not isinstance(gains, dict) or not all(
            isinstance(k, int) and isinstance(v, (int, float)) for k, v in gains.items()
        ):
            raise MeasureError(f"{text!r}: gains must be a dict of int -> number")
        pairs = tuple((str(k), float(v)) for k, v in gains.items())
    if p["dcg"] == "exp-log2":
        if pairs:
            raise MeasureError(f"{text!r}: gains cannot be combined with dcg='exp-log2'")
        return "ndcg_exp", {}
    if p["dcg"] != "log2":
        raise MeasureError(f"{text!r}: dcg must be 'log2' or 'exp-log2'")
    return ("ndcg" if p["cutoff"] is None else "ndcg_cut"), {"pairs": pairs}


def _iprec_spec(p: dict, text: str) -> tuple:
    recall = p["recall"]
    if isinstance(recall, bool) or not isinstance(recall, (int, float)):
        raise MeasureError(f"{text!r}: the recall level must be a number")
    return "iprec_at_recall", {"cuts": (float(recall),)}


def _rbp_spec(p: dict, text: str) -> tuple:
    prob = p["p"]
    if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0 < prob < 1:
        raise MeasureError(f"{text!r}: p must be in (0, 1), got {prob!r}")
    return ("rbp" if p["rel"] is None else "rbp_bin"), {"pairs": (("p", float(prob)),)}


def _count(family: str, agg: str, **column) -> Callable[[dict, str], tuple]:
    """A count measure: an int column summed (or counted) over queries."""
    return lambda p, text: (family, {"column": Column(text.strip(), kind="int", agg=agg, **column)})


def _num_ret_spec(p: dict, text: str) -> tuple:
    column = Column(text.strip(), kind="int", agg="sum", bogus_zero=p["rel"] is None)
    return ("num_ret" if p["rel"] is None else "num_rel_ret"), {"column": column}


@dataclasses.dataclass(frozen=True)
class _IrSpec:
    params: dict  # name -> default (_REQ: required)
    family: Callable[[dict, str], tuple]  # (params, text) -> (trec family, Measure overrides)
    at: Optional[str] = "cutoff"  # the parameter written after '@'


# ir_measures name -> its parameters and the trec family that computes it
_IR: dict[str, _IrSpec] = {
    "P": _IrSpec({"cutoff": _REQ, "rel": None, "judged_only": False}, _fixed("P")),
    "R": _IrSpec({"cutoff": _REQ, "rel": None, "judged_only": False}, _fixed("recall")),
    "AP": _IrSpec({"cutoff": None, "rel": None, "judged_only": False}, _by_cutoff("map", "map_cut")),
    "RR": _IrSpec({"cutoff": None, "rel": None, "judged_only": False}, _by_cutoff("recip_rank", "rr_cut")),
    "nDCG": _IrSpec({"cutoff": None, "dcg": "log2", "gains": None, "judged_only": False}, _ndcg_spec),
    "ERR": _IrSpec({"cutoff": None}, _fixed("err")),
    "Judged": _IrSpec({"cutoff": None}, _fixed("judged")),
    "infAP": _IrSpec({"rel": None}, _fixed("infAP"), at=None),
    "IPrec": _IrSpec({"recall": _REQ, "rel": None, "judged_only": False}, _iprec_spec, at="recall"),
    "Bpref": _IrSpec({"rel": None}, _fixed("bpref"), at=None),
    "Rprec": _IrSpec({"rel": None, "judged_only": False}, _fixed("Rprec"), at=None),
    "Success": _IrSpec({"cutoff": _REQ, "rel": None, "judged_only": False}, _fixed("success")),
    "SetP": _IrSpec({"rel": None, "relative": False, "judged_only": False},
                    lambda p, text: ("set_relative_P" if p["relative"] else "set_P", {}), at=None),
    "SetR": _IrSpec({"rel": None}, _fixed("set_recall"), at=None),
    "SetF": _IrSpec({"rel": None, "beta": 1.0, "judged_only": False},
                    lambda p, text: ("set_F", {"cuts": (float(p["beta"]),)}), at=None),
    "SetAP": _IrSpec({"rel": None, "judged_only": False}, _fixed("set_map"), at=None),
    "NumQ": _IrSpec({}, _count("num_q", "count", per_query=False), at=None),
    "NumRel": _IrSpec({"rel": None}, _count("num_rel", "sum"), at=None),
    "NumRet": _IrSpec({"rel": None}, _num_ret_spec, at=None),
    "RBP": _IrSpec({"cutoff": None, "p": 0.8, "rel": None}, _rbp_spec),
}
_IR_ALIASES: dict[str, tuple[str, dict]] = {
    "MAP": ("AP", {}),
    "MRR": ("RR", {}),
    "NDCG": ("nDCG", {}),
    "BPref": ("Bpref", {}),
    "RPrec": ("Rprec", {}),
    "Precision": ("P", {}),
    "Recall": ("R", {}),
    "NumRelRet": ("NumRet", {"rel": 1}),
    "SetRelP": ("SetP", {"relative": True}),
}


def _ir_syntax(text: str) -> tuple[str, dict, object]:
    """``Name(k=v, ...)@at`` -> (name, params, at); raises MeasureError."""
    head = re.split(r"[.(@]", text.strip(), maxsplit=1)[0].strip()
    if head not in _IR and head not in _IR_ALIASES:
        raise MeasureError(_unknown(text))
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        raise MeasureError(f"cannot parse measure {text!r}") from None
    at = None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
        try:
            at = ast.literal_eval(node.right)
        except ValueError:
            raise MeasureError(f"{text!r}: the value after '@' must be a number") from None
        node = node.left
    params = {}
    if isinstance(node, ast.Call):
        if node.args:
            raise MeasureError(f"{text!r}: parameters must be named (e.g. rel=2)")
        for kw in node.keywords:
            try:
                params[kw.arg] = ast.literal_eval(kw.value)
            except ValueError:
                raise MeasureError(f"{text!r}: the value of {kw.arg} must be a literal") from None
        node = node.func
    if not isinstance(node, ast.Name):
        raise MeasureError(f"cannot parse measure {text!r}")
    return node.id, params, at


def _ir_measure(text: str) -> Measure:
    name, given, at = _ir_syntax(text)
    if name in _IR_ALIASES:
        name, implied = _IR_ALIASES[name]
        given = {**implied, **given}
    if name not in _IR:
        raise MeasureError(_unknown(text))
    spec = _IR[name]
    if at is not None:
        if spec.at is None:
            raise MeasureError(f"{text!r}: {name} takes no '@' value")
        if spec.at in given:
            raise MeasureError(f"{text!r}: {spec.at} given twice")
        given[spec.at] = at
    for key in given:
        if key not in spec.params:
            raise MeasureError(f"{text!r}: {name} has no parameter {key!r} (it has {sorted(spec.params)})")
    p = {k: given.get(k, d) for k, d in spec.params.items()}
    for key, value in p.items():
        if value is _REQ:
            raise MeasureError(f"{text!r}: {name} needs {'@' if key == spec.at else key + '='}{key}")
    cutoff = p.get("cutoff")
    if cutoff is not None and (isinstance(cutoff, bool) or not isinstance(cutoff, int) or cutoff <= 0):
        raise MeasureError(f"{text!r}: the cutoff must be a positive integer, got {cutoff!r}")
    rel = p.get("rel")
    if rel is not None and (isinstance(rel, bool) or not isinstance(rel, int)):
        raise MeasureError(f"{text!r}: rel must be an integer, got {rel!r}")
    family, overrides = spec.family(p, text)
    fields = {"cuts": () if cutoff is None else (cutoff,), "pairs": (), "column": Column(text.strip())}
    fields.update(overrides)
    return Measure(family, (fields["column"],), cuts=fields["cuts"], pairs=fields["pairs"], level=rel,
                   judged_only=bool(p.get("judged_only", False)), source=text.strip())


# ----------------------------------------------------------------------------- parsing


def measure_names() -> list[str]:
    """Every accepted measure name: trec_eval names and nicknames, ir_measures names."""
    return list(_TREC) + list(_NICKNAMES) + list(_IR) + list(_IR_ALIASES)


def _by_lower(names: Iterable[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in names:
        out.setdefault(n.lower(), []).append(n)
    return out


def _ir_target(name: str) -> tuple[str, tuple]:
    base, implied = _IR_ALIASES.get(name, (name, {}))
    return base, tuple(sorted(implied.items()))


def _respelled(text: str) -> Optional[str]:
    """``text`` in jaxrank's spelling when it differs from an accepted measure only in case
    or separator and names one measure: ``ndcg@10`` -> ``nDCG@10``, ``NDCG_CUT.10`` and
    ``ndcg_cut_10`` (trec_eval's printed name) -> ``ndcg_cut.10``; else None."""
    head, tail = re.fullmatch(r"([^.(@]*)(.*)", text, re.S).groups()
    if tail[:1] in ("(", "@"):
        names = _by_lower(list(_IR) + list(_IR_ALIASES)).get(head.lower(), [])
        return names[0] + tail if len({_ir_target(n) for n in names}) == 1 else None
    trec = _by_lower(list(_TREC) + list(_NICKNAMES))
    if len(trec.get(head.lower(), [])) == 1:
        return trec[head.lower()][0] + tail
    ir = _by_lower(list(_IR) + list(_IR_ALIASES)).get(text.lower(), [])
    if len({_ir_target(n) for n in ir}) == 1:
        return ir[0]
    printed = re.fullmatch(r"(\w+?)_(\d+(?:\.\d+)?)", text)  # a cutoff measure's printed name
    if printed:
        names = [n for n in trec.get(printed[1].lower(), []) if _TREC.get(n, ("",))[0] in ("lcut", "dcut")]
        if len(names) == 1:
            return f"{names[0]}.{printed[2]}"
    return None


def _cutoff_spellings(text: str) -> list[str]:
    """ir_measures and trec_eval spellings of ``name<sep>k`` (``ndcg_10``: ``nDCG@10``,
    ``ndcg_cut.10``)."""
    m = re.fullmatch(r"(\w+?)[_.@](\d+)", text)
    if not m:
        return []
    head, k = m[1].lower(), m[2]
    ir = [n for n in list(_IR) if n.lower() == head and _IR[n].at == "cutoff"]
    trec = [n for n in _TREC if n.lower() in (head, head + "_cut") and _TREC[n][0] == "lcut"]
    return [f"{n}@{k}" for n in ir] + [f"{n}.{k}" for n in trec]


def _unknown(text: str) -> str:
    head = re.split(r"[.(@]", text.strip(), maxsplit=1)[0]
    spelled = _cutoff_spellings(text.strip())
    if spelled:
        return f"unknown measure {text.strip()!r}; did you mean {', '.join(spelled)}?"
    close = difflib.get_close_matches(head, measure_names(), n=4, cutoff=0.5)
    if not close:
        close = difflib.get_close_matches(head.lower(), [n.lower() for n in measure_names()], n=4)
        lower = {n.lower(): n for n in measure_names()}
        close = [lower[c] for c in close]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return f"unknown measure {text.strip()!r}{hint}"


def parse_measures(strings: Union[str, Iterable[str], None]) -> tuple[Measure, ...]:
    """Measures from strings, in output order.

    trec_eval measures come first, in trec_eval's order, each once: a measure named several
    times keeps the parameters of its first mention that has some (``-m all_trec -m P.5``
    prints ``P_5`` only), as trec_eval does. ir_measures strings follow in the order given.
    ``None`` means trec_eval's default set (``official``).

    Raises:
        MeasureError: an unknown measure (the message names the closest ones) or bad parameters.

    >>> [c.name for m in parse_measures(["P.10,5", "nDCG@10"]) for c in m.columns]
    ['P_5', 'P_10', 'nDCG@10']
    """
    if strings is None:
        strings = ["official"]
    elif isinstance(strings, str):
        strings = [strings]
    trec_params: dict[str, Optional[str]] = {}
    ir: list[Measure] = []
    seen_ir: set[str] = set()
    for text in strings:
        if not isinstance(text, str):
            raise MeasureError(f"a measure must be a string, got {text!r}")
        s = text.strip()
        if not s:
            raise MeasureError("empty measure name")
        name, dot, params = s.partition(".")
        if name not in _NICKNAMES and name not in _TREC and name not in _TREC_UNSUPPORTED:
            head = re.split(r"[.(@]", s, maxsplit=1)[0].strip()
            if head not in _IR and head not in _IR_ALIASES:
                s = _respelled(s) or s
                name, dot, params = s.partition(".")
        if name in _NICKNAMES or name in _TREC:
            if dot and not params:
                raise MeasureError(f"{s!r}: nothing after the '.'")
            for member in _NICKNAMES.get(name, (name,)):
                if member not in trec_params or trec_params[member] is None:
                    trec_params[member] = params if (dot and member == name) else trec_params.get(member)
            continue
        if name in _TREC_UNSUPPORTED:
            raise MeasureError(f"{s!r}: trec_eval's preference and judgment-group measures are not supported")
        if s in seen_ir:
            continue
        seen_ir.add(s)
        ir.append(_ir_measure(s))
    trec = [_trec_measure(n, trec_params[n]) for n in sorted(trec_params, key=_TREC_ORDER.get)]
    return tuple(trec) + tuple(ir)


# ----------------------------------------------------------------------------- computation


def _safe_div(num, den):
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1), 0.0)


def _identity(y):
    return y


def _col(x):
    return x[..., None] if x.ndim == 1 else x


class _Ctx:
    """What every measure of one call shares: one ranking and its rank-order views.

    ``rr`` holds trec_eval's relevance values in input order (rel when judged, -1 not in
    the qrels, -2 pooled but unjudged); ``judg``/``jvalid`` the qrels rels of the query and
    the mask of the judged ones (rel >= 0), which are what trec_eval counts.
    """

    def __init__(self, plan: Plan, scores, rr, where, judg, jmask, ranks=None, ideals=None):
        self.plan = plan
        self.where = where
        self.rr = rr.astype(scores.dtype)
        self.judg = judg.astype(scores.dtype)
        self.jmask = jmask
        self.jvalid = jmask & (judg >= 0)
        self.scores = scores
        self.ranks: HardRanks = hard("stable")(scores, where, depth=None) if ranks is None else ranks
        self.n = scores.shape[-1]
        self.m = judg.shape[-1]
        self.fdtype = scores.dtype
        self._memo: dict = {("ideal", p): v for p, v in (ideals or {}).items()}

    def memo(self, key, fn):
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    def level(self, measure: Measure) -> int:
        return self.plan.level if measure.level is None else measure.level

    # -- metrics.py, with the shared ranking ----------------------------------------------
    def metric(self, fn: Callable, labels=None, judged: bool = False, **kw):
        """``fn(scores, labels, where=, ranker=ranks, **kw)``; ``judged`` adds the qrels."""
        extra = dict(judgments=self.judg, judgments_where=self.jvalid) if judged else {}
        labels = self.rr if labels is None else labels
        ranker = {} if fn is metrics.num_rel else dict(ranker=self.ranks)
        return fn(self.scores, labels, where=self.where, **ranker, **extra, **kw)

    def num_ret(self):
        return self.memo("num_ret", lambda: self.metric(metrics.num_ret))

    def num_rel(self, level):
        return self.memo(("num_rel", level), lambda: self.metric(metrics.num_rel, judged=True, rel=level))

    def num_rel_ret(self, level):
        return self.memo(("num_rel_ret", level), lambda: self.metric(metrics.num_rel_ret, rel=level))

    # -- rank-order views -----------------------------------------------------------------
    @property
    def pos(self):
        return jnp.arange(1, self.n + 1, dtype=self.fdtype)

    def valid_s(self):
        return self.memo("valid_s", self.ranks.valid_positions)

    def in_rank_order(self, v):
        """``v[..., n]`` (input order) in rank order; invalid positions hold 0."""
        return self.ranks.in_rank_order(v)

    def rr_s(self):
        return self.memo("rr_s", lambda: self.in_rank_order(self.rr))

    def rel_s(self, level):
        """Relevant (rel >= level) in rank order, as floats."""
        return self.memo(("rel_s", level), lambda: (self.valid_s() & (self.rr_s() >= level)).astype(self.fdtype))

    def cum_rel(self, level):
        return self.memo(("cum_rel", level), lambda: cumsum(self.rel_s(level)))

    # -- gains (nDCG family, rbp) ---------------------------------------------------------
    def gains(self, values, pairs):
        """trec_eval's ``get_gain``: the gain of each relevance value. Levels >= 0 default to
        the level, other values to 0; ``pairs`` with integer names override."""
        out = jnp.where(values >= 0, values, 0.0)
        for name, value in pairs:
            if _valid_int(name):
                out = jnp.where(values == int(name), value, out)
        return out

    def ideal_gains(self, pairs):
        """The gains of the judged documents, input order, 0 for the unjudged."""
        return self.memo(("ideal_gains", pairs), lambda: jnp.where(self.jvalid, self.gains(self.judg, pairs), 0.0))

    def ideal_ranks(self, pairs):
        """The exact ranking of the judged documents of positive gain by gain: the ideal
        ordering that nDCG (``metrics.ndcg(ideal_ranks=)``) and :meth:`ideal` share."""

        def build():
            g = self.ideal_gains(pairs)
            return hard("stable")(g, g > 0, depth=None)

        return self.memo(("ideal_ranks", pairs), build)

    def ideal(self, pairs):
        """Positive gains of the judged documents, sorted descending: ``[Q, m]`` (0 after)."""
        return self.memo(("ideal", pairs), lambda: self.ideal_ranks(pairs).in_rank_order(self.ideal_gains(pairs)))

    def ideal_at_positions(self, pairs):
        """The ideal gains aligned with the ``n`` retrieval positions (padded or cut)."""
        ig = self.ideal(pairs)
        if self.m >= self.n:
            return ig[..., : self.n]
        return jnp.pad(ig, [(0, 0)] * (ig.ndim - 1) + [(0, self.n - self.m)])

    def dcg_terms(self, pairs):
        """Results gains over log2(rank + 1), rank order, and their running sum."""

        def build():
            g = self.in_rank_order(self.gains(self.rr, pairs))
            terms = g * metrics.log2_discount(self.pos)
            return g, cumsum(terms)

        return self.memo(("dcg_terms", pairs), build)


# Each family: (ctx, measure) -> [Q, C] values (C = number of columns; relstring: codes).
_FAMILIES: dict[str, Callable[[_Ctx, Measure], jax.Array]] = {}


def _family(*names):
    def register(fn):
        for n in names:
            _FAMILIES[n] = fn
        return fn

    return register


@_family("runid", "num_q")
def _nothing(ctx, m):
    return jnp.zeros(ctx.scores.shape[:-1] + (1,), ctx.fdtype)


@_family("num_ret")
def _num_ret(ctx, m):
    return _col(ctx.num_ret())


@_family("num_rel")
def _num_rel(ctx, m):
    return _col(ctx.num_rel(ctx.level(m)))


@_family("num_rel_ret")
def _num_rel_ret(ctx, m):
    return _col(ctx.num_rel_ret(ctx.level(m)))


@_family("map", "gm_map")
def _map(ctx, m):
    return _col(ctx.memo(("map", ctx.level(m)), lambda: ctx.metric(
        metrics.average_precision, judged=True, rel=ctx.level(m))))


@_family("map_cut")
def _map_cut(ctx, m):
    return ctx.metric(metrics.average_precision, judged=True, rel=ctx.level(m), k=list(m.cuts))


@_family("Rprec")
def _rprec(ctx, m):
    return _col(ctx.metric(metrics.r_precision, judged=True, rel=ctx.level(m)))


@_family("Rprec_mult")
def _rprec_mult(ctx, m):
    level = ctx.level(m)
    return ctx.metric(metrics.r_precision, judged=True, rel=level, mult=[float(x) for x in m.cuts])


@_family("recip_rank")
def _recip_rank(ctx, m):
    return _col(ctx.metric(metrics.reciprocal_rank, rel=ctx.level(m)))


@_family("rr_cut")
def _rr_cut(ctx, m):
    return ctx.metric(metrics.reciprocal_rank, rel=ctx.level(m), k=list(m.cuts))


def _over_cutoffs(ctx, labels, level, cuts):
    """Hits in the top k over k, for each cutoff k, divided as trec_eval divides: XLA would
    fold a division by constants into the weights of the hit count (18 x 0.001 is not
    18 / 1000), so the divisor is made data-dependent."""
    hits = ctx.metric(metrics.num_rel_ret, labels=labels, rel=level, k=list(cuts))
    return hits / jnp.where(hits >= 0, jnp.asarray(cuts, ctx.fdtype), 1.0)


@_family("P")
def _precision(ctx, m):
    return _over_cutoffs(ctx, None, ctx.level(m), m.cuts)


@_family("recall")
def _recall(ctx, m):
    return ctx.metric(metrics.recall, judged=True, rel=ctx.level(m), k=list(m.cuts))


@_family("success")
def _success(ctx, m):
    return ctx.metric(metrics.success, rel=ctx.level(m), k=list(m.cuts))


@_family("relative_P")
def _relative_p(ctx, m):
    level = ctx.level(m)
    hits = ctx.metric(metrics.num_rel_ret, rel=level, k=list(m.cuts))
    big_r = ctx.num_rel(level)[..., None]
    return _safe_div(hits, jnp.minimum(jnp.asarray(m.cuts, ctx.fdtype), big_r))


@_family("set_P")
def _set_p(ctx, m):
    return _col(ctx.metric(metrics.precision, rel=ctx.level(m)))


@_family("set_recall")
def _set_recall(ctx, m):
    return _col(ctx.metric(metrics.recall, judged=True, rel=ctx.level(m)))


def _counts(ctx, m):
    level = ctx.level(m)
    return ctx.num_ret(), ctx.num_rel(level), ctx.num_rel_ret(level)


@_family("set_relative_P")
def _set_relative_p(ctx, m):
    ret, rel, rel_ret = _counts(ctx, m)
    return _col(jnp.where(ret > 0, _safe_div(rel_ret, jnp.minimum(ret, rel)), 0.0))


@_family("set_map")
def _set_map(ctx, m):
    ret, rel, rel_ret = _counts(ctx, m)
    return _col(_safe_div(rel_ret * rel_ret, ret * rel))


@_family("set_F")
def _set_f(ctx, m):
    ret, rel, rel_ret = _counts(ctx, m)
    x = m.cuts[0]
    p, r = _safe_div(rel_ret, ret), _safe_div(rel_ret, rel)
    return _col(jnp.where(rel_ret > 0, _safe_div((x + 1.0) * p * r, x * p + r), 0.0))


@_family("utility")
def _utility(ctx, m):
    ret, rel, rel_ret = _counts(ctx, m)
    a, b, c, d = m.cuts
    n = ctx.plan.num_docs
    return _col(a * rel_ret + b * (ret - rel_ret) + c * (rel - rel_ret) + d * (n + rel_ret - ret - rel))


@_family("num_nonrel_judged_ret")
def _num_nonrel_judged_ret(ctx, m):
    ret, _, rel_ret = _counts(ctx, m)
    unjudged = row_sum(ctx.where & (ctx.rr < 0))
    return _col(ret - unjudged - rel_ret)


@_family("unj")
def _unj(ctx, m):
    return _over_cutoffs(ctx, (ctx.rr < 0).astype(ctx.fdtype), 1, m.cuts)


@_family("judged")
def _judged(ctx, m):
    flags = (ctx.rr != -1).astype(ctx.fdtype)  # in the qrels, whatever its rel
    k = list(m.cuts) if m.cuts else None
    out = ctx.metric(metrics.precision, labels=flags, rel=1, k=k, adaptive=True)
    return out if m.cuts else _col(out)


def _whole(ctx) -> int:
    """A cutoff that keeps both the whole list and every judgment."""
    return max(ctx.n, ctx.m)


def _ndcg_rels(ctx):
    """trec_eval's ``ndcg`` and ``ndcg_cut`` (gains are the rels), ``{k: [Q]}``: one
    :func:`metrics.ndcg` call for every cutoff of the plan and the whole list (``k = n``),
    so that the judgments are put in their ideal order once. The whole list's key is
    ``max(n, m)``: the ideal DCG counts every judged document, also past the run's end."""

    def build():
        cuts = {k for m in ctx.plan.measures if m.family == "ndcg_cut" and not m.pairs for k in m.cuts}
        ks = sorted(cuts | {_whole(ctx)})
        values = ctx.metric(metrics.ndcg, judged=True, k=ks, ideal_ranks=ctx.ideal_ranks(()))
        return {k: values[..., i] for i, k in enumerate(ks)}

    return ctx.memo("ndcg_rels", build)


@_family("ndcg_cut")
def _ndcg_cut(ctx, m):
    if not m.pairs:
        return jnp.stack([_ndcg_rels(ctx)[k] for k in m.cuts], -1)
    return _ndcg_gains(ctx, m.pairs, list(m.cuts))


def _ndcg_gains(ctx, pairs, k):
    """nDCG with a gain map: gains passed as labels (results: every rel; ideal: the positive
    gains of judged documents), so the ideal is ordered by gain, as trec_eval orders it."""
    gains = ctx.gains(ctx.rr, pairs)
    ideal = ctx.ideal_gains(pairs)
    return metrics.ndcg(ctx.scores, gains, k=k, where=ctx.where, ranker=ctx.ranks, gain=_identity,
                        judgments=ideal, judgments_where=ideal > 0, ideal_ranks=ctx.ideal_ranks(pairs))


@_family("ndcg")
def _ndcg(ctx, m):
    if not m.pairs:
        return _col(_ndcg_rels(ctx)[_whole(ctx)])
    return _col(_ndcg_gains(ctx, m.pairs, None))


@_family("dcg")
def _dcg(ctx, m):
    gains = ctx.gains(ctx.rr, m.pairs)
    return _col(ctx.metric(metrics.dcg, labels=gains, gain=_identity))


@_family("ideal_dcg")
def _ideal_dcg(ctx, m):
    ig = ctx.ideal(m.pairs)
    return _col(row_sum(ig * metrics.log2_discount(jnp.arange(1, ctx.m + 1, dtype=ctx.fdtype))))


@_family("ndcg_exp")
def _ndcg_exp(ctx, m):
    k = list(m.cuts) if m.cuts else None
    out = ctx.metric(metrics.ndcg, judged=True, k=k, gain="exp", ideal_ranks=ctx.ideal_ranks(()))
    return out if m.cuts else _col(out)


@_family("err")
def _err(ctx, m):
    k = list(m.cuts) if m.cuts else None
    out = ctx.metric(metrics.err, k=k, max_label=4)
    return out if m.cuts else _col(out)


@_family("rbp_bin")
def _rbp_bin(ctx, m):
    p = dict(m.pairs)["p"]
    k = list(m.cuts) if m.cuts else None
    out = ctx.metric(metrics.rbp, rel=ctx.level(m), p=p, k=k)
    return out if m.cuts else _col(out)


def _decay(p, cuts):
    def f(pos):
        w = ((1.0 - p) * jnp.power(p, pos - 1.0))[..., None]
        if cuts:
            w = w * (pos[..., None] <= jnp.asarray(cuts, pos.dtype))
        return w

    return f


@_family("rbp")
def _rbp(ctx, m):
    """trec_eval's rbp: graded, gains rescaled to [0, 1] per query when some gain is outside
    (min and max over the gains of the levels 0..max rel of the query and the gain pairs)."""
    pairs = dict(m.pairs)
    p = pairs.get("p", 0.9)
    gain_pairs = tuple((k, v) for k, v in m.pairs if _valid_int(k))
    overridden = {int(k) for k, _ in gain_pairs}
    max_level = jnp.max(jnp.where(ctx.jvalid, ctx.judg, -1.0), axis=-1)  # -1: no level
    # smallest and largest default gain (= level) among the levels 0..max_level not overridden
    top = max_level
    for _ in range(len(overridden)):
        top = jnp.where(jnp.isin(top, jnp.asarray(sorted(overridden), ctx.fdtype)), top - 1, top)
    bottom = jnp.zeros_like(max_level)
    for _ in range(len(overridden)):
        bottom = jnp.where(jnp.isin(bottom, jnp.asarray(sorted(overridden), ctx.fdtype)), bottom + 1, bottom)
    has_default = (top >= 0) & (bottom <= max_level)
    lo = jnp.where(has_default, bottom, jnp.inf)
    hi = jnp.where(has_default, top, -jnp.inf)
    for _, v in gain_pairs:
        lo, hi = jnp.minimum(lo, v), jnp.maximum(hi, v)
    rescale = ((lo < 0) | (hi > 1))[..., None]
    g = ctx.gains(ctx.rr, gain_pairs)
    listed = ctx.rr >= 0
    for k in overridden:
        listed = listed | (ctx.rr == k)
    scaled = _safe_div(g - lo[..., None], (hi - lo)[..., None])
    g = jnp.where(rescale & listed, scaled, g)
    g = jnp.where(ctx.where, g, 0.0)
    out = ctx.ranks.linear(g, _decay(p, m.cuts))
    return out


@_family("rbp_resid")
def _rbp_resid(ctx, m):
    p = dict(m.pairs).get("p", 0.9)
    unj = (ctx.where & (ctx.rr < 0)).astype(ctx.fdtype)
    tail = jnp.power(p, ctx.num_ret())
    resid = ctx.ranks.linear(unj, _decay(p, ()))[..., 0] + tail
    return _col(jnp.where(row_sum(unj) > 0, resid, 0.0))


@_family("bpref", "gm_bpref")
def _bpref(ctx, m):
    level = ctx.level(m)

    def build():
        rr, valid = ctx.rr_s(), ctx.valid_s()
        rel = valid & (rr >= max(level, 0))
        nonrel = valid & (rr >= 0) & (rr < level)
        big_r = ctx.num_rel(level)[..., None]
        big_n = row_sum(ctx.jvalid & (ctx.judg < level))[..., None]
        before = cumsum(nonrel.astype(ctx.fdtype))  # at a relevant position: nonrel above it
        denom = jnp.minimum(big_n, big_r)
        # trec_eval: 1 - min(before, R) / min(N, R). Written as a difference of counts over
        # the count: XLA turns x / broadcast(y) into x * (1 / y), and 1 - 10 * (1 / 10)
        # would be -5.6e-17 (printed -0.0000) where trec_eval has 0.
        term = jnp.where(before > 0, (denom - jnp.minimum(before, big_r)) / jnp.where(denom > 0, denom, 1), 1.0)
        return _safe_div(row_sum(jnp.where(rel, term, 0.0)), big_r[..., 0])

    return _col(ctx.memo(("bpref", level), build))


@_family("infAP")
def _infap(ctx, m):
    level = ctx.level(m)
    rr, valid = ctx.rr_s(), ctx.valid_s()
    f = ctx.fdtype
    rel = valid & (rr >= max(level, 0))
    nonrel = (valid & (rr >= 0) & (rr < level)).astype(f)
    pooled = (valid & (rr == -2)).astype(f)
    rs = cumsum(rel.astype(f))
    nr, pu = cumsum(nonrel), cumsum(pooled)  # inclusive; equal to "before" at relevant items
    j = jnp.arange(ctx.n, dtype=f)
    fj = jnp.where(j > 0, j, 1.0)
    # trec_eval forms the counts as integers, then adds epsilon. XLA would fold the constants
    # of rs - 1 + nr + 2e-5 into nr + rs + (2e-5 - 1) and lose digits; the max()s (no-ops at
    # relevant documents, where rs >= 1) keep each count exact before epsilon is added.
    above = jnp.maximum(rs - 1.0, 0.0)
    judged_above = jnp.maximum(above + nr, 0.0)
    term = 1.0 / (fj + 1.0) + (fj / (fj + 1.0)) * ((judged_above + pu) / fj) * (
        (above + INFAP_EPSILON) / (judged_above + 2 * INFAP_EPSILON)
    )
    term = jnp.where(j == 0, 1.0, term)
    return _col(_safe_div(row_sum(jnp.where(rel, term, 0.0)), ctx.num_rel(level)))


@_family("binG")
def _bing(ctx, m):
    level = ctx.level(m)
    rel = ctx.rel_s(level)
    rs = ctx.cum_rel(level)
    i = jnp.arange(ctx.n, dtype=ctx.fdtype)
    term = jnp.where(rel > 0, 1.0 / jnp.log2(jnp.maximum(3.0 + i - rs, 2.0)), 0.0)
    return _col(_safe_div(row_sum(term), ctx.num_rel(level)))


def _interpolated(ctx, m):
    """trec_eval's interpolated precision at recall cutoffs (``iprec_at_recall``,
    ``11pt_avg``), one value per cutoff, as trec_eval's walk over the cutoffs from the last.

    At the c-th relevant document (rank r_c) the value is the best precision at any rank
    >= r_c; trec_eval turns a recall x into c = lround(x R) (trec_eval 9: (long)(x R + 0.9)).
    Precision falls between relevant documents, so that best is the largest precision at a
    relevant document with at least c relevant documents up to it: one masked max per cutoff.
    """
    level = ctx.level(m)
    cr = ctx.cum_rel(level)
    rel = ctx.rel_s(level) > 0
    prec = jnp.where(rel, cr / ctx.pos, 0.0)
    rel_ret = cr[..., -1]
    big_r = ctx.num_rel(level)

    # x R, rounded before it is used: the max keeps XLA:CPU from fusing the product into an
    # FMA with what follows (trec_eval rounds the product, then adds or rounds again)
    v = jnp.maximum(jnp.asarray(m.cuts, ctx.fdtype) * big_r[..., None], -1.0)  # [Q, C]
    if ctx.plan.version == "9":
        counts = jnp.floor(v + 0.9)
    else:
        counts = jnp.floor(v)
        counts = counts + (v - counts >= 0.5)  # lround, for v >= 0
    at_count = jnp.max(jnp.where(cr[..., None, :] >= counts[..., None], prec[..., None, :], 0.0), axis=-1)
    final = jnp.where(ctx.num_ret() > 0, jnp.max(prec, axis=-1), jnp.nan)  # 0/0 in trec_eval
    if list(m.cuts) == sorted(m.cuts):
        # increasing cutoffs (always for iprec_at_recall): trec_eval's walk reduces to this
        return jnp.where(counts > rel_ret[..., None], 0.0, jnp.where(counts >= 1, at_count, final[..., None]))
    values = [None] * len(m.cuts)  # 11pt_avg with unsorted parameters: the walk itself
    skipping = jnp.ones(rel_ret.shape, bool)
    stuck = jnp.zeros(rel_ret.shape, bool)
    walk = rel_ret
    for i in reversed(range(len(m.cuts))):
        c = counts[..., i]
        skipping = skipping & (c > rel_ret)
        match = ~skipping & ~stuck & (c >= 1) & (c <= walk)
        values[i] = jnp.where(skipping, 0.0, jnp.where(match, at_count[..., i], final))
        walk = jnp.where(match, c, walk)
        stuck = stuck | (~skipping & ~match)
    return values


def _interpolated_once(ctx, m):
    """:func:`_interpolated`, shared by ``iprec_at_recall`` and ``11pt_avg`` (same cutoffs
    by default): traced once."""
    return ctx.memo(("interpolated", ctx.level(m), tuple(m.cuts)), lambda: _interpolated(ctx, m))


@_family("iprec_at_recall")
def _iprec(ctx, m):
    values = _interpolated_once(ctx, m)
    return values if not isinstance(values, list) else jnp.stack(values, -1)


@_family("11pt_avg")
def _eleven_pt(ctx, m):
    values = _interpolated_once(ctx, m)
    if not isinstance(values, list):
        values = [values[..., i] for i in range(len(m.cuts))]
    total = jnp.zeros_like(values[0])
    for v in reversed(values):  # trec_eval's summation order
        total = total + v
    return _col(total / len(values))


@_family("G")
def _g(ctx, m):
    g, _ = ctx.dcg_terms(m.pairs)
    ig = ctx.ideal_at_positions(m.pairs)
    sum_results = cumsum(g)
    sum_cost = cumsum(jnp.maximum(ig, 1.0))
    term = jnp.where(g != 0, g / jnp.log2(2.0 + sum_cost - sum_results), 0.0)
    return _col(_safe_div(row_sum(term), row_sum(ctx.ideal(m.pairs))))


def _ideal_dcg_running(ctx, pairs):
    ig = ctx.ideal(pairs)
    return cumsum(ig * metrics.log2_discount(jnp.arange(1, ctx.m + 1, dtype=ctx.fdtype)))


@_family("ndcg_rel")
def _ndcg_rel(ctx, m):
    g, dcg = ctx.dcg_terms(m.pairs)
    ig_n = ctx.ideal_at_positions(m.pairs)
    idcg_n = cumsum(ig_n * metrics.log2_discount(ctx.pos))
    idcg_total = _ideal_dcg_running(ctx, m.pairs)[..., -1]
    r_pos = row_sum(ctx.ideal(m.pairs) > 0)
    at_rel = jnp.where(g > 0, _safe_div(dcg, idcg_n), 0.0)
    n_rel_ret = row_sum(g > 0)
    total = row_sum(at_rel) + (r_pos - n_rel_ret) * _safe_div(dcg[..., -1], idcg_total)
    return _col(jnp.where(total > 0, _safe_div(total, r_pos), 0.0))


@_family("Rndcg")
def _rndcg(ctx, m):
    level = ctx.level(m)
    _, dcg = ctx.dcg_terms(m.pairs)
    ig = ctx.ideal(m.pairs)
    idcg = _ideal_dcg_running(ctx, m.pairs)
    r_pos = row_sum(ig > 0)[..., None]
    b = jnp.arange(1, ctx.m + 1, dtype=ctx.fdtype)  # number of ideal documents before
    nxt = jnp.concatenate([ig[..., 1:], jnp.zeros_like(ig[..., :1])], -1)
    boundary = (b <= r_pos) & ((b == r_pos) | (nxt != ig))
    dcg_at = jnp.take_along_axis(dcg, jnp.broadcast_to(jnp.minimum(jnp.arange(ctx.m), ctx.n - 1), ig.shape), -1)
    # dcg has n columns; an ideal prefix longer than the list sees the whole list's DCG
    total = row_sum(jnp.where(boundary, _safe_div(dcg_at, idcg), 0.0))
    count = row_sum(boundary)
    extra = (r_pos[..., 0] + 1 < ctx.num_ret()) & (idcg[..., -1] > 0)
    total = total + jnp.where(extra, _safe_div(dcg[..., -1], idcg[..., -1]), 0.0)
    count = count + extra
    value = total / count  # 0/0 when no boundary, as trec_eval
    return _col(jnp.where(ctx.num_rel(level) > 0, value, 0.0))


@_family("relstring")
def _relstring(ctx, m):
    width = max(0, min(int(m.cuts[0]), ctx.n))
    return jnp.where(ctx.valid_s()[..., :width], ctx.rr_s()[..., :width], -100.0)


# Two jitted stages. The first holds everything that sorts -- the one ranking of the run and
# the ideal ordering of the judgments per gain map (``_Ctx.ideal_ranks``, shared by nDCG and
# by G, ndcg_rel, Rndcg) -- which on CPU are host callbacks (numpy sorts). The second, everything else, gets
# the ranks as an argument; having no host callback, its compiled code can be kept in JAX's
# persistent compilation cache across processes (``jaxrank eval`` turns that cache on).
_SORTING = frozenset({"ndcg", "ndcg_cut", "ndcg_exp"})  # call metrics.ndcg
_IDEAL = frozenset({"G", "ndcg_rel", "Rndcg", "ideal_dcg"})  # use ctx.ideal


def _split(plan: Plan):
    first = tuple(i for i, m in enumerate(plan.measures) if m.family in _SORTING)
    rest = tuple(i for i, m in enumerate(plan.measures) if m.family not in _SORTING)
    pairs = tuple(sorted({m.pairs for m in plan.measures if m.family in _IDEAL}))
    return first, rest, pairs


def _scores(plan: Plan, scores):
    if plan.version == "9":  # trec_eval 9 compares scores as C floats
        return scores.astype(jnp.float32).astype(scores.dtype)
    return scores


@functools.partial(jax.jit, static_argnames=("plan",))
def _stage_sort(plan: Plan, scores, rr, where, judg, jmask):
    first, _, pairs = _split(plan)
    ctx = _Ctx(plan, _scores(plan, scores), rr, where, judg, jmask)
    ideals = tuple(ctx.ideal(p) for p in pairs)
    return ctx.ranks, ideals, tuple(_FAMILIES[plan.measures[i].family](ctx, plan.measures[i]) for i in first)


@functools.partial(jax.jit, static_argnames=("plan",))
def _stage_rest(plan: Plan, ranks, ideals, scores, rr, where, judg, jmask):
    _, rest, pairs = _split(plan)
    ctx = _Ctx(plan, _scores(plan, scores), rr, where, judg, jmask, ranks=ranks, ideals=dict(zip(pairs, ideals)))
    return tuple(_FAMILIES[plan.measures[i].family](ctx, plan.measures[i]) for i in rest)


def _merge(plan: Plan, first_out, rest_out) -> list:
    first, rest, _ = _split(plan)
    out = [None] * len(plan.measures)
    for i, v in zip(first, first_out):
        out[i] = v
    for i, v in zip(rest, rest_out):
        out[i] = v
    return out


_DTYPES = (jnp.float64, jnp.int32, jnp.bool_, jnp.int32, jnp.bool_)


class Compiled:
    """The compiled computation of a :class:`Plan` for one batch shape (see
    :meth:`Lowered.compile`); call it with the five arrays of :func:`compute`."""

    def __init__(self, plan: Plan, sort_stage, rest_stage):
        self.plan, self._sort, self._rest = plan, sort_stage, rest_stage

    def __call__(self, scores, rr, where, judgments, judgments_where) -> list[np.ndarray]:
        # Waits for the result: two executions holding the sort's host callback, in flight
        # at once, deadlocked in an experiment (docs/trec.md); overlapping them gained nothing.
        arrays = (scores, rr, where, judgments, judgments_where)
        ranks, ideals, first_out = self._sort(*arrays)
        rest_out = self._rest(ranks, ideals, *arrays) if self._rest is not None else ()
        return [np.asarray(x) for x in _merge(self.plan, first_out, rest_out)]


@dataclasses.dataclass(frozen=True)
class Lowered:
    """The two stages of a :class:`Plan` lowered for one batch shape, not yet compiled
    (see :func:`lower_plan`)."""

    plan: Plan
    sort_stage: Any
    rest_stage: Any

    def compile(self) -> Compiled:
        """XLA's compilation: C++ that releases the GIL, so it can overlap Python work."""
        rest = self.rest_stage.compile() if self.rest_stage is not None else None
        return Compiled(self.plan, self.sort_stage.compile(), rest)


def lower_plan(plan: Plan, queries: int, n: int, m: int) -> Lowered:
    """Trace and lower :func:`compute` for ``[queries, n]`` lists and ``[queries, m]``
    judgments (float64 scores, int32 relevance values): Python work, under the GIL. Needs
    ``jax_enable_x64`` (e.g. within ``with jax.enable_x64(True)``), as the calls of the
    compiled result do."""
    shapes = [(queries, n)] * 3 + [(queries, m)] * 2
    specs = [jax.ShapeDtypeStruct(s, d) for s, d in zip(shapes, _DTYPES)]
    sort_lowered = _stage_sort.lower(plan, *specs)
    ranks, ideals, _ = sort_lowered.out_info
    rest_lowered = _stage_rest.lower(plan, ranks, ideals, *specs) if _split(plan)[1] else None
    return Lowered(plan, sort_lowered, rest_lowered)


def compute(plan: Plan, scores, rr, where, judgments, judgments_where) -> list[np.ndarray]:
    """All measures of ``plan`` for a padded batch: one ranking, two jitted stages.

    Args:
        plan: the measures and options.
        scores: ``[Q, n]`` floats, documents pre-ordered by docno descending within ties.
        rr: ``[Q, n]`` ints: trec_eval relevance values (rel if judged, -1 not in the qrels,
            -2 pooled but unjudged).
        where: ``[Q, n]`` bool, retrieved documents.
        judgments, judgments_where: ``[Q, m]`` qrels rels of each query and their mask.

    Returns:
        one ``[Q, C]`` float array per measure (``relstring``: relevance codes).
    """
    arrays = [jnp.asarray(x) for x in (scores, rr, where, judgments, judgments_where)]
    ranks, ideals, first_out = _stage_sort(plan, *arrays)
    rest_out = _stage_rest(plan, ranks, ideals, *arrays) if _split(plan)[1] else ()
    return [np.asarray(x) for x in _merge(plan, first_out, rest_out)]


def relstring_text(codes: np.ndarray) -> list[str]:
    """trec_eval's relstring characters from ``[Q, w]`` relevance codes (-100: past the end)."""
    codes = np.asarray(codes)
    if codes.shape[-1] == 0:
        return [""] * codes.shape[0]
    c = codes.astype(np.int64)
    chars = np.where(c > 9, ord(">"), np.where(c >= 0, ord("0") + np.clip(c, 0, 9),
                     np.where(c == -1, ord("-"), np.where(c == -2, ord("."), ord("<")))))
    chars = np.where(c == -100, 0, chars).astype(np.uint8)
    return np.ascontiguousarray(chars).view(f"S{chars.shape[-1]}")[:, 0].astype(str).tolist()
