"""The documentation builds with warnings as errors, its guides read as guides and their\nexamples run, and the reports hold the measurements."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


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


# The guides: pages that say how, short enough to read, with examples that run --------------
REPORTS = DOCS / "reports"
# Pages whose ```python blocks run here, in order, each page in a namespace of its own (from the
# repository's root). The other guides' examples run in their own tests: compare.md
# (tests/test_compare.py, a doctest), diversity.md (tests/test_diversity.py), compat/rax.md
# (tests/test_compat_rax.py), training.md's tree example (tests/test_gbdt.py, on a sample of its file),
# fuse.md's trained fusion (tests/test_fuse.py); those blocks are ``{code-block} python`` or skipped below.
RUN_EXAMPLES = [
    "getting_started.md",
    "soft.md",
    "training.md",
    "retrieval_loss.md",
    "scale.md",
    "accumulate.md",
    "fuse.md",
    "compat/autointent.md",
    "compat/sklearn.md",
    "compat/torcheval.md",
    "compat/torchmetrics.md",
]
# Pages whose examples are doctests (compare.md's run in tests/test_compare.py).
DOCTESTS = ["trec.md", "diversity.md", "metrics/agreement.rst", "metrics/cwl.rst"]
NOT_RUN_HERE = "import lightgbm as lgb"  # training.md's tree example: tests/test_gbdt.py


def _guides():
    return [p for p in sorted(DOCS.rglob("*.md")) if REPORTS not in p.parents and "notebooks" not in p.parts]


def _code_blocks(text):
    return [b for b in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M) if not b.lstrip().startswith(">>>")]


def test_the_guides_examples_run(tmp_path):
    # compiled as the suite compiles (tests/conftest.py): many small programs, XLA's passes off
    script = ["from jaxrank.cli import _fast_compile_flags", "_fast_compile_flags()", "import jax"]
    script += ['jax.config.update("jax_disable_most_optimizations", True)', "namespaces = {}"]
    for page in RUN_EXAMPLES:
        blocks = [b for b in _code_blocks((DOCS / page).read_text()) if NOT_RUN_HERE not in b]
        assert blocks, page
        script.append(f"ns = namespaces[{page!r}] = {{}}")
        for i, block in enumerate(blocks):
            script.append(f"exec(compile({block!r}, {f'docs/{page}, block {i}'!r}, 'exec'), ns)")
    path = tmp_path / "guides.py"
    path.write_text("\n".join(script) + "\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]


@pytest.mark.parametrize("page", DOCTESTS)
def test_the_guides_doctests_run(page, monkeypatch):
    import doctest

    monkeypatch.chdir(ROOT)
    flags = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS
    result = doctest.testfile(str(DOCS / page), module_relative=False, optionflags=flags)
    assert result.failed == 0 and result.attempted > 0, page


def test_guides_read_as_guides():
    for page in _guides():
        text = page.read_text()
        name = page.relative_to(DOCS)
        assert len(text.splitlines()) <= 420, f"{name}: split it by topic (a guide reads in one sitting)"
        lowered = text.lower()
        for phrase in ("notes for the docs", "notes for the lead", "last session", "this session"):
            assert phrase not in lowered, f"{name}: {phrase!r}"
        assert not re.search(r"\b(at|commit|worktree of) [0-9a-f]{7,40}\b", text), f"{name}: speaks of a commit"


def test_pasted_output_is_no_heading():
    # a benchmark's pasted "# machine: ..." lines outside a code block would be pages of the site
    for page in sorted(DOCS.rglob("*.md")):
        if "notebooks" in page.parts:
            continue
        outside, fenced = [], False
        for line in page.read_text().splitlines():
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and line.startswith("# "):
                outside.append(line)
        assert len(outside) == 1, f"{page.relative_to(DOCS)}: one title, got {outside}"


def test_no_path_of_a_developers_machine():
    files = [ROOT / "README.md", *DOCS.rglob("*.md"), *DOCS.rglob("*.rst"), *(ROOT / "notebooks").glob("*.ipynb")]
    files += [*(ROOT / "examples").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    for path in files:
        text = path.read_text().replace("/tmp/autointent_whl/", "")  # a test's documented default folder
        assert "/work/" not in text and "/tmp/" not in text, path.relative_to(ROOT)


def test_reports_have_their_section_and_command():
    index = (REPORTS / "index.md").read_text()
    assert ":glob:" in index and "*" in index  # every report is in the reports section
    for report in REPORTS.glob("*.md"):
        if report.name == "index.md":
            continue
        text = report.read_text()
        assert "python benchmarks/" in text, f"{report.name}: the command that produced it"
