"""The tutorials in notebooks/ run headless at small sizes (JAXRANK_QUICK=1) and show their
tables and plots; the docs render them from the outputs stored in them."""

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TUTORIALS = ["evaluate_runs", "ltr_training", "retriever_training", "dense_evaluation"]


def _outputs(nb, kind):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if kind in data:
                yield data[kind]


def _stdout(nb) -> str:
    return "".join(
        out.get("text", "")
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream" and out.get("name") == "stdout"
    )


def _execute(name, monkeypatch, shared_data, optimize=False):
    monkeypatch.setenv("JAXRANK_QUICK", "1")
    monkeypatch.setenv("JAXRANK_LTR_DATA", str(shared_data / "lambdarank"))
    # The kernel is a child process: make the checkout importable without an install.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # small programs at small sizes: XLA's optimisation passes cost more than they save (tests/conftest.py),
    # except for the dual encoder, whose steps gather and scatter a 2^16 x 64 embedding table
    if not optimize:
        monkeypatch.setenv("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
    path = NOTEBOOKS / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
    client.execute()  # raises CellExecutionError if any cell fails
    return nb


def _pictures(nb, at_least):
    images = list(_outputs(nb, "image/png"))
    assert len(images) >= at_least, "the tutorial must show its plots"
    assert all(len(image) > 1000 for image in images)  # real pictures, base64


def test_every_tutorial_is_in_the_docs_and_stored_with_its_outputs():
    index = (ROOT / "docs" / "index.rst").read_text()
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(TUTORIALS)
    for name in TUTORIALS:
        assert f"notebooks/{name}\n" in index, name
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        # the docs render the stored outputs (docs/conf.py: nb_execution_mode = "off")
        assert list(_outputs(nb, "image/png")), f"{name}: run it and save it with its outputs"
        assert "/work/" not in nbformat.writes(nb), f"{name}: a path of a developer's machine"


def test_evaluate_runs(shared_data, monkeypatch):
    nb = _execute("evaluate_runs", monkeypatch, shared_data)
    out = _stdout(nb)
    assert "map          0.1785" in out  # trec_eval's map of its own test run (out.test)
    assert "225 queries; 1837 judgments" in out
    tables = [t for t in _outputs(nb, "text/markdown") if "| (a) tfidf |" in t and "| (b) bm25" in t]
    assert len(tables) == 1, "the significance table"
    _pictures(nb, 2)  # per-query differences, precision-recall curves


def test_ltr_training(shared_data, monkeypatch):
    nb = _execute("ltr_training", monkeypatch, shared_data)
    out = _stdout(nb)
    assert "quick=True" in out
    assert "metric_loss (1 - soft nDCG@10): best validation nDCG@10" in out
    tables = [t for t in _outputs(nb, "text/markdown") if "| test | nDCG@1 | nDCG@5 | nDCG@10 |" in t]
    assert len(tables) == 1 and "| metric_loss (1 - soft nDCG@10) (step" in tables[0]
    _pictures(nb, 1)


def test_retriever_training(shared_data, monkeypatch):
    nb = _execute("retriever_training", monkeypatch, shared_data, optimize=True)
    out = _stdout(nb)
    assert "quick=True" in out and "retrieval_loss: best validation nDCG@10" in out and "InfoNCE: best" in out
    tables = [t for t in _outputs(nb, "text/markdown") if "| test queries | nDCG@10 | R@100 |" in t]
    assert len(tables) == 1 and "| retrieval_loss (step" in tables[0] and "| InfoNCE (step" in tables[0]
    _pictures(nb, 1)


def test_dense_evaluation(shared_data, monkeypatch):
    nb = _execute("dense_evaluation", monkeypatch, shared_data)
    out = _stdout(nb)
    assert "CpuDevice(id=7)" in out, "the kernel sees 8 host devices"
    assert "same top 100 as on one device: True" in out
    _pictures(nb, 1)
