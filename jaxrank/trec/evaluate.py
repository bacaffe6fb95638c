"""``jaxrank.evaluate``: qrels + run + measure strings -> values, as trec_eval computes them.

The pipeline: read the inputs (:mod:`jaxrank.trec.files`), pad them into one batch, compute every
requested measure in one jitted call (:mod:`jaxrank.measures.engine`: one ranking, shared by
all measures), aggregate over queries as trec_eval does, and return plain Python values.
:class:`Report` also renders trec_eval's text output byte for byte (used by ``jaxrank eval``).

Evaluation runs in float64 (``jax.enable_x64`` is switched on for the call only), so values
match trec_eval's doubles.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Optional, Union

import jax
import numpy as np

from jaxrank.measures import engine
from jaxrank.measures.engine import relstring_text
from jaxrank.measures.names import DIVERSITY
from jaxrank.measures.parse import Column, Plan, parse_measures
from jaxrank.trec import files as trec
from jaxrank.trec._report import Report, zscored
from jaxrank.trec._report import summary as _summary
from jaxrank.trec.join import ranges
from jaxrank.trec.zscores import read_zscores

__all__ = ["Report", "evaluate", "report"]

Measures = Union[str, Iterable[str], None]


# ----------------------------------------------------------------------------- evaluation


@dataclasses.dataclass
class _Rows:
    """The retrieved documents of the evaluated run queries, unpadded, gathered part by part:
    query ``index[i]`` (its place in the qrels) has the next ``lens[i]`` entries of ``scores``
    and ``rr`` (trec_eval's relevance values: rel if judged, -2 pooled but unjudged, -1 not
    in the qrels), in trec_eval's order."""

    index: list = dataclasses.field(default_factory=list)
    lens: list = dataclasses.field(default_factory=list)
    scores: list = dataclasses.field(default_factory=list)
    rr: list = dataclasses.field(default_factory=list)

    def add(self, j: trec._Joined) -> None:
        self.index.append(j.rel_q)
        self.lens.append(j.run_lens)
        self.scores.append(j.scores.copy())  # not a view that keeps the part's arrays alive
        rr = np.where(j.judged, j.labels, np.where(j.pooled, -2, -1))
        small = rr.size == 0 or (rr.min() >= -128 and rr.max() < 128)  # a quarter of int32's memory
        self.rr.append(rr.astype(np.int8 if small else np.int32))

    def joined(self) -> tuple[np.ndarray, ...]:
        """(index, lens, starts of each query's entries, scores, rr), one array each; the
        parts are freed as they are copied, so the rows are not held twice."""
        index, lens = np.concatenate(self.index), np.concatenate(self.lens)
        starts = np.cumsum(lens) - lens
        return index, lens, starts, _drain(self.scores), _drain(self.rr)


def _drain(parts: list) -> np.ndarray:
    """``np.concatenate(parts)``, emptying ``parts`` while copying."""
    out = np.empty(sum(p.size for p in parts), dtype=np.result_type(*parts))
    at = 0
    parts.reverse()
    while parts:
        p = parts.pop()
        out[at : at + p.size] = p
        at += p.size
    return out


class _Restart(Exception):
    """The stream stopped (a query deeper than its shape): the rows it was given are gone."""


def _collect(q: trec.Qrels, parts, judged_only: Iterable[bool], max_docs: Optional[int], stream=None):
    """The rows of each ``judged_only`` setting from the parts of a run (Runs over disjoint
    queries), the run's qids and its tag. With ``stream`` (a :class:`_Stream`, for the only
    setting), each part's rows go to it as soon as they are read, and are not kept here (the
    rows returned are then empty: they would be 45 MB of a 5M-line run when the evaluation
    ends, its peak of memory); should the stream stop, :class:`_Restart` is raised."""
    rows = {jo: _Rows() for jo in judged_only}
    run_qids, tag = [], ""
    for part in parts:
        run_qids.append(part.qids)
        tag = part.tag or tag
        for jo, r in rows.items():
            joined = trec._joined(q, part, complete=False, max_docs=max_docs, judged_only=jo)
            if stream is None:
                r.add(joined)
                continue
            got = _Rows()
            got.add(joined)
            stream.add(got.index[0], got.lens[0], got.scores[0], got.rr[0])
            if not stream.live:
                raise _Restart
            for kept, x in zip((r.index, r.lens, r.scores, r.rr), (got.index, got.lens, got.scores, got.rr)):
                kept.append(x[0][:0])
    return rows, np.concatenate(run_qids), tag


