"""Shared test helpers."""

from pathlib import Path

import jax
import pytest

jax.config.update("jax_enable_x64", True)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not SHARED.exists():
        raise FileNotFoundError(f"reference data missing: {SHARED} (../shared must sit beside the repo)")
    return SHARED


TREC_EVAL_SOURCE = Path(__file__).resolve().parents[2] / "shared" / "ref" / "trec_eval"


@pytest.fixture(scope="session")
def trec_eval_binary(tmp_path_factory) -> Path:
    """trec_eval's C binary, built from ../shared/ref/trec_eval in a temporary copy."""
    import shutil
    import subprocess

    if not (TREC_EVAL_SOURCE / "Makefile").exists():
        raise FileNotFoundError(f"trec_eval source missing: {TREC_EVAL_SOURCE}")
    build = tmp_path_factory.mktemp("trec_eval") / "src"
    shutil.copytree(TREC_EVAL_SOURCE, build)
    subprocess.run(["make", "-s", "-C", str(build)], check=True, capture_output=True)
    return build / "trec_eval"
