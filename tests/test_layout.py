"""The floor plan (docs/architecture.md), checked on the code's own imports.

* every public path users imported before the second floor plan still imports, with every
  name it had (``tests/data/public_names.json``: the names each path defined or listed in
  ``__all__`` at commit ebe2940, before the files moved);
* the import graph of jaxrank's files has no cycle, and neither has the graph of its
  packages (each a layer: an import never runs back up);
* no import crosses a package boundary to a private name or module (a name with a leading
  underscore is private to the package that holds it, and visible inside it);
* no file is over 800 lines; the top level holds ``__init__.py``, ``cli.py``, private
  helpers, packages and faces of a few lines where a public path is kept.
"""

from __future__ import annotations

import ast
import importlib
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jaxrank"
PUBLIC_NAMES = json.loads((ROOT / "tests" / "data" / "public_names.json").read_text())
FACES = {"accumulate.py", "datasets.py", "lambdaweights.py"}  # public paths kept, each a face


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _imports(name: str) -> list[tuple[str, str | None]]:
    """(module imported, name taken from it or None) for every import of jaxrank in a module,
    at any depth (imports inside functions count), and for every private attribute read
    through an imported module (``losses._helper(...)``)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    out, bound = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "jaxrank":
                    out.append((a.name, None))
                    bound[a.asname or "jaxrank"] = a.name if a.asname else "jaxrank"
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.split(".")[0] != "jaxrank":
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub, None) if sub in MODULES else (base, a.name))
                if sub in MODULES:
                    bound[a.asname or a.name] = sub
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                out.append((bound[node.value.id], node.attr))
    return out


def _package(name: str) -> str:
    """The package a module belongs to: ``jaxrank.X`` for anything under ``jaxrank/X/``, the
    module itself for a top-level file."""
    parts = name.split(".")
    if len(parts) >= 2 and (PACKAGE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return name


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v) :] + [v]
            if v not in state and (found := visit(v)):
                return found
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state and (found := visit(u)):
            return found
    return None


@pytest.mark.parametrize("path", sorted(PUBLIC_NAMES))
def test_every_public_path_imports_with_every_name_it_had(path):
    module = importlib.import_module(path)
    missing = [n for n in PUBLIC_NAMES[path] if not hasattr(module, n)]
    assert not missing, f"{path} lost {missing}"


def test_the_import_graph_of_files_has_no_cycle():
    graph = {m: {t for t, _ in _imports(m) if t in MODULES and t != m} for m in MODULES if m != "jaxrank"}
    graph = {m: {t for t in ts if t != "jaxrank"} for m, ts in graph.items()}
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    assert not [m for m in MODULES if m != "jaxrank" and ("jaxrank", None) in _imports(m)], "import jaxrank inside it"


def test_packages_are_layers_that_no_import_runs_back_up():
    graph: dict[str, set[str]] = {}
    for m in MODULES:
        if m in ("jaxrank", "jaxrank.cli"):  # the face and the command line sit on top of everything
            continue
        for t, _ in _imports(m):
            if t in MODULES and _package(t) != _package(m):
                graph.setdefault(_package(m), set()).add(_package(t))
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


def _private_crossing(importer: str, target: str) -> bool:
    """Whether ``target`` (a dotted module or name) is private to a package that does not
    hold ``importer``: a component after the common prefix, other than the first, starts
    with an underscore (the first is a sibling of the importer's package: a private helper
    of a common parent is visible to it)."""
    home = _package(importer)
    if target == home or target.startswith(home + "."):
        return False
    a, b = importer.split("."), target.split(".")
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    return any(part.startswith("_") and not part.startswith("__") for part in b[common + 1 :])


def test_no_import_crosses_a_package_boundary_to_a_private_name():
    crossings = [
        f"{m} imports {t}{'.' + n if n else ''}"
        for m in MODULES
        for t, n in _imports(m)
        if _private_crossing(m, f"{t}.{n}" if n else t)
    ]
    assert not crossings, "\n".join(crossings)


def test_the_private_crossing_rule_on_known_cases():
    assert _private_crossing("jaxrank.losses.pairwise", "jaxrank.ranking._backend.cumsum")
    assert _private_crossing("jaxrank.compat.rax", "jaxrank.losses.pairwise._hinge")
    assert not _private_crossing("jaxrank.losses.pairwise", "jaxrank.losses.listwise._log_softmax")
    assert not _private_crossing("jaxrank.metrics.ir", "jaxrank._checks.check_scores")
    assert not _private_crossing("jaxrank.trec.files", "jaxrank.measures.plan.Column")
    MODULES["jaxrank.compat._probe"] = probe = ROOT / "build" / "_probe.py"
    probe.parent.mkdir(exist_ok=True)
    probe.write_text("from jaxrank import losses\nlosses._helper(1)\n")
    try:
        assert ("jaxrank.losses", "_helper") in _imports("jaxrank.compat._probe")
        assert _private_crossing("jaxrank.compat._probe", "jaxrank.losses._helper")
    finally:
        del MODULES["jaxrank.compat._probe"]
        probe.unlink()


def test_no_file_is_over_800_lines():
    long = {name: n for name, p in MODULES.items() if (n := len(p.read_text().splitlines())) > 800}
    assert not long, long


def test_the_top_level_holds_the_face_the_cli_private_helpers_packages_and_faces():
    for entry in PACKAGE.iterdir():
        if entry.is_dir():
            assert entry.name in ("data", "__pycache__") or (entry / "__init__.py").exists(), entry
        elif entry.suffix == ".py" and entry.name not in ("__init__.py", "cli.py") and not entry.name.startswith("_"):
            assert entry.name in FACES, f"{entry.name}: a loose module at the top level"
            body = [s for s in ast.parse(entry.read_text()).body if not isinstance(s, (ast.Expr, ast.ImportFrom))]
            assert all(isinstance(s, ast.Assign) and s.targets[0].id == "__all__" for s in body), entry.name


def test_every_platform_switch_lives_in_the_backend_module():
    # DESIGN.md: a path chosen per platform is confined to ranking/backend.py and tested there
    # on 8 host devices; elsewhere code asks the backend for it by name
    switching = [p.relative_to(ROOT).as_posix() for p in MODULES.values() if "platform_dependent" in p.read_text()]
    assert switching == ["jaxrank/ranking/backend.py"]