def _fill(flat: np.ndarray, starts: np.ndarray, lens: np.ndarray, rows: int, cols: int, fill) -> np.ndarray:
    """``[rows, cols]``: row i holds ``flat[starts[i]:starts[i] + lens[i]]``, then ``fill``."""
    out = np.full((rows, cols), fill, dtype=flat.dtype)
    out.reshape(-1)[ranges(np.arange(lens.size) * cols, lens)] = flat[ranges(starts, lens)]
    return out


def _group(
    plan: Plan,
    q: trec.Qrels,
    found: _Rows,
    run_qids: np.ndarray,
    *,
    complete: bool,
    max_docs: Optional[int],
    judged_only: bool,
    guess: Optional[tuple] = None,
):
    """Evaluate the measures of ``plan`` on the run's rows: (qids, per-measure ``[Q, C]``
    arrays, rows of queries missing from the run, judgments with rel > 0 per query). Slices
    of queries are padded one at a time, so no padded copy of the whole run is made."""
    index, lens, starts, scores, rr = found.joined()
    bogus = np.zeros(q.qids.size, bool)
    if complete:  # every qrels query; those the run lacks have no documents
        bogus[:] = ~np.isin(q.qids, run_qids)
        all_lens = np.zeros(q.qids.size, np.int64)
        all_lens[index], lens = lens, all_lens
        all_starts = np.zeros(q.qids.size, np.int64)
        all_starts[index], starts = starts, all_starts
        index = np.arange(q.qids.size)
        if bogus.any() and not judged_only and (max_docs is None or max_docs > 0):
            # trec_eval 10 ranks one document, absent from the qrels, for a missing query
            lens[bogus], starts[bogus] = 1, scores.size
            scores, rr = np.append(scores, 1.0), np.append(rr, np.int32(-1))
    order = np.argsort(index, kind="stable")  # trec_eval's query order: the qrels'
    index, lens, starts = index[order], lens[order], starts[order]
    bogus = bogus[index]
    n_q = int(index.size)
    if n_q == 0:
        raise ValueError("no query is both in the qrels and in the run")
    n = engine.bucket(max(1, int(lens.max())))
    m = engine.bucket(max(1, int(np.diff(q.offsets)[index].max())))
    rows, n, m = engine.reuse(plan, (engine.rows_per_call(n_q, n), n, m), guess)
    out = _evaluate_rows(plan, q, (rows, n, m), scores, rr, starts, lens, index)
    return _grouped(q, index, out, bogus)


def _evaluate_rows(plan: Plan, q: trec.Qrels, shape: tuple, scores, rr, starts, lens, index) -> list[np.ndarray]:
    """The measures of ``plan`` on queries ``index`` (places in the qrels), whose documents are
    ``scores[starts[i]:starts[i] + lens[i]]`` (and ``rr``), in slices of ``shape[0]`` queries
    padded to ``shape``: one ``[len(index), C]`` array per measure."""
    rows, n, m = shape
    rel_starts, rel_lens = q.offsets[index], np.diff(q.offsets)[index]
    executable = engine.executable(plan, shape).result()
    rels = q.rels.astype(np.int32)
    parts = []
    with jax.enable_x64(True):
        for lo in range(0, index.size, rows):
            s = slice(lo, lo + rows)
            here, rel_here = lens[s], rel_lens[s]
            parts.append(
                executable(
                    _fill(scores, starts[s], here, rows, n, 0.0),
                    _fill(rr, starts[s], here, rows, n, 0).astype(np.int32),
                    np.arange(n) < np.pad(here, (0, rows - here.size))[:, None],
                    _fill(rels, rel_starts[s], rel_here, rows, m, 0),
                    np.arange(m) < np.pad(rel_here, (0, rows - rel_here.size))[:, None],
                )
            )
    return [np.concatenate([p[i] for p in parts])[: index.size] for i in range(len(parts[0]))]


