"""Comparing systems: :func:`compare` evaluates several runs on the same qrels and tests
every difference, in one jitted call over all systems, measures and pairs.

Per-query values come from :func:`jaxrank.evaluate` (trec_eval's semantics). Which queries
count is ``queries=``:

* ``"qrels"`` (default): every query of the qrels; a query missing from a run scores as
  ``trec_eval -c`` scores it (0 for nearly every measure). ranx and ir_measures count
  missing queries the same way. Every system is then tested on the same queries.
* ``"common"``: only the queries that every run answers (plain trec_eval's query set of
  each run, intersected).

Per system and measure: the mean and its bootstrap confidence interval (percentile,
``n_resamples`` resamples). Per pair (a system against ``baseline``, or every pair of
systems when there is none) and measure: the test's p-value, the p-value adjusted for the
number of pairs (``correction`` over the pairs of each measure), and whether the adjusted
p-value is below ``alpha``. ``test="tukey"`` (Tukey's HSD, ranx's ``"tukey"``) tests all the
systems at once; its p-values are adjusted for every pair already.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _checks
from jaxrank.stats import _significance as stats
from jaxrank.trec.evaluate import evaluate
from jaxrank.trec.files import Qrels, read_qrels

__all__ = ["Comparison", "compare"]

TESTS = ("randomization", "ttest", "wilcoxon", "sign", "tukey")
QUERY_SETS = ("qrels", "common")
_FIELDS = ("system", "baseline", "measure", "mean", "ci_low", "ci_high", "pvalue", "pvalue_adjusted", "significant")


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What :func:`compare` returns.

    Attributes:
      systems: system names, in the order of ``runs``.
      measures: measure names, as :func:`jaxrank.evaluate` names them.
      queries: the query ids tested.
      values: ``float[systems, measures, queries]``, the per-query values.
      mean, ci_low, ci_high: ``float[systems, measures]``.
      pairs: ``(system, baseline)`` index pairs tested.
      pvalue, pvalue_adjusted: ``float[pairs, measures]``.
      significant: ``bool[pairs, measures]``: ``pvalue_adjusted < alpha``.
      test, correction, alpha, confidence: the settings used.
    """

    systems: tuple[str, ...]
    measures: tuple[str, ...]
    queries: tuple[str, ...]
    values: np.ndarray
    mean: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    pairs: tuple[tuple[int, int], ...]
    pvalue: np.ndarray
    pvalue_adjusted: np.ndarray
    significant: np.ndarray
    test: str
    correction: str
    alpha: float
    confidence: float
    baseline: Optional[str]

    def to_records(self) -> list[dict[str, Any]]:
        """One record per tested pair and measure: ``{system, baseline, measure, mean,
        ci_low, ci_high, pvalue, pvalue_adjusted, significant}`` (``mean`` and the interval
        are the system's). With a baseline, the baseline's own rows come first, with
        ``baseline``, the p-values and ``significant`` set to None."""
        out = []
        if self.baseline is not None:
            b = self.systems.index(self.baseline)
            for m, measure in enumerate(self.measures):
                out.append(self._record(b, None, m, measure, None))
        for p, (s, b) in enumerate(self.pairs):
            for m, measure in enumerate(self.measures):
                out.append(self._record(s, b, m, measure, p))
        return out

    def _record(self, s: int, b: Optional[int], m: int, measure: str, p: Optional[int]) -> dict[str, Any]:
        tested = p is not None
        return {
            "system": self.systems[s],
            "baseline": self.systems[b] if b is not None else None,
            "measure": measure,
            "mean": float(self.mean[s, m]),
            "ci_low": float(self.ci_low[s, m]),
            "ci_high": float(self.ci_high[s, m]),
            "pvalue": float(self.pvalue[p, m]) if tested else None,
            "pvalue_adjusted": float(self.pvalue_adjusted[p, m]) if tested else None,
            "significant": bool(self.significant[p, m]) if tested else None,
        }

    def to_json(self) -> str:
        """The records as a JSON list."""
        return json.dumps(self.to_records(), indent=1)

    def to_csv(self) -> str:
        """The records as CSV (a header line, empty fields for None)."""
        lines = [",".join(_FIELDS)]
        for r in self.to_records():
            lines.append(",".join("" if r[f] is None else _csv_field(r[f]) for f in _FIELDS))
        return "\n".join(lines) + "\n"

    def to_frame(self):
        """The records as a pandas DataFrame (pandas is imported here, on first use)."""
        import pandas as pd

        return pd.DataFrame.from_records(self.to_records(), columns=list(_FIELDS))

    def _marks(self) -> dict[tuple[int, int], str]:
        """Per (system, measure): the marks of the systems it is significantly better than
        (a, b, c, ... by system order), as in the tables of IR papers."""
        marks: dict[tuple[int, int], str] = {}
        letters = _letters(len(self.systems))
        for p, (s, b) in enumerate(self.pairs):
            for m in range(len(self.measures)):
                if not self.significant[p, m]:
                    continue
                better, worse = (s, b) if self.mean[s, m] > self.mean[b, m] else (b, s)
                marks[better, m] = marks.get((better, m), "") + letters[worse]
        return {k: "".join(sorted(v)) for k, v in marks.items()}

    def table(self) -> list[list[str]]:
        """Rows of the summary table: system (with its letter) then, per measure, the mean
        with the letters of the systems it is significantly better than."""
        marks, letters = self._marks(), _letters(len(self.systems))
        rows = [["system", *self.measures]]
        for s, name in enumerate(self.systems):
            cells = [
                f"{self.mean[s, m]:.4f}" + (f" {marks[s, m]}" if (s, m) in marks else "")
                for m in range(len(self.measures))
            ]
            rows.append([f"({letters[s]}) {name}", *cells])
        return rows

    def _legend(self) -> str:
        against = f"against {self.baseline}" if self.baseline is not None else "between every pair"
        return (
            f"{_TEST_NAMES[self.test]} {against}, {self.correction}-adjusted p < {self.alpha:g} "
            f"over {len(self.queries)} queries; a letter marks a significant win over that system"
        )

    def to_markdown(self) -> str:
        """The summary table in Markdown, with a line saying what the marks mean."""
        rows = self.table()
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        fmt = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
        lines = [fmt(rows[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
        lines += [fmt(r) for r in rows[1:]]
        return "\n".join(lines) + f"\n\n{self._legend()}\n"

    def to_latex(self) -> str:
        """The summary table as a LaTeX ``tabular`` (booktabs), the best mean of each
        measure in bold and the significance letters as superscripts."""
        best = self.mean.argmax(axis=0)
        marks, letters = self._marks(), _letters(len(self.systems))
        cols = "l" + "r" * len(self.measures)
        lines = [f"\\begin{{tabular}}{{{cols}}}", "\\toprule"]
        lines.append(" & ".join(["System", *(_tex(m) for m in self.measures)]) + " \\\\")
        lines.append("\\midrule")
        for s, name in enumerate(self.systems):
            cells = []
            for m in range(len(self.measures)):
                v = f"{self.mean[s, m]:.4f}"
                v = f"\\textbf{{{v}}}" if best[m] == s else v
                if (s, m) in marks:
                    v += f"$^{{{marks[s, m]}}}$"
                cells.append(v)
            lines.append(" & ".join([f"({letters[s]}) {_tex(name)}", *cells]) + " \\\\")
        lines += ["\\bottomrule", "\\end{tabular}", f"% {self._legend()}"]
        return "\n".join(lines) + "\n"

    def differences(self, system: str, baseline: str, measure: str) -> np.ndarray:
        """Per-query ``system - baseline`` values of ``measure``, in query order."""
        s, b, m = self.systems.index(system), self.systems.index(baseline), self.measures.index(measure)
        return self.values[s, m] - self.values[b, m]

    def plot(self, system: str, baseline: str, measure: str, ax=None):
        """Bar plot of the per-query differences ``system - baseline``, sorted (matplotlib,
        imported here); returns the axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3))
        diff = np.sort(self.differences(system, baseline, measure))
        colors = np.where(diff >= 0, "tab:blue", "tab:red")
        ax.bar(np.arange(len(diff)), diff, color=colors, width=1.0)
        ax.axhline(0, color="black", linewidth=0.5)
        ax.set_xlabel("queries (sorted by difference)")
        ax.set_ylabel(f"{measure}: {system} - {baseline}")
        return ax


_TEST_NAMES = {
    "randomization": "Fisher's randomization test",
    "ttest": "paired t-test",
    "wilcoxon": "Wilcoxon signed-rank test",
    "sign": "sign test",
    "tukey": "Tukey's HSD test",
}


def _letters(n: int) -> list[str]:
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    return [alphabet[i] if n <= 26 else f"{alphabet[i % 26]}{i // 26}" for i in range(n)]


def _tex(s: str) -> str:
    return s.replace("\\", "\\textbackslash{}").replace("_", "\\_").replace("&", "\\&").replace("%", "\\%")


def _csv_field(v) -> str:
    s = str(v)
    return f'"{s}"' if ("," in s or '"' in s) else s


@partial(jax.jit, static_argnames=("test", "n_resamples", "correction", "confidence"))
def _analyse(values, left, right, key, *, test, n_resamples, correction, confidence):
    """All systems, measures and pairs at once: ``values[S, M, Q]``, pair indices
    ``left``, ``right``; returns means, intervals, p-values and adjusted p-values."""
    ci_key, test_key = jax.random.split(key)
    mean = values.mean(-1)
    low, high = stats.bootstrap_ci(values, n_resamples=n_resamples, key=ci_key, confidence=confidence)
    x, y = values[left], values[right]  # [P, M, Q]
    if test == "randomization":
        p = stats.randomization_test(x, y, n_resamples=n_resamples, key=test_key)[1]
    elif test == "ttest":
        p = stats.paired_ttest(x, y)[1]
    elif test == "wilcoxon":
        p = stats.wilcoxon(x, y)[1]
    elif test == "sign":
        p = stats.sign_test(x, y)
    else:  # Tukey's HSD over all systems at once (ranx's "tukey"); its p-values are family-wise already
        p = stats.tukey_hsd(jnp.swapaxes(values, 0, 1))[1][:, left, right].T
        return mean, low, high, p, p
    adjusted = stats.multipletests(p.T, correction).T  # a family per measure: the pairs
    return mean, low, high, p, adjusted


def _per_query(qrels, run, measures, queries: str) -> dict[str, dict[str, float]]:
    out = evaluate(qrels, run, measures, per_query=True, queries="qrels" if queries == "qrels" else "run")
    return out["per_query"]


def compare(
    qrels,
    runs: Mapping[str, Any] | Sequence[Any],
    measures: Sequence[str] | str = ("map", "ndcg_cut.10"),
    *,
    baseline: Optional[str] = None,
    test: str = "randomization",
    n_resamples: int = 10000,
    correction: str = "holm",
    alpha: float = 0.05,
    confidence: float = 0.95,
    queries: str = "qrels",
    key: Optional[jax.Array] = None,
) -> Comparison:
    """Evaluate several runs on the same qrels and test their differences.

    Args:
      qrels: anything :func:`jaxrank.evaluate` takes as qrels (path, dict, records, Qrels).
      runs: ``{name: run}``, or a list of runs (ranx's form), each run anything
        :func:`jaxrank.evaluate` takes (at least two). A list's runs are named as ``jaxrank
        compare`` names its files: a path by its file name (by the whole path when two file
        names clash), any other run ``run_1``, ``run_2``, ... by position, as ranx names
        unnamed runs.
      measures: measure strings (trec_eval's, ir_measures' or ranx's: ``hits@5``); their
        per-query values must be numbers.
      baseline: a name of ``runs`` (for a list, also a path in it): test every other system
        against it; None: every pair.
      test: ``"randomization"`` (Fisher's, :func:`jaxrank.stats.randomization_test`),
        ``"ttest"``, ``"wilcoxon"``, ``"sign"`` or ``"tukey"`` (Tukey's HSD,
        :func:`jaxrank.stats.tukey_hsd`, as ranx's ``compare(stat_test="tukey")``: one test of
        all the systems, whose p-values are adjusted for every pair already; with a
        baseline, its pairs are reported).
      n_resamples: random sign assignments of the randomization test and bootstrap
        resamples of the confidence intervals.
      correction: ``"holm"``, ``"bonferroni"`` or ``"fdr_bh"``, over the pairs of each measure.
        Not applied with ``test="tukey"``: ``pvalue_adjusted`` is then Tukey's p-value and
        the report's ``correction`` is ``"tukey"``.
      alpha: significance level of the adjusted p-values.
      confidence: level of the bootstrap confidence intervals of the means.
      queries: ``"qrels"`` (every qrels query, missing ones scoring as ``trec_eval -c``) or
        ``"common"`` (the queries every run answers).
      key: ``jax.random`` key of the resampling; None: ``jax.random.key(0)``.

    Returns:
      A :class:`Comparison` (``to_records``, ``to_frame``, ``to_markdown``, ``to_latex``,
      ``plot``).

    Example:
      >>> import jaxrank
      >>> from jaxrank import trec
      >>> qrels, run = trec.demo_paths()
      >>> runs = {"bm25": run, "bm25-top5": trec.read_run(run).to_dict()}
      >>> report = jaxrank.compare(qrels, runs, ["P.5"], baseline="bm25", test="ttest")
      >>> [r["system"] for r in report.to_records()]
      ['bm25', 'bm25-top5']
    """
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    if correction not in stats.CORRECTIONS:
        raise ValueError(f"correction must be one of {stats.CORRECTIONS}, got {correction!r}")
    if queries not in QUERY_SETS:
        raise ValueError(f"queries must be one of {QUERY_SETS}, got {queries!r}")
    alpha = _checks.in_range(alpha, "alpha", 0, 1)
    confidence = _checks.in_range(confidence, "confidence", 0, 1)
    n_resamples = stats._resamples(n_resamples)
    named = _checks.named_runs(runs)
    if len(named) < 2:
        raise ValueError(f"runs must hold at least two runs (a dict {{name: run}} or a list), got {len(named)}")
    systems = tuple(named)
    if baseline is not None and baseline not in named and isinstance(baseline, (str, os.PathLike)):
        # a run given as a path is named by its path too, as jaxrank compare --baseline takes either
        paths = {os.fspath(r): name for name, r in named.items() if isinstance(r, (str, os.PathLike))}
        baseline = paths.get(os.fspath(baseline), baseline)
    if baseline is not None and baseline not in named:
        raise ValueError(f"baseline {baseline!r} is not one of the runs {list(systems)}")
    if isinstance(measures, str):
        measures = [measures]
    if not isinstance(qrels, Qrels):
        qrels = read_qrels(qrels)  # read (or converted) once for every run

    per_query = [_per_query(qrels, run, list(measures), queries) for run in named.values()]
    names = [k for k, v in next(iter(per_query[0].values()), {}).items() if isinstance(v, float)]
    common = set(per_query[0])
    for pq in per_query[1:]:
        common &= set(pq)
    qids = tuple(q for q in per_query[0] if q in common)
    if len(qids) < 2:
        raise ValueError(f"the runs have {len(qids)} evaluated queries in common; a comparison needs at least two")
    if not names:
        raise ValueError(f"no numeric per-query values among the measures {list(measures)}")
    values = np.array([[[pq[q][m] for q in qids] for m in names] for pq in per_query], dtype=np.float64)

    b = None if baseline is None else systems.index(baseline)
    if b is None:
        pairs = tuple((j, i) for i in range(len(systems)) for j in range(i + 1, len(systems)))
    else:
        pairs = tuple((s, b) for s in range(len(systems)) if s != b)
    left = np.array([p[0] for p in pairs])
    right = np.array([p[1] for p in pairs])
    with jax.enable_x64(True):
        key = jax.random.key(0) if key is None else key
        out = _analyse(
            jnp.asarray(values),
            jnp.asarray(left),
            jnp.asarray(right),
            key,
            test=test,
            n_resamples=n_resamples,
            correction=correction,
            confidence=confidence,
        )
        mean, low, high, p, adjusted = (np.asarray(a) for a in out)
    return Comparison(
        systems=systems,
        measures=tuple(names),
        queries=qids,
        values=values,
        mean=mean,
        ci_low=low,
        ci_high=high,
        pairs=pairs,
        pvalue=p,
        pvalue_adjusted=adjusted,
        significant=adjusted < alpha,
        test=test,
        correction="tukey" if test == "tukey" else correction,
        alpha=alpha,
        confidence=confidence,
        baseline=baseline,
    )
