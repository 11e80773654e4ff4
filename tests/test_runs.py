"""groc runs: one row per run directory, as a table, JSON or CSV, sorted; damaged and unfinished runs are rows."""

import csv
import io
import json
import os
import shutil

import pytest

from tests.conftest import REPO, TINY, run_groc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_run):
    """data: Persuasion with a test split (tiny_run's, linked here: read-only); runs/: a finished tied run
    with a test evaluation, a finished lookup run (copies of tiny_run's: eval records itself in a run), an
    unfinished run (its summary.json gone, as while training), and a damaged one (config.json cut short)."""
    root = tmp_path_factory.mktemp("runs")
    data = tiny_run.data(REPO / "groc_cli" / "data" / "austen-persuasion.txt", "3000,500,500")
    (root / "data").symlink_to(data)
    for kind, tokens in (("tied", 300), ("lookup", 48)):
        tiny_run.copy(tiny_run(kind, data=data, max_tokens=tokens), root / "runs" / kind)
    (root / "runs" / "evals").mkdir()
    ev = run_groc("eval", root / "runs" / "tied", root / "data", "--split", "test", check=True).stdout
    (root / "runs" / "evals" / "tied-test.json").write_bytes(ev)
    shutil.copytree(root / "runs" / "lookup", root / "runs" / "unfinished")
    (root / "runs" / "unfinished" / "summary.json").unlink()
    (root / "runs" / "broken").mkdir()
    (root / "runs" / "broken" / "config.json").write_text('{"format": "groc-run", "mod')
    return root


def test_one_row_per_run_with_what_it_recorded(runs):
    rows = json.loads(run_groc("runs", runs / "runs", "--json", check=True).stdout)
    by = {r["run"].rsplit("/", 1)[-1]: r for r in rows}
    assert sorted(by) == ["broken", "lookup", "tied", "unfinished"]
    tied = by["tied"]
    summary = json.loads((runs / "runs" / "tied" / "summary.json").read_text())
    test = json.loads((runs / "runs" / "evals" / "tied-test.json").read_text())
    assert tied["status"] == "done" and tied["kind"] == "tied" and tied["stage"] == "train"
    assert tied["parameters"] == summary["parameters"] and tied["dataset"] == "data"
    assert tied["best_valid_ppl"] == summary["best_valid_ppl"] and tied["stop_reason"] == summary["stop_reason"]
    assert tied["test_ppl"] == test["perplexity"] and tied["test_vocab"] == "model"
    assert by["lookup"]["test_ppl"] is None
    assert by["unfinished"]["status"].startswith("unfinished") and by["unfinished"]["epochs"] is not None
    assert by["broken"]["status"].startswith("damaged") and by["broken"]["kind"] is None


def test_a_run_being_written_is_running_with_its_pid_and_minutes_so_far(runs, tmp_path):
    """A run whose output lock a live process holds (the lock `groc train` takes) is "running (pid N)";
    the lock file a killed process left behind does not make it so. Either way its minutes are those
    trained so far (steps.parquet's last cumulative seconds)."""
    import subprocess
    import sys

    import pyarrow.parquet as pq

    from groc_cli.artifacts.locks import output_lock

    run = runs / "runs" / "unfinished"
    steps = pq.read_table(run / "steps.parquet").column("seconds").to_pylist()

    def status():
        rows = json.loads(run_groc("runs", runs / "runs", "--json", check=True).stdout)
        return next(r for r in rows if r["run"].endswith("/unfinished"))

    with output_lock(run):
        row = status()
        assert row["status"] == f"running (pid {os.getpid()})"
        assert row["minutes"] == round(steps[-1] / 60, 1)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock = run.with_name(".unfinished.lock")
    lock.write_text(dead.stdout.strip())  # the process has exited: a stale lock
    try:
        assert status()["status"] == "unfinished"
    finally:
        lock.unlink()


