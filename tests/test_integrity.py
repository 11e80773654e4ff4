"""Integrity (issue 30, class 5): every artifact groc reads is checked against what it records
(checksums, shapes, finite values where cheap) and names only files inside itself; a file that
fails is one line naming it and the fix, exit status 2, nothing written."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tests.conftest import run_groc
from tests.test_damaged_artifacts import (EVAL, edit_json, pristine, refused, rewrite_parquet, without_integrity,  # noqa: F401
                                          work)

EVAL_STATES = ["eval", "run", "ds", "--states", "st", "--cache", "local", "--device", "cpu", "--per-token", "out.parquet"]
START = "run/best/start_state.safetensors"


def score(work, *extra):
    (work / "lines.txt").write_text("she was not a woman of many words .\n")
    return ["score", "run", "lines.txt", "--device", "cpu", *extra]


@pytest.mark.slow
def test_run_vocab_with_two_words_swapped(work):
    def swap(words):
        words[5], words[6] = words[6], words[5]

    rewrite_parquet(work / "run" / "vocab.parquet", "word", swap)
    err = refused(work, EVAL, "run/vocab.parquet", "re-train")
    assert "checksum" in err


@pytest.mark.slow
def test_weights_with_nan(work):
    path = work / "run" / "best" / "model.safetensors"
    from safetensors import safe_open

    with safe_open(str(path), "np") as handle:
        metadata = handle.metadata()
    tensors = load_file(str(path))
    name = sorted(tensors)[0]
    tensors[name].flat[0] = np.nan
    save_file(tensors, str(path), metadata=metadata)
    refused(work, EVAL, "run/best/model.safetensors", "--checkpoint last")


@pytest.mark.slow
def test_start_state_is_there(work):
    assert (work / START).is_file()
    ok = run_groc(*score(work), cwd=work)
    assert ok.returncode == 0, ok.stderr.decode()


@pytest.mark.slow
def test_truncated_start_state(work):
    data = (work / START).read_bytes()
    score(work)
    (work / START).write_bytes(data[: len(data) // 2])
    refused(work, score(work), START, "delete")


@pytest.mark.slow
def test_start_state_of_another_shape(work):
    tensors = load_file(str(work / START))
    tensors["h.0"] = np.zeros((1, 1, 3), dtype=np.float32)
    save_file(tensors, str(work / START))
    score(work)
    refused(work, score(work), START, "re-train")


@pytest.mark.slow
def test_start_state_with_nan(work):
    tensors = load_file(str(work / START))
    tensors["c.0"].flat[0] = np.nan
    save_file(tensors, str(work / START))
    score(work)
    err = refused(work, score(work), START, "re-train")
    assert "NaN" in err


@pytest.mark.slow
def test_states_with_nan_rows(work):
    hidden = np.load(work / "st" / "hidden.npy", mmap_mode="r+")
    hidden[7] = np.nan
    hidden.flush()
    del hidden
    without_integrity(work / "st")  # a dump without checksums: the rows' own check finds it
    """Found while the rows are read (a scan of every state at open would cost as much as the
    evaluation): after eval's opening log line, one error line; no per-token file."""
    r = run_groc(*EVAL_STATES, cwd=work)
    err = r.stderr.decode().splitlines()
    assert r.returncode == 2 and not r.stdout
    assert [line for line in err if line.startswith("groc: error: ")] == err[-1:]
    assert "st/hidden.npy" in err[-1] and "row 7" in err[-1] and "groc dump" in err[-1]
    assert not (work / "out.parquet").exists()


@pytest.mark.slow
def test_states_with_nan_logp_refused_at_open(work):
    logp = np.load(work / "st" / "logp.npy", mmap_mode="r+")
    logp[3] = np.nan
    logp.flush()
    del logp
    without_integrity(work / "st")
    err = refused(work, EVAL_STATES, "st/logp.npy", "groc dump")
    assert "row 3" in err


@pytest.mark.slow
def test_states_meta_naming_a_file_outside(work):
    np.save(work / "x.npy", np.zeros(3))
    edit_json(work / "st" / "meta.json", lambda m: m["files"].update({"../../x": {"shape": [3], "dtype": "float64"}}))
    refused(work, EVAL_STATES, "st/meta.json", "groc dump")


def change_row(path, row, change):
    array = np.load(path, mmap_mode="r+")
    array[row] = change(np.array(array[row]))
    array.flush()


@pytest.mark.slow
@pytest.mark.parametrize("name, change", [("hidden", lambda row: row[::-1]), ("logp", lambda value: value - 0.5)])
def test_states_changed_after_the_dump(work, name, change):
    """A finite, plausible value changed in place: shapes and finiteness hold, the checksum does not."""
    change_row(work / "st" / f"{name}.npy", 4, change)
    err = refused(work, EVAL_STATES, f"st/{name}.npy", "groc dump")
    assert "SHA-256" in err


@pytest.mark.slow
def test_states_array_with_bytes_appended(work):
    with open(work / "st" / "targets.npy", "ab") as handle:
        handle.write(b"\0" * 16)
    err = refused(work, EVAL_STATES, "st/targets.npy", "groc dump")
    assert "bytes" in err


@pytest.mark.slow
def test_states_without_integrity_records_are_still_read(work):
    """Dumps written before the record are read as before, to the same numbers."""
    meta = json.loads((work / "st" / "meta.json").read_text())
    assert all(spec["integrity"]["bytes"] == (work / "st" / f"{name}.npy").stat().st_size
               for name, spec in meta["files"].items())
    checked = run_groc(*EVAL_STATES, cwd=work, check=True)
    without_integrity(work / "st")
    old = run_groc(*EVAL_STATES, "--force", cwd=work, check=True)
    assert json.loads(old.stdout)["perplexity"] == json.loads(checked.stdout)["perplexity"]


def test_sampled_checksum_of_a_large_file(tmp_path, monkeypatch):
    """A file over WHOLE_BYTES is hashed in blocks spread over it: a change inside one is found, a
    change between them is not (the documented limit), a size change always is; a record keeps the
    sampling it was written with."""
    from groc_cli.artifacts import integrity

    monkeypatch.setattr(integrity, "WHOLE_BYTES", 1 << 20)
    monkeypatch.setattr(integrity, "SAMPLE_BLOCKS", 4)
    path = tmp_path / "big.npy"
    data = bytearray(np.random.default_rng(0).bytes(4 << 20))
    path.write_bytes(data)
    record = integrity.integrity_record(path)
    assert record["sampled_blocks"] == 4 and record["bytes"] == 4 << 20
    monkeypatch.setattr(integrity, "SAMPLE_BLOCKS", 8)  # later constants do not change how it is checked
    assert integrity.integrity_problem(path, record) is None
    for offset, found in ((len(data) - 1, True), (100_000, False)):
        changed = bytearray(data)
        changed[offset] ^= 1
        path.write_bytes(changed)
        assert (integrity.integrity_problem(path, record) is not None) == found, offset
    path.write_bytes(data + b"\0")
    assert "bytes" in integrity.integrity_problem(path, record)
    assert integrity.integrity_problem(path, {"bytes": "many"}) is not None
