"""trec_eval's measure names, as data: each name's parameter style and default, in
trec_eval's table order (which is its print order), the nicknames (``-m official``, ``set``,
``all_trec``) and the measures that need input formats jaxrank does not read.
:mod:`jaxrank.measures.parse` parses strings against these tables.
"""

from __future__ import annotations

_LONG_CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
_TENTHS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

# trec_eval's measures in its table order, which is the print order.
_TREC_NAMES = (
    *("runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank"),
    *("iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg"),
    *("binG", "G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P"),
    *("success", "set_P", "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret"),
    *("rbp", "rbp_resid", "unj"),
)
# The parameter style and default of those that take parameters: "lcut" integer cutoffs,
# "dcut" float cutoffs, "dparams" float parameters, "pairs" name=value pairs.
_PARAMETERS: dict[str, tuple[str, tuple]] = {
    "iprec_at_recall": ("dcut", _TENTHS),
    "P": ("lcut", _LONG_CUTS),
    "relstring": ("dparams", (10.0,)),
    "recall": ("lcut", _LONG_CUTS),
    "Rprec_mult": ("dcut", (0.2, 0.4, 0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 1.8, 2.0)),
    "utility": ("dparams", (1.0, -1.0, 0.0, 0.0)),
    "11pt_avg": ("dparams", _TENTHS),
    **dict.fromkeys(("G", "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "rbp", "rbp_resid"), ("pairs", ())),
    **dict.fromkeys(("ndcg_cut", "map_cut", "relative_P"), ("lcut", _LONG_CUTS)),
    "success": ("lcut", (1, 5, 10)),
    "set_F": ("dparams", (1.0,)),
    "unj": ("lcut", (5, 10, 20)),
}
# name -> (parameter style, default), in print order.
_TREC: dict[str, tuple[str, object]] = {name: _PARAMETERS.get(name, ("none", None)) for name in _TREC_NAMES}
_TREC_ORDER = {name: i for i, name in enumerate(_TREC)}

# trec_eval's preference measures (-R prefs / qrels_prefs), in its table order
PREFS_MEASURES = (
    "prefs_num_prefs_poss",
    "prefs_num_prefs_ful",
    "prefs_num_prefs_ful_ret",
    "prefs_simp",
    "prefs_pair",
    "prefs_avgjg",
    "prefs_avgjg_Rnonrel",
    "prefs_simp_ret",
    "prefs_pair_ret",
    "prefs_avgjg_ret",
    "prefs_avgjg_Rnonrel_ret",
    "prefs_simp_imp",
    "prefs_pair_imp",
    "prefs_avgjg_imp",
)

# trec_eval measures that need other input formats (preferences, judgment groups).
_TREC_UNSUPPORTED = (*PREFS_MEASURES, "map_avgjg", "P_avgjg", "Rprec_mult_avgjg", "yaap")

# The nicknames' members, in trec_eval's nickname order (not the print order). Every
# nickname starts with the counts; all_trec starts with the whole of official.
_COUNTS = ("runid", "num_q", "num_ret", "num_rel", "num_rel_ret")
_SET = ("set_P", "set_recall", "set_relative_P", "set_map", "set_F")
_OFFICIAL = (*_COUNTS, "map", "gm_map", "Rprec", "bpref", "recip_rank", "iprec_at_recall", "P")
_NICKNAMES: dict[str, tuple[str, ...]] = {
    "official": _OFFICIAL,
    "set": (*_COUNTS, "utility", *_SET),
    "all_trec": (
        *_OFFICIAL,
        "relstring",
        "recall",
        "unj",
        "rbp",
        "rbp_resid",
        "infAP",
        "gm_bpref",
        "utility",
        "11pt_avg",
        "ndcg",
        "relative_P",
        "Rprec_mult",
        "success",
        "map_cut",
        "ndcg_cut",
        "ndcg_rel",
        "Rndcg",
        "binG",
        "G",
        *_SET,
        "num_nonrel_judged_ret",
    ),
}

# ir_measures' diversity measures (its pyndeval provider, i.e. ndeval): they read qrels whose
# second column is the subtopic (jaxrank.trec.diversity), so they are evaluated apart from the others.
# In the order of ndeval's output columns.
DIVERSITY = ("ERR_IA", "nERR_IA", "alpha_DCG", "alpha_nDCG", "NRBP", "nNRBP", "AP_IA", "P_IA", "StRecall")
