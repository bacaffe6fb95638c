"""Command line: ``jaxrank eval QRELS RUN`` -- trec_eval's flags and trec_eval's output;
``jaxrank ndeval QRELS RUN`` -- ndeval's (:mod:`jaxrank.trec.ndeval`); ``jaxrank compare``.

::

    jaxrank eval QRELS RUN [RUN ...] [-m MEASURE ...] [-q] [-c] [-M N] [-l N] [-J] [-N N] [-n]
                 [-R qrels|qrels_jg|prefs|qrels_prefs] [-Z ZSCORES_FILE] [--format trec|json|csv] [--trec-eval-version 10|9]

``-m`` takes trec_eval names (``-m all_trec``, ``-m P.5,10``, ``-mndcg_cut.10``) and
ir_measures strings (``-m nDCG@10 -m 'P(rel=2)@5'``). With the default ``--format trec`` the
output is byte for byte trec_eval 10.0's. Without files, the demo pair shipped with jaxrank
is evaluated (a note goes to stderr, so stdout stays trec_eval's). Run queries absent from
the qrels are skipped, as trec_eval skips them, and a line on stderr says how many (nothing
when there are none). Bad input ends with exit status 1 and one line on stderr, with nothing
on stdout.

Several runs (``jaxrank eval QRELS RUN1 RUN2 ...``): the qrels are read once, and each run
is evaluated in turn (the later runs start from the batch shape guessed for the first, and
runs of one batch shape share the compiled program), its output
printed as ``jaxrank eval QRELS RUN`` prints it, in the order given. ``--format json``
prints one JSON object per run and line, with ``"run": RUN`` first; ``--format csv`` one
table, ``run,measure,qid,value``. A run that cannot be evaluated gets its one line on
stderr, naming it, and the others are still evaluated; the exit status is then 1.

The command's start-up latency machinery lives here, not in the Python API: XLA flags and
the persistent compilation cache, compilation started in the background for the batch shape
the run most likely has (overlapping the reading of the run), the garbage collector off, and
``os._exit`` once the output is written.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import gzip
import os
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:  # annotations only
    from jaxrank.measures.parse import Plan
    from jaxrank.trec.files import Qrels


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line and exit status 1 (see :func:`main`)."""

    def error(self, message: str):  # noqa: D102 - argparse API
        raise _UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="jaxrank", description="Ranking metrics for JAX.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    ev = sub.add_parser(
        "eval",
        help="evaluate a TREC run against qrels (trec_eval-compatible)",
        description="Evaluate a TREC run against qrels; output as trec_eval's. Several runs: each is "
        "printed as if alone, in order. Without files, the demo pair shipped with jaxrank is evaluated.",
    )
    ev.add_argument(
        "qrels",
        nargs="?",
        help="qrels file (qid iter docno rel, or BEIR's qrels/<split>.tsv with its header); - reads standard input",
    )
    ev.add_argument(
        "runs",
        nargs="*",
        metavar="RUN",
        help="run file (qid Q0 docno rank score tag); - reads standard input. Several: each is evaluated in "
        "turn against the qrels read once, its output as alone (json: one line per run, csv: one table, "
        "both with a run field)",
    )
    ev.add_argument(
        "-m",
        dest="measures",
        action="append",
        metavar="MEASURE",
        help="measure: trec_eval name (map, P.5,10, all_trec), ir_measures string "
        "(nDCG@10) or ranx name (hits@5, rbp.95); repeatable; default: trec_eval's official set",
    )
    ev.add_argument("-q", dest="per_query", action="store_true", help="also print each query's values")
    ev.add_argument(
        "-c", dest="complete", action="store_true", help="average over all queries of the qrels (missing ones score 0)"
    )
    ev.add_argument("-M", dest="max_docs", type=int, metavar="N", help="evaluate only the top N documents")
    ev.add_argument(
        "-l",
        dest="rel_level",
        type=int,
        default=1,
        metavar="N",
        help="relevance level: rel >= N is relevant (default 1)",
    )
    ev.add_argument("-J", dest="judged_only", action="store_true", help="drop unjudged retrieved documents")
    ev.add_argument(
        "-N", dest="num_docs", type=int, default=0, metavar="N", help="number of documents in the collection (utility)"
    )
    ev.add_argument("-n", dest="no_summary", action="store_true", help="no summary (the 'all' lines)")
    ev.add_argument(
        "-R",
        "--Rel_info_format",
        dest="rel_format",
        choices=("qrels", "qrels_jg", "prefs", "qrels_prefs"),
        default="qrels",
        help="qrels format: qrels (default), qrels_jg (the second column names a judgment group; -m qrels_jg), "
        "prefs (qid jg jsg docno rel_level) or qrels_prefs (qrels as preferences; both -m all_prefs)",
    )
    ev.add_argument(
        "-Z",
        "--Zscore",
        dest="zscores",
        metavar="ZSCORES_FILE",
        help="print z-scores: each value as (value - mean) / stddev, from lines 'qid measure mean stddev'",
    )
    ev.add_argument(
        "--format",
        choices=("trec", "json", "csv"),
        default="trec",
        help="output format (default trec: trec_eval's bytes)",
    )
    ev.add_argument(
        "--trec-eval-version",
        dest="version",
        choices=("10", "9"),
        default="10",
        help="reproduce trec_eval 10.0 (default) or 9.x, as bundled in pytrec_eval",
    )
    _compare_parser(sub)
    sub.add_parser(  # listed here; its arguments are ndeval's, read by _ndeval_args
        "ndeval",
        help="evaluate a diversity run against subtopic qrels (ndeval-compatible; -help for its options)",
        add_help=False,
    )
    return parser


