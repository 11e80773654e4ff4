"""Table 2 at the paper's scale, one row a GPU slot: `gpu-lease.sh row DIR` (there) trains the next row to early
stopping and brings back its record in 8 files; `gpu-table2.sh keep DIR` (here) checks what came back as
untrusted input and keeps it under RECORDS; `report table2-paper` builds the table from the records. The CPU dry
run (SCALE=tiny) rehearses a whole slot, as a lent machine would run it."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import TEST_ENV
from tests.recipes.test_lib import REPO, recipe_env
from tests.recipes.test_window import image_env

sys.path.insert(0, str(REPO / "recipes" / "lib"))
import paper_rows  # noqa: E402

TABLE2 = REPO / "recipes" / "gpu-table2.sh"
LEASE = REPO / "recipes" / "gpu-lease.sh"


def fake_record(folder: Path, kind: str, stop: str = "early-stopping", ppl: float = 90.0) -> Path:
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"stop_reason": stop, "epochs": 40, "parameters": 10_000_000,
                                                     "seconds": 240.0, "best_valid_ppl": ppl + 3}))
    (folder / "config.json").write_text(json.dumps({"model": {"output": kind}, "environment": {"gpu": "NVIDIA H200"}}))
    for name, value in (("test.json", ppl), ("test-open.json", ppl + 0.5), ("train.json", ppl - 30)):
        (folder / name).write_text(json.dumps({"perplexity": value}))
    pq.write_table(pa.table({"epoch": [1, 2], "train_ppl": [200.0, 150.0], "valid_ppl": [190.0, 140.0],
                             "lr": [1e-3, 1e-3]}), folder / "metrics.parquet")
    pq.write_table(pa.table({"word": ["the", "cat"], "train_freq": [10, 1], "model_logp": [-1.0, -5.0]}),
                   folder / "test.parquet")
    (folder / "lease.log").write_text("# row\n")
    return folder


def test_rows_go_tied_then_groc_then_table2s_order_and_unconverged_rows_come_again(tmp_path):
    records = tmp_path / "records"
    assert paper_rows.next_row(records) == "tied"
    fake_record(records / "ptb-tied", "tied")
    assert paper_rows.next_row(records) == "groc"
    for kind in paper_rows.ORDER[1:]:
        fake_record(records / f"ptb-{kind}", kind, stop="early-stopping" if kind != "bilinear" else "max-minutes")
    assert paper_rows.next_row(records) == "bilinear"  # the slot's time stopped it: trained again
    shutil.rmtree(records / "ptb-bilinear")
    fake_record(records / "ptb-bilinear", "bilinear")
    assert paper_rows.next_row(records) is None


def keep(returned: Path, records: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(TABLE2), "keep", str(returned)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=recipe_env(returned.parent, RECORDS=str(records), **TEST_ENV))


def _set(path: Path, key: str, value) -> None:
    doc = json.loads(path.read_text())
    doc[key] = value
    path.write_text(json.dumps(doc))


CRAFTED = {
    "another row's run": (lambda f: _set(f / "config.json", "model", {"output": "lookup"}), "not groc, the row next"),
    "an extra file": (lambda f: (f / "run.sh").write_text("rm -rf ~"), "holds run.sh"),
    "a missing file": (lambda f: (f / "train.json").unlink(), "lacks train.json"),
    "a link": (lambda f: ((f / "test.json").unlink(), (f / "test.json").symlink_to("/etc/hostname")),
               "test.json is not a regular file"),
    "a non-finite perplexity": (lambda f: (f / "test.json").write_text('{"perplexity": NaN}'), "not a finite number"),
    "absurd nesting": (lambda f: (f / "train.json").write_text("[" * 100_000 + "]" * 100_000), "train.json is not JSON"),
    "a JSON list": (lambda f: (f / "summary.json").write_text("[1, 2]"), "summary.json is not a JSON object"),
    "an unknown stop": (lambda f: _set(f / "summary.json", "stop_reason", "../../x"), "stop_reason"),
    "a damaged Parquet table": (lambda f: (f / "metrics.parquet").write_bytes(b"PAR1 nope"), "metrics.parquet is not"),
    "positive log-probabilities": (lambda f: pq.write_table(pa.table({"word": ["a"], "train_freq": [1],
                                                                      "model_logp": [0.5]}), f / "test.parquet"),
                                   "not all log-probabilities"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_keep_refuses_a_crafted_record_and_changes_nothing(tmp_path, case):
    records = tmp_path / "records"
    fake_record(records / "ptb-tied", "tied")  # an earlier slot's: groc is next
    before = {p.name: p.read_bytes() for p in (records / "ptb-tied").iterdir()}
    returned = fake_record(tmp_path / "back", "groc")
    change, message = CRAFTED[case]
    change(returned)
    r = keep(returned, records)
    assert r.returncode == 2, (case, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert {p.name: p.read_bytes() for p in (records / "ptb-tied").iterdir()} == before
    assert sorted(p.name for p in records.iterdir()) == ["ptb-tied"]


@pytest.mark.slow
def test_keep_replaces_an_unconverged_row_with_a_converged_one(tmp_path):
    records = tmp_path / "records"
    for kind in paper_rows.ORDER:  # every row has a record; tied's did not converge, so tied is next
        fake_record(records / f"ptb-{kind}", kind, stop="max-minutes" if kind == "tied" else "early-stopping",
                    ppl=120.0)
    r = keep(fake_record(tmp_path / "back", "tied", ppl=88.5), records)
    assert r.returncode == 0, r.stderr
    assert "kept" in r.stdout and "converged, test perplexity 88.50" in r.stdout
    assert json.loads((records / "ptb-tied" / "test.json").read_text())["perplexity"] == 88.5
    assert sorted(p.name for p in records.iterdir()) == sorted(f"ptb-{k}" for k in paper_rows.ORDER)  # nothing aside


@pytest.mark.slow
def test_a_whole_slot_rehearsed_on_cpu_then_kept_and_tabled(tmp_path, data_dir, wordnet):
    """gpu-lease.sh row as the lent image runs it (shims, no groc on PATH), SCALE=tiny: the next row (tied) trains,
    is evaluated three ways, and its 8 files come back; keep puts them under RECORDS; the next slot would train
    groc; the table is built from the records."""
    records = tmp_path / "records"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = image_env(tmp_path, DATA=str(data_dir), SCALE="tiny", SECONDS_LEFT="400", RESERVE="120",
                    TMPDIR=str(scratch), RECORDS=str(records))
    out = tmp_path / "slot"
    r = subprocess.run(["bash", str(LEASE), "row", str(out)], capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(paper_rows.RECORD_FILES)
    assert all(p.stat().st_size <= 16 * 2**20 for p in out.iterdir()) and len(list(out.iterdir())) <= 8
    log = (out / "lease.log").read_text()
    assert "row: tied on CPU (SCALE=tiny)" in log and "# row tied:" in log and "--max-minutes" in log
    assert json.loads((out / "config.json").read_text())["model"]["output"] == "tied"

    k = keep(out, records)
    assert k.returncode == 0, k.stderr
    assert (records / "ptb-tied" / "test.parquet").is_file()
    assert paper_rows.next_row(records) == "groc"
    table_out = tmp_path / "table"
    t = subprocess.run([sys.executable, str(REPO / "recipes" / "lib" / "tables.py"), "table2-paper",
                        f"--out={table_out}", f"--records={records}"], capture_output=True, text=True,
                       env=recipe_env(tmp_path, **TEST_ENV))
    assert t.returncode == 0, t.stderr
    table = (table_out / "table2-paper.md").read_text()
    assert "| tied |" in table and "| 86.2 |" in table  # the paper's number beside ours
