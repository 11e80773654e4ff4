"""Integrity (issue 30, class 5): every artifact groc reads is checked against what it records
(checksums, shapes, finite values where cheap) and names only files inside itself; a file that
fails is one line naming it and the fix, exit status 2, nothing written."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tests.conftest import run_groc
from tests.test_damaged_artifacts import EVAL, edit_json, pristine, refused, rewrite_parquet, work  # noqa: F401

EVAL_STATES = ["eval", "run", "ds", "--states", "st", "--cache", "local", "--device", "cpu", "--per-token", "out.parquet"]
START = "run/best/start_state.safetensors"


def score(work, *extra):
    (work / "lines.txt").write_text("she was not a woman of many words .\n")
    return ["score", "run", "lines.txt", "--device", "cpu", *extra]


def test_run_vocab_with_two_words_swapped(work):
    def swap(words):
        words[5], words[6] = words[6], words[5]

    rewrite_parquet(work / "run" / "vocab.parquet", "word", swap)
    err = refused(work, EVAL, "run/vocab.parquet", "re-train")
    assert "checksum" in err


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


def test_start_state_is_there(work):
    assert (work / START).is_file()
    ok = run_groc(*score(work), cwd=work)
    assert ok.returncode == 0, ok.stderr.decode()


def test_truncated_start_state(work):
    data = (work / START).read_bytes()
    score(work)
    (work / START).write_bytes(data[: len(data) // 2])
    refused(work, score(work), START, "delete")


def test_start_state_of_another_shape(work):
    tensors = load_file(str(work / START))
    tensors["h.0"] = np.zeros((1, 1, 3), dtype=np.float32)
    save_file(tensors, str(work / START))
    score(work)
    refused(work, score(work), START, "re-train")


def test_start_state_with_nan(work):
    tensors = load_file(str(work / START))
    tensors["c.0"].flat[0] = np.nan
    save_file(tensors, str(work / START))
    score(work)
    err = refused(work, score(work), START, "re-train")
    assert "NaN" in err


def test_states_with_nan_rows(work):
    hidden = np.load(work / "st" / "hidden.npy", mmap_mode="r+")
    hidden[7] = np.nan
    hidden.flush()
    del hidden
    """Found while the rows are read (a scan of every state at open would cost as much as the
    evaluation): after eval's opening log line, one error line; no per-token file."""
    r = run_groc(*EVAL_STATES, cwd=work)
    err = r.stderr.decode().splitlines()
    assert r.returncode == 2 and not r.stdout
    assert [line for line in err if line.startswith("groc: error: ")] == err[-1:]
    assert "st/hidden.npy" in err[-1] and "row 7" in err[-1] and "groc dump" in err[-1]
    assert not (work / "out.parquet").exists()


def test_states_with_nan_logp_refused_at_open(work):
    logp = np.load(work / "st" / "logp.npy", mmap_mode="r+")
    logp[3] = np.nan
    logp.flush()
    del logp
    err = refused(work, EVAL_STATES, "st/logp.npy", "groc dump")
    assert "row 3" in err


def test_states_meta_naming_a_file_outside(work):
    np.save(work / "x.npy", np.zeros(3))
    edit_json(work / "st" / "meta.json", lambda m: m["files"].update({"../../x": {"shape": [3], "dtype": "float64"}}))
    refused(work, EVAL_STATES, "st/meta.json", "groc dump")
