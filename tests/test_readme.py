"""README.md's examples run, in order, as one script from the repository's root, and its
links into the repository point at files that exist."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_examples_run(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert len(blocks) >= 5, "one example per use"
    script = tmp_path / "readme_examples.py"
    script.write_text(
        "\n".join(blocks)
        + "\nassert abs(summary['map'] - 0.1785) < 1e-4, summary"
        + "\nassert ndcg.shape == (2, 2) and grads[0].shape == q.shape"
        + "\nassert set(acc.compute(state)) == {'nDCG@10', 'R@100'}\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run(
        [sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_readme_keeps_the_ci_test_command():
    # .ci/run runs the commands the README opens with; the suite's line must stay as CI runs it
    ci = (ROOT / ".ci" / "run").read_text()
    command = "python -m pytest -q -n auto --dist loadfile --max-worker-restart=0"
    assert command in ci and command in README
    assert 'pip install -e ".[test]" && jaxrank eval' in README


def test_readme_is_a_front_page():
    assert len(README.splitlines()) <= 120
    assert not re.search(r"\bp\s*[=<]?\s*0\.\d", README), "p-values live in the reports, not on the front page"
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), target
