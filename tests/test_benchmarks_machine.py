"""benchmarks/_machine.py: every record is complete, and the "noisy" rule holds at its edges."""

from __future__ import annotations

import doctest
import json
import math
import os
import sys
from importlib import metadata
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import _machine  # noqa: E402


def _loads(monkeypatch, *values):
    """os.getloadavg returns each of ``values`` (1-min) in turn."""
    it = iter(values)
    monkeypatch.setattr(os, "getloadavg", lambda: (next(it), 0.0, 0.0))


def test_record_is_complete(monkeypatch):
    _loads(monkeypatch, 0.1, 0.2)
    run = _machine.start(peers=("optax", "surely-not-installed-dist"), extra={"backend": "cpu"})
    m = run.machine
    assert m["cpu"] and m["cores"] == os.cpu_count() and 1 <= m["usable_cores"] <= m["cores"]
    assert (
        m["ram_gib"] > 0
        and m["os"]
        and m["python"] == f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    )
    # versions from the installed metadata, peers included; an absent one says so
    for dist in ("jax", "jaxlib", "numpy", "optax"):
        assert run.versions[dist] == metadata.version(dist)
    assert run.versions["surely-not-installed-dist"] == "not installed"
    header = run.header()
    for needle in ("machine:", m["cpu"], "GiB RAM", "jax ", "jaxlib ", "numpy ", "optax ", "backend: cpu", "0.10"):
        assert needle in header
    footer = run.finish()
    assert "0.20" in footer and "quiet" in footer
    record = json.loads(json.dumps(run.as_dict()))
    assert record["load_before"][0] == 0.1 and record["load_after"][0] == 0.2 and record["noisy"] is False
    assert set(record) >= {"command", "started", "machine", "versions", "extra"}


@pytest.mark.parametrize(
    ("before", "after", "noisy"),
    [(0.5, 0.5, False), (0.51, 0.1, True), (0.1, 0.51, True), (0.0, 0.0, False), (math.nan, 0.1, True)],
)
def test_noisy_rule_before_or_after(monkeypatch, before, after, noisy):
    _loads(monkeypatch, before, after)
    with _machine.Watch() as w:
        pass  # no CPU: the own share is ~0
    assert w.noisy is noisy
    assert w.flag == ("noisy" if noisy else "")


def test_own_share_is_set_aside(monkeypatch):
    # 60 s at two busy cores: the 1-minute average holds 2 * (1 - 1/e) = 1.26 of our own.
    own = _machine.own_share(cpu_s=120.0, wall_s=60.0)
    assert own == pytest.approx(2 * (1 - math.exp(-1)))
    assert not _machine.is_noisy(0.1, 0.4 + own, own)
    assert _machine.is_noisy(0.1, 0.6 + own, own)
    # the Watch measures its own CPU time: a minute of work, two cores, seen through os.times
    times = iter([os.times_result((0.0, 0.0, 0.0, 0.0, 0.0)), os.times_result((100.0, 20.0, 0.0, 0.0, 0.0))])
    clock = [0.0, 60.0]
    monkeypatch.setattr(os, "times", lambda: next(times))
    monkeypatch.setattr(_machine.time, "monotonic", lambda: clock.pop(0) if len(clock) > 1 else clock[0])
    _loads(monkeypatch, 0.1, 1.6)
    w = _machine.Watch().stop()
    assert w.own == pytest.approx(own) and not w.noisy


def test_peer_runs_in_a_fresh_interpreter(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    setup = """
        import os, sys
        seen = (sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'jax', '_machine')), os.environ.get('OMP_NUM_THREADS'))
    """
    stmt = "assert seen == ([], None), seen"
    r = _machine.time_in_subprocess(setup, stmt, repeats=3, value="sum(range(10))")
    assert r["value"] == 45
    assert len(r["runs_s"]) == 3 and r["best_s"] <= r["median_s"] and r["peak_rss_mib"] > 1
    assert isinstance(r["noisy"], bool) and len(r["load_before"]) == 3
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        _machine.time_in_subprocess("", "1 / 0", repeats=1)


def test_doctests():
    assert doctest.testmod(_machine).failed == 0


def test_settle_waits_for_the_load_to_fall_and_gives_up_at_its_timeout(monkeypatch):
    loads = iter([1.3, 0.9, 0.4, 0.2])
    monkeypatch.setattr(_machine, "load", lambda: (next(loads), 0.0, 0.0))
    assert _machine.settle(timeout_s=60, poll_s=0.01) >= 0.02  # two polls above 0.5
    assert next(loads) == 0.2  # stopped at the first load at most 0.5
    monkeypatch.setattr(_machine, "load", lambda: (3.0, 0.0, 0.0))
    assert 0.05 <= _machine.settle(timeout_s=0.05, poll_s=0.01) < 1.0
