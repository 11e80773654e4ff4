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
    """Training, evaluation and the API share the run directory through groc_cli.run_storage (and
    groc_cli.start_state, the checkpoints' start states beside it): evaluation and the API reach
    nothing of training's, and the format markers are declared once (groc_cli/formats.py), never
    spelt out elsewhere."""
    graph = imports()
    for module, deps in graph.items():
        if module.startswith("groc_cli.evaluation") or module == "groc_cli.api":
            assert {d for d in deps if d.startswith("groc_cli.training")} == set(), module
    assert "groc_cli.run_storage" in graph["groc_cli.evaluation.perplexity"]
    assert "groc_cli.run_storage" in graph["groc_cli.training.api"]
    assert "groc_cli.start_state" in graph["groc_cli.api"] and "groc_cli.start_state" in graph["groc_cli.training.api"]
    spelt = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                   for marker in ('"groc-run"', '"groc-dataset"', '"groc-states"') if marker in path.read_text())
    assert spelt == ["formats.py"] * 3


#: What groc_cli.artifacts (outputs written aside, locks, Parquet and JSON, integrity) may import
#: besides its own modules: it is the bottom layer every stage writes through.
ARTIFACTS_BELOW = {"groc_cli.errors", "groc_cli.console", "groc_cli.formats", "groc_cli.json_input", "groc_cli.version"}


def test_artifacts_import_no_stage():
    graph = imports()
    for module, deps in graph.items():
        if module.startswith("groc_cli.artifacts"):
            assert {d for d in deps if not d.startswith("groc_cli.artifacts")} <= ARTIFACTS_BELOW, module


def test_no_module_imports_another_s_private_name():
    """A name with a leading underscore stays in its module: one that another module needs is public
    (a package's private module, as ``commands/_settings.py``, is imported by its package's own modules)."""
    modules = _modules()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        package = ".".join(parts[:-1])
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("groc_cli")):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if private and f"{target}.{alias.name}" not in modules:
                        found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {target}.{alias.name}")
    assert not found, "\n".join(found)


#: Other programs' flags, which messages quote (torchrun's, pip's, docker's).
FOREIGN_FLAGS = {"--nproc_per_node", "--force-reinstall", "--no-deps", "--cpus"}
#: Values of a file format that spell a flag: the stage a grid table's metadata records.
FORMAT_VALUES = {"eval --grid"}


def test_no_library_module_names_a_flag():
    """The library names settings (in backticks: "`cache_weight` 2.0: must be in [0, 1]"); only the
    command layer (groc_cli/commands/, cli.py) writes them as flags, so that the Python API's users
    read their own names. A string in any other module (a message, a help, a docstring) may name a
    flag only inside a command line the user could type: quoted ('groc lexicon --vocab DATASET
    -o FILE'), in double backticks (``groc --version``) or in parentheses with groc in them ("(groc
    prepare --min-count 2)"); or as a setting's own ``flag=``, another program's flag
    (FOREIGN_FLAGS) or a format's value (FORMAT_VALUES). docs/extending.md, "Adding a setting"."""
    import re

    flag = re.compile(r"(?<![\w-])--[a-z][\w-]*")
    command_line = re.compile(r"'groc [^']*'|``groc [^`]*``|\([^()]*\bgroc [^()]*\)")
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name.startswith("commands/") or name == "cli.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        declared = {id(k.value) for node in ast.walk(tree) if isinstance(node, ast.Call)
                    for k in node.keywords if k.arg == "flag"}
        for node, text in _strings(tree):
            if id(node) in declared or text in FORMAT_VALUES:
                continue
            for f in flag.findall(command_line.sub("", text)):
                if f not in FOREIGN_FLAGS:
                    found.append(f"groc_cli/{name}:{node.lineno}: {f}")
    assert not found, "\n".join(found)


def test_every_setting_a_message_names_is_an_option():
    """A name in backticks in a library string (a message, a help; not a docstring) is written as a
    flag by the command layer: it must be an option of some command, not a bare name there."""
    import re

    from groc_cli.cli import command
    from groc_cli.commands import SUMMARIES

    options = {p.name for name in SUMMARIES for p in command(name).params}
    unknown = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        for node, text in _strings(tree):
            if id(node) in docstrings:
                continue
            for m in re.finditer(r"(?<!`)`(\w+)`(?!`)", text):
                if m[1] not in options:
                    unknown.append(f"groc_cli/{name}:{node.lineno}: `{m[1]}`")
    assert not unknown, "\n".join(unknown)


def _strings(tree: ast.AST):
    """Each string literal of ``tree`` with its text; an f-string as one text, "{}" for each
    replacement field (so that a command line with a value in it stays one piece)."""
    parts = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts |= {id(v) for v in node.values}
            yield node, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            yield node, node.value
