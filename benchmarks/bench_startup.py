"""``jaxrank eval``'s start-up: the packaged demo beside ``import jax`` and the C binary.

Issue 36 part 6: ``jaxrank eval`` of a small file within 0.2 s of ``python -c "import jax"``
on the same machine. Each command runs in a fresh process, round-robin over the commands
(interleaved, so that a change in the machine's load reaches every row alike), ``--repeats``
times; the table gives the median wall time (``perf_counter`` around ``fork`` to ``wait``) and
the median CPU time of the process (``wait4``'s rusage, user + system), with the 1-minute
load average around the rounds.

The commands:

* ``python -c "import jax"`` and ``python -c "import jaxrank"`` (the floors), and ``import jax``
  ended by ``os._exit(0)`` as ``jaxrank eval`` ends (no teardown of the interpreter);
* ``jaxrank eval`` with no files (the demo pair shipped with jaxrank, 364 lines), through the
  console script, with the compilation cache of an earlier run (``warm``: what every run
  after the first gets) and, with ``--cold``, without any (``JAXRANK_CACHE_DIR=``);
* with ``--baseline DIR`` (a worktree of another commit, ``git worktree add DIR COMMIT``),
  the same two ``import jaxrank`` and ``jaxrank eval`` from DIR, run as ``bench_trec.py
  --baseline`` runs it (DIR first on ``sys.path``, then ``jaxrank.cli.main()``);
* with ``--trec-eval BINARY``, trec_eval's C binary on the same demo files. trec_eval 10 stops
  with exit status 4 when a qrels query has no results (the demo's q4), so it runs with
  ``-c``; so does a ``jaxrank eval -c`` row, for the same output.

The caches are filled by one untimed run of each command before the rounds. Bytecode: this
project's environment may set ``PYTHONDONTWRITEBYTECODE=1``, which makes every process
compile jaxrank's sources again (an installed package has its ``.pyc`` files); the
commands run with that variable removed and ``PYTHONPYCACHEPREFIX`` set to a directory of
the benchmark's own, filled by the untimed runs (``--bytecode off`` keeps the environment).

    python benchmarks/bench_startup.py --repeats 15 --baseline BASE --trec-eval TREC_EVAL
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _machine

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _timed(cmd: list[str], env: dict) -> tuple[float, float, str]:
    """(wall s, CPU s of the process, stdout) of one run of ``cmd``; raises when it fails."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise RuntimeError(f"{cmd!r} exited with {p.returncode}: {err.read().decode(errors='replace')[-2000:]}")
        return wall, usage.ru_utime + usage.ru_stime, out.read().decode(errors="replace")