def _compare_parser(sub) -> None:
    cmp = sub.add_parser(
        "compare",
        help="compare TREC runs: means, confidence intervals, significance tests",
        description="Evaluate several runs on the same qrels (every qrels query; a query missing from "
        "a run scores as with trec_eval -c) and test their differences, with p-values adjusted over the pairs.",
    )
    cmp.add_argument("qrels", help="qrels file (qid iter docno rel, or BEIR's qrels/<split>.tsv)")
    cmp.add_argument("runs", nargs="+", metavar="RUN", help="run files (at least two); named by file name")
    cmp.add_argument(
        "-m", dest="measures", action="append", metavar="MEASURE", help="measure, as for jaxrank eval; default: map"
    )
    cmp.add_argument("--baseline", metavar="NAME", help="test every run against this one (a RUN's name or path)")
    cmp.add_argument(
        "--test",
        choices=("randomization", "ttest", "wilcoxon", "sign", "tukey"),
        default="randomization",
        help="the test (tukey: Tukey's HSD over all the runs, as ranx; --correction is not applied)",
    )
    cmp.add_argument("--correction", choices=("holm", "bonferroni", "fdr_bh"), default="holm")
    cmp.add_argument("--alpha", type=float, default=0.05, help="significance level (default 0.05)")
    cmp.add_argument("--n-resamples", type=int, default=10000, help="randomization and bootstrap resamples")
    cmp.add_argument("--format", choices=("table", "json", "csv", "latex"), default="table")


def _run_compare(args) -> str:
    from jaxrank import _checks
    from jaxrank.stats import compare

    _programs_on_disk()

    try:  # the names jaxrank.compare gives a list of paths: file names, or paths where they clash
        names = list(_checks.named_runs(args.runs))
    except ValueError:
        raise _UsageError("each RUN must be given once") from None
    for path in [args.qrels, *args.runs]:
        if not os.path.isfile(path):
            raise _UsageError(f"no such file: {path}")
    baseline = args.baseline
    if baseline is not None and baseline not in names:
        by_path = dict(zip(args.runs, names))
        if baseline not in by_path:
            raise _UsageError(f"--baseline {baseline} is none of the runs: {', '.join(names)}")
        baseline = by_path[baseline]
    report = compare(
        args.qrels,
        dict(zip(names, args.runs)),
        args.measures or ["map"],
        baseline=baseline,
        test=args.test,
        n_resamples=args.n_resamples,
        correction=args.correction,
        alpha=args.alpha,
    )
    if args.format == "json":
        return report.to_json() + "\n"
    if args.format == "csv":
        return report.to_csv()
    if args.format == "latex":
        return report.to_latex()
    return report.to_markdown()


