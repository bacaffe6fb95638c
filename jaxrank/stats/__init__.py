"""Significance: paired tests, intervals and corrections over per-query values
(:mod:`jaxrank.stats._significance`, each agreeing with scipy or statsmodels), and
:func:`compare`, the report of systems against a baseline built on them
(:mod:`jaxrank.stats._compare`).
"""

from jaxrank.stats._compare import Comparison, compare
from jaxrank.stats._significance import (
    ALTERNATIVES as ALTERNATIVES,
)
from jaxrank.stats._significance import (
    CORRECTIONS as CORRECTIONS,
)
from jaxrank.stats._significance import (
    WILCOXON_EXACT_MAX as WILCOXON_EXACT_MAX,
)
from jaxrank.stats._significance import (
    WILCOXON_PERMUTATION_MAX as WILCOXON_PERMUTATION_MAX,
)
from jaxrank.stats._significance import (
    Alternative as Alternative,
)
from jaxrank.stats._significance import (
    Array as Array,
)
from jaxrank.stats._significance import (
    bootstrap_ci,
    multipletests,
    paired_ttest,
    randomization_test,
    sign_test,
    tukey_hsd,
    wilcoxon,
)

__all__ = [
    "Comparison",
    "bootstrap_ci",
    "compare",
    "multipletests",
    "paired_ttest",
    "randomization_test",
    "sign_test",
    "tukey_hsd",
    "wilcoxon",
]
