"""What every benchmark records: the machine, the versions, the load, and whether a result is noisy.

A benchmark script calls :func:`start` first and prints its header, wraps each measurement
in ``run.watch()`` (its ``flag`` goes beside the result), and prints ``run.finish()`` last::

    run = _machine.start(peers=("faiss-cpu",), extra={"backend": "cpu"})
    print(run.header())
    with run.watch() as w:
        seconds = measure()
    print(f"| search | {seconds:.2f} | {w.flag} |")
    print(run.finish())

A result is *noisy* when the 1-minute load average exceeded :data:`NOISY_LOAD` before it
was taken or after it, the benchmark's own share of the load after set aside (a
benchmark that keeps two cores busy for a minute raises the load by about 1.3 by
itself; what matters is whether anything *else* ran). The own share is the process's
CPU time (children included) over the interval, as the kernel's 1-minute moving average
would have counted it: ``cpu_s / wall_s * (1 - exp(-wall_s / 60))``.

:func:`time_in_subprocess` runs a peer the way its users run it: a fresh interpreter,
only the standard library imported before the peer's own setup, its library's default
thread count (the variables that cap threads are removed from its environment).

Only the standard library: the versions are read from the installed distributions'
metadata, so recording them imports nothing.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterable, Mapping
from importlib import metadata

NOISY_LOAD = 0.5
# The kernel's 1-minute load average is an exponential moving average with this time constant.
_LOAD_TAU_S = 60.0
# Distributions every record names; a script adds its peers.
BASE_PACKAGES = ("jax", "jaxlib", "numpy")
# Variables that cap a library's threads; a peer run "as its users run it" has none of them.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMBA_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
)


def load() -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages (``nan`` where the platform has none)."""
    try:
        return tuple(float(v) for v in os.getloadavg())
    except (AttributeError, OSError):
        return (math.nan, math.nan, math.nan)


def own_cpu_s() -> float:
    """CPU seconds used by this process and its finished children (user + system)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def own_share(cpu_s: float, wall_s: float) -> float:
    """This process's part of the 1-minute load after ``wall_s`` seconds using ``cpu_s`` CPU."""
    if wall_s <= 0:
        return 0.0
    return cpu_s / wall_s * (1.0 - math.exp(-wall_s / _LOAD_TAU_S))


def is_noisy(load_before: float, load_after: float | None = None, own: float = 0.0) -> bool:
    """True when the 1-minute load before, or after less ``own`` (our share), exceeds 0.5.

    A load that the platform cannot tell (``nan``) counts as noisy: nothing says it was quiet.

    >>> is_noisy(0.2, 1.4, own=1.1), is_noisy(0.2, 1.4), is_noisy(0.7)
    (False, True, True)
    """
    values = [load_before] + ([] if load_after is None else [load_after - own])
    return any(math.isnan(v) or v > NOISY_LOAD for v in values)


def settle(timeout_s: float, limit: float = NOISY_LOAD, poll_s: float = 5.0) -> float:
    """Wait until the 1-minute load is at most ``limit`` (or ``timeout_s`` has passed), so that
    the next measurement does not start in the wake of the previous one. Returns the seconds
    waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s and not load()[0] <= limit:
        time.sleep(poll_s)
    return time.monotonic() - t0


def machine() -> dict:
    """CPU model, logical cores (and those this process may use), RAM in GiB, OS, Python."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    try:
        ram_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (AttributeError, ValueError, OSError):
        ram_gib = math.nan
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "ram_gib": round(ram_gib, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
    }


def versions(packages: Iterable[str] = ()) -> dict:
    """Installed versions of jax, jaxlib, numpy and ``packages`` (distribution names), unimported."""
    out = {}
    for name in (*BASE_PACKAGES, *packages):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


class Watch:
    """Load and own CPU time around one measurement; ``flag`` is ``"noisy"`` or ``""``."""

    def __init__(self) -> None:
        self.load_before = load()
        self.load_after: tuple[float, float, float] | None = None
        self.own = 0.0
        self._t0, self._cpu0 = time.monotonic(), own_cpu_s()

    def stop(self) -> Watch:
        self.own = own_share(own_cpu_s() - self._cpu0, time.monotonic() - self._t0)
        self.load_after = load()
        return self

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def noisy(self) -> bool:
        after = None if self.load_after is None else self.load_after[0]
        return is_noisy(self.load_before[0], after, self.own)

    @property
    def flag(self) -> str:
        return "noisy" if self.noisy else ""


class Run(Watch):
    """A whole benchmark run: machine and versions, plus the load around all of it."""

    def __init__(self, peers: Iterable[str] = (), extra: Mapping[str, object] | None = None) -> None:
        self.machine = machine()
        self.versions = versions(peers)
        self.extra = dict(extra or {})
        self.command = " ".join([os.path.relpath(sys.argv[0]) if sys.argv[0] else "python", *sys.argv[1:]])
        self.started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
        super().__init__()

    def watch(self) -> Watch:
        return Watch()

    def header(self) -> str:
        m = self.machine
        lines = [
            f"# {self.command}   ({self.started})",
            f"# machine: {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['ram_gib']} GiB RAM, {m['os']}",
            "# versions: python " + m["python"] + ", " + ", ".join(f"{k} {v}" for k, v in self.versions.items()),
        ]
        if self.extra:
            lines.append("# " + ", ".join(f"{k}: {v}" for k, v in self.extra.items()))
        lines.append(f"# load average before (1, 5, 15 min): {_fmt(self.load_before)}")
        return "\n".join(lines)

    def finish(self) -> str:
        """Stop the run's watch; a footer line with the load after and the verdict."""
        self.stop()
        verdict = (
            f"NOISY (1-min load above {NOISY_LOAD} before, or after less this run's own {self.own:.2f})"
            if self.noisy
            else f"quiet (1-min load at most {NOISY_LOAD} before and after, less this run's own {self.own:.2f})"
        )
        return f"# load average after (1, 5, 15 min): {_fmt(self.load_after)}; {verdict}"

    def as_dict(self) -> dict:
        """Everything recorded, for a script's JSON output."""
        return {
            "command": self.command,
            "started": self.started,
            "machine": self.machine,
            "versions": self.versions,
            "extra": self.extra,
            "load_before": list(self.load_before),
            "load_after": None if self.load_after is None else list(self.load_after),
            "own_load": self.own,
            "noisy": self.noisy,
        }