def _fast_compile_flags() -> None:
    """XLA:CPU compiles the measures faster with its older fusion code emitters, and the
    compiled code runs as fast (docs/reports/trec_eval.md). Only for the jaxlib versions where the flag is known
    (XLA aborts on an unknown flag), only when the user set no such flag, and only before XLA
    starts (in-process callers keep their settings)."""
    flag = "--xla_cpu_use_fusion_emitters=false"
    current = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" in current:
        return
    try:
        from importlib.metadata import version

        major, minor = (int(x) for x in version("jaxlib").split(".")[:2])
    except Exception:  # unknown version: leave XLA alone
        return
    if (major, minor) < (0, 7) or (major, minor) > (0, 10):
        return
    os.environ["XLA_FLAGS"] = f"{current} {flag}".strip()


def _compilation_cache() -> None:
    """Keep compiled measure code on disk between runs (JAX's persistent compilation cache),
    unless the user configured that cache already or set ``JAXRANK_CACHE_DIR`` to empty.
    The directory is ``$JAXRANK_CACHE_DIR``, else ``$XDG_CACHE_HOME/jaxrank`` (default
    ``~/.cache/jaxrank``); nothing happens when it cannot be written."""
    setting = os.environ.get("JAXRANK_CACHE_DIR")
    if setting == "":
        return
    import jax

    if jax.config.jax_compilation_cache_dir:
        return
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = setting or os.path.join(base, "jaxrank", "xla")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return
    if os.access(path, os.W_OK | os.X_OK):
        jax.config.update("jax_compilation_cache_dir", path)
        # JAX skips programs that compiled in under a second; on a fast machine that would be
        # every measure program, whose compilation a run then pays again
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        _PROGRAMS[:] = [os.path.join(path, "programs")]  # and whole measure programs, below


_PROGRAMS: list[str] = []  # the directory of whole programs, when the compilation cache is on


def _programs_on_disk() -> None:
    """Let the measure engine keep whole compiled programs beside the compilation cache, so
    that a later run neither traces nor compiles them (measures/engine.py: programs on
    disk); the engine is imported here, not at start-up: ``jaxrank ndeval`` does not need it."""
    if _PROGRAMS:
        from jaxrank.measures import engine

        engine.program_cache(_PROGRAMS[0])


def _libc(name: str) -> Optional[Callable]:
    """A glibc malloc function, or None (another C library)."""
    import ctypes

    try:
        return getattr(ctypes.CDLL(None), name)
    except (AttributeError, OSError):
        return None


def _one_malloc_arena() -> None:
    """glibc gives each thread that allocates its own malloc arena, and memory freed in one
    is kept for reuse there: XLA's worker threads and the reading threads then hold a few
    hundred MB of freed blocks between them (docs/reports/trec_eval.md). One arena keeps the peak
    RSS near the live data; its lock costs nothing measurable with these few, large
    allocations. Only before JAX starts its threads."""
    mallopt = _libc("mallopt")
    if mallopt is not None:
        mallopt(-8, 1)  # M_ARENA_MAX (malloc.h)


def _release_freed_memory() -> None:
    """Give the pages of freed heap blocks back to the system (reading the qrels leaves
    about 90 MB of them on the 5M-line benchmark, docs/reports/trec_eval.md)."""
    trim = _libc("malloc_trim")
    if trim is not None:
        trim(0)


def _one_line(message: object) -> str:
    return " ".join(str(message).split()) or "error"


# -- start-up latency: compile in the background while the run is read


def _in_background(work: Callable[[], None]) -> None:
    # not a daemon: the interpreter waits for it at exit (a daemon thread killed inside
    # XLA at exit can crash the process)
    threading.Thread(target=work, name="jaxrank-compile", daemon=False).start()