def _grouped(q: trec.Qrels, index: np.ndarray, out: list, bogus: np.ndarray):
    """:func:`_group`'s result for queries ``index`` (in trec_eval's order) and their values."""
    positive = np.bincount(np.repeat(np.arange(q.qids.size), np.diff(q.offsets)), q.rels > 0, q.qids.size)
    positive = positive[index].astype(np.int64)
    return [str(x) for x in q.qids[index].tolist()], out, bogus, positive


class _Stream:
    """Evaluation of a run's queries while the rest of the run is still being read (the
    command line's overlap of evaluation with parsing, after the compilation it started
    before reading: :func:`report`'s ``before_run``).

    Each part's rows join a queue (references to the arrays :class:`_Rows` holds, no copy);
    each whole slice of ``shape[0]`` queries becomes a job of one worker thread, which pads
    it and runs the computation compiled for ``shape`` while the main thread parses the next
    part. One execution at a time (two in flight can deadlock on the sort's host callback;
    docs/trec_internals.md), and only the running job's padded copy exists at any time. A query with
    more documents or judgments than ``shape`` holds stops the stream: :func:`_group` then
    evaluates every query after the reading, as without a stream. The values do not depend
    on the slice a query is evaluated in, nor on its padding.
    """

    def __init__(self, plan: Plan, q: trec.Qrels, shape: tuple):
        self.plan, self.q, self.shape = plan, q, shape
        self.rel_lens = np.diff(q.offsets)
        self.queue = _Rows()
        self.queued = 0
        self.jobs: list = []
        self.live = True
        self.worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jaxrank-evaluate")

    def add(self, index: np.ndarray, lens: np.ndarray, scores: np.ndarray, rr: np.ndarray) -> None:
        """Queue the rows of one part, as :class:`_Rows` holds them."""
        if not self.live or index.size == 0:
            return
        _, n, m = self.shape
        if lens.max() > n or self.rel_lens[index].max() > m:
            self.stop()
            return
        self.queue.index.append(index)
        self.queue.lens.append(lens)
        self.queue.scores.append(scores)
        self.queue.rr.append(rr)
        self.queued += index.size
        while self.queued >= self.shape[0]:
            self._submit(self.shape[0])

    def _submit(self, count: int) -> None:
        """Make the first ``count`` queued queries a job (views of the queued arrays)."""
        job, rest = _Rows(), _Rows()
        need = count
        for rows in zip(self.queue.index, self.queue.lens, self.queue.scores, self.queue.rr):
            take = min(need, rows[0].size)
            cut = int(rows[1][:take].sum())
            # a part's queries may have no documents (judged-only): split by queries, not entries
            if take:
                for held, x, at in zip((job.index, job.lens, job.scores, job.rr), rows, (take, take, cut, cut)):
                    held.append(x[:at])
            if take < rows[0].size:
                for left, x, at in zip((rest.index, rest.lens, rest.scores, rest.rr), rows, (take, take, cut, cut)):
                    left.append(x[at:])
            need -= take
        self.queue, self.queued = rest, self.queued - count
        self.jobs.append((np.concatenate(job.index), self.worker.submit(self._evaluate, job)))

    def _evaluate(self, job: _Rows) -> list[np.ndarray]:
        index, lens, starts, scores, rr = job.joined()
        return _evaluate_rows(self.plan, self.q, self.shape, scores, rr, starts, lens, index)

    def stop(self) -> None:
        """Abandon the stream; returns once its worker is idle."""
        self.live = False
        self.worker.shutdown(wait=True, cancel_futures=True)
        self.jobs = []

    def finish(self):
        """:func:`_group`'s result from the streamed queries, or None when the stream stopped
        or saw no query."""
        if self.live and self.queued:
            self._submit(self.queued)
        self.worker.shutdown(wait=True)
        if not self.live or not self.jobs:
            return None
        index = np.concatenate([i for i, _ in self.jobs])
        values = [f.result() for _, f in self.jobs]
        order = np.argsort(index, kind="stable")  # trec_eval's query order: the qrels'
        out = [np.concatenate([v[i] for v in values])[order] for i in range(len(values[0]))]
        return _grouped(self.q, index[order], out, np.zeros(index.size, bool))


