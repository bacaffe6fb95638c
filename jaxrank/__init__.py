"""jaxrank: ranking metrics for JAX, exact and differentiable, over one ranking primitive.

The names below are what users call. Implementation classes (the ``Ranks`` of each
ranker, the accumulator's state, the TREC file types) live in their modules:
:mod:`jaxrank.ranking`, :mod:`jaxrank.measures.accumulate`, :mod:`jaxrank.trec`.

Every name is imported on first use (PEP 562's module ``__getattr__``): ``import jaxrank``
costs little beyond JAX's own import, and ``jaxrank eval`` imports only the file layer and
the measure engine (docs/reports/trec_eval.md). ``from jaxrank import ndcg``, ``jaxrank.ndcg``,
``jaxrank.trec`` and ``from jaxrank import *`` work as with eager imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# Each exported name (besides the metrics) and the module that defines it.
_NAMES = {
    "Ranker": "jaxrank.ranking",
    "Ranks": "jaxrank.ranking",
    "accumulator": "jaxrank.measures",
    "aggregate": "jaxrank.measures",
    "approx": "jaxrank.ranking",
    "bound": "jaxrank.ranking",
    "compare": "jaxrank.stats",
    "compute": "jaxrank.measures",
    "evaluate": "jaxrank.trec.evaluate",
    "fuse": "jaxrank.fusion",
    "group_by_query": "jaxrank.lists",
    "gumbel": "jaxrank.ranking",
    "hard": "jaxrank.ranking",
    "laplace": "jaxrank.ranking",
    "neuralsort": "jaxrank.ranking",
    "optimize_fusion": "jaxrank.fusion",
    "positives": "jaxrank.ranking",
    "score_spread": "jaxrank.ranking",
    "soft_cutoff": "jaxrank.ranking",
    "soft_ranks": "jaxrank.ranking",
    "softrank": "jaxrank.ranking",
    "softsort": "jaxrank.ranking",
}
_EXPORTED_MODULES = ("losses", "retrieval", "stats")
# Subpackages and modules reachable as attributes (``jaxrank.trec`` after ``import jaxrank``).
_SUBMODULES = frozenset(
    {
        "accumulate",
        "cli",
        "compat",
        "datasets",
        "fusion",
        "lambdaweights",
        "lists",
        "losses",
        "measures",
        "metrics",
        "ranking",
        "retrieval",
        "stats",
        "trec",
        "_checks",
        "_npsort",
    }
)


def _all() -> list[str]:
    """The exported names: those above and the metrics (listed once, in ``jaxrank.metrics``)."""
    from jaxrank import metrics

    return sorted([*_NAMES, *_EXPORTED_MODULES, *metrics.__all__])


def __getattr__(name: str):
    if name == "__all__":
        value = _all()
    elif name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    elif name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        from jaxrank import metrics

        if name not in metrics.__all__:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(metrics, name)
    globals()[name] = value  # the next access finds it without this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_all()) | _SUBMODULES)


if TYPE_CHECKING:  # what type checkers and IDEs see: the eager imports
    from jaxrank import losses, metrics, retrieval, stats  # noqa: F401
    from jaxrank.fusion import fuse, optimize_fusion  # noqa: F401
    from jaxrank.lists import group_by_query  # noqa: F401
    from jaxrank.measures import accumulator, aggregate, compute  # noqa: F401
    from jaxrank.metrics import *  # noqa: F403
    from jaxrank.ranking import (  # noqa: F401
        Ranker,
        Ranks,
        approx,
        bound,
        gumbel,
        hard,
        laplace,
        neuralsort,
        positives,
        score_spread,
        soft_cutoff,
        soft_ranks,
        softrank,
        softsort,
    )
    from jaxrank.stats import compare  # noqa: F401
    from jaxrank.trec.evaluate import evaluate  # noqa: F401

    __all__: list[str]
