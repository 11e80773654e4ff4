"""The package's layering: no module imports, even inside a function, one that imports it back."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "groc_cli"


def imports() -> dict[str, set[str]]:
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [f"{target}.{a.name}" for a in node.names]
                found |= {n for n in names if n in _modules()} or {target}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("groc_cli"):
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("groc_cli")}
        graph[module] = {m for m in found if m in _modules() and m != module}
    return graph


def _modules() -> set[str]:
    mods = set()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        mods.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return mods


def test_no_import_circle():
    graph = imports()
    # A package's __init__ re-exports its modules; importing a sibling through it is the same edge.
    def reachable(start):
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    circles = sorted((a, b) for a in graph for b in graph[a]
                     if a in reachable(b) and not a.startswith(b + ".") and not b.startswith(a + ".")
                     and a.rpartition(".")[0] != b and b.rpartition(".")[0] != a)
    assert circles == []


def test_models_and_caches_import_nothing_above_them():
    graph = imports()
    for module, deps in graph.items():
        if module.startswith(("groc_cli.models", "groc_cli.caches")):
            above = {d for d in deps if d.startswith(("groc_cli.training", "groc_cli.evaluation", "groc_cli.commands",
                                                      "groc_cli.cli"))}
            assert above == set(), module


def test_the_run_directory_format_is_run_storage_s():
    """Training, evaluation and the API share the run directory through groc_cli.run_storage:
    evaluation reaches nothing of training's, and the format markers are declared once
    (groc_cli/formats.py), never spelt out elsewhere."""
    graph = imports()
    for module, deps in graph.items():
        if module.startswith("groc_cli.evaluation"):
            assert {d for d in deps if d.startswith("groc_cli.training")} == set(), module
    assert "groc_cli.run_storage" in graph["groc_cli.evaluation.perplexity"]
    assert "groc_cli.run_storage" in graph["groc_cli.training.api"]
    spelt = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                   for marker in ('"groc-run"', '"groc-dataset"', '"groc-states"') if marker in path.read_text())
    assert spelt == ["formats.py"] * 3
