"""The documentation builds with warnings as errors."""

import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_docs_build_without_warnings(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(DOCS), str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_public_metric_has_a_docs_page():
    import jaxrank

    text = "".join(p.read_text() for p in (DOCS / "metrics").glob("*.rst"))
    for name in ["precision", "recall", "average_precision", "reciprocal_rank", "dcg", "ndcg", "success",
                 "r_precision", "err", "rbp", "fallout", "num_ret", "num_rel", "num_rel_ret"]:
        assert hasattr(jaxrank, name)
        assert f"autofunction:: jaxrank.{name}\n" in text, name
