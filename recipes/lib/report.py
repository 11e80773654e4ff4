"""Result tables for the recipes: Markdown beside Parquet, written atomically from complete
outputs only.

    import sys; sys.path.insert(0, "recipes/lib")
    from report import Table, load
    t = Table("table2", "Perplexity per output layer", ["model", "ppl", "paper_ppl"])
    t.add(model="tied", ppl=load("results/work/runs/ptb-tied/summary.json")["final"]["valid_ppl"], paper_ppl=86.2)
    t.write("results/table2", notes=["SCALE=small: ..."])

``load`` fails (one line, exit 2) when an expected output is missing, so a table is never
built from partial outputs.

A recipe is a folder, recipes/NAME/: its script (run.sh) and its table (table.py: the report
functions, marked ``@report``, and the paper's numbers beside them). ``tables.py`` finds the
reports by scanning the folders; ``recipe(NAME)`` is another recipe's table.py, for numbers two
recipes share (Table 2's paper values serve table2, gpu-table2 and table2-cpu).
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pyarrow.parquet as pq

from groc_cli.artifacts.atomic import atomic_path
from groc_cli.artifacts.io import read_metadata

RECIPES = Path(__file__).resolve().parent.parent  # recipes/: one folder per recipe, and lib/
DATASET_NAMES = {"ptb": "penn", "wt2": "wikitext2"}  # the paper's names


def output_layers() -> tuple[str, ...]:
    """groc's output layers in the order of the paper's Table 2, as recipes/lib/output-layers.txt
    lists them for the scripts (common.sh: OUTPUT_LAYERS)."""
    text = (RECIPES / "lib" / "output-layers.txt").read_text()
    return tuple(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


OUTPUT_LAYERS = output_layers()


def report(function):
    """Mark a function of a recipe's table.py as a report: ``report NAME --option=VALUE ...``
    (steps.sh) calls it, NAME being the function's name with - for _, its options its parameters."""
    function.is_report = True
    return function


_LOADED: dict[Path, ModuleType] = {}


def recipe(name: str, root: Path = RECIPES) -> ModuleType:
    """The table.py of recipe ``name`` (root/NAME/table.py), loaded once."""
    path = (Path(root) / name / "table.py").resolve()
    if path not in _LOADED:
        spec = importlib.util.spec_from_file_location(f"recipe_{name.replace('-', '_')}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _LOADED[path] = module
    return _LOADED[path]


def coverage(lexicon: Path) -> dict:
    """A lexicon's WordNet coverage of its vocabulary, in % (Table 1's and Table 4's columns)."""
    cov = read_metadata(lexicon)["coverage"]
    return {"relations_cov": round(100 * cov["relations_coverage"], 1),
            "definitions_cov": round(100 * cov["definition_coverage"], 1)}


def fail(message: str) -> None:
    print(f"report: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def load(path) -> dict:
    """A JSON output of an earlier stage; a missing or unreadable one stops the recipe."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        fail(f"{path} is missing: a stage did not complete, so no table is written")
    except json.JSONDecodeError as exc:
        fail(f"{path} is not valid JSON ({exc})")


def summary(run_dir) -> dict:
    """summary.json of a finished run (train or finetune)."""
    return load(Path(run_dir) / "summary.json")


def _atomic(final: Path, write) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(final) as tmp:
        write(tmp)


def fmt(value, spec: str = ".1f") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf"
        if math.isnan(value):
            return "nan"
        return format(value, spec)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    return str(value)


class Table:
    def __init__(self, name: str, title: str, columns: list[str], formats: dict[str, str] | None = None):
        self.name, self.title, self.columns = name, title, columns
        self.formats = formats or {}
        self.rows: list[dict] = []

    def add(self, **row) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            fail(f"table {self.name}: unknown column(s) {sorted(unknown)}")
        self.rows.append({c: row.get(c) for c in self.columns})

    def markdown(self, notes: list[str] = ()) -> str:
        lines = [f"# {self.title}", "", "| " + " | ".join(self.columns) + " |",
                 "|" + "|".join("---" for _ in self.columns) + "|"]
        for row in self.rows:
            lines.append("| " + " | ".join(fmt(row[c], self.formats.get(c, ".1f")) for c in self.columns) + " |")
        if notes:
            lines += [""] + [f"- {n}" for n in notes]
        return "\n".join(lines) + "\n"

    def write(self, out_dir, notes: list[str] = (), meta: dict | None = None) -> None:
        out_dir = Path(out_dir)
        md = self.markdown(notes)
        table = pa.Table.from_pylist(self.rows)
        table = table.replace_schema_metadata({b"groc": json.dumps({"title": self.title, "notes": list(notes),
                                                                      **(meta or {})}).encode()})
        _atomic(out_dir / f"{self.name}.parquet", lambda tmp: pq.write_table(table, tmp))
        _atomic(out_dir / f"{self.name}.md", lambda tmp: Path(tmp).write_text(md))
        print(md)
