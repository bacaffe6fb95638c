"""A fresh clone tests itself: the data lives in tests/data, and a test that needs a C
oracle skips without it, unless JAXRANK_REQUIRE_ORACLES=1 (CI) makes that a failure."""

import re
from pathlib import Path

import pytest

from tests import oracles

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("build", [oracles.build_trec_eval, oracles.build_ndeval])
def test_a_missing_oracle_skips_naming_what_and_where(build, tmp_path, monkeypatch):
    monkeypatch.delenv(oracles.REQUIRE, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        build(tmp_path / "nowhere", tmp_path)
    reason = str(skipped.value)
    assert "missing: " in reason and str(tmp_path / "nowhere") in reason and "github.com/" in reason
    assert "\n" not in reason
    monkeypatch.setenv(oracles.REQUIRE, "0")  # set to 0: not required
    with pytest.raises(pytest.skip.Exception):
        build(tmp_path / "nowhere", tmp_path)


@pytest.mark.parametrize("build", [oracles.build_trec_eval, oracles.build_ndeval])
def test_a_missing_oracle_fails_when_required(build, tmp_path, monkeypatch):
    monkeypatch.setenv(oracles.REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match=f"missing: .*{oracles.REQUIRE} is set"):
        build(tmp_path / "nowhere", tmp_path)


def test_ci_requires_the_oracles_before_it_runs_the_tests():
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    export = lines.index(f"export {oracles.REQUIRE}=1")
    assert export < next(i for i, line in enumerate(lines) if line.startswith("python -m pytest"))


def test_tests_read_no_data_from_outside_the_repository():
    """Only tests/oracles.py looks beside the repository (for the C sources); data comes
    from tests/data."""
    outside = re.compile(r"parents\[2\]|\"shared\" /")  # a path built beside the repository
    offenders = [
        p.name
        for p in (ROOT / "tests").glob("*.py")
        if p.name not in ("oracles.py", "test_oracles.py") and outside.search(p.read_text())
    ]
    assert offenders == []
    assert (ROOT / "tests" / "data" / "trec_eval" / "qrels.test").is_file()
    assert (ROOT / "tests" / "data" / "lambdarank" / "rank.train").is_file()