def start(peers: Iterable[str] = (), extra: Mapping[str, object] | None = None) -> Run:
    """Record the machine, the versions (jax, jaxlib, numpy and ``peers``) and the load now."""
    return Run(peers, extra)


def _fmt(values) -> str:
    return "n/a" if values is None else " ".join(f"{v:.2f}" for v in values)


_CHILD = """
import json, resource, sys, time
_t0 = time.perf_counter()
{setup}
_setup_s = time.perf_counter() - _t0
_runs = []
for _ in range({repeats}):
    _t0 = time.perf_counter()
{stmt}
    _runs.append(time.perf_counter() - _t0)
_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"setup_s": _setup_s, "runs_s": _runs, "peak_rss_mib": _rss / (2**20 if sys.platform == "darwin" else 2**10), "value": {value}}}))
"""


def time_compiled(fn, repeats: int) -> tuple[float, float]:
    """(median warm call, first call minus it: the compile) of a JAX ``fn``, every call
    waited for (``jax.block_until_ready``)."""
    import jax

    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        runs.append(time.perf_counter() - t0)
    median = statistics.median(runs)
    return median, max(first - median, 0.0)


# Runs one command with stdout to a file; prints the command's own wall time and rusage
# (RUSAGE_CHILDREN of this wrapper: the command and its children, not the benchmark).
_WRAPPER = textwrap.dedent(
    """
    import json, resource, subprocess, sys, time
    out, cmd = sys.argv[1], sys.argv[2:]
    with open(out, "wb") as f:
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, stdout=f)
        wall = time.perf_counter() - t0
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps(dict(rc=rc, wall=wall, maxrss_kb=ru.ru_maxrss, user=ru.ru_utime, sys=ru.ru_stime)))
    """
)


def run_command(cmd: list[str], out: str) -> dict:
    """Run ``cmd`` with stdout to the file ``out``, in a fresh wrapper process.

    Returns the command's ``wall`` seconds, ``user`` and ``sys`` CPU seconds, ``cpu`` (their
    sum), ``maxrss_kb`` (its peak resident memory), ``load_before``, ``load_after``, ``own_load``
    and ``noisy``; a command that fails raises ``RuntimeError`` with its stderr.

    >>> r = run_command([sys.executable, "-c", "print(1)"], os.devnull)
    >>> r["rc"], r["cpu"] == r["user"] + r["sys"]
    (0, True)
    """
    load0 = load()[0]
    p = subprocess.run([sys.executable, "-c", _WRAPPER, str(out), *cmd], capture_output=True, text=True)
    load1 = load()[0]
    if p.returncode != 0 or not p.stdout.strip():
        raise RuntimeError(f"wrapper failed for {cmd[:3]!r}...:\n{p.stderr[-3000:]}")
    res = json.loads(p.stdout.strip().splitlines()[-1])
    if res["rc"] != 0:
        raise RuntimeError(f"{cmd[:3]!r}... exited with {res['rc']}:\n{p.stderr[-3000:]}")
    res["cpu"] = res["user"] + res["sys"]
    own = own_share(res["cpu"], res["wall"])
    res.update(load_before=load0, load_after=load1, own_load=own, noisy=is_noisy(load0, load1, own))
    res["stderr_tail"] = p.stderr[-500:]
    return res


def time_in_subprocess(
    setup: str, stmt: str, *, repeats: int = 3, value: str = "None", timeout: float | None = None
) -> dict:
    """Time ``stmt`` ``repeats`` times after ``setup``, in a fresh interpreter, as users run it.

    The child imports only the standard library before ``setup`` (which imports the peer and
    loads its data, e.g. from a file the parent wrote), and its environment has none of
    :data:`THREAD_VARIABLES`. Returns ``setup_s``, ``runs_s`` (one per repeat; the first
    holds any warm-up), ``best_s``, ``median_s``, ``peak_rss_mib`` (the child's peak resident
    memory), ``value`` (the expression ``value`` evaluated after the runs: a JSON-able result
    to check against), the child's load ``watch`` (``load_before``, ``load_after``, ``noisy``). A child
    that fails raises ``RuntimeError`` with its stderr.

    >>> r = time_in_subprocess("import math", "math.factorial(100)", repeats=2)
    >>> len(r["runs_s"]), r["best_s"] <= r["median_s"]
    (2, True)
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    code = _CHILD.format(
        setup=textwrap.dedent(setup),
        stmt=textwrap.indent(textwrap.dedent(stmt), "    "),
        repeats=repeats,
        value=value,
    )
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    with Watch() as watch:
        proc = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    if proc.returncode != 0:
        raise RuntimeError(f"peer subprocess exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["best_s"] = min(result["runs_s"])
    result["median_s"] = statistics.median(result["runs_s"])
    result.update(load_before=watch.load_before, load_after=watch.load_after, noisy=watch.noisy)
    return result