def report(
    qrels,
    run,
    measures: Measures = None,
    *,
    complete: bool = False,
    max_docs: Optional[int] = None,
    rel_level: int = 1,
    judged_only: bool = False,
    num_docs: int = 0,
    version: str = "10",
    queries: Optional[str] = None,
    zscores=None,
    rel_format: str = "qrels",
    before_run: Optional[Callable[[Plan, trec.Qrels], Optional[tuple]]] = None,
) -> Report:
    """Evaluate and keep everything: see :func:`evaluate` for the arguments.

    ``before_run(plan, qrels)``, when given and the run is still to be read, is called
    before the run is read and returns a batch shape it started compiling for (or None):
    the command line uses it to overlap compilation with reading (:mod:`jaxrank.cli`).
    The run's queries are then evaluated while the run is read (:class:`_Stream`), unless
    ``complete`` or judged-only measures beside others.
    """
    complete = _complete(queries, complete)
    if sum(map(_is_stdin, (qrels, run, zscores))) > 1:
        raise ValueError("only one of the qrels, the run and the z-scores can be read from standard input ('-')")
    if rel_format != "qrels":
        return _other_format(rel_format, qrels, run, measures, complete, max_docs, rel_level, judged_only, zscores)
    if version not in ("9", "10"):
        raise ValueError(f"version must be '10' or '9', got {version!r}")
    if max_docs is not None and max_docs < 0:
        raise ValueError(f"max_docs must be >= 0, got {max_docs}")
    parsed = parse_measures(measures)
    if any(m.family in DIVERSITY for m in parsed):  # subtopic qrels: their own reading and order
        if zscores is not None:
            raise ValueError("z-scores (-Z) are not available for the diversity measures")
        from jaxrank.trec.diversity import report_diversity

        return report_diversity(
            qrels, run, parsed, complete=complete, max_docs=max_docs, rel_level=rel_level, judged_only=judged_only
        )
    zs = None if zscores is None else read_zscores(zscores)
    plan = Plan(measures=parsed, level=int(rel_level), num_docs=int(num_docs), version=version)
    groups: dict[bool, list[int]] = {}
    for i, meas in enumerate(parsed):
        groups.setdefault(bool(judged_only or meas.judged_only), []).append(i)
    plans = {jo: dataclasses.replace(plan, measures=tuple(parsed[i] for i in idx)) for jo, idx in groups.items()}
    q = qrels if isinstance(qrels, trec.Qrels) else trec.read_qrels(qrels)
    if _is_stdin(run):  # read once, whole: standard input cannot be read again
        run = trec.read_run(run)
    guess = None
    if before_run is not None and not isinstance(run, trec.Run):
        guess = before_run(next(iter(plans.values())), q)
    streamed = None
    if isinstance(run, (str, os.PathLike)):
        # read a part of the run at a time (trec.read_run's result, never all of it at once),
        # unless a query's lines are scattered over the file; with a compilation under way
        # (the command line), evaluate each part's queries while the next part is read
        stream = _Stream(plans[next(iter(groups))], q, guess) if guess and len(groups) == 1 and not complete else None
        try:
            found, run_qids, tag = _collect(q, trec._run_parts(run), groups, max_docs, stream)
            streamed = stream.finish() if stream is not None else None
        except trec._Scattered:
            if stream is not None:
                stream.stop()
            found, run_qids, tag = _collect(q, [trec.read_run(run)], groups, max_docs)
        except _Restart:  # the stream stopped: what it was given is not kept, so read again
            streamed = stream.finish()  # None, the stream being stopped
            try:
                found, run_qids, tag = _collect(q, trec._run_parts(run), groups, max_docs)
            except trec._Scattered:
                found, run_qids, tag = _collect(q, [trec.read_run(run)], groups, max_docs)
        except BaseException:
            if stream is not None:
                stream.stop()
            raise
    else:
        found, run_qids, tag = _collect(q, [run if isinstance(run, trec.Run) else trec.read_run(run)], groups, max_docs)
    results: list = [None] * len(parsed)
    qids, bogus, positive = None, None, None
    for jo, idx in groups.items():
        qids_g, out, bogus_g, positive_g = streamed or _group(
            plans[jo], q, found[jo], run_qids, complete=complete, max_docs=max_docs, judged_only=jo, guess=guess
        )
        qids, bogus, positive = qids_g, bogus_g, positive_g
        for i, o in zip(idx, out):
            results[i] = o
    assert qids is not None
    n_q = len(qids)
    columns: list[Column] = []
    values: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for meas, out in zip(parsed, results):
        if meas.family == "relstring":
            texts = relstring_text(out)
            if complete:
                texts = ["" if b and meas.columns[0].bogus_zero else t for t, b in zip(texts, bogus)]
            per_column = [texts]
        else:
            per_column = [np.array(out[:, j], np.float64) for j in range(out.shape[1])]
        for column, v in zip(meas.columns, per_column):
            if column.name in values:  # the same printed name twice (e.g. P@5 and P_5 differ)
                continue
            if column.bogus_zero and complete and bogus.any() and column.kind != "str":
                v = np.where(bogus, 0.0, v)
            columns.append(column)
            values[column.name] = v
            if column.summary:
                summary[column.name] = _summary(column, v, n_q, complete, positive, tag=tag)
    unjudged = tuple(dict.fromkeys(np.asarray(run_qids)[~np.isin(run_qids, q.qids)].tolist()))
    if zs is not None:
        columns, values, summary = zscored(zs, list(qids), columns, values, summary, complete, positive)
    return Report(qids=qids, columns=columns, values=values, summary=summary, unjudged=unjudged, zscore=zs is not None)