def test_an_evaluation_recorded_with_relative_paths_is_found_from_anywhere(runs, tmp_path):
    """A recipe evaluates from the directory that holds its work (`groc eval runs/tied data`), so the JSON
    names the run by a relative path; `groc runs` from another directory still gives that run its test
    perplexity, and where that path also names another run from the working directory, the one whose
    best checkpoint the JSON's checksum names keeps it; once the run has trained on, the JSON no longer
    gives its test perplexity."""
    work = tmp_path / "exp"
    shutil.copytree(runs / "runs" / "tied", work / "runs" / "tied")
    shutil.copytree(runs / "data", work / "data")
    (work / "results" / "evals").mkdir(parents=True)
    ev = run_groc("eval", "runs/tied", "data", "--split", "test", cwd=work, check=True).stdout
    assert json.loads(ev)["run"] == "runs/tied"
    (work / "results" / "evals" / "tied.json").write_bytes(ev)
    rows = json.loads(run_groc("runs", work, "--json", cwd=tmp_path, check=True).stdout)
    assert [(r["run"], r["test_ppl"]) for r in rows] == [(str(work / "runs" / "tied"), json.loads(ev)["perplexity"])]
    shutil.copytree(runs / "runs" / "lookup", tmp_path / "runs" / "tied")  # what runs/tied names from tmp_path
    rows = json.loads(run_groc("runs", tmp_path, "--json", cwd=tmp_path, check=True).stdout)
    assert {r["run"]: r["test_ppl"] for r in rows} == {str(work / "runs" / "tied"): json.loads(ev)["perplexity"],
                                                       str(tmp_path / "runs" / "tied"): None}
    # trained further (a larger budget on --resume), the run has a new best model: the JSON scored the old one
    best = (work / "runs" / "tied" / "best" / "model.safetensors").read_bytes()
    run_groc("train", "data", "-o", "runs/tied", "--max-tokens", "3000", *TINY, "--resume", cwd=work, check=True)
    assert (work / "runs" / "tied" / "best" / "model.safetensors").read_bytes() != best
    rows = json.loads(run_groc("runs", work, "--json", cwd=tmp_path, check=True).stdout)
    assert [(r["run"], r["test_ppl"]) for r in rows] == [(str(work / "runs" / "tied"), None)]


def test_a_record_kept_without_weights_is_a_row_with_its_own_test_perplexity(runs, tmp_path):
    """A finished row kept as recipes/table2-cpu.sh keeps it (summary, config and metrics, its evaluations
    inside it, no checkpoints) is status "record" with its own test perplexity, not a damaged run; listed
    beside the run it was kept from, each keeps its own; a run whose best weights alone are gone is damaged."""
    tied = runs / "runs" / "tied"
    record = tmp_path / "records" / "ptb-tied"
    record.mkdir(parents=True)
    for name in ("summary.json", "config.json", "metrics.parquet"):
        shutil.copy(tied / name, record / name)
    test = json.loads((runs / "runs" / "evals" / "tied-test.json").read_text())
    shutil.copy(runs / "runs" / "evals" / "tied-test.json", record / "test.json")
    train = run_groc("eval", tied, runs / "data", "--split", "train", check=True).stdout
    (record / "train.json").write_bytes(train)  # not the test split: never the test perplexity
    (record / "test.json.partial.x1y2z3").write_text("{")  # what a killed capture leaves: ignored
    rows = json.loads(run_groc("runs", tmp_path / "records", runs / "runs", "--json", check=True).stdout)
    by = {r["run"]: r for r in rows}
    summary = json.loads((tied / "summary.json").read_text())
    kept = by[str(record)]
    assert kept["status"] == "record" and kept["kind"] == "tied" and kept["test_ppl"] == test["perplexity"]
    assert (kept["epochs"], kept["best_valid_ppl"], kept["parameters"]) == (
        summary["epochs"], summary["best_valid_ppl"], summary["parameters"])
    assert by[str(tied)]["status"] == "done" and by[str(tied)]["test_ppl"] == test["perplexity"]
    table = run_groc("runs", tmp_path / "records", check=True).stdout.decode().splitlines()
    assert table[1].split()[:3] == [str(record), "record", "tied"]
    gone = tmp_path / "gone"
    shutil.copytree(tied, gone / "tied")
    (gone / "tied" / "best" / "model.safetensors").unlink()
    rows = json.loads(run_groc("runs", gone, "--json", check=True).stdout)
    assert [r["status"] for r in rows] == ["damaged: best/model.safetensors missing"]


def test_table_csv_and_sort(runs):
    table = run_groc("runs", runs / "runs", "--sort", "parameters", check=True).stdout.decode().splitlines()
    assert table[0].split()[:3] == ["run", "status", "kind"] and len(table) == 5
    at = table[0].index("status")  # aligned: every row's status starts under the header's
    assert {line[at:].split()[0] for line in table[1:]} <= {"done", "unfinished", "unfinished:", "damaged:"}
    rows = list(csv.DictReader(io.StringIO(run_groc("runs", runs / "runs", "--csv", "--sort", "parameters",
                                                    check=True).stdout.decode())))
    params = [int(r["parameters"]) for r in rows if r["parameters"]]
    assert params == sorted(params) and rows[-1]["status"].startswith("damaged")  # empty cells last


