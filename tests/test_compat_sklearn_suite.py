"""scikit-learn's own tests of its ranking scores, run on jaxrank.compat.sklearn (issue 41, part 4).

The test file that ships inside the installed scikit-learn wheel,
``sklearn/metrics/tests/test_ranking.py``, runs in a subprocess with ``roc_auc_score``,
``average_precision_score``, ``dcg_score`` and ``ndcg_score`` of ``sklearn.metrics`` replaced by
jaxrank's before the file is imported (it takes them ``from sklearn.metrics``, parametrisations
included). A test *reaches* them when it calls one of them (from the test, a fixture or a helper
such as ``metric_at_thresholds``); every such test must pass, except the ones named in
:data:`KNOWN_FAILURES` (docs/compat/sklearn.md gives the reasons). The references are
scikit-learn's: its expected values, its own curves (``roc_curve``, ``precision_recall_curve``,
``auc``) and its error messages.

Run by hand: ``python tests/test_compat_sklearn_suite.py jaxrank OUT.json`` (or ``sklearn`` for
the control run on scikit-learn's own functions, which reaches the same tests and passes them all).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NAMES = ("roc_auc_score", "average_precision_score", "dcg_score", "ndcg_score")
ROOT = Path(__file__).resolve().parents[1]

# Tests of the shipped file that reach the four functions and are expected to fail, with the reason
# (docs/compat/sklearn.md). A test listed here that passes fails this module: drop it from the list.
KNOWN_FAILURES: dict[str, str] = {}

# Tests of scikit-learn 1.9.1's file that reach the four functions (the control run on scikit-learn's
# own functions counts 68 of its 248); fewer means the replacement did not take.
MIN_REACHED = 68


def _suite_file() -> Path:
    import sklearn  # a test dependency ([test] extra): its absence is a failure, not a skip

    path = Path(sklearn.__file__).parent / "metrics" / "tests" / "test_ranking.py"
    assert path.exists(), f"scikit-learn {sklearn.__version__} ships no {path}: the suite cannot be judged"
    return path


def run_suite(impl: str, out: Path) -> dict:
    """Run scikit-learn's file with the four names taken from ``impl`` ("jaxrank" or "sklearn") in a
    subprocess; return ``{"collected": n, "reached": {nodeid: outcome}}``."""
    suite = _suite_file()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}  # the file alone
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), impl, str(out), str(suite)],
        cwd=out.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if not out.exists():
        raise AssertionError(
            f"the suite did not run (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    result = json.loads(out.read_text())
    result["output"] = proc.stdout
    return result


def test_sklearn_ranking_suite_passes(tmp_path):
    result = run_suite("jaxrank", tmp_path / "result.json")
    reached = result["reached"]
    assert len(reached) >= MIN_REACHED, f"only {len(reached)} tests reached the four functions"
    failed = sorted(t for t, outcome in reached.items() if outcome != "passed")
    unexpected = [t for t in failed if t not in KNOWN_FAILURES]
    fixed = [t for t in KNOWN_FAILURES if reached.get(t) == "passed"]
    assert not unexpected and not fixed, (
        f"failed, not in KNOWN_FAILURES: {unexpected}\npassed, still in KNOWN_FAILURES: {fixed}\n"
        + result["output"][-8000:]
    )
    assert set(KNOWN_FAILURES) <= set(reached), f"no longer reached: {set(KNOWN_FAILURES) - set(reached)}"


# The subprocess ------------------------------------------------------------------------------------
def _main(impl: str, out: str, suite: str) -> int:
    import sklearn.metrics

    if impl == "jaxrank":
        from jaxrank.cli import _fast_compile_flags

        _fast_compile_flags()  # as jaxrank's own suite and `jaxrank eval` compile
        from jaxrank.compat import sklearn as source
    else:
        source = sklearn.metrics

    current: list[str] = []
    reached: set[str] = set()
    outcomes: dict[str, str] = {}

    def recorded(fn):
        def call(*args, **kwargs):
            if current:
                reached.add(current[0])
            return fn(*args, **kwargs)

        call.__name__ = call.__qualname__ = fn.__name__
        call.__doc__ = fn.__doc__
        return call

    # Before the suite's module is imported: it binds the names at import.
    for name in NAMES:
        setattr(sklearn.metrics, name, recorded(getattr(source, name)))

    class Recorder:
        def pytest_runtest_logstart(self, nodeid, location):
            current[:] = [nodeid]

        def pytest_runtest_logfinish(self, nodeid, location):
            current.clear()

        def pytest_runtest_logreport(self, report):
            if report.failed:
                outcomes[report.nodeid] = "failed"
            elif report.when == "call" or report.skipped:
                outcomes.setdefault(report.nodeid, "skipped" if report.skipped else "passed")

    # No ini file of a checkout above the wheel (this repository's pyproject.toml adds doctests);
    # scikit-learn's conftest.py (global_random_seed) still loads.
    ini = Path(out).with_name("pytest.ini")
    ini.write_text("[pytest]\n")
    site = str(Path(sklearn.__file__).parents[1])
    args = [suite, "-q", "-rf", "-p", "no:cacheprovider", "-c", str(ini), "--rootdir", site, "--confcutdir", site]
    code = pytest.main(args, plugins=[Recorder()])
    reached_outcomes = {t: outcomes.get(t, "failed") for t in sorted(reached)}
    Path(out).write_text(json.dumps({"collected": len(outcomes), "reached": reached_outcomes, "exit": int(code)}))
    return 0


if __name__ == "__main__":
    sys.exit(_main(*sys.argv[1:4]))
