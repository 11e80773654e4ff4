"""recipes/gpu-resume.sh, dry-run on the CPU (DEVICE=cpu) as a lent GPU would run it: pack refuses bad input
and a run being trained, run resumes every packed run with a larger budget and brings the state back in
parts, unpack puts each run back where it was, refuses one that trained here since pack, and the returned
run resumes here with groc train."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO, run_env, run_groc

SCRIPT = REPO / "recipes" / "gpu-resume.sh"
TINY = ["--emb", "8", "--hidden", "8", "--batch-size", "4", "--bptt", "12", "--device", "cpu", "--seed", "3"]


@pytest.fixture
def trained(tmp_path):
    run_groc("prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split", "3000,800",
             "--min-count", "2", "-o", tmp_path / "ds", check=True)
    for name in ("a", "b"):  # stopped by their token budget: a checkpoint in last/, as an interrupted run has
        run_groc("train", tmp_path / "ds", "-o", tmp_path / "runs" / name, "--max-tokens", "100", *TINY, check=True)
    return tmp_path


def recipe(tmp_path: Path, *args, **env) -> subprocess.CompletedProcess:
    full = run_env({"GPU_RESUME_PACK": str(tmp_path / "pack"), **env})
    full["PATH"] = f"{Path(sys.executable).parent}:{full['PATH']}"  # python3 with torch, as the lent image has
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=full,
                          stdin=subprocess.DEVNULL)


def tokens(run: Path) -> int:
    return torch.load(run / "last" / "trainer.pt", weights_only=True)["position"]["tokens"]


def test_bad_arguments_stop_before_any_work(trained):
    t = trained
    (t / "runs" / "b" / "last" / "trainer.pt").unlink()
    (t / "runs" / ".a.lock").write_text(str(os.getpid()))  # a live process holds a's lock: it is training
    for args, message in [([], "unknown verb ''"), (["pack", t / "ds"], "pack needs a dataset and at least one run"),
                          (["pack", t / "runs", t / "runs" / "a"], "is not a dataset from groc prepare"),
                          (["pack", t / "ds", t / "ds"], "is not a groc run with a checkpoint"),
                          (["pack", t / "ds", t / "runs" / "b"], "is not a groc run with a checkpoint"),
                          (["pack", t / "ds", t / "runs" / "a"], f"is training here (pid {os.getpid()})"),
                          (["run", t / "out"], "nothing packed"), (["unpack", t], "holds no state.tar parts")]:
        r = recipe(t, *args)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.splitlines()) == 1, (args, r.stderr)
    assert not (t / "pack").exists() and not (t / "out").exists() and not list(t.glob("pack.*"))


def test_pack_run_unpack_round_trip(trained):
    t = trained
    a, b = t / "runs" / "a", t / "runs" / "b"
    before = {run: tokens(run) for run in (a, b)}
    r = recipe(t, "pack", t / "ds", a, b)
    assert r.returncode == 0, r.stderr
    assert 'carry [".gpu-resume"]' in r.stdout and "packed 2 run(s)" in r.stdout

    (t / "full").mkdir()
    (t / "full" / "x").write_text("")
    refused = [(["run", t / "full"], {"DEVICE": "cpu"}, "is not an empty directory"),
               (["run", t / "out"], {"SECONDS_LEFT": "9m"}, "SECONDS_LEFT must be a whole number"),
               (["run", t / "out"], {"SECONDS_LEFT": "60", "RESERVE": "55"}, "leaves no time to train")]
    if not torch.cuda.is_available():  # the default DEVICE, cuda, is refused before any run starts
        refused.append((["run", t / "out"], {}, "sees no CUDA device"))
    for args, env, message in refused:
        r = recipe(t, *args, **env)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.splitlines()) == 1, (args, r.stderr)
    assert not (t / "out").exists()

    r = recipe(t, "run", t / "out", DEVICE="cpu", SECONDS_LEFT="300", RESERVE="30", TRAIN_ARGS="--max-tokens 400")
    assert r.returncode == 0, r.stdout + r.stderr
    back = sorted(p.name for p in (t / "out").iterdir())
    assert back == ["gpu-resume.log", "state.tar.00"], back
    log = (t / "out" / "gpu-resume.log").read_text()
    assert log.count(": ended") == 2 and "run 1: resuming" in log and "run 2: resuming" in log, log
    assert tokens(a) == before[a]  # nothing here changed yet

    # Parts that did not all come back are refused whole, changing nothing.
    (t / "cut").mkdir()
    part = (t / "out" / "state.tar.00").read_bytes()
    (t / "cut" / "state.tar.00").write_bytes(part[: len(part) // 2])
    r = recipe(t, "unpack", t / "cut")
    assert r.returncode == 2 and "incomplete or damaged" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert tokens(a) == before[a] and tokens(b) == before[b] and not list(t.glob("pack.*"))

    # a trained here meanwhile: its GPU state is not put back; b's is.
    run_groc("train", t / "ds", "-o", a, "--resume", "--max-tokens", "200", "--device", "cpu", check=True)
    here = tokens(a)
    r = recipe(t, "unpack", t / "out")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{a} has trained here since pack" in r.stderr and f"{b}: put back" in r.stdout
    assert "1 run(s) put back, 1 left as they were" in r.stdout
    assert tokens(a) == here and tokens(b) > before[b]
    assert not list((t / "runs").glob("*.gpu-resume.*")) and not list(t.glob("pack.*"))

    # The returned run goes on here, from where the lease left it.
    got = tokens(b)
    run_groc("train", t / "ds", "-o", b, "--resume", "--max-tokens", "600", "--device", "cpu", check=True)
    assert tokens(b) > got
