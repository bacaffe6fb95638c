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


def test_every_exported_name_has_an_api_page():
    import types

    import jaxrank

    text = "".join(p.read_text() for pattern in ("*.rst", "*.md") for p in DOCS.rglob(pattern))
    for name in jaxrank.__all__:
        obj = getattr(jaxrank, name)
        if isinstance(obj, types.ModuleType):
            assert f"automodule:: {obj.__name__}\n" in text, name
        else:
            assert f":: jaxrank.{name}\n" in text, name


def test_public_api_is_sorted_and_exports_no_implementation_classes():
    import jaxrank

    assert jaxrank.__all__ == sorted(jaxrank.__all__)
    classes = {n for n in jaxrank.__all__ if isinstance(getattr(jaxrank, n), type)}
    assert classes == {"Ranker", "Ranks"}  # the typing protocols; implementations stay in their modules