def _wait_for_compilations() -> None:
    """Return once every compilation :func:`_in_background` started has finished: none
    outlives the evaluation that started it (a guess that went unused included)."""
    for thread in threading.enumerate():
        if thread.name == "jaxrank-compile":
            thread.join()


_PEEK_BYTES = 1 << 20  # what _peek_depth reads of a run


def _peek_depth(source) -> Optional[int]:
    """How many lines the deepest query of a run file has (run files keep a query's lines
    together), from the whole queries of its first MiB (all of a small file); None when that
    cannot be told. A run that opens with a shallower query than the rest is guessed right
    when its first MiB holds a deeper one (the demo run's queries have 50 to 80 lines)."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    path = Path(source)
    size = _PEEK_BYTES
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            head = f.read(size + 1)
    except OSError:
        return None
    whole = len(head) <= size
    lines = head.split(b"\n")
    if not whole:
        lines = lines[:-1]  # a line cut by the MiB's end
    counts, count, first = [], 0, None
    for line in lines:
        fields = line.split(None, 1)
        if not fields or fields[0].startswith(b"#"):
            continue
        if fields[0] != first:
            if count:
                counts.append(count)
            first, count = fields[0], 0
        count += 1
    if count and (whole or not counts):  # the last query is whole, or the only one seen
        counts.append(count)
    return max(counts, default=0) or None


def _speculate(plan: Plan, q: Qrels, run_source, *, max_docs) -> Optional[tuple]:
    """Start compiling, in the background, for the batch shape the run most likely gives:
    the qrels' queries and judgments, and the depth of the run's first query. Compilation
    then overlaps the parsing of the run. Returns the shape, or None. First gives the memory
    freed by reading the qrels back."""
    _release_freed_memory()
    depth = _peek_depth(run_source)
    if depth is None or len(q) == 0:
        return None
    import numpy as np

    from jaxrank.measures import engine

    if max_docs is not None:
        depth = min(depth, max_docs)
    m = int(np.diff(q.offsets).max())
    n = engine.bucket(max(depth, 1))
    shape = engine.reuse(plan, (engine.rows_per_call(len(q), n), n, engine.bucket(max(m, 1))), None)
    engine.executable(plan, shape, spawn=_in_background)
    return shape


def _unjudged_note(qids: Sequence[str], shown: int = 5, run: Optional[str] = None) -> str:
    """The line ``jaxrank eval`` writes on stderr when run queries were skipped for having no
    judgments: trec_eval skips them silently (with ``-c`` too), so a user who mistyped the
    qrels or mixed up topic sets would not know. The first ``shown`` are named.

    >>> _unjudged_note(["q7", "q8", "q9"])
    'jaxrank eval: skipped 3 run queries with no judgments in the qrels (trec_eval skips them too): q7, q8, q9'
    >>> _unjudged_note(["q7"], run="a.run")
    'jaxrank eval: a.run: skipped 1 run query with no judgments in the qrels (trec_eval skips it too): q7'
    """
    n = len(qids)
    names = ", ".join(qids[:shown]) + (", ..." if n > shown else "")
    what, them = ("query", "it") if n == 1 else ("queries", "them")
    which = "" if run is None else f"{run}: "
    return (
        f"jaxrank eval: {which}skipped {n} run {what} with no judgments in the qrels (trec_eval skips {them} too): "
        f"{names}"
    )


def _run_eval(args) -> tuple[str, int]:
    """The output of ``jaxrank eval`` and its exit status (several runs: written as each is
    evaluated, and the text returned is empty)."""
    from jaxrank import trec
    from jaxrank.measures.parse import parse_measures

    _programs_on_disk()
    if args.rel_format == "qrels_jg":
        from jaxrank.trec.judgment_groups import parse_jg_measures

        parse_jg_measures(args.measures)  # bad measure names fail before any file is read
    elif args.rel_format in ("prefs", "qrels_prefs"):
        from jaxrank.trec.preferences import parse_prefs_measures

        parse_prefs_measures(args.measures)
    else:
        parse_measures(args.measures)
    qrels, runs = args.qrels, [str(r) for r in args.runs]
    if qrels is None and not runs:
        qrels, run = trec.demo_paths()
        runs = [str(run)]
        print(f"jaxrank: no files given; evaluating the demo pair shipped with jaxrank: {qrels} {run}", file=sys.stderr)
    elif not runs:
        raise _UsageError("give QRELS and RUN (or several RUNs), or neither for the demo pair")
    if len(runs) == 1:
        rep = _report(args, str(qrels), runs[0])
        if rep.unjudged:
            print(_unjudged_note(rep.unjudged), file=sys.stderr)
        return _formatted(args, rep), 0
    from jaxrank.trec.evaluate import qrels_once

    once = qrels_once(str(qrels), args.measures, args.rel_format)
    status = 0
    header = True  # csv: one header for all the runs
    first: list = []  # the batch shape guessed for the first run, once guessed
    for run in runs:
        try:
            rep = _report(args, once, run, first=first)
        except Exception as e:  # this run only: one line naming it; the others go on
            print(f"jaxrank: {_about_run(run, e)}", file=sys.stderr)
            status = 1
            continue
        if rep.unjudged:
            print(_unjudged_note(rep.unjudged, run=run), file=sys.stderr)
        sys.stdout.write(_formatted(args, rep, run=run, header=header))
        header = False
    return "", status


def _about_run(run: str, e: Exception) -> str:
    """The line for a run that could not be evaluated, naming the run."""
    from jaxrank.trec import MeasureError, TrecFormatError

    known = isinstance(e, (TrecFormatError, MeasureError, ValueError, OSError))
    text = _one_line(e)
    if not text.startswith((f"{run}:", f"{Path(run)}:")):
        text = f"{run}: {text}"
    return text if known else f"internal error ({type(e).__name__}): {text}"


def _formatted(args, rep, run: Optional[str] = None, header: bool = True) -> str:
    """A report in the asked format; ``run`` names it (json, csv) among several runs."""
    if args.format == "json":
        return rep.to_json(args.per_query, run=run)
    if args.format == "csv":
        return rep.to_csv(args.per_query, summary=not args.no_summary, run=run, header=header)
    return rep.to_trec(args.per_query, summary=not args.no_summary)


def _report(args, qrels, run: str, first: Optional[list] = None):
    """One run's report, with compilation started in the background while it is read.

    ``first`` (several runs): the batch shape guessed for the first run, which the later
    runs take instead of guessing from their own first MiB, a pass over it in Python that
    cost more than evaluating a small run (docs/reports/trec_eval.md); a later run with deeper
    queries than the guess stops its stream and is evaluated once read, as a wrong guess is."""
    from jaxrank.trec.evaluate import report

    def before_run(plan, q):
        if first:
            return first[0]
        shape = _speculate(plan, q, run, max_docs=args.max_docs)
        if first is not None:
            first.append(shape)
        return shape

    try:
        return report(
            qrels,
            run,
            args.measures,
            complete=args.complete,
            max_docs=args.max_docs,
            rel_level=args.rel_level,
            judged_only=args.judged_only,
            num_docs=args.num_docs,
            version=args.version,
            zscores=args.zscores,
            rel_format=args.rel_format,
            before_run=before_run,
        )
    finally:
        _wait_for_compilations()


# -- jaxrank ndeval

_NDEVAL_VERSION = "version 4.5 (Mon 29 Apr 2013 20:51:02 EDT)"
_NDEVAL_USAGE = "usage: jaxrank ndeval [options] QRELS RUN (-help for the options)"
_NDEVAL_HELP = """jaxrank ndeval [options] QRELS RUN
  ndeval's novelty and diversity measures for TREC Web tasks, as a CSV on standard
  output, byte for byte ndeval's (jaxrank/trec/ndeval.py). QRELS lines are
  'topic subtopic docno judgment', RUN lines 'topic Q0 docno rank score runid'.

  options (before QRELS and RUN, as ndeval reads them):
    -alpha value      redundancy intolerance of alpha-nDCG and NRBP, in [0, 1] (0.5)
    -beta value       patience of NRBP, in [0, 1] (0.5)
    -traditional      order runs by score, then docno (default: by the rank column)
    -baseline RUN     risk-sensitive evaluation against this baseline run
    -riskAlpha value  losses against the baseline weigh 1 + value (default 0)
    -c                average over every topic of the qrels (and print the baseline's
                      topics the run lacks)
    -M depth          cut each topic of the runs at this depth
    -version          print ndeval's version

  Measures: ERR-IA, nERR-IA, alpha-DCG, alpha-nDCG, P-IA, strec at 5, 10 and 20; NRBP,
  nNRBP, MAP-IA.
