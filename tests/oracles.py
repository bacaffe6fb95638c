"""The C programs the tests compare with (trec_eval, ndeval), built from the project's
reference sources beside the repository, and what happens when they are not there.

A fresh clone has no ``../shared``: a test that needs an oracle then skips, with one line
naming what is missing and where to get it. CI must never skip them: with
``JAXRANK_REQUIRE_ORACLES=1`` (``.ci/run`` sets it) a missing oracle fails instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

REQUIRE = "JAXRANK_REQUIRE_ORACLES"
REF = Path(__file__).resolve().parents[2] / "shared" / "ref"
TREC_EVAL_SOURCE = REF / "trec_eval"
NDEVAL_SOURCE = REF / "ndeval" / "ndeval.c"
TREC_EVAL_ORIGIN = "github.com/usnistgov/trec_eval"
NDEVAL_ORIGIN = "github.com/seanmacavaney/pyndeval (src/ndeval.c)"


def required() -> bool:
    """Whether a missing oracle fails the test run (``JAXRANK_REQUIRE_ORACLES`` set, not 0)."""
    return os.environ.get(REQUIRE, "") not in ("", "0")


def missing(what: str, path: Path, origin: str) -> NoReturn:
    """Skip the test (or fail it, when :func:`required`): ``what`` is not at ``path``."""
    reason = f"{what} missing: {path} (get it from {origin})"
    if required():
        pytest.fail(f"{reason}; {REQUIRE} is set, so oracle tests may not skip", pytrace=False)
    pytest.skip(reason)


def _tool(name: str, purpose: str) -> str:
    path = shutil.which(name)
    if path is None:
        missing(f"{name} (to build {purpose})", Path(name), "the system's C toolchain")
    return path


def build_trec_eval(source: Path, into: Path) -> Path:
    """trec_eval's binary, built by ``make`` in a copy of ``source`` under ``into``."""
    if not (source / "Makefile").exists():
        missing("trec_eval's C source", source, TREC_EVAL_ORIGIN)
    make = _tool("make", "trec_eval")
    build = into / "trec_eval_src"
    shutil.copytree(source, build)
    subprocess.run([make, "-s", "-C", str(build)], check=True, capture_output=True)
    return build / "trec_eval"


def build_ndeval(source: Path, into: Path) -> Path:
    """ndeval's binary, ``cc -O2 -o ndeval ndeval.c -lm`` (its README's command) in ``into``."""
    if not source.is_file():
        missing("ndeval's C source", source, NDEVAL_ORIGIN)
    cc = _tool("cc", "ndeval")
    binary = into / "ndeval"
    subprocess.run([cc, "-O2", "-o", str(binary), str(source), "-lm"], check=True, capture_output=True)
    return binary