def _commands(args, tmp: Path) -> list[tuple[str, list[str], dict]]:
    py = sys.executable
    base_env = dict(os.environ)
    if args.bytecode == "on":
        base_env.pop("PYTHONDONTWRITEBYTECODE", None)
        base_env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")

    def env(**extra) -> dict:
        return {**base_env, **extra}

    script = shutil.which("jaxrank", path=str(Path(py).parent)) or shutil.which("jaxrank")
    if script is None:
        sys.exit("no jaxrank console script next to this python or on PATH (pip install -e .?)")
    qrels, run = ROOT / "jaxrank" / "data" / "demo.qrels", ROOT / "jaxrank" / "data" / "demo.run"
    out = [
        ('python -c "import jax"', [py, "-c", "import jax"], env()),
        # jaxrank eval ends with os._exit, skipping the interpreter's teardown of JAX's modules
        ('python -c "import jax; os._exit(0)"', [py, "-c", "import os, jax; os._exit(0)"], env()),
        ('python -c "import jaxrank"', [py, "-c", "import jaxrank"], env()),
        ("jaxrank eval (demo), warm cache", [script, "eval"], env(JAXRANK_CACHE_DIR=str(tmp / "cache"))),
    ]
    if args.cold:
        out.append(("jaxrank eval (demo), no cache", [script, "eval"], env(JAXRANK_CACHE_DIR="")))
    if args.trec_eval:
        out.append(
            ("jaxrank eval -c (demo), warm cache", [script, "eval", "-c"], env(JAXRANK_CACHE_DIR=str(tmp / "cache")))
        )
        out.append(("trec_eval (C) -c (demo files)", [args.trec_eval, "-c", str(qrels), str(run)], env()))
    if args.baseline:
        base = str(Path(args.baseline).resolve())
        first = f"import sys; sys.path.insert(0, {base!r}); "
        check = f"assert jaxrank.__file__.startswith({base!r}), jaxrank.__file__; "
        out.append(
            (f'baseline: python -c "import jaxrank" ({base})', [py, "-c", first + "import jaxrank; " + check], env())
        )
        main = first + "import jaxrank, jaxrank.cli; " + check + "sys.exit(jaxrank.cli.main())"
        out.append(
            (
                f"baseline: jaxrank eval (demo), warm cache ({base})",
                [py, "-c", main, "eval"],
                env(JAXRANK_CACHE_DIR=str(tmp / "cache-baseline")),
            )
        )
        if args.cold:
            out.append(
                (
                    f"baseline: jaxrank eval (demo), no cache ({base})",
                    [py, "-c", main, "eval"],
                    env(JAXRANK_CACHE_DIR=""),
                )
            )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15, help="rounds over the commands (default 15; at least 10)")
    ap.add_argument("--baseline", metavar="DIR", help="also time the jaxrank sources in DIR (another checkout)")
    ap.add_argument("--trec-eval", help="trec_eval's C binary, timed on the demo files")
    ap.add_argument("--cold", action="store_true", help="also time jaxrank eval without any compilation cache")
    ap.add_argument("--bytecode", choices=("on", "off"), default="on", help="on: bytecode kept (default)")
    args = ap.parse_args(argv)
    run = _machine.start(extra={"bytecode": args.bytecode})
    print(run.header())
    tmp = Path(tempfile.mkdtemp(prefix="jaxrank-bench-startup-"))
    try:
        commands = _commands(args, tmp)
        outputs = {}
        for name, cmd, env in commands:  # untimed: fills the caches (compilation, bytecode)
            outputs[name] = _timed(cmd, env)[2]
        demo = [o for n, o in outputs.items() if n.startswith(("jaxrank eval (demo)", "baseline: jaxrank eval"))]
        same_c = [o for n, o in outputs.items() if n.startswith(("jaxrank eval -c", "trec_eval (C) -c"))]
        results: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in commands}
        loads = []
        for _ in range(args.repeats):
            loads.append(_machine.load()[0])
            for name, cmd, env in commands:
                wall, cpu, _ = _timed(cmd, env)
                results[name].append((wall, cpu))
        loads.append(_machine.load()[0])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"{args.repeats} interleaved rounds; 1-minute load average at the rounds' starts and end: "
        f"min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f}"
    )
    print(f"demo outputs identical: {len(set(demo)) == 1}; -c outputs identical (jaxrank, C): {len(set(same_c)) <= 1}")
    print()
    print("| command | wall s (median) | wall s (min..max) | CPU s (median) | wall - import jax | CPU - import jax |")
    print("|---|---:|---:|---:|---:|---:|")
    jax_wall = statistics.median(w for w, _ in results[commands[0][0]])
    jax_cpu = statistics.median(c for _, c in results[commands[0][0]])
    for name, _, _ in commands:
        walls, cpus = [w for w, _ in results[name]], [c for _, c in results[name]]
        w, c = statistics.median(walls), statistics.median(cpus)
        print(
            f"| {name} | {w:.3f} | {min(walls):.3f}..{max(walls):.3f} | {c:.3f} | {w - jax_wall:+.3f} | {c - jax_cpu:+.3f} |"
        )
    print()
    print(run.finish())
    return 0


if __name__ == "__main__":
    sys.exit(main())
