"""ranx 0.3's metric names as measures of the existing families.

The names are those ``ranx.evaluate`` accepts (``ranx/metrics/__init__.py``'s
``metric_switch``, read by ``ranx/meta/evaluate.py``'s ``extract_metric_and_params``):
``NAME``, ``NAME@k`` (``k = 0``: the whole run, as in ranx) and a relevance level
``NAME@k-lN`` (rel >= N relevant; the gains of ``dcg``, ``ndcg``, their ``_burges`` forms and
``rbp`` are the rels from N up, 0 below, as ranx drops the judgments under its level), and
RBP's persistence after a dot or an ``@``: ``rbp.95`` (p = 0.95). Each is computed by a
family that trec_eval's or ir_measures' names use, or by one computed from their parts:

====================  ===================================  ==========================
ranx                  without ``@k``                       with ``@k``
====================  ===================================  ==========================
``hits``              ``num_rel_ret``                      relevant in the top k
``hit_rate``          ``success`` over the whole run       ``success.k``
``precision``         ``set_P``                            ``P.k``
``recall``            ``set_recall`` (``-lN`` only: bare    ``recall.k``
                      ``recall`` is trec_eval's)
``f1``                ``set_F`` (beta 1)                   2 P R / (P + R) of ``P.k``, ``recall.k``
``r-precision``       ``Rprec``                            (no cutoff)
``mrr``               ``recip_rank``                       ``RR@k``
``map``               ``map``                              ``map_cut.k``
``dcg``               ``dcg``                              DCG of the top k
``dcg_burges``        DCG with gain 2^rel - 1              the same at k
``ndcg``              ``ndcg``                             ``ndcg_cut.k``
``ndcg_burges``       ``nDCG(dcg='exp-log2')``             ``nDCG(dcg='exp-log2')@k``
``bpref``             trec_eval's ``bpref`` (not ranx's)   (no cutoff)
``rbp.95``            RBP of the rels, p = 0.95            (no cutoff)
====================  ===================================  ==========================

The bare names that trec_eval has (``map``, ``ndcg``, ``dcg``, ``bpref``, ``recall``,
``rbp``) keep trec_eval's meaning: :func:`ranx_measure` leaves them, and ``rbp.p=0.5``,
to trec_eval's parser. Those that ir_measures' names spell alike (``ndcg@10``, ``map@100``,
``mrr@10``, ``precision@5``, ``recall@10``, ``mrr``: the same values) it leaves to the
ir_measures parser, which prints them in its spelling (``nDCG@10``); every other ranx name
is printed as given. ``bpref`` stays trec_eval's whatever its form: ranx's differs (its
value is 0 on a query without a judged non-relevant document, where trec_eval's is not).
"""

from __future__ import annotations

import re
from typing import Optional

from jaxrank.measures.names import _TREC
from jaxrank.measures.plan import Column, Measure, MeasureError

# ranx's name -> (family without a cutoff, family with one; None: it takes no cutoff)
FAMILIES: dict[str, tuple[str, Optional[str]]] = {
    "hits": ("num_rel_ret", "num_rel_ret"),
    "hit_rate": ("success", "success"),
    "precision": ("set_P", "P"),
    "recall": ("set_recall", "recall"),
    "f1": ("set_F", "f1"),
    "r-precision": ("Rprec", None),
    "mrr": ("recip_rank", "rr_cut"),
    "map": ("map", "map_cut"),
    "dcg": ("dcg", "dcg_cut"),
    "dcg_burges": ("dcg_exp", "dcg_exp"),
    "ndcg": ("ndcg", "ndcg_cut"),
    "ndcg_burges": ("ndcg_exp", "ndcg_exp"),
    "bpref": ("bpref", None),
    "rbp": ("rbp_gain", None),
}
# ranx's names that ir_measures' spell too, at a cutoff k > 0 without a level (and mrr bare):
# the ir_measures parser takes them, and prints them in its spelling (ndcg@10 as nDCG@10)
_IR_SPELLED = frozenset({"ndcg", "map", "mrr", "precision", "recall"})
# families whose gains are the rels (ranx's -lN: the levels below N gain 0)
_GAINS = frozenset({"dcg", "dcg_cut", "dcg_exp", "ndcg", "ndcg_cut", "ndcg_exp", "rbp_gain"})
_DIGITS = re.compile(r"[0-9]+")


def ranx_measure(text: str) -> Optional[Measure]:
    """``text`` as a ranx metric name, or None when it is not one (then trec_eval's or
    ir_measures' parser reads it).

    Raises:
        MeasureError: a ranx name with a bad cutoff, level or persistence.

    >>> m = ranx_measure("ndcg_burges@10-l2")
    >>> m.family, m.cuts, m.pairs
    ('ndcg_exp', (10,), (('1', 0.0),))
    >>> ranx_measure("rbp.95").pairs, ranx_measure("rbp") is None
    ((('p', 0.95),), True)
    """
    s = text.strip()
    body, has_level, level_text = s.partition("-l")
    found = re.fullmatch(r"(r-precision|[a-z_0-9]+)(?:([@.])(.*))?", body, re.S)
    if found is None or found[1] not in FAMILIES:
        return None
    name, sep, param = found[1], found[2], found[3]
    if sep == "." and (name != "rbp" or "=" in param):
        return None  # trec_eval's parameters (ndcg.1=3, rbp.p=0.5)
    if not sep and not has_level and name in _TREC:
        return None  # map, ndcg, dcg, bpref, recall, rbp: trec_eval's
    if (
        not has_level
        and name in _IR_SPELLED
        and (sep == "@" and param.strip("0").isdigit() or name == "mrr" and not sep)
    ):
        return None  # ndcg@10 is nDCG@10, mrr is MRR
    what = repr(s)
    level = None
    if has_level:
        if not _DIGITS.fullmatch(level_text):
            raise MeasureError(
                f"{what}: the relevance level of {name} (after -l) must be an integer >= 0, got {level_text!r}"
            )
        level = int(level_text)
    cuts: tuple = ()
    pairs: tuple = ()
    if name == "rbp":
        if sep is None:
            raise MeasureError(f"{what}: rbp needs its persistence p, written after a dot: rbp.95 is p=0.95")
        if not _DIGITS.fullmatch(param):
            raise MeasureError(
                f"{what}: the persistence p of rbp is the digits after 0. (rbp.95 is p=0.95), got {param!r}"
            )
        family, pairs = "rbp_gain", (("p", float(f"0.{param}")),)
    else:
        k = None
        if sep is not None:
            if not _DIGITS.fullmatch(param):
                raise MeasureError(
                    f"{what}: the cutoff k of {name} must be an integer >= 0 (0: the whole run), got {param!r}"
                )
            k = int(param) or None
        family = FAMILIES[name][0 if k is None else 1]
        if family is None:
            raise MeasureError(f"{what}: {name} takes no cutoff (ranx ignores it); write {name}")
        cuts = (1.0,) if family == "set_F" else () if k is None else (k,)
    if level is not None and family in _GAINS:
        pairs += tuple((str(r), 0.0) for r in range(1, level))
        level = None
    return Measure(family, (Column(s),), cuts=cuts, pairs=pairs, level=level, source=s)
