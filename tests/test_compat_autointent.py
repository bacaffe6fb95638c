"""jaxrank.compat.autointent against autointent's own metrics module.

autointent's dependencies are heavy; its metrics need only numpy. The module (and the one
sibling it imports) is read from the autointent wheel: ``$AUTOINTENT_WHEEL``, else a wheel in
/tmp/autointent_whl/, else one ``pip download`` fetches (no dependencies).
"""

import glob
import os
import subprocess
import sys
import types
import zipfile

import numpy as np
import pytest

from jaxrank.compat import autointent as ai

AUTOINTENT_VERSION = "0.4.0"
NAMES = [
    f"retrieval_{k}{s}"
    for k in ("map", "hit_rate", "precision", "ndcg", "mrr")
    for s in ("", "_intersecting", "_macro")
]


def _wheel(tmp_path_factory) -> str:
    if os.environ.get("AUTOINTENT_WHEEL"):
        return os.environ["AUTOINTENT_WHEEL"]
    found = glob.glob(f"/tmp/autointent_whl/autointent-{AUTOINTENT_VERSION}-*.whl")
    if found:
        return found[0]
    target = tmp_path_factory.mktemp("autointent_whl")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", f"autointent=={AUTOINTENT_VERSION}", "--no-deps", "-d", str(target)],
        check=True,
        capture_output=True,
    )
    return glob.glob(str(target / "autointent-*.whl"))[0]


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """autointent/metrics/retrieval.py (and _converter.py, which it imports) as a module."""
    with zipfile.ZipFile(_wheel(tmp_path_factory)) as wheel:
        package = types.ModuleType("_autointent_metrics")
        package.__path__ = []
        modules = {"_autointent_metrics": package}
        for name in ("_converter", "retrieval"):
            module = types.ModuleType(f"_autointent_metrics.{name}")
            module.__package__ = "_autointent_metrics"
            modules[module.__name__] = module
            sys.modules.update(modules)
            exec(compile(wheel.read(f"autointent/metrics/{name}.py"), name, "exec"), module.__dict__)
    return modules["_autointent_metrics.retrieval"]


def cases(seed):
    """Multiclass and multilabel label lists of lengths 1 to 7, random, with no relevant
    candidate and with only relevant ones; one ``None`` query."""
    rng = np.random.default_rng(seed)
    out = []
    for n in (1, 2, 4, 7):
        q = rng.integers(0, 3, 6)
        c = rng.integers(0, 3, (6, n))
        c[1] = (q[1] + 1) % 3  # nothing relevant
        c[2] = q[2]  # all relevant
        ql = rng.integers(0, 2, (6, 3))
        cl = rng.integers(0, 2, (6, n, 3))
        cl[1] = 1 - ql[1]
        cl[2] = ql[2]
        out.append(("multiclass", [None] + q.tolist(), [c[0].tolist()] + c.tolist()))
        out.append(("multilabel", [None] + ql.tolist(), [cl[0].tolist()] + cl.tolist()))
    return out


@pytest.mark.parametrize("name", NAMES)
def test_equals_autointent(name, reference):
    kind = "multiclass" if not name.endswith(("_intersecting", "_macro")) else "multilabel"
    for (case_kind, q, c), k in zip(cases(0), (None, None, 2, 2, 10, 10, 3, 3)):  # few shapes: few compilations
        if case_kind == kind:
            theirs = getattr(reference, name)(q, c, k)
            assert float(getattr(ai, name)(q, c, k)) == pytest.approx(theirs, abs=1e-12), (q, c, k)


def test_arrays_without_none_run_under_jit(reference):
    import jax

    q, c = np.array([1, 0, 2]), np.array([[0, 1, 1], [0, 0, 1], [2, 2, 0]])
    ours = jax.jit(lambda a, b: ai.retrieval_ndcg(a, b, k=2))(q, c)
    assert float(ours) == pytest.approx(reference.retrieval_ndcg(q, c, 2), abs=1e-12)


@pytest.mark.parametrize(
    "args, match",
    [
        (([1], [[1]], 0), "k must be a positive integer"),
        (([1, 2], [[1]], None), "candidates_labels must have shape"),
        (([None], [[1]], None), "every query label is None"),
    ],
)
def test_bad_input_raises(args, match):
    with pytest.raises(ValueError, match=match):
        ai.retrieval_map(*args)
