"""benchmarks/accelerator.py --quick on CPU: every row kind, every check PASS, the header."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ROW_KINDS = ("check:", "core:", "soft:", "retrieval:", "trec:", "search:", "sharding:", "compare:")
CHECKS = 6


def test_quick_run_writes_the_whole_table(tmp_path):
    out = tmp_path / "table.md"
    # as on the accelerator machine: from the working tree, nothing installed
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    # XLA's default code emitters, not the suite's faster-compiling ones (tests/conftest.py)
    env["XLA_FLAGS"] = " ".join(f for f in env.get("XLA_FLAGS", "").split() if "fusion_emitters" not in f)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "accelerator.py"), "--quick", "--out", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    text = out.read_text()
    for field in ("- platform: cpu", "- versions:", "jaxrank 0.", "jax ", "jaxlib ", "- load average before", "UTC"):
        assert field in text, field
    assert "load average after" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| what")]
    for kind in ROW_KINDS:
        assert any(row.startswith(f"| {kind}") for row in rows), kind
    checks = [row for row in rows if row.startswith("| check:")]
    assert len(checks) == CHECKS
    assert all(row.rstrip(" |").endswith("PASS") for row in checks), checks
    assert not any("ERROR" in row or "FAIL" in row for row in rows), rows
    timed = [row.split(" | ") for row in rows if not row.startswith("| check:")]
    assert all(cells[2].endswith(("ms", " s")) for cells in timed), timed  # a jaxrank time on every timed row


def test_a_failure_is_a_row_and_the_table_stays(monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import accelerator

    def broken() -> None:
        raise AssertionError("values differ")

    monkeypatch.setattr(accelerator, "CHECKS", {"broken": (broken, "[1, 1]")})
    assert accelerator.correctness_rows()[0].status == "FAIL AssertionError: values differ"
    (row,) = accelerator.guarded(lambda: 1 / 0, "core: metrics", "[1, 1]")
    assert row.what == "core: metrics" and row.status.startswith("ERROR ZeroDivisionError")
    timed = accelerator.Row("search: k=10", "1 x 1", 0.5, 0.1, "torch topk")
    (row,) = accelerator.with_peer([timed], "numpy", lambda: [][0])  # the peer fails
    assert row.jaxrank_s == 0.5 and row.peer_s is None and row.status.startswith("peer ERROR IndexError")
    (row,) = accelerator.with_peer([timed], "numpy", lambda: [0.25])
    assert accelerator._ratio(row) == "2.00"
