"""Shared test helpers."""

import gc
import threading
from pathlib import Path

from jaxrank.cli import _fast_compile_flags

# Before XLA starts: compile with XLA:CPU's older fusion emitters, as `jaxrank eval` does
# (about a quarter less compile time, which is most of this suite's time). The correctness
# checks of tests/test_accelerator_bench.py run with XLA's defaults, as a library user's.
_fast_compile_flags()

import jax  # noqa: E402
import pytest  # noqa: E402

from tests import oracles  # noqa: E402
from tests.xla import optimisations  # noqa: E402

jax.config.update("jax_enable_x64", True)

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def shared_data() -> Path:
    """The reference data the tests read: ``tests/data``, the in-repository copy of
    ``../shared/data`` (origins in tests/data/README.md)."""
    return DATA


@pytest.fixture(scope="session")
def trec_eval_binary(tmp_path_factory) -> Path:
    """trec_eval's C binary, built from ../shared/ref/trec_eval in a temporary copy; the
    test skips without it (fails with JAXRANK_REQUIRE_ORACLES=1: tests/oracles.py)."""
    return oracles.build_trec_eval(oracles.TREC_EVAL_SOURCE, tmp_path_factory.mktemp("trec_eval"))


@pytest.fixture(scope="session")
def ndeval_binary(tmp_path_factory) -> Path:
    """ndeval's C binary, built from ../shared/ref/ndeval/ndeval.c in a temporary folder;
    skips or fails as :func:`trec_eval_binary`."""
    return oracles.build_ndeval(oracles.NDEVAL_SOURCE, tmp_path_factory.mktemp("ndeval"))


@pytest.fixture(scope="module")
def quick_compiles():
    """For modules of many small programs (``pytestmark = pytest.mark.usefixtures(...)``):
    XLA's optimisation passes cost more than they save at these sizes (about half the compile
    time; the benchmarks run fully optimised)."""
    with optimisations(on=False):
        yield


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module: a worker runs dozens of modules,
    and their executables otherwise pile up (5 GB per worker seen at 80% of the suite; CI has
    24 GB for two workers and their subprocesses)."""
    yield
    # a compilation the command line started in the background finishes first (a bad-input
    # test returns before it): nothing compiles while the caches are dropped
    for thread in threading.enumerate():
        if thread.name == "jaxrank-compile":
            thread.join()
    jax.clear_caches()
    gc.collect()