"""


@dataclasses.dataclass
class _NdevalArgs:
    qrels: str = ""
    run: str = ""
    alpha: float = 0.5
    beta: float = 0.5
    traditional: bool = False
    complete: bool = False
    depth: int = 0
    baseline: Optional[str] = None
    risk_alpha: float = 0.0
    risk_alpha_text: str = "0"
    show: Optional[str] = None  # "help" or "version": print that instead


def _c_number(option: str, text: str, whole: bool = False) -> float:
    """An option's value as ndeval's ``sscanf`` reads it (the number at the start);
    text without one is refused (ndeval would keep the previous value)."""
    import re

    from jaxrank.trec.subtopics import strtod

    m = re.match(r"[ \t\n\v\f\r]*([+-]?\d+)", text) if whole else None
    value = int(m.group(1)) if m else (None if whole else strtod(text.lstrip(" \t\n\v\f\r").encode()))
    if value is None:
        raise _UsageError(f"{option} {text}: not a number; {_NDEVAL_USAGE}")
    return value


def _ndeval_args(words: Sequence[str]) -> _NdevalArgs:
    """ndeval's command line: options are read from the front while more than QRELS and
    RUN are left (so the last two words are always the files), as ndeval's ``main`` does.

    >>> a = _ndeval_args(["-alpha", "0.3", "-c", "-M", "5", "q", "r"])
    >>> a.alpha, a.complete, a.depth, a.qrels, a.run
    (0.3, True, 5, 'q', 'r')
    """
    args, rest = _NdevalArgs(), list(words)
    while len(rest) != 2:
        head = rest[0] if rest else ""
        if head in ("-version", "-help", "--help", "-h"):
            args.show = "version" if head == "-version" else "help"
            return args
        if len(rest) >= 4 and head in ("-alpha", "-beta", "-M", "-baseline", "-riskAlpha"):
            option, value = head, rest[1]
            rest = rest[2:]
            if option == "-baseline":
                args.baseline = value
            elif option == "-M":
                args.depth = int(_c_number(option, value, whole=True))
                if args.depth <= 0:
                    raise _UsageError(f"-M {value}: the depth must be positive; {_NDEVAL_USAGE}")
            else:
                number = _c_number(option, value)
                if option == "-riskAlpha":
                    if number < 0:
                        raise _UsageError(f"-riskAlpha {value}: must not be negative; {_NDEVAL_USAGE}")
                    args.risk_alpha, args.risk_alpha_text = number, value
                elif not 0.0 <= number <= 1.0:
                    raise _UsageError(f"{option} {value}: must be in [0, 1]; {_NDEVAL_USAGE}")
                else:
                    setattr(args, option[1:], number)
        elif len(rest) >= 3 and head == "-traditional":
            args.traditional, rest = True, rest[1:]
        elif len(rest) >= 3 and head.startswith("-"):
            if any(c not in "ca" for c in head[1:]):  # -a (ndeval's unused 'all') is accepted
                raise _UsageError(f"unknown option {head}; {_NDEVAL_USAGE}")
            args.complete = args.complete or "c" in head
            rest = rest[1:]
        else:
            raise _UsageError(_NDEVAL_USAGE)
    args.qrels, args.run = rest
    return args


def _run_ndeval(args: _NdevalArgs) -> str:
    from jaxrank.trec import ndeval, subtopics

    qrels = subtopics.read_subtopic_qrels(args.qrels, ndeval=True)
    runs = [args.run] if args.baseline is None else [args.run, args.baseline]
    read = [subtopics.read_ndeval_run(r, traditional=args.traditional, depth=args.depth) for r in runs]
    table, *base_table = [ndeval.evaluate_run(qrels, r, alpha=args.alpha, beta=args.beta) for r in read]
    base = base_table[0] if base_table else None
    return ndeval.ndeval_text(
        table,
        qrels_topics=len(qrels) if args.complete else None,
        baseline=base,
        risk_alpha=args.risk_alpha,
        risk_alpha_text=args.risk_alpha_text,
    )


def _ndeval_main(words: Sequence[str], command: bool) -> int:
    """``jaxrank ndeval``: usage errors and bad input end with one line on stderr and exit
    status 1, as ndeval's do."""
    try:
        args = _ndeval_args(words)
    except _UsageError as e:
        print(f"jaxrank ndeval: {_one_line(e)}", file=sys.stderr)
        return 1
    if args.show is not None:
        from jaxrank import __version__

        text = (
            _NDEVAL_HELP
            if args.show == "help"
            else f"jaxrank ndeval: jaxrank {__version__}, ndeval {_NDEVAL_VERSION}\n"
        )
        sys.stdout.write(text)
        return _finish(0, command)
    if command:
        _start_up()
    try:
        text = _run_ndeval(args)
    except Exception as e:  # malformed input: one line, no traceback
        from jaxrank.trec import TrecFormatError

        known = isinstance(e, (TrecFormatError, ValueError, OSError))
        prefix = "" if known else f"internal error ({type(e).__name__}): "
        print(f"jaxrank ndeval: {prefix}{_one_line(e)}", file=sys.stderr)
        return _finish(1, command)
    sys.stdout.write(text)
    return _finish(0, command)


