"""Many runs against one qrels: ``jaxrank eval QRELS RUN1 ... RUN100`` in one call, beside
trec_eval's C binary called once per run in a shell loop, and ir_measures and ranx
evaluating the same runs in one Python process each.

The data (``benchmarks/gen_trec.py``): one qrels of ``--queries`` topics (300 judged
documents each, graded), and ``--runs`` runs of ``--queries`` x ``--docs`` documents, each
drawing its documents among the 2 x ``--docs`` documents the qrels judge from (different
documents and scores per run; 4-decimal scores, so ties occur). Every tool runs in a fresh
process, timed from its start to its last output line; the table shows the median wall time
of ``--repeats`` rounds, round-robin over the tools (a burst of load elsewhere hits them
alike), and the peak RSS of that process (the largest over its runs):

1. ``jaxrank eval -m all_trec QRELS RUN...``: cold (``JAXRANK_CACHE_DIR=``: XLA compiles in
   the call) and warm (the compilation cache of an earlier call);
2. ``for f in RUN...; do trec_eval -m all_trec QRELS $f; done`` (``sh``), the way the C
   binary is used on a set of runs; the binary is ``--trec-eval``, or ``trec_eval`` on
   PATH, or built from ``../shared/ref/trec_eval`` (as the tests build it);
3. ir_measures: ``read_trec_qrels`` once, then for each run ``read_trec_run`` and
   ``calc_aggregate`` of the 65 measures of ``all_trec`` that
   ``ir_measures.parse_trec_measure`` converts (its pytrec_eval provider);
4. ranx: ``Qrels.from_file`` once, then for each run ``Run.from_file`` and ``evaluate`` of
   the 46 metrics of ``all_trec`` that ranx has (``benchmarks/bench_trec.py``'s list).

jaxrank's output is checked byte for byte against the concatenated outputs of the C loop.

    python benchmarks/bench_many_runs.py                       # 100 runs of 50 x 1000, 3 repeats
    python benchmarks/bench_many_runs.py --runs 5 --repeats 1  # quick check
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import _machine
import gen_trec

HERE = Path(__file__).resolve().parent
TREC_EVAL_SOURCE = HERE.parents[1] / "shared" / "ref" / "trec_eval"

# The measures of trec_eval's all_trec that ranx has (bench_trec.py's RANX_METRICS).
CUTS = (5, 10, 15, 20, 30, 100, 200, 500, 1000)
RANX_METRICS = (
    ["map", "ndcg", "mrr", "r-precision", "bpref", "hits", "f1"]
    + [f"hit_rate@{k}" for k in (1, 5, 10)]
    + [f"{m}@{k}" for m in ("precision", "recall", "ndcg", "map") for k in CUTS]
)


IR_MEASURES_SCRIPT = textwrap.dedent(
    """
    import sys
    import ir_measures

    names = ["num_q", "num_ret", "num_rel", "num_rel_ret", "map", "Rprec", "bpref", "recip_rank",
             "iprec_at_recall", "P", "recall", "infAP", "ndcg", "success", "map_cut", "ndcg_cut",
             "set_P", "set_recall", "set_relative_P", "set_map", "set_F"]
    measures = [m for n in names for m in ir_measures.parse_trec_measure(n)]
    qrels = list(ir_measures.read_trec_qrels(sys.argv[1]))
    for path in sys.argv[2:]:
        means = ir_measures.calc_aggregate(measures, qrels, ir_measures.read_trec_run(path))
        for m in measures:
            print(f"{str(m):<22}\\tall\\t{means[m]:.4f}")
    """
)

RANX_SCRIPT = textwrap.dedent(
    """
    import sys
    from ranx import Qrels, Run, evaluate

    metrics = sys.argv[1].split(",")
    qrels = Qrels.from_file(sys.argv[2], kind="trec")
    for path in sys.argv[3:]:
        means = evaluate(qrels, Run.from_file(path, kind="trec"), metrics, make_comparable=True)
        for m in metrics:
            print(f"{m:<22}\\tall\\t{means[m]:.4f}")
    """
)


def _generate(d: Path, n_runs: int, n_queries: int, n_docs: int, n_judged: int) -> tuple[Path, list[Path]]:
    """The qrels and runs in ``d`` (generated once)."""
    qrels = d / "bench.qrels"
    runs = [d / f"run{r:03d}.run" for r in range(n_runs)]
    done = d / ".done"
    if not done.exists():
        d.mkdir(parents=True, exist_ok=True)
        gen_trec.generate_qrels(qrels, n_queries, n_judged, seed=0, n_docs=n_docs)
        for r, path in enumerate(runs):
            gen_trec.generate_run(path, n_queries, n_docs, seed=r + 1, tag=f"run{r:03d}", pool_seed=0)
        done.write_text("ok\n")
    return qrels, runs


def _trec_eval(explicit: str | None, build_dir: Path) -> str | None:
    """trec_eval's binary: given, on PATH, or built from ../shared/ref/trec_eval."""
    if explicit:
        return explicit
    found = shutil.which("trec_eval")
    if found:
        return found
    if not (TREC_EVAL_SOURCE / "Makefile").exists() or not shutil.which("make"):
        return None
    build = build_dir / "trec_eval_src"
    if not (build / "trec_eval").exists():
        shutil.copytree(TREC_EVAL_SOURCE, build, dirs_exist_ok=True)
        subprocess.run(["make", "-s", "-C", str(build)], check=True, capture_output=True)
    return str(build / "trec_eval")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="folder for the generated files (default: a temporary one, removed at the end)")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--judged", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--trec-eval", help="trec_eval's binary (default: on PATH, else built from ../shared/ref)")
    ap.add_argument("--tools", default="jaxrank,trec_eval,ir_measures,ranx", help="a comma-separated subset")
    args = ap.parse_args(argv)

    tmp = None if args.data else tempfile.mkdtemp(prefix="bench_many_runs_")
    base = Path(args.data or tmp)
    try:
        qrels, runs = _generate(
            base / f"r{args.runs}_q{args.queries}_d{args.docs}_j{args.judged}",
            args.runs,
            args.queries,
            args.docs,
            args.judged,
        )
        te = _trec_eval(args.trec_eval, base)
        wanted = args.tools.split(",")
        py = sys.executable
        jaxrank_bin = str(Path(py).parent / "jaxrank") if (Path(py).parent / "jaxrank").exists() else "jaxrank"
        scripts = base / "scripts"
        scripts.mkdir(exist_ok=True)
        (scripts / "ir_measures_path.py").write_text(IR_MEASURES_SCRIPT)
        (scripts / "ranx_path.py").write_text(RANX_SCRIPT)
        files = [str(r) for r in runs]
        jr = [jaxrank_bin, "eval", "-m", "all_trec", str(qrels), *files]
        tools: list[tuple[str, list[str]]] = []
        if "jaxrank" in wanted:
            tools.append(("jaxrank eval -m all_trec QRELS RUN... (one call), cold", ["env", "JAXRANK_CACHE_DIR=", *jr]))
            cache = f"JAXRANK_CACHE_DIR={base / 'xla-cache'}"
            subprocess.run(["env", cache, *jr], check=True, capture_output=True)  # fills the cache
            tools.append(("jaxrank eval -m all_trec QRELS RUN... (one call), warm cache", ["env", cache, *jr]))
        if te and "trec_eval" in wanted:
            loop = f'for f in "$@"; do "{te}" -m all_trec "{qrels}" "$f" || exit 1; done'
            tools.append(("trec_eval (C) -m all_trec, once per run (sh loop)", ["sh", "-c", loop, "sh", *files]))
        if "ir_measures" in wanted:
            script = str(scripts / "ir_measures_path.py")
            tools.append(("ir_measures, one process (65 measures)", [py, script, str(qrels), *files]))
        if "ranx" in wanted:
            script = str(scripts / "ranx_path.py")
            label = f"ranx, one process ({len(RANX_METRICS)} metrics)"
            tools.append((label, [py, script, ",".join(RANX_METRICS), str(qrels), *files]))
            # ranx's numba cache: filled by one untimed run on two runs
            subprocess.run([py, script, ",".join(RANX_METRICS), str(qrels), *files[:2]], capture_output=True)

        run = _machine.start(
            peers=("ir_measures", "ranx", "numba", "pytrec_eval-terrier"),
            extra={"data": f"{args.runs} runs of {args.queries} topics x {args.docs} documents, {args.judged} judged"},
        )
        print(run.header())
        results: dict[str, list[dict]] = {name: [] for name, _ in tools}
        outs = {name: base / f"out{i}.txt" for i, (name, _) in enumerate(tools)}
        for _ in range(args.repeats):
            for name, cmd in tools:
                results[name].append(_machine.run_command(cmd, outs[name]))
        print(f"\n| tool | wall s (median of {args.repeats}) | min..max | peak RSS MB | |")
        print("|---|---|---|---|---|")
        for name, _ in tools:
            walls = [r["wall"] for r in results[name]]
            rss = max(r["maxrss_kb"] for r in results[name]) / 1024
            flag = "noisy" if any(r["noisy"] for r in results[name]) else ""
            print(
                f"| {name} | {statistics.median(walls):.2f} | {min(walls):.2f}..{max(walls):.2f} | {rss:.0f} | {flag} |"
            )
        c_out = next((outs[n] for n, _ in tools if n.startswith("trec_eval")), None)
        for name, _ in tools:
            if name.startswith("jaxrank") and c_out is not None:
                same = outs[name].read_bytes() == c_out.read_bytes()
                print(f"# {name}: output {'identical to' if same else 'DIFFERENT from'} the C loop's, byte for byte")
        print(run.finish())
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    status = main()
    print(f"# total {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    sys.exit(status)
