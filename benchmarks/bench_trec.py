"""End-to-end benchmark of ``jaxrank eval`` against its peers on a big TREC run.

Times, from process start to printed output, each tool in its own fresh subprocess:

  1. ``jaxrank eval QRELS RUN -m all_trec`` (the console script of this environment), twice:
     cold (``JAXRANK_CACHE_DIR=`` turns the persistent compilation cache off, so XLA compiles
     in every run) and warm (the cache directory filled by one untimed run on the same data);
  2. the pytrec_eval path: parse both files in plain Python (``pytrec_eval.parse_qrel`` /
     ``parse_run``, or the equivalent loop), ``RelevanceEvaluator(qrels,
     pytrec_eval.supported_measures).evaluate(run)``, then the means, printed;
  3. ranx: ``Qrels.from_file`` / ``Run.from_file`` (kind="trec"), ``evaluate`` with the
     measures of ``all_trec`` that ranx has (see ``RANX_METRICS``), the means printed;
  4. the ``trec_eval`` binary, when one is on PATH;
  5. with ``--baseline DIR``, the jaxrank sources of another checkout (``jaxrank.cli.main()``
     with DIR first on ``sys.path``), cold and warm: an A/B of two versions, in the same
     round-robin;

plus floors: ``python -c pass``, ``python -c "import jaxrank"`` (the import floor) and
``python -c "import jax; jax.numpy.zeros(1)"`` (the JAX runtime's own memory and time). The
header records the machine, the versions and the load (``benchmarks/_machine.py``); a row
is marked ``noisy`` when the 1-minute load exceeded 0.5 around any of its runs (the run's
own share set aside). ``--trec-eval PATH`` names trec_eval's binary when it is not on PATH.

Each measured run goes through a small wrapper process that starts the tool, waits for it
and reports the tool's own wall time and ``getrusage(RUSAGE_CHILDREN)`` -- so the peak RSS
(``ru_maxrss``) and CPU time are those of that one tool run, never shared with another.
Tools run one at a time, round-robin over the repeats (so a burst of load elsewhere on the
machine hits all tools alike); the table shows medians. One untimed warm-up of every tool on
a tiny data set comes first (it fills ranx's numba cache, which would otherwise be compiled
in the first timed run). The 1-minute load average is sampled around every run.

With ``--breakdown`` (default on), one extra subprocess times the phases of the jaxrank
path using the package's public functions (import, ``trec.read_qrels``, ``trec.read_run``,
``evaluate.report`` twice -- the first includes XLA compilation, the second not -- and
``Report.to_trec``); nothing is added to the package for this. It reads the whole run at
once, where the command reads it a part at a time, so its peak RSS is higher.

The data come from ``benchmarks/gen_trec.py`` and are generated once into ``--data DIR``
(a fresh temporary directory, removed at the end, when not given):

    python benchmarks/bench_trec.py --data DIR                   # 5000 x 1000, 300 judged
    python benchmarks/bench_trec.py --queries 200 --docs 100 --judged 30 --repeats 1   # quick check
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import _machine

HERE = Path(__file__).resolve().parent


PYTREC_SCRIPT = textwrap.dedent(
    """
    # The pytrec_eval path: plain-Python parsing into dicts, RelevanceEvaluator, means.
    import collections, sys
    import pytrec_eval

    qrels_path, run_path = sys.argv[1], sys.argv[2]

    def parse_qrel(f):
        qrel = collections.defaultdict(dict)
        for line in f:
            qid, _, docno, rel = line.split()
            qrel[qid][docno] = int(rel)
        return qrel

    def parse_run(f):
        run = collections.defaultdict(dict)
        for line in f:
            qid, _, docno, _, score, _ = line.split()
            run[qid][docno] = float(score)
        return run

    parse_qrel = getattr(pytrec_eval, "parse_qrel", parse_qrel)
    parse_run = getattr(pytrec_eval, "parse_run", parse_run)
    with open(qrels_path) as f:
        qrels = parse_qrel(f)
    with open(run_path) as f:
        run = parse_run(f)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, pytrec_eval.supported_measures)
    results = evaluator.evaluate(run)
    measures = sorted(next(iter(results.values())).keys())
    agg = getattr(pytrec_eval, "compute_aggregated_measure", None)
    for m in measures:
        values = [r[m] for r in results.values()]
        mean = agg(m, values) if agg else sum(values) / len(values)
        print(f"{m:<22}\\tall\\t{mean:.4f}")
    """
)

# The measures of trec_eval's all_trec that ranx has (trec_eval name -> ranx name).
CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RANX_METRICS = (
    ["map", "ndcg", "mrr", "r-precision", "bpref", "hits", "f1"]
    + [f"hit_rate@{k}" for k in (1, 5, 10)]  # trec_eval success_1,5,10
    + [f"{m}@{k}" for m in ("precision", "recall", "ndcg", "map") for k in CUTS]
)

RANX_SCRIPT = textwrap.dedent(
    """
    # ranx: Qrels/Run.from_file(kind="trec"), evaluate, means.
    import sys
    from ranx import Qrels, Run, evaluate

    qrels_path, run_path, metrics = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
    qrels = Qrels.from_file(qrels_path, kind="trec")
    run = Run.from_file(run_path, kind="trec")
    means = evaluate(qrels, run, metrics)
    for m in metrics:
        print(f"{m:<22}\\tall\\t{means[m]:.4f}")
    """
)

BREAKDOWN_SCRIPT = textwrap.dedent(
    """
    # Phases of the jaxrank path, from the package's public functions (nothing added to it).
    import json, resource, sys, time
    t = [("start", time.perf_counter())]
    import jaxrank.cli  # what the console script imports first
    from jaxrank import trec
    from jaxrank.trec.evaluate import report
    t.append(("import jaxrank (+ cli, trec, evaluate)", time.perf_counter()))
    qrels_path, run_path, measures = sys.argv[1], sys.argv[2], sys.argv[3:]
    q = trec.read_qrels(qrels_path)
    t.append(("read qrels (trec.read_qrels)", time.perf_counter()))
    r = trec.read_run(run_path)
    t.append(("read run (trec.read_run)", time.perf_counter()))
    rep = report(q, r, measures)
    t.append(("evaluate, 1st call (batch + XLA compile + compute)", time.perf_counter()))
    rep = report(q, r, measures)
    t.append(("evaluate, 2nd call (batch + compute, compiled)", time.perf_counter()))
    text = rep.to_trec()
    t.append(("format (Report.to_trec)", time.perf_counter()))
    sys.stdout.write(text)
    sys.stdout.flush()
    t.append(("write stdout", time.perf_counter()))
    phases = [(name, b - a) for (_, a), (name, b) in zip(t, t[1:])]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(dict(phases=phases, maxrss_kb=rss)), file=sys.stderr)
    """
)


def _generate(data: Path, n_queries: int, n_docs: int, n_judged: int) -> tuple[Path, Path]:
    """Generate (once) the run and qrels into ``data/q{Q}_d{D}_j{J}``."""
    d = data / f"q{n_queries}_d{n_docs}_j{n_judged}"
    run, qrels, done = d / "bench.run", d / "bench.qrels", d / ".done"
    if not (done.exists() and run.exists() and qrels.exists()):
        d.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, str(HERE / "gen_trec.py"), str(d), str(n_queries), str(n_docs), str(n_judged)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        done.write_text("ok\n")
        print(f"# generated {d} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return qrels, run


def _find_jaxrank(explicit: str | None) -> str:
    if explicit:
        return explicit
    sibling = Path(sys.executable).parent / "jaxrank"
    if sibling.exists():
        return str(sibling)
    found = shutil.which("jaxrank")
    if not found:
        sys.exit("no jaxrank console script next to this python or on PATH (pip install -e .?)")
    return found


def _tools(args, qrels: Path, run: Path, scripts: Path, jaxrank_bin: str) -> list[tuple[str, list[str]]]:
    py = sys.executable
    tools: list[tuple[str, list[str]]] = []
    jr = [jaxrank_bin, "eval", str(qrels), str(run)]
    for m in args.measures:
        jr += ["-m", m]
    label_m = " ".join(f"-m {m}" for m in args.measures) or "(default measures)"
    if "jaxrank" in args.tools:
        # cold: no persistent compilation cache, XLA compiles in every run; warm: the cache
        # that `jaxrank eval` keeps on disk, filled by one untimed run on the same data
        tools.append((f"jaxrank eval {label_m}, cold (no compilation cache)", ["env", "JAXRANK_CACHE_DIR="] + jr))
        tools.append(
            (
                f"jaxrank eval {label_m}, warm (compilation cache of an earlier run)",
                ["env", f"JAXRANK_CACHE_DIR={scripts.parent / 'xla-cache'}"] + jr,
            )
        )
    if args.baseline:
        # another jaxrank checkout (e.g. `git worktree add BASE <commit>`), run the way the
        # console script runs (`jaxrank.cli.main()`), with its sources first on the path (not
        # PYTHONPATH: `python -m` puts the working directory, maybe this checkout, before it)
        base = str(Path(args.baseline).resolve())
        code = (
            f"import sys; sys.path.insert(0, {base!r}); import jaxrank, jaxrank.cli; "
            f"assert jaxrank.__file__.startswith({base!r}), jaxrank.__file__; sys.exit(jaxrank.cli.main())"
        )
        bj = [py, "-c", code] + jr[1:]
        tools.append((f"baseline {base}: jaxrank eval {label_m}, cold", ["env", "JAXRANK_CACHE_DIR="] + bj))
        tools.append(
            (
                f"baseline {base}: jaxrank eval {label_m}, warm",
                ["env", f"JAXRANK_CACHE_DIR={scripts.parent / 'xla-cache-baseline'}"] + bj,
            )
        )
    if "pytrec_eval" in args.tools:
        tools.append(
            ("pytrec_eval path (supported_measures)", [py, str(scripts / "pytrec_path.py"), str(qrels), str(run)])
        )
    if "ranx" in args.tools:
        tools.append(
            (
                f"ranx ({len(RANX_METRICS)} metrics)",
                [py, str(scripts / "ranx_path.py"), str(qrels), str(run), ",".join(RANX_METRICS)],
            )
        )
    te = args.trec_eval or shutil.which("trec_eval")
    if te and "trec_eval" in args.tools:
        cmd = [te]
        for m in args.measures:
            cmd += ["-m", m]
        tools.append((f"trec_eval (C) {label_m}", cmd + [str(qrels), str(run)]))
    if args.floors:
        tools.append(("floor: python -c pass", [py, "-c", "pass"]))
        tools.append(("floor: python -c 'import jaxrank'", [py, "-c", "import jaxrank"]))
        # the JAX runtime alone: import, and the CPU client that any computation starts
        tools.append(
            ("floor: JAX runtime (import jax; jax.numpy.zeros(1))", [py, "-c", "import jax; jax.numpy.zeros(1)"])
        )
    return tools


def _source_fingerprint() -> str:
    """sha256 (12 hex) of the installed jaxrank package's .py files, found without importing it."""
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("jaxrank")
    if spec is None or not spec.submodule_search_locations:
        return "?"
    root = Path(list(spec.submodule_search_locations)[0])
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode())
        h.update(f.read_bytes())
    return f"{h.hexdigest()[:12]} ({root})"


