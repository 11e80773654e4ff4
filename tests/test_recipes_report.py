"""The recipes' result tables (recipes/NAME/table.py, found and run by recipes/lib/tables.py) on
small made-up outputs with the fields each report reads: the printed tables, the Markdown and Parquet files and the plots must be what
the recipes wrote before their reports moved out of shell heredocs.

The expected files under tests/recipes_expected/ are frozen output: they were written by this
test (GROC_UPDATE_EXPECTED=1) after every case had been run both through the new functions and
through the heredoc reports of commit 59f61bd (recipes/*.sh as they were then, extracted with
git show) on the same inputs, with identical results byte for byte: stdout, stderr, exit status
and every Markdown, Parquet and PNG file. So they hold what the recipes printed and wrote before.
To change a table on purpose, change its function and regenerate its expected file the same way.
"""

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from groc_cli.artifacts.io import write_parquet

from .conftest import REPO

EXPECTED = Path(__file__).parent / "recipes_expected"
sys.path.insert(0, str(REPO / "recipes" / "lib"))
try:
    import report
    import tables
finally:
    sys.path.pop(0)


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def _lexicon(path: Path, relations: float, definitions: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(pa.table({"word": ["a"]}), path,
                  {"coverage": {"relations_coverage": relations, "definition_coverage": definitions}})


def _ppl(rng: random.Random) -> float:
    return rng.uniform(60, 900)


# Builders: each writes, under the current directory, the outputs one report reads (paths as the
# recipes name them), with values that exercise its formatting: thousands separators, rounding,
# missing and non-finite values.

def build_table1(rng):
    for ds, vocab, tokens in (("ptb", 9_999, 887_521), ("wt2", 33_278, 2_088_628)):
        _write(Path(f"work/{ds}/manifest.json"), {"vocab_size": vocab, "splits": {"train": {"tokens": tokens}}})
        _lexicon(Path(f"work/{ds}.lexicon.parquet"), rng.random(), rng.random())


def build_runs(rng, scale, datasets, names, best_valid=True):
    for ds in datasets:
        for i, name in enumerate(names):
            s = {"parameters": rng.randrange(1_000_000, 30_000_000),
                 "final": {"valid_ppl": _ppl(rng), "tokens_per_s": rng.uniform(500, 20_000)}}
            if best_valid or i % 2:  # table2 falls back to final.valid_ppl without best_valid_ppl
                s["best_valid_ppl"] = _ppl(rng)
            _write(Path(f"work/runs/{scale}/{ds}-{name}/summary.json"), s)
            _write(Path(f"work/evals/{scale}/{ds}-{name}.test.json"), {"perplexity": _ppl(rng)})


def build_table2(rng, scale="small", datasets=("ptb", "wt2")):
    build_runs(rng, scale, datasets, report.recipe("table2").PAPER_TABLE2, best_valid=False)


def build_table3(rng, scale="small", datasets=("ptb", "wt2")):
    build_runs(rng, scale, datasets, report.recipe("table3").PAPER_TABLE3)


def build_table4(rng, scale="small", fractions=("0", "0.2", "0.5", "1"), train_fractions=("0", "1")):
    _write(Path(f"work/evals/{scale}/ptb-groc-d0-surf.test.json"), {"perplexity": _ppl(rng)})
    for f in fractions:
        _lexicon(Path(f"work/ptb.lexicon.keep{f}.parquet"), rng.random() * float(f), rng.random() * float(f))
        _write(Path(f"work/evals/{scale}/table4-inference-{f}.json"), {"perplexity": _ppl(rng)})
    for f in train_fractions:
        _write(Path(f"work/evals/{scale}/table4-train-{f}.json"), {"perplexity": _ppl(rng)})


def build_table5(rng, scale="small", suffix="-min2", tests=("news13", "news14", "web", "wiki", "books")):
    for kind in ("tied", "groc"):
        for d in tests:
            for setting, _ in report.recipe("table5").TABLE5_SETTINGS:
                _write(Path(f"work/evals/{scale}/table5{suffix}-{kind}-{d}-{setting}.json"),
                       {"perplexity": _ppl(rng) * 10, "tokens": rng.randrange(5_000, 300_000),
                        "vocab_size": rng.randrange(5_000, 60_000), "new_words": rng.randrange(100, 20_000),
                        "oov_rate": rng.random() / 5})
        for ft in report.recipe("table5").TABLE5_FINETUNING:
            run = Path(f"work/runs/{scale}/reuters{suffix}-{kind}-ft-{ft}")
            run.mkdir(parents=True)
            pq.write_table(pa.table({"epoch": [1, 2, 3], "train_loss": [rng.uniform(4, 7) for _ in range(3)],
                                     "valid_loss": [rng.uniform(4, 7) for _ in range(3)]}), run / "metrics.parquet")


def build_table10(rng, scale="small", datasets=("ptb", "wt2")):
    for ds in datasets:
        results = {}
        for name in ("tied", "lookup", "groc", "groc@update_prob=0.5", "groc@update_prob=0.05"):  # the last not in the paper
            results[name] = {"seconds_per_step": rng.uniform(0.01, 2), "mean_seconds_per_step": rng.uniform(0.01, 2),
                             "step_time_vs_tied": rng.uniform(0.5, 9)}
            if name != "lookup":  # a result without its parameter count reads as 0
                results[name]["parameters"] = rng.randrange(100_000, 20_000_000)
        _write(Path(f"work/bench/{scale}/{ds}-train-throughput.json"),
               {"settings": {"device": "cpu", "threads": 2}, "results": results})


def build_figure3(rng, datasets=("ptb", "wt2"), baselines=("tied", "adaptive")):
    for ds in datasets:
        for base in baselines:
            _write(Path(f"out/{ds}-{base}-vs-groc.json"),
                   {"bins": [{"bin": b, "median_diff": rng.uniform(-0.5, 0.5)} for b in ("1-10", "10-100", ">100")],
                    "overall": {"median_diff": rng.uniform(-0.2, 0.2)}})


def build_figure6(rng):
    for fig in ("figure6", "figure7"):
        grid = [{"theta": t, "cache_weight": w, "perplexity": _ppl(rng)} for t in (0, 0.5, 1) for w in (0.034, 0.1, 0.167)]
        _write(Path(f"out/{fig}-grid.json"),
               {"grid": grid, "best": min(grid, key=lambda r: r["perplexity"]), "model_perplexity": _ppl(rng)})


def build_check_open_vocab(rng, domains=("news14", "wiki", "books"), non_finite=()):
    for kind in report.recipe("check-open-vocab").CHECK_OUTPUTS:
        for d in domains:
            for x in report.recipe("check-open-vocab").CHECK_CACHES:
                ppl = math.inf if (kind, d, x) in non_finite else _ppl(rng)
                _write(Path(f"check/evals/{kind}-{d}-{x}.json"), {"perplexity": ppl, "tokens": rng.randrange(9_000, 30_000),
                                                                   "oov_rate": rng.random() / 5, "new_words": rng.randrange(10, 3_000)})


def build_check_wikitext2_caches(rng):
    _write(Path("out/local-grid.json"), {"model_perplexity": _ppl(rng),
                                         "best": {"theta": 0.3, "cache_weight": 0.1, "perplexity": _ppl(rng)}})
    _write(Path("out/unbounded-grid.json"), {"model_perplexity": _ppl(rng), "best": {
        "knn": 1024, "bandwidth_scale": 0.5, "cache_weight": 0.2, "perplexity": _ppl(rng)}})
    for name in ("static", "local", "unbounded"):
        _write(Path(f"out/test-{name}.json"), {"perplexity": _ppl(rng)})


QUICKSTART_ENVIRONMENT = {"groc": "0.1.0", "python": "3.11.2", "torch": "2.13.0+cpu", "faiss": "1.15.1", "numpy": "2.4.6",
                          "pyarrow": "21.0.0", "platform": "Linux-6.1-x86_64", "cpu": "AMD EPYC 7B13",
                          "cpu_flags": ["sse4_2", "avx", "avx2", "fma"], "torch_cpu_capability": "AVX2", "cpu_count": 2,
                          "threads": 2, "device": "cpu", "gpu": None, "wordnet": "3.0"}


def build_quickstart(rng):
    for kind in ("tied", "groc"):
        _write(Path(f"out/{kind}/summary.json"), {"tokens": 170_123, "parameters": rng.randrange(300_000, 500_000)})
        for d in report.recipe("quickstart").QUICKSTART_SETS:
            cache_base = _ppl(rng)  # the model the caches are given: GroC's new words down-weighted
            for n in ("base", "local", "unbounded"):
                _write(Path(f"out/evals/{kind}-{d}-{n}.json"), {"tokens": rng.randrange(20_000, 40_000), "oov_rate": rng.random() / 5,
                                                                "new_words": rng.randrange(100, 3_000), "perplexity": _ppl(rng),
                                                                "model_perplexity": cache_base,
                                                                "environment": QUICKSTART_ENVIRONMENT})


# case: (builder, its keyword arguments, the report's command line). Paths are relative to the
# case's directory, so that the expected text does not depend on where the test runs.
CASES = {
    "table1": (build_table1, {}, ["table1", "--out=out", "--work=work"]),
    "table2": (build_table2, {}, ["table2", "--out=out", "--work=work", "--scale=small", "--datasets=ptb wt2"]),
    "table2-paper": (build_table2, {"scale": "paper", "datasets": ["wt2"]},
                     ["table2", "--out=out", "--work=work", "--scale=paper", "--datasets=wt2"]),
    "table3": (build_table3, {}, ["table3", "--out=out", "--work=work", "--scale=small", "--datasets=ptb wt2"]),
    "table4": (build_table4, {}, ["table4", "--out=out", "--work=work", "--scale=small", "--fractions=0 0.2 0.5 1",
                                  "--train-fractions=0 1"]),
    "table4-no-training": (build_table4, {"scale": "paper", "fractions": ["0.4"], "train_fractions": []},
                           ["table4", "--out=out", "--work=work", "--scale=paper", "--fractions=0.4", "--train-fractions="]),
    "table5": (build_table5, {}, ["table5", "--out=out", "--work=work", "--scale=small",
                                  "--tests=news13 news14 web wiki books", "--reuters-suffix=-min2", "--reuters-min-count=2"]),
    "table5-min1-paper": (build_table5, {"scale": "paper", "suffix": "", "tests": ["news14", "web"]},
                          ["table5", "--out=out", "--work=work", "--scale=paper", "--tests=news14 web",
                           "--reuters-suffix=", "--reuters-min-count=1"]),
    "table10": (build_table10, {}, ["table10", "--out=out", "--work=work", "--scale=small", "--datasets=ptb wt2"]),
    "figure3": (build_figure3, {}, ["figure3", "--out=out", "--scale=small", "--datasets=ptb wt2",
                                    "--baselines=tied adaptive"]),
    "figure6": (build_figure6, {}, ["figure6", "--out=out", "--scale=small"]),
    "check-open-vocab": (build_check_open_vocab, {}, ["check-open-vocab", "--out=out", "--check-dir=check",
                                                      "--domains=news14 wiki books"]),
    "check-open-vocab-non-finite": (build_check_open_vocab, {"non_finite": [("tied", "wiki", "local"), ("groc", "books", "none")]},
                                    ["check-open-vocab", "--out=out", "--check-dir=check", "--domains=news14 wiki books"]),
    "check-wikitext2-caches": (build_check_wikitext2_caches, {}, ["check-wikitext2-caches", "--out=out"]),
    "grid-best": (build_check_wikitext2_caches, {}, ["grid-best", "--grid=out/unbounded-grid.json", "--key=bandwidth_scale"]),
    "quickstart": (build_quickstart, {}, ["quickstart", "--out=out", "--seconds=238"]),
}


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
    assert len(folders) == 15
    for folder in folders:
        entry = REPO / "recipes" / f"{folder.name}.sh"
        assert f'exec bash "$(dirname "$0")/{folder.name}/run.sh" "$@"' in entry.read_text(), entry
        assert os.access(entry, os.X_OK) and os.access(folder / "run.sh", os.X_OK)
        if (folder / "table.py").exists():
            assert folder.name in tables.REPORTS
            assert tables.REPORTS[folder.name].__module__ == report.recipe(folder.name).__name__
    assert sorted(p.parent for p in REPO.glob("recipes/*/table.py")) == folders
    assert "grid-best" in tables.REPORTS  # a second report of check-wikitext2-caches/


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