QUERY_SETS = ("run", "qrels")
REL_FORMATS = ("qrels", "qrels_jg", "prefs", "qrels_prefs")  # trec_eval's -R formats jaxrank reads


def _other_format(rel_format, qrels, run, measures, complete, max_docs, rel_level, judged_only, zscores) -> Report:
    """trec_eval ``-R FORMAT`` other than plain qrels: their own measures (pure Python)."""
    if rel_format == "qrels_jg":
        from jaxrank.trec.judgment_groups import report_jg

        return report_jg(
            qrels,
            run,
            measures,
            complete=complete,
            max_docs=max_docs,
            rel_level=rel_level,
            judged_only=judged_only,
            zscores=zscores,
        )
    if rel_format in ("prefs", "qrels_prefs"):
        from jaxrank.trec.preferences import report_prefs

        return report_prefs(
            qrels, run, measures, rel_format=rel_format, complete=complete, max_docs=max_docs, zscores=zscores
        )
    raise ValueError(f"rel_format must be one of {REL_FORMATS}, got {rel_format!r}")


def _is_stdin(source) -> bool:
    """Whether ``source`` names standard input: the path ``-``, as in trec_eval 10."""
    return isinstance(source, (str, os.PathLike)) and os.fspath(source) == trec.STDIN


def _complete(queries: Optional[str], complete: bool) -> bool:
    """``complete`` from the ``queries`` choice (``"qrels"`` is ``complete=True``)."""
    if queries is None:
        return bool(complete)
    if queries not in QUERY_SETS:
        raise ValueError(f"queries must be one of {QUERY_SETS}, got {queries!r}")
    if complete and queries == "run":
        raise ValueError("queries='run' contradicts complete=True (which is queries='qrels')")
    return queries == "qrels"