def _start_up() -> None:
    """The command's start-up settings, before JAX starts (see :func:`main`)."""
    # The run makes few reference cycles (arrays are freed by reference counting), and
    # the collector's passes over JAX's many objects are pure overhead here.
    gc.disable()
    _one_malloc_arena()
    _fast_compile_flags()
    _compilation_cache()


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of the ``jaxrank`` command; returns the exit status."""
    command = argv is None  # the command itself, not a caller in a Python process
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["ndeval"]:  # ndeval's own option syntax (-alpha, -c), not argparse's
        return _ndeval_main(words[1:], command)
    try:
        args = _parser().parse_args(argv)
    except _UsageError as e:
        print(f"jaxrank: {_one_line(e)} (see jaxrank eval --help)", file=sys.stderr)
        return 1
    except SystemExit as e:  # --help
        return int(e.code or 0)
    if command:
        _start_up()
    try:
        text, status = (_run_compare(args), 0) if args.command == "compare" else _run_eval(args)
    except _UsageError as e:
        print(f"jaxrank: {_one_line(e)}", file=sys.stderr)
        return _finish(1, command)
    except Exception as e:  # malformed input, unknown measure, ...: one line, no traceback
        from jaxrank.trec import MeasureError, TrecFormatError

        known = isinstance(e, (TrecFormatError, MeasureError, ValueError, OSError))
        prefix = "" if known else f"internal error ({type(e).__name__}): "
        print(f"jaxrank: {prefix}{_one_line(e)}", file=sys.stderr)
        return _finish(1, command)
    sys.stdout.write(text)
    return _finish(status, command)


def _finish(status: int, command: bool) -> int:
    """Flush the output; the command then ends at once, skipping the interpreter's teardown
    of JAX and XLA objects (nothing to save); no background compilation is left by then
    (:func:`_run_eval` waits for them, which may still be writing the compilation cache)."""
    try:
        sys.stdout.flush()
    except OSError:  # e.g. a closed pipe
        status = 1
    if not command:
        return status
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    sys.exit(main())
