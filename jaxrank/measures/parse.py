"""Measure strings -> :class:`Measure` descriptions.

Three spellings are accepted, and may be mixed:

* **trec_eval** names, with trec_eval's parameter syntax after the first dot: ``map``,
  ``P.5,10``, ``ndcg_cut.10``, ``ndcg.1=3,2=9``, ``iprec_at_recall..25,.5``, and the
  nicknames ``official`` (trec_eval's default), ``set`` and ``all_trec``. Every measure of
  ``trec_eval -m all_trec`` (version 10.0) is here, plus ``dcg`` and ``ideal_dcg``.
* **ir_measures** strings: ``nDCG@10``, ``nDCG(dcg='exp-log2')@10``, ``P(rel=2)@5``,
  ``R@100``, ``AP``, ``AP@100``, ``RR``, ``RR@10``, ``ERR@20``, ``Judged@10``, ``infAP``,
  ``IPrec@0.5``, ``Bpref``, ``Rprec``, ``Success@5``, ``SetP``, ``SetR``, ``SetF(beta=0.5)``,
  ``SetAP``, ``NumQ``, ``NumRel``, ``NumRet(rel=1)``, ``RBP(p=0.8)`` and the aliases ``MAP``,
  ``MRR``, ``NDCG``, ``BPref``, ``RPrec``, ``NumRelRet``, ``SetRelP``.
* **ranx** names (``jaxrank/measures/_ranx.py``): ``hits@5``, ``hit_rate@5``, ``f1@10``,
  ``r-precision``, ``dcg@10``, ``dcg_burges@10``, ``ndcg_burges@10``, ``rbp.95``, with
  ``-l2`` levels; the bare names trec_eval has (``map``, ``bpref``, ``recall``...) are
  trec_eval's.

:func:`parse_measures` turns strings into a tuple of :class:`Measure` (the descriptions are
defined in ``jaxrank/measures/plan.py`` and exported here; trec_eval's names, their parameters
and nicknames are the tables of ``_names.py``, ir_measures' names the table ``_IR`` below);
:mod:`jaxrank.measures.kernels` computes them, :mod:`jaxrank.measures.engine` runs them in one
jitted call.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import re
from collections.abc import Callable, Iterable
from typing import Optional, Union

from jaxrank.measures._ranx import FAMILIES as _RANX
from jaxrank.measures._ranx import ranx_measure
from jaxrank.measures.names import _NICKNAMES, _TREC, _TREC_ORDER, _TREC_UNSUPPORTED, DIVERSITY
from jaxrank.measures.plan import INFAP_EPSILON, MIN_GEO_MEAN, Column, Measure, MeasureError, Plan

__all__ = [
    "INFAP_EPSILON",
    "MIN_GEO_MEAN",
    "Column",
    "Measure",
    "MeasureError",
    "Plan",
    "measure_names",
    "parse_measures",
]

# ----------------------------------------------------------------------------- trec_eval names

_LONG_KIND = ("num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret")

_ATOF = re.compile(r"[ \t\n\v\f\r]*([+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan))", re.I)
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


def trec_measure(name: str, params: Optional[str]) -> Measure:
    """A trec_eval measure with trec_eval's parameter parsing (``meas_init.c``)."""
    style, default = _TREC[name]
    printable = None
    cuts: tuple = ()
    pairs: tuple = ()
    if style in ("lcut", "dcut"):  # integer cutoffs, or float ones printed %3.2f
        whole = style == "lcut"
        cuts = tuple(default)
        if params is not None:
            values = sorted((_atol if whole else _atof)(p) for p in params.split(","))
            if whole and values[0] <= 0:
                raise MeasureError(f"{name}.{params}: cutoffs must be positive")
            if len(set(values)) != len(values):
                raise MeasureError(f"{name}.{params}: duplicate cutoffs")
            cuts = tuple(values)
        names = tuple(f"{name}_{c}" if whole else f"{name}_{c:3.2f}" for c in cuts)
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
        columns = (Column(names[0], kind="str", summary=False, agg="none", bogus_zero=names[0] == "relstring"),)
    elif name in _LONG_KIND:
        agg = "num_rel" if name == "num_rel" else "sum"
        columns = (Column(name, kind="int", agg=agg, bogus_zero=name == "num_ret"),)
    else:
        columns = tuple(Column(n, bogus_zero=n in ("utility", "rbp_resid") or n.startswith("unj")) for n in names)
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