def _several_runs(run) -> bool:
    """Whether ``run`` is a dict of runs by name (``{name: run}``, each run a path, a
    ``{qid: {docno: score}}`` dict, records, a DataFrame or a Run) rather than one run
    ``{qid: {docno: score}}``, whose values are dicts of numbers."""
    if not isinstance(run, Mapping) or not run:
        return False
    return all(
        (isinstance(v, Mapping) and v and all(isinstance(x, Mapping) for x in v.values()))
        or (not isinstance(v, Mapping) and not isinstance(v, (int, float, np.number)))
        for v in run.values()
    )


def qrels_once(qrels, measures: Measures = None, rel_format: str = "qrels"):
    """The qrels read once, for evaluating several runs against them: a
    :class:`~jaxrank.trec.Qrels` (subtopic qrels for ir_measures' diversity names); other
    ``rel_format`` s are read by each run's evaluation. Raises what reading and
    :func:`~jaxrank.measures.parse.parse_measures` raise."""
    if rel_format != "qrels" or isinstance(qrels, trec.Qrels):
        return qrels
    if any(m.family in DIVERSITY for m in parse_measures(measures)):
        from jaxrank.trec.subtopics import SubtopicQrels, read_subtopic_qrels

        return qrels if isinstance(qrels, SubtopicQrels) else read_subtopic_qrels(qrels)
    return trec.read_qrels(qrels)


