"""notebooks/ltr_training.ipynb runs headless (JAXRANK_QUICK=1) and shows its table and plot."""

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "ltr_training.ipynb"


def _outputs(nb, kind):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if kind in data:
                yield data[kind]


def test_ltr_notebook_runs_quick(shared_data, monkeypatch):
    monkeypatch.setenv("JAXRANK_QUICK", "1")
    monkeypatch.setenv("JAXRANK_LTR_DATA", str(shared_data / "lambdarank"))
    # The kernel is a child process: make the checkout importable without an install.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()  # raises CellExecutionError if any cell fails

    stdout = "".join(
        out.get("text", "")
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )
    assert "quick=True" in stdout

    tables = [t for t in _outputs(nb, "text/markdown") if "| loss | nDCG@1 | nDCG@5 | nDCG@10 |" in t]
    assert len(tables) == 1, "the notebook must display the results table"
    table = tables[0]
    for loss in (
        "approx",
        "softrank",
        "neuralsort",
        "softsort",
        "softmax_cross_entropy",
        "pairwise_logistic",
        "lambda_loss",
        "listmle",
    ):
        assert f"| {loss} |" in table
    assert "test; mean ± std over 1 seed (0)" in table

    images = list(_outputs(nb, "image/png"))
    assert len(images) >= 1, "the notebook must show the nDCG@10 plot"
    assert len(images[0]) > 1000  # a real picture, base64