def _map_value(path: Path) -> str:
    """The 'map ... all' value printed by a tool, for an agreement check."""
    try:
        for line in path.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "map" and parts[1] == "all":
                return parts[2]
    except OSError:
        pass
    return "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="cache dir for generated files (default: a temp dir, removed at the end)")
    ap.add_argument("--queries", type=int, default=5000)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--judged", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "-m",
        dest="measures",
        action="append",
        help="measure(s) for jaxrank eval / trec_eval (default: all_trec); "
        "'-m default' runs jaxrank eval with no -m (trec_eval's default set)",
    )
    ap.add_argument(
        "--tools",
        default="jaxrank,pytrec_eval,ranx,trec_eval",
        help="comma-separated subset of jaxrank,pytrec_eval,ranx,trec_eval",
    )
    ap.add_argument("--no-floors", dest="floors", action="store_false", help="skip the import floors")
    ap.add_argument("--no-breakdown", dest="breakdown", action="store_false", help="skip the jaxrank phase breakdown")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false", help="skip the untimed warm-up on tiny data")
    ap.add_argument("--jaxrank", help="path of the jaxrank console script (default: next to this python)")
    ap.add_argument(
        "--baseline", metavar="DIR", help="also time the jaxrank sources in DIR (another checkout), cold and warm"
    )
    ap.add_argument("--trec-eval", help="trec_eval binary (default: trec_eval on PATH)")
    ap.add_argument("--json", help="also write the raw results here")
    args = ap.parse_args(argv)
    args.measures = args.measures or ["all_trec"]
    if args.measures == ["default"]:
        args.measures = []
    args.tools = [t.strip() for t in args.tools.split(",") if t.strip()]

    tmp = None
    if args.data:
        data = Path(args.data)
    else:
        tmp = tempfile.mkdtemp(prefix="jaxrank-bench-trec-")
        data = Path(tmp)
    data.mkdir(parents=True, exist_ok=True)
    try:
        return _bench(args, data)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def _bench(args, data: Path) -> int:
    machine = _machine.start(peers=("jaxrank", "pytrec_eval-terrier", "ranx"))
    print(machine.header(), file=sys.stderr)
    load_start = os.getloadavg()
    fingerprint = _source_fingerprint()
    scripts = data / "scripts"
    scripts.mkdir(exist_ok=True)
    (scripts / "pytrec_path.py").write_text(PYTREC_SCRIPT)
    (scripts / "ranx_path.py").write_text(RANX_SCRIPT)
    (scripts / "jaxrank_breakdown.py").write_text(BREAKDOWN_SCRIPT)
    outs = data / "outputs"
    outs.mkdir(exist_ok=True)
    jaxrank_bin = _find_jaxrank(args.jaxrank)

    qrels, run = _generate(data, args.queries, args.docs, args.judged)
    n_lines = args.queries * args.docs
    size_mb = run.stat().st_size / 1e6
    tools = _tools(args, qrels, run, scripts, jaxrank_bin)

    if args.warmup:
        tq, tr = _generate(data, 3, 50, 20)
        for name, cmd in _tools(args, tq, tr, scripts, jaxrank_bin):
            if name.startswith("floor"):
                continue
            print(f"# warm-up (tiny data): {name}", file=sys.stderr)
            _machine.run_command(cmd, outs / "warmup.txt")
        for name, cmd in tools:
            if "jaxrank eval" in name and name.endswith(("warm", "earlier run)")):
                print(f"# filling the compilation cache: {name}", file=sys.stderr)
                _machine.run_command(cmd, outs / "warmup.txt")
        # Read the big files once so that every timed run finds them in the page cache.
        for path in (qrels, run):
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass

    results: dict[str, list[dict]] = {name: [] for name, _ in tools}
    for rep in range(args.repeats):
        for i, (name, cmd) in enumerate(tools):
            res = _machine.run_command(cmd, outs / f"tool{i}.txt")
            results[name].append(res)
            print(
                f"# repeat {rep + 1}/{args.repeats} {name}: {res['wall']:.2f} s, "
                f"{res['maxrss_kb'] / 1024:.0f} MB, cpu {res['user'] + res['sys']:.1f} s, "
                f"load {res['load_before']:.2f}->{res['load_after']:.2f}",
                file=sys.stderr,
            )

    breakdown = None
    if args.breakdown and "jaxrank" in args.tools:
        p = subprocess.run(
            [sys.executable, str(scripts / "jaxrank_breakdown.py"), str(qrels), str(run), *args.measures],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            breakdown = json.loads(p.stderr.strip().splitlines()[-1])
        except (ValueError, IndexError):
            breakdown = {"error": p.stderr[-1000:]}
    load_end = os.getloadavg()
    fingerprint_end = _source_fingerprint()

    # ---- report -------------------------------------------------------------------------
    def med(name, key):
        return statistics.median(r[key] for r in results[name])

    def rss_mb(name):
        return max(r["maxrss_kb"] for r in results[name]) / 1024

    ref = next((n for n in results if n.startswith("pytrec_eval")), None)
    loads = [r[k] for rs in results.values() for r in rs for k in ("load_before", "load_after")]
    lines = []
    lines.append(
        f"Data: {args.queries} queries x {args.docs} docs = {n_lines:,} run lines "
        f"({size_mb:.0f} MB), {args.judged} judged docs per query "
        f"({args.queries * args.judged:,} qrels lines); gen_trec.py seed 0."
    )
    lines.append(
        f"Run at {time.strftime('%Y-%m-%d %H:%M:%S %Z')}. Machine: {os.cpu_count()} CPUs, {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.machine()}; repeats: {args.repeats} "
        f"(median wall; peak RSS = max over repeats)."
    )
    lines.append(
        f"Load average (1, 5, 15 min) at start: {load_start[0]:.2f} {load_start[1]:.2f} "
        f"{load_start[2]:.2f}; at end: {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}; "
        f"1-min load around the timed runs: min {min(loads):.2f}, median "
        f"{statistics.median(loads):.2f}, max {max(loads):.2f}."
    )
    lines.insert(0, machine.header())
    changed = "" if fingerprint_end == fingerprint else f" -> {fingerprint_end} (CHANGED during the run)"
    lines.append(f"jaxrank sources sha256: {fingerprint}{changed}.")
    lines.append("")
    lines.append(
        "| tool | wall s (median) | wall s (min..max) | CPU s (user+sys, median) | peak RSS MB "
        "| wall / pytrec_eval | RSS / pytrec_eval | output lines | map | load |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for i, (name, _) in enumerate(tools):
        rs = results[name]
        w, cpu, mb = med(name, "wall"), statistics.median(r["user"] + r["sys"] for r in rs), rss_mb(name)
        walls = [r["wall"] for r in rs]
        if ref:
            rw = f"{w / med(ref, 'wall'):.2f}"
            rm = f"{mb / rss_mb(ref):.2f}"
        else:
            rw = rm = "-"
        out = outs / f"tool{i}.txt"
        n_out = len(out.read_text().splitlines()) if out.exists() else 0
        lines.append(
            f"| {name} | {w:.2f} | {min(walls):.2f}..{max(walls):.2f} | {cpu:.1f} | {mb:.0f} "
            f"| {rw} | {rm} | {n_out} | {_map_value(out)} | {'noisy' if any(r['noisy'] for r in rs) else 'quiet'} |"
        )
    lines.append("")
    te = next((n for n in results if n.startswith("trec_eval")), None)
    for jr in (n for n in results if "jaxrank eval" in n) if te else ():
        ratio, rss = med(jr, "wall") / med(te, "wall"), rss_mb(jr) / rss_mb(te)
        flag = " (noisy)" if any(r["noisy"] for r in results[jr] + results[te]) else ""
        lines.append(
            f"{jr} vs trec_eval (C): wall {ratio:.2f}x (target <= 0.5: {'met' if ratio <= 0.5 else 'NOT met'}), "
            f"peak RSS {rss:.2f}x (target <= 1: {'met' if rss <= 1 else 'NOT met'}){flag}."
        )
    for jr in (n for n in results if "jaxrank eval" in n) if ref else ():
        speed = med(ref, "wall") / med(jr, "wall")
        mem = rss_mb(ref) / rss_mb(jr)
        lines.append(
            f"{jr} vs the pytrec_eval path: speed-up {speed:.2f}x (pytrec_eval wall / jaxrank "
            f"wall; target >= 2x: {'met' if speed >= 2 else 'NOT met'}), peak-RSS ratio {mem:.2f}x "
            f"(pytrec_eval / jaxrank; target > 1x: {'met' if mem > 1 else 'NOT met'})."
        )
    if breakdown is not None:
        lines.append("")
        if "phases" in breakdown:
            lines.append(
                f"jaxrank phase breakdown (one run, public functions, peak RSS {breakdown['maxrss_kb'] / 1024:.0f} MB):"
            )
            lines.append("")
            lines.append("| phase | s |")
            lines.append("|---|---:|")
            for name, s in breakdown["phases"]:
                lines.append(f"| {name} | {s:.2f} |")
        else:
            lines.append(f"jaxrank phase breakdown failed: {breakdown['error']}")
    lines.append("")
    lines.append(machine.finish())
    text = "\n".join(lines)
    print(text)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                dict(
                    args=vars(args),
                    fingerprint=[fingerprint, fingerprint_end],
                    load_start=load_start,
                    load_end=load_end,
                    results=results,
                    breakdown=breakdown,
                    machine=machine.as_dict(),
                    ranx_metrics=RANX_METRICS,
                ),
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
