"""``jaxrank ndeval``: ndeval's table of a run (:func:`evaluate_run`, every topic at once in
the compiled program of :mod:`jaxrank.trec.diversity`), its risk-sensitive variant against a
baseline, and ndeval's CSV text, byte for byte (:func:`ndeval_text`).
"""

from __future__ import annotations

import dataclasses
import platform
from typing import Optional

import numpy as np

from jaxrank.measures.names import DIVERSITY
from jaxrank.trec.diversity import _family_values, _lists, _quantities
from jaxrank.trec.subtopics import NdevalRun, SubtopicQrels

#: ndeval's output columns after ``runid,topic``, in order.
COLUMNS = (
    *("ERR-IA@5", "ERR-IA@10", "ERR-IA@20", "nERR-IA@5", "nERR-IA@10", "nERR-IA@20"),
    *("alpha-DCG@5", "alpha-DCG@10", "alpha-DCG@20", "alpha-nDCG@5", "alpha-nDCG@10", "alpha-nDCG@20"),
    *("NRBP", "nNRBP", "MAP-IA", "P-IA@5", "P-IA@10", "P-IA@20", "strec@5", "strec@10", "strec@20"),
)
_NDEVAL_CUTOFFS = (5, 10, 20)
# 0/0 in C is the processor's default NaN: negative on x86 (glibc prints "-nan"), positive on ARM
_NAN_TEXT = "-nan" if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686") else "nan"


# ----------------------------------------------------------------------------- ndeval


@dataclasses.dataclass(frozen=True, eq=False)
class TopicTable:
    """ndeval's 21 values for each topic of a run.

    Attributes:
        runid: the run's id.
        topics: ``[T]`` int64, the run's topics, ascending.
        values: ``[T, 21]`` float64, in :data:`COLUMNS` order; zeros for a topic the qrels
            lack, nNRBP NaN (ndeval's 0/0) for a topic without a relevant judgment.
        judged: how many of the topics the qrels have (ndeval's ``actualTopics``).
    """

    runid: str
    topics: np.ndarray
    values: np.ndarray
    judged: int


def evaluate_run(qrels: SubtopicQrels, run: NdevalRun, *, alpha: float = 0.5, beta: float = 0.5) -> TopicTable:
    """ndeval's values for every topic of ``run`` (``applyQrels``), one call per measure.

    >>> from jaxrank.trec.subtopics import read_subtopic_qrels
    >>> q = read_subtopic_qrels({"1": {"0": {"d1": 1}, "1": {"d2": 1}}})
    >>> r = NdevalRun("r", np.array([1]), np.array([0, 2]), np.array([b"d2", b"d1"]))
    >>> q = SubtopicQrels((1,), q.docnos, q.subtopics, q.judgments)  # ndeval's int topics
    >>> dict(zip(COLUMNS, evaluate_run(q, r).values[0].round(4).tolist()))["strec@5"]
    1.0
    """
    place = {t: i for i, t in enumerate(qrels.topics)}
    rows = [i for i, t in enumerate(run.topics.tolist()) if t in place]
    ranked = run.lists()
    values = np.zeros((run.topics.size, len(COLUMNS)), np.float64)
    if rows:
        lists = _lists(qrels, [place[int(run.topics[i])] for i in rows], [ranked[i] for i in rows], 1)
        q = _quantities(lists, _NDEVAL_CUTOFFS, alpha, beta)
        parts = [_family_values(f, q, lists, _NDEVAL_CUTOFFS) for f in DIVERSITY]
        values[rows] = np.concatenate(parts, axis=1)[: len(rows)]
    return TopicTable(run.runid, run.topics, values, len(rows))


def risk_based(r: np.ndarray, b: np.ndarray, risk_alpha: float) -> np.ndarray:
    """ndeval's ``RiskBased``: ``r - b`` where ``r >= b``, else ``(1 + risk_alpha)(r - b)``
    (NaN compares false, as in C)."""
    diff = r - b
    with np.errstate(invalid="ignore"):
        return np.where(r >= b, diff, (risk_alpha + 1) * diff)


def _rows(
    run: TopicTable, base: Optional[TopicTable], complete: bool
) -> list[tuple[int, Optional[int], Optional[int]]]:
    """ndeval's ``outputMeasures`` walk: (topic, row of run or None, row of baseline or None)
    for each printed row. Baseline topics the run lacks are printed only with ``-c``."""
    r_topics = run.topics.tolist()
    if base is None:
        return [(t, i, None) for i, t in enumerate(r_topics)]
    b_topics = base.topics.tolist()
    i = j = 0
    out = []
    while i < len(r_topics) or (j < len(b_topics) and complete):
        if i < len(r_topics) and j < len(b_topics):
            if r_topics[i] == b_topics[j]:
                out.append((r_topics[i], i, j))
                i, j = i + 1, j + 1
            elif r_topics[i] > b_topics[j]:
                if complete:
                    out.append((b_topics[j], None, j))
                j += 1
            else:
                out.append((r_topics[i], i, None))
                i += 1
        elif i >= len(r_topics):
            out.append((b_topics[j], None, j))
            j += 1
        else:
            out.append((r_topics[i], i, None))
            i += 1
    return out


def _fmt(values: np.ndarray) -> list[str]:
    """``printf("%.6f")`` of each value (Python rounds the exact binary value as glibc does)."""
    return [_NAN_TEXT if v != v else f"{v:.6f}" for v in values.tolist()]


def ndeval_text(
    run: TopicTable,
    *,
    qrels_topics: Optional[int] = None,
    baseline: Optional[TopicTable] = None,
    risk_alpha: float = 0.0,
    risk_alpha_text: str = "0",
) -> str:
    """ndeval's output, byte for byte: the CSV header, a row per topic, the ``amean`` row.

    Args:
        run: the run's values (:func:`evaluate_run`).
        qrels_topics: ndeval ``-c``: average over this many topics (the qrels'), and print
            the baseline's topics the run lacks.
        baseline: ndeval ``-baseline``: print the risk-sensitive differences against it.
        risk_alpha: ndeval ``-riskAlpha``: losses weigh ``1 + risk_alpha``.
        risk_alpha_text: ``risk_alpha`` as typed (ndeval prints it in the runid).
    """
    complete = qrels_topics is not None
    rows = _rows(run, baseline, complete)
    zeros = np.zeros(len(COLUMNS))
    r = np.array([run.values[i] if i is not None else zeros for _, i, _ in rows]).reshape(-1, len(COLUMNS))
    runid = run.runid
    if baseline is not None:
        b = np.array([baseline.values[j] if j is not None else zeros for _, _, j in rows]).reshape(-1, len(COLUMNS))
        r = risk_based(r, b, risk_alpha)
        runid = f"{run.runid} (rel to. {baseline.runid}; rs=1+a; a={risk_alpha_text})"
    divisor = qrels_topics if complete else run.judged
    if baseline is not None:
        divisor = max(divisor, len(rows))
    total = np.cumsum(np.vstack([zeros, r]), axis=0)[-1]  # C's running sums from 0.0, in order
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / np.float64(divisor)
    lines = ["runid,topic," + ",".join(COLUMNS)]
    lines.extend(f"{runid},{topic}," + ",".join(_fmt(v)) for (topic, _, _), v in zip(rows, r))
    lines.append(f"{runid},amean," + ",".join(_fmt(mean)))
    return "\n".join(lines) + "\n"