def _diversity_spec(family: str) -> Callable[[dict, str], tuple]:
    """A diversity measure: pyndeval computes cutoffs to ndeval's depth, 20; alpha and beta
    in [0, 1] as ndeval takes them."""

    def spec(p: dict, text: str) -> tuple:
        cutoff = p.get("cutoff")
        if cutoff is not None and not isinstance(cutoff, bool) and isinstance(cutoff, int) and cutoff > 20:
            raise MeasureError(f"{text!r}: diversity cutoffs go to 20 (ndeval's depth), got {cutoff}")
        pairs = []
        for name in ("alpha", "beta"):
            if name in p:
                value = p[name]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
                    raise MeasureError(f"{text!r}: {name} must be in [0, 1], got {value!r}")
                pairs.append((name, float(value)))
        return family, {"pairs": tuple(pairs)}

    return spec


def _diversity(family: str) -> _IrSpec:
    """ir_measures' parameters of a diversity measure (its pyndeval provider's): the
    cutoff is required where there is one, as pyndeval needs it."""
    params: dict = {} if family in ("NRBP", "nNRBP", "AP_IA") else {"cutoff": _REQ}
    if family in ("alpha_DCG", "alpha_nDCG", "NRBP", "nNRBP"):
        params["alpha"] = 0.5
    if family in ("NRBP", "nNRBP"):
        params["beta"] = 0.5
    params["rel"] = None
    if family not in ("NRBP", "nNRBP", "StRecall"):
        params["judged_only"] = False
    return _IrSpec(params, _diversity_spec(family), at="cutoff" if "cutoff" in params else None)


def _unit(prob, text: str) -> float:
    if isinstance(prob, bool) or not isinstance(prob, (int, float)) or not 0 < prob <= 1:
        raise MeasureError(f"{text!r}: p must be in (0, 1], got {prob!r}")
    return float(prob)


def _compat_spec(p: dict, text: str) -> tuple:
    if not isinstance(p["normalize"], bool):
        raise MeasureError(f"{text!r}: normalize must be True or False, got {p['normalize']!r}")
    return "compat", {"pairs": (("normalize", float(p["normalize"])), ("p", _unit(p["p"], text)))}


