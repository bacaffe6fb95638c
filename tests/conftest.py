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