def evaluate(
    qrels,
    run,
    measures: Measures = None,
    *,
    per_query: bool = False,
    complete: bool = False,
    max_docs: Optional[int] = None,
    rel_level: int = 1,
    judged_only: bool = False,
    num_docs: int = 0,
    version: str = "10",
    as_frame: bool = False,
    queries: Optional[str] = None,
    zscores=None,
    rel_format: str = "qrels",
):
    """Evaluate a run against qrels, as trec_eval does.

    Args:
        qrels: a qrels file path, a ``{qid: {docno: rel}}`` dict (pytrec_eval's format),
            ir_measures-style records (``query_id, doc_id, relevance``), a DataFrame, or a
            :class:`jaxrank.trec.Qrels`.
        run: a run file path, ``{qid: {docno: score}}``, records (``query_id, doc_id,
            score``), a DataFrame, or a :class:`jaxrank.trec.Run`; or several runs by name,
            ``{name: run, ...}``: the qrels are then read once, each run is evaluated with
            the same options (runs of one batch shape share the compiled program) and the
            result is ``{name: result}``.
        measures: measure strings, trec_eval's (``"map"``, ``"P.5,10"``, ``"all_trec"``) or
            ir_measures' (``"nDCG@10"``, ``"P(rel=2)@5"``); None: trec_eval's default set.
        per_query: also return the value of each query.
        complete: trec_eval ``-c``: average over every query of the qrels (a query missing
            from the run scores as trec_eval 10 scores it: 0 for nearly every measure).
        max_docs: trec_eval ``-M``: evaluate only the first ``max_docs`` documents per query.
        rel_level: trec_eval ``-l``: a rel >= ``rel_level`` is relevant (gains of nDCG-style
            measures use the rels themselves).
        judged_only: trec_eval ``-J``: drop retrieved documents that are not judged.
        num_docs: trec_eval ``-N``: documents in the collection (``utility``).
        version: ``"10"`` (trec_eval 10.0, default) or ``"9"`` (trec_eval 9.x as bundled in
            pytrec_eval: different recall cutoffs in ``iprec_at_recall``/``11pt_avg``,
            scores compared as float32).
        as_frame: return a pandas DataFrame (queries and ``all`` as rows, measures as columns).
        queries: which queries are evaluated and averaged. ``"run"`` (the default, plain
            trec_eval): the qrels' queries that the run has; run queries without judgments
            are skipped, and so are qrels queries without results (where trec_eval stops
            with exit status 4). ``"qrels"`` (``trec_eval -c``, ir_measures, ranx): every
            query of the qrels, those missing from the run scoring 0; the same as
            ``complete=True``.
        zscores: trec_eval ``-Z``: a z-scores file (``qid measure mean stddev`` lines) or
            ``{qid: {measure: (mean, stddev)}}``; every value is then ``(v - mean) /
            stddev`` per query, and the summary is over those (see
            :mod:`jaxrank.trec.zscores`).
        rel_format: trec_eval ``-R``: ``"qrels"`` (default) or ``"qrels_jg"`` (the
            second column of the qrels names a judgment group; measures ``"qrels_jg"``,
            ``map_avgjg``, ``P_avgjg``, ``Rprec_mult_avgjg``, averaged over the groups:
            :mod:`jaxrank.trec.judgment_groups`); ``"prefs"`` (``qrels`` is then a
            preferences file, ``qid jg jsg docno rel_level``) or ``"qrels_prefs"`` (qrels
            read as preferences), with the measures ``"all_prefs"`` (the default there),
            ``"prefs"`` or ``prefs_*`` (:mod:`jaxrank.trec.preferences`).

    Returns:
        ``{measure: value}`` over all queries; with ``per_query``,
        ``{"all": {measure: value}, "per_query": {qid: {measure: value}}}``. Counts are ints,
        ``runid`` and ``relstring`` strings, the rest floats. For several runs
        ``{name: run}``: ``{name: that result}``, in the dict's order.

    Raises:
        jaxrank.trec.TrecFormatError: a malformed or unreadable input (file and line named).
        jaxrank.trec.MeasureError: an unknown measure (the closest names suggested).
        ValueError: no query in both inputs, or bad options.

    Example:
        >>> import jaxrank
        >>> qrels = {"q1": {"d1": 1, "d2": 0, "d3": 1}}
        >>> run = {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.1}}
        >>> values = jaxrank.evaluate(qrels, run, ["map", "P.2", "nDCG@2"])
        >>> {name: round(value, 4) for name, value in values.items()}
        {'map': 0.8333, 'P_2': 0.5, 'nDCG@2': 0.6131}
        >>> qrels["q2"] = {"d1": 1}  # a query the run lacks
        >>> jaxrank.evaluate(qrels, run, "map")["map"] == values["map"]  # skipped
        True
        >>> round(jaxrank.evaluate(qrels, run, "map", queries="qrels")["map"], 4)  # scores 0
        0.4167
    """
    # the options are spelled out (not **options) so that help() and IDEs show them
    options = dict(
        per_query=per_query,
        complete=complete,
        max_docs=max_docs,
        rel_level=rel_level,
        judged_only=judged_only,
        num_docs=num_docs,
        version=version,
        as_frame=as_frame,
        queries=queries,
        zscores=zscores,
        rel_format=rel_format,
    )
    if _several_runs(run):
        once = qrels_once(qrels, measures, rel_format)
        return {str(name): evaluate(once, r, measures, **options) for name, r in run.items()}
    report_options = {k: v for k, v in options.items() if k not in ("per_query", "as_frame")}
    rep = report(qrels, run, measures, **report_options)
    if as_frame:
        return rep.to_frame(per_query)
    return rep.to_dict(per_query)