def _cwl(family: str, **params) -> _IrSpec:
    """A C/W/L measure of ir_measures' cwl_eval provider (``jaxrank.metrics.cwl``): integer
    ``min_rel`` < ``max_rel`` (required), ``T`` > 0, ``p`` in (0, 1], the cutoff after '@'."""

    def spec(p: dict, text: str) -> tuple:
        for key in ("min_rel", "max_rel"):
            if isinstance(p[key], bool) or not isinstance(p[key], int):
                raise MeasureError(f"{text!r}: {key} must be an integer, got {p[key]!r}")
        if p["min_rel"] >= p["max_rel"]:
            raise MeasureError(f"{text!r}: min_rel must be below max_rel, got {p['min_rel']} and {p['max_rel']}")
        pairs = [("max_rel", float(p["max_rel"])), ("min_rel", float(p["min_rel"]))]
        if "T" in p:
            t = p["T"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 < t < float("inf"):
                raise MeasureError(f"{text!r}: T must be a positive number, got {t!r}")
            pairs.append(("T", float(t)))
        if "p" in p:
            pairs.append(("p", _unit(p["p"], text)))
        if p.get("dcg", "log2") != "log2":
            raise MeasureError(f"{text!r}: dcg must be 'log2', got {p['dcg']!r}")
        return family, {"pairs": tuple(pairs)}

    params = {**params, "min_rel": 0, "max_rel": _REQ}
    return _IrSpec(params, spec, at="cutoff" if "cutoff" in params else None)


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
    "SetP": _IrSpec(
        {"rel": None, "relative": False, "judged_only": False},
        lambda p, text: ("set_relative_P" if p["relative"] else "set_P", {}),
        at=None,
    ),
    "SetR": _IrSpec({"rel": None}, _fixed("set_recall"), at=None),
    "SetF": _IrSpec(
        {"rel": None, "beta": 1.0, "judged_only": False},
        lambda p, text: ("set_F", {"cuts": (float(p["beta"]),)}),
        at=None,
    ),
    "SetAP": _IrSpec({"rel": None, "judged_only": False}, _fixed("set_map"), at=None),
    "NumQ": _IrSpec({}, _count("num_q", "count", per_query=False), at=None),
    "NumRel": _IrSpec({"rel": None}, _count("num_rel", "sum"), at=None),
    "NumRet": _IrSpec({"rel": None}, _num_ret_spec, at=None),
    "RBP": _IrSpec({"cutoff": None, "p": 0.8, "rel": None}, _rbp_spec),
    **{name: _diversity(name) for name in DIVERSITY},
    "Accuracy": _IrSpec({"cutoff": None, "rel": None}, _fixed("accuracy")),
    "Compat": _IrSpec({"p": 0.95, "normalize": True}, _compat_spec, at=None),
    "INST": _cwl("inst", T=1.0),
    "INSQ": _cwl("insq", T=1.0),
    "BPM": _cwl("bpm", cutoff=_REQ, T=1.0),
    "SDCG": _cwl("sdcg", cutoff=_REQ, dcg="log2"),
    "NERR8": _cwl("nerr8", cutoff=_REQ),
    "NERR9": _cwl("nerr9", cutoff=_REQ),
    "NERR10": _cwl("nerr10", p=0.9),
    "NERR11": _cwl("nerr11", T=1.0),
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
    "MAP_IA": ("AP_IA", {}),
    "α_DCG": ("alpha_DCG", {}),
    "α_nDCG": ("alpha_nDCG", {}),
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
            raise MeasureError(f"{text!r}: {name} needs {'@' + key if key == spec.at else key + '=...'}")
    cutoff = p.get("cutoff")
    if cutoff is not None and (isinstance(cutoff, bool) or not isinstance(cutoff, int) or cutoff <= 0):
        raise MeasureError(f"{text!r}: the cutoff must be a positive integer, got {cutoff!r}")
    rel = p.get("rel")
    if rel is not None and (isinstance(rel, bool) or not isinstance(rel, int)):
        raise MeasureError(f"{text!r}: rel must be an integer, got {rel!r}")
    family, overrides = spec.family(p, text)
    fields = {"cuts": () if cutoff is None else (cutoff,), "pairs": (), "column": Column(text.strip())}
    fields.update(overrides)
    return Measure(
        family,
        (fields["column"],),
        cuts=fields["cuts"],
        pairs=fields["pairs"],
        level=rel,
        judged_only=bool(p.get("judged_only", False)),
        source=text.strip(),
    )


# ----------------------------------------------------------------------------- parsing


def measure_names() -> list[str]:
    """Every accepted measure name: trec_eval names and nicknames, ir_measures names, ranx's
    names (those trec_eval has are trec_eval's)."""
    return list(_TREC) + list(_NICKNAMES) + list(_IR) + list(_IR_ALIASES) + [n for n in _RANX if n not in _TREC]


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
        ranx = ranx_measure(s)  # ranx's names (hits@5, rbp.95, ndcg@10-l2), printed as given
        if ranx is not None:
            if s not in seen_ir:
                seen_ir.add(s)
                ir.append(ranx)
            continue
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
    trec = [trec_measure(n, trec_params[n]) for n in sorted(trec_params, key=_TREC_ORDER.get)]
    return tuple(trec) + tuple(ir)