def test_bad_input_is_one_line(runs, tmp_path):
    for args, needle in (((runs / "runs", "--sort", "colour"), "--sort"), ((tmp_path / "missing",), "no such directory"),
                         ((runs / "runs", "--json", "--csv"), "pick one"),
                         ((runs / "runs" / "tied" / "config.json",), "not a directory"),
                         (("/dev/null",), "not a directory")):
        r = run_groc("runs", *args)
        assert r.returncode == 2 and r.stdout == b"" and needle in r.stderr.decode()
        assert len(r.stderr.decode().strip().splitlines()) == 1
    r = run_groc("runs", tmp_path, check=True)
    assert r.stdout == b"" and "no run directories" in r.stderr.decode()
    # an eval JSON whose run path no file system accepts (a NUL byte) names no run: the table is as without it
    shutil.copytree(runs / "runs" / "lookup", tmp_path / "r" / "lookup")
    (tmp_path / "r" / "bad.json").write_text(json.dumps({"run": "a\u0000b", "perplexity": 5.0, "model_checksum": "x",
                                                        "settings": {"split": "test"}}))
    rows = json.loads(run_groc("runs", tmp_path / "r", "--json", check=True).stdout)
    assert [(r["status"], r["test_ppl"]) for r in rows] == [("done", None)]


def test_each_evaluation_is_kept_in_its_run_and_shown_with_its_dataset_and_split(runs, tmp_path):
    """`groc eval` keeps each evaluation inside the run (evals/), so `groc runs RUN` alone lists every one with
    its dataset and split: a run evaluated on its own test split and on another corpus shows both numbers, and
    test_ppl is its own dataset's, named in test_dataset."""
    books = REPO / "groc_cli" / "data"
    run = tmp_path / "only" / "tied"
    shutil.copytree(runs / "runs" / "tied", run)
    shutil.rmtree(run / "evals", ignore_errors=True)
    run_groc("prepare", "--train", books / "austen-emma.txt", "--split", "1000,300,300", "-o", tmp_path / "emma",
             check=True)
    own = json.loads(run_groc("eval", run, runs / "data", "--split", "test", check=True).stdout)
    other = json.loads(run_groc("eval", run, tmp_path / "emma", "--split", "test", check=True).stdout)
    valid = json.loads(run_groc("eval", run, tmp_path / "emma", "--split", "valid", "--vocab", "union", check=True).stdout)
    assert own["perplexity"] != other["perplexity"]
    assert sorted(p.parent.name for p in run.rglob("*.json") if p.parent != run) == ["evals"] * 3
    assert own["recorded"].startswith(str(run / "evals" / "test-data-"))
    (row,) = json.loads(run_groc("runs", run, "--json", check=True).stdout)
    assert row["test_ppl"] == own["perplexity"] and row["test_dataset"] == "data" and row["test_vocab"] == "model"
    assert row["evals"] == [
        {"dataset": "data", "split": "test", "vocab": "model", "cache": "none", "perplexity": own["perplexity"]},
        {"dataset": "emma", "split": "test", "vocab": "model", "cache": "none", "perplexity": other["perplexity"]},
        {"dataset": "emma", "split": "valid", "vocab": "union", "cache": "none", "perplexity": valid["perplexity"]}]
    # evaluated again, the same evaluation replaces its record rather than adding one
    run_groc("eval", run, runs / "data", "--split", "test", check=True)
    assert len(list((run / "evals").iterdir())) == 3
    table = run_groc("runs", tmp_path / "only", check=True).stdout.decode()
    assert "test_dataset" in table.splitlines()[0]
    assert f"emma/test {other['perplexity']:,.2f}" in table and f"emma/valid union {valid['perplexity']:,.2f}" in table
    (csv_row,) = csv.DictReader(io.StringIO(run_groc("runs", run, "--csv", check=True).stdout.decode()))
    assert csv_row["evals"].startswith(f"data/test {own['perplexity']:,.2f}; emma/test")


def test_symbolic_links_out_of_the_folder_given_are_not_followed(runs, tmp_path):
    """A link inside the folder given, to a run or to an eval JSON elsewhere, lists nothing from there."""
    shutil.copytree(runs / "runs" / "lookup", tmp_path / "listed" / "lookup")
    (tmp_path / "listed" / "elsewhere").symlink_to(runs / "runs" / "tied", target_is_directory=True)
    (tmp_path / "listed" / "all").symlink_to(runs / "runs", target_is_directory=True)
    rows = json.loads(run_groc("runs", tmp_path / "listed", "--json", check=True).stdout)
    assert [r["run"] for r in rows] == [str(tmp_path / "listed" / "lookup")]
    # an eval JSON linked in names a run that is listed: still not read
    own = tmp_path / "own"
    shutil.copytree(runs / "runs" / "tied", own / "tied")
    shutil.rmtree(own / "tied" / "evals", ignore_errors=True)
    outside = tmp_path / "outside.json"
    outside.write_bytes(run_groc("eval", own / "tied", runs / "data", check=True).stdout)
    shutil.rmtree(own / "tied" / "evals")
    (own / "linked.json").symlink_to(outside)
    (row,) = json.loads(run_groc("runs", own, "--json", check=True).stdout)
    assert row["test_ppl"] is None and row["evals"] is None
    (own / "copied.json").write_bytes(outside.read_bytes())  # the same JSON as a file inside is read
    (row,) = json.loads(run_groc("runs", own, "--json", check=True).stdout)
    assert row["test_ppl"] == json.loads(outside.read_text())["perplexity"]
