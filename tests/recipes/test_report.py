"""The recipes' result tables (recipes/NAME/table.py, found and run by recipes/lib/tables.py) on
small made-up outputs with the fields each report reads: the printed tables, the Markdown and Parquet files and the plots must be what
the recipes wrote before their reports moved out of shell heredocs.

The expected files under tests/recipes/expected/ are frozen output: they were written by this
test (GROC_UPDATE_EXPECTED=1) after every case had been run both through the new functions and
through the heredoc reports of commit 59f61bd (recipes/*.sh as they were then, extracted with
git show) on the same inputs, with identical results byte for byte: stdout, stderr, exit status
and every Markdown, Parquet and PNG file. So they hold what the recipes printed and wrote before.
To change a table on purpose, change its function and regenerate its expected file the same way.
Each recipe declares its own cases (recipes/NAME/cases.py, with recipes/lib/made_up.py): a new
recipe adds its cases there and, with GROC_UPDATE_EXPECTED=1, its expected files here.
"""

import importlib.util
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import REPO

EXPECTED = Path(__file__).parent / "expected"


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def recipe_cases(root: Path = REPO / "recipes") -> dict:
    """Every recipe's test cases (recipes/NAME/cases.py, ``CASES``), by name: (builder, its keyword
    arguments, the report's command line). recipes/lib must be importable (made_up, report)."""
    found: dict = {}
    for path in sorted(Path(root).glob("*/cases.py")):
        spec = importlib.util.spec_from_file_location(f"recipe_cases_{path.parent.name.replace('-', '_')}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, case in module.CASES.items():
            if name in found:
                raise ValueError(f"two recipes declare the test case {name}")
            found[name] = case
    return found


sys.path.insert(0, str(REPO / "recipes" / "lib"))
try:
    import report
    import tables

    CASES = recipe_cases()
finally:
    sys.path.pop(0)


def build_case(case: str, directory: Path) -> None:
    """Write case's made-up inputs into directory (which must be the current directory)."""
    builder, kwargs, _ = CASES[case]
    assert Path.cwd() == directory
    builder(random.Random(case), **kwargs)
    Path("out").mkdir(exist_ok=True)


def outputs(directory: Path, before: set) -> dict:
    """What a report wrote under directory (files not in before): Markdown as text, Parquet as its
    schema, metadata and rows, plots as their kind."""
    found = {}
    for path in sorted(directory.rglob("*")):
        name = str(path.relative_to(directory))
        if not path.is_file() or name in before:
            continue
        if path.suffix == ".parquet":
            t = pq.read_table(path)
            found[name] = {"schema": str(t.schema.remove_metadata()),
                           "metadata": {k.decode(): json.loads(v) for k, v in (t.schema.metadata or {}).items()},
                           "rows": t.to_pylist()}
        elif path.suffix == ".png":
            found[name] = "PNG" if path.read_bytes().startswith(b"\x89PNG") else "not a PNG"
        else:
            found[name] = path.read_text()
    return found


def run_case(case: str, directory: Path, capsys) -> dict:
    """The report of case on its inputs, in process: exit status, stdout, stderr and the files it wrote."""
    build_case(case, directory)
    before = {str(p.relative_to(directory)) for p in directory.rglob("*")}
    try:
        tables.main(CASES[case][2])
        status = 0
    except SystemExit as exc:
        status = exc.code
    out, err = capsys.readouterr()
    return {"status": status, "stdout": out, "stderr": err, "files": outputs(directory, before)}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_report_matches_what_the_recipe_wrote_before(case, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    got = run_case(case, tmp_path, capsys)
    # JSON turns inf into Infinity and tuples into lists: compare as the expected file stores them.
    got = json.loads(json.dumps(got))
    expected_file = EXPECTED / f"{case}.json"
    if os.environ.get("GROC_UPDATE_EXPECTED"):
        expected_file.parent.mkdir(exist_ok=True)
        expected_file.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    expected = json.loads(expected_file.read_text())
    assert got["stdout"] == expected["stdout"]
    assert got == expected
    for name, text in got["files"].items():  # each Markdown file is also printed
        if name.endswith(".md"):
            assert text + "\n" in got["stdout"]


def test_a_missing_output_stops_the_report_before_any_table(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    build_case("table5", tmp_path)
    Path("work/evals/small/table5-min2-groc-web-local.json").unlink()
    with pytest.raises(SystemExit) as exc:
        tables.main(CASES["table5"][2])
    assert exc.value.code == 2
    assert "table5-min2-groc-web-local.json is missing" in capsys.readouterr().err
    assert not list(Path("out").glob("table5.*"))


@pytest.mark.slow
def test_reports_run_from_the_command_line_as_the_recipes_call_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    build_case("grid-best", tmp_path)
    script = REPO / "recipes" / "lib" / "tables.py"
    r = subprocess.run([sys.executable, str(script), *CASES["grid-best"][2]], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (0, "0.5\n", "")
    r = subprocess.run([sys.executable, str(script), "table5", "--out=out"], capture_output=True, text=True)
    assert r.returncode == 2 and "required: --work, --scale, --tests" in r.stderr
    r = subprocess.run([sys.executable, str(script), "table6"], capture_output=True, text=True)
    assert r.returncode == 2 and "invalid choice: 'table6'" in r.stderr


def test_converge_report_names_each_model_and_how_it_stopped(tmp_path, capsys):
    out = tmp_path / "converge"
    for m, stop, ppl in (("tied", "early-stopping", 67.1), ("groc", "max-minutes", 57.0)):
        _write(out / "runs" / m / "summary.json", {"parameters": 1_111_089, "epochs": 45, "stop_reason": stop,
                                                   "seconds": 1089.9, "best_valid_ppl": ppl})
        for k in ("emma-closed", "emma-open", "near-open", "far-open"):
            _write(out / "evals" / f"{m}-{k}.json", {"perplexity": ppl + len(k)})
    _write(out / "evals" / "tied-emma-train.json", {"perplexity": 40.0})  # groc's training split was not scored
    _write(out / "evals" / "compare-tied-groc.json", {"bins": [{"bin": "1-49", "median_diff": -0.16},
                                                               {"bin": "0", "median_diff": None}],
                                                      "overall": {"median_diff": -0.11}})
    report.recipe("converge").converge(out, ["tied", "groc"], 3600)
    md = (out / "converge.md").read_text()
    assert "| tied | 1,111,089 | 45 | early-stopping | 18 | 40.0 | 67.1 | 78.1 |" in md
    assert "| GroC, authors' char-CNN init |" in md and "max-minutes" in md and "not converged" in md
    assert "1-49: -0.160; overall -0.110" in md
    assert pq.read_table(out / "converge.parquet").num_rows == 2


# A recipe is a folder (recipes/NAME/: run.sh and table.py); the report finds it by scanning.

DROPPED_TABLE = '''
from pathlib import Path

from report import Table, load, report


@report
def dropped_in(out: Path, work: Path, names: list[str]) -> None:
    """A recipe that no central file names."""
    t = Table("dropped-in", "A dropped-in recipe", ["name", "ppl"])
    for n in names:
        t.add(name=n, ppl=load(work / f"{n}.json")["perplexity"])
    t.write(out, notes=["found by scanning recipes/*/table.py"])


def helper_not_a_report(out: Path) -> None:
    raise AssertionError("only @report functions are commands")
'''
DROPPED_SCRIPT = '''#!/usr/bin/env bash
NAME=dropped-in
source "$(dirname "$0")/../lib/steps.sh"
WORK=$1
report dropped-in --out="$2" --work="$WORK" --names="a b"
'''


@pytest.mark.slow
def test_a_recipe_folder_dropped_in_is_found_without_editing_a_central_file(tmp_path):
    """recipes/lib as it is, copied beside a new folder: the folder's script reaches its table through
    `report`, and nothing under recipes/lib names it."""
    recipes = tmp_path / "recipes"
    (recipes / "lib").mkdir(parents=True)
    for f in (REPO / "recipes" / "lib").iterdir():
        if f.is_file():
            (recipes / "lib" / f.name).write_bytes(f.read_bytes())
    (recipes / "dropped-in").mkdir()
    (recipes / "dropped-in" / "table.py").write_text(DROPPED_TABLE)
    (recipes / "dropped-in" / "run.sh").write_text(DROPPED_SCRIPT)
    for n, ppl in (("a", 91.25), ("b", 12345.0)):
        _write(tmp_path / "work" / f"{n}.json", {"perplexity": ppl})
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    r = subprocess.run(["bash", str(recipes / "dropped-in" / "run.sh"), str(tmp_path / "work"), str(tmp_path / "out")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert "| a | 91.2 |\n| b | 12345.0 |" in r.stdout
    assert (tmp_path / "out" / "dropped-in.md").read_text() + "\n" == r.stdout
    assert pq.read_table(tmp_path / "out" / "dropped-in.parquet").num_rows == 2
    assert not any("dropped" in f.read_text() for f in (recipes / "lib").iterdir())
    found = tables.reports(recipes)
    assert list(found) == ["dropped-in"]  # not its helper, nor the imported `report` or `load`
    r = subprocess.run([sys.executable, str(recipes / "lib" / "tables.py"), "helper-not-a-report", "--out=x"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "invalid choice: 'helper-not-a-report'" in r.stderr


def test_two_reports_of_one_name_are_refused(tmp_path):
    for folder in ("one", "two"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "table.py").write_text(DROPPED_TABLE)
    with pytest.raises(ValueError, match="two reports are named dropped-in"):
        tables.reports(tmp_path)


def test_every_recipe_folder_has_its_script_its_report_and_its_command():
    """recipes/NAME/ holds run.sh and (for a recipe with a table) table.py with a report NAME;
    recipes/NAME.sh, the command README and docs give, runs that folder's script."""
    folders = sorted(p.parent for p in REPO.glob("recipes/*/run.sh"))
    assert folders == sorted(p for p in REPO.glob("recipes/*") if p.is_dir() and p.name not in ("lib", "configs"))
    for folder in folders:
        entry = REPO / "recipes" / f"{folder.name}.sh"
        assert f'exec bash "$(dirname "$0")/{folder.name}/run.sh" "$@"' in entry.read_text(), entry
        assert os.access(entry, os.X_OK) and os.access(folder / "run.sh", os.X_OK)
        if (folder / "table.py").exists():
            assert folder.name in tables.REPORTS
            assert tables.REPORTS[folder.name].__module__ == report.recipe(folder.name).__name__
    assert sorted(p.parent for p in REPO.glob("recipes/*/table.py")) == folders
    assert "grid-best" in tables.REPORTS  # a second report of check-wikitext2-caches/


def test_every_recipe_case_runs_a_report_and_has_its_expected_output():
    """A case declared in recipes/NAME/cases.py runs one of the reports, and each has its frozen output
    (an expected file without a case, or a case without one, is a recipe half added or half removed)."""
    assert all(command[0] in tables.REPORTS for _, _, command in CASES.values())
    assert sorted(p.stem for p in EXPECTED.glob("*.json")) == sorted(CASES)


@pytest.mark.slow
def test_the_scripts_output_layers_are_groc_s_registered_ones(tmp_path):
    """recipes/lib/output-layers.txt, which common.sh and the tables read, names every output layer
    groc registers, each once (in the paper's Table 2 order, which the registry does not keep). The
    registry is read in a process of its own: the layers groc_cli.models imports, not a test's."""
    r = subprocess.run([sys.executable, "-c", "from groc_cli.models import KINDS; print(*KINDS)"],
                       capture_output=True, text=True)
    kinds = r.stdout.split()
    assert r.returncode == 0 and kinds, r.stderr
    assert sorted(report.OUTPUT_LAYERS) == sorted(kinds) and len(set(report.OUTPUT_LAYERS)) == len(kinds)
    assert report.OUTPUT_LAYERS == ("lookup", "convolutional", "tied", "bilinear", "deep-residual", "adaptive", "groc")
    env = {**os.environ, "DATA": str(tmp_path), "RESULTS": str(tmp_path / "results"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    r = subprocess.run(["bash", "-c", f'NAME=t; source {REPO}/recipes/lib/common.sh; printf "%s\\n" "${{OUTPUT_LAYERS[@]}}"'],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert tuple(r.stdout.split("\n")[:-1]) == report.OUTPUT_LAYERS
    assert report.recipe("check-open-vocab").CHECK_OUTPUTS == report.OUTPUT_LAYERS
    assert set(report.recipe("table2").PAPER_TABLE2) == set(report.OUTPUT_LAYERS)


def test_table2_cpu_notes_the_words_that_make_a_difference_infinite_ones_included():
    """groc compare --words in the table's notes; a sum that a zero probability made infinite is null in its JSON."""
    words = report.recipe("table2-cpu")._words
    assert words({"total_diff": None, "b_worse": [{"word": "<unk>", "tokens": 4794, "sum_diff": None}],
                  "b_better": [{"word": "of", "tokens": 2195, "sum_diff": -73.9}]}) == (
        "summed over every token infinite nats; costing GroC most <unk> infinite (4,794 tokens); gaining it most "
        "of -73.9 (2,195 tokens)")


def test_quickstart_verdict_names_groc_against_tied_and_each_cache_against_its_starting_point():
    table = report.recipe("quickstart")
    evals = {}
    for d, (tied, groc) in zip(table.QUICKSTART_SETS, [(100, 110), (200, 150), (400, 300)]):
        evals["tied", d] = {"base": {"perplexity": tied}, "local": {"perplexity": tied * 0.9, "model_perplexity": tied},
                            "unbounded": {"perplexity": tied * 0.8, "model_perplexity": tied}}
        # GroC's caches start from its down-weighted model (here 5% above its own perplexity), not from it
        evals["groc", d] = {"base": {"perplexity": groc},
                            "local": {"perplexity": groc, "model_perplexity": groc * 1.05},
                            "unbounded": {"perplexity": groc * 1.05 * 1.1, "model_perplexity": groc * 1.05}}
    assert table.verdict(evals) == (
        "Verdict (perplexity change, - is better): GroC against tied, no cache: Emma +10.0%, near -25.0%, far -25.0%; "
        "each cache against 'cache on': local -4.8% to -10.0%, unbounded +10.0% to -20.0% (9 of 12 lower).")
