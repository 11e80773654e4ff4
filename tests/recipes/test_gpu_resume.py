"""recipes/gpu-resume.sh, dry-run on the CPU (DEVICE=cpu) as a lent GPU would run it: pack refuses bad input
and a run being trained, run resumes every packed run with a larger budget and brings the state back in
parts, as many whole runs as fit in what a lease brings back, unpack puts each run back where it was, refuses
one that trained here since pack or that did not come back, and the returned run resumes here with groc train."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO, run_env, run_groc

pytestmark = pytest.mark.slow

SCRIPT = REPO / "recipes" / "gpu-resume.sh"


@pytest.fixture
def trained(tmp_path, tiny_run):
    """ds, runs/a and runs/b: copies of tiny_run.small_data() and tiny_run.small(), a run stopped by its
    token budget (a checkpoint in last/, as an interrupted run has)."""
    tiny_run.copy(tiny_run.small_data(), tmp_path / "ds")
    for name in ("a", "b"):
        tiny_run.copy(tiny_run.small(), tmp_path / "runs" / name)
    return tmp_path


def recipe(tmp_path: Path, *args, **env) -> subprocess.CompletedProcess:
    full = run_env({"GPU_RESUME_PACK": str(tmp_path / "pack"), **env})
    full["PATH"] = f"{Path(sys.executable).parent}:{full['PATH']}"  # python3 with torch, as the lent image has
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=full,
                          stdin=subprocess.DEVNULL)


def tar_bytes(*paths: Path) -> int:
    """What PATHS take in the state's tar as run counts it: their bytes, and 1 KiB for each entry."""
    entries = [q for path in paths for q in ([path, *path.rglob("*")] if path.is_dir() else [path])]
    return sum(q.stat().st_size for q in entries if q.is_file()) + 1024 * len(entries)


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


def test_pack_refuses_runs_that_would_not_come_back(trained):
    t = trained
    a = t / "runs" / "a"
    for env, message in [({"BACK_MIB": "64k"}, "BACK_MIB must be a number of MiB above 1, not '64k'"),
                         ({"BACK_MIB": "1"}, "BACK_MIB must be a number of MiB above 1"),
                         ({"BACK_MIB": "1.01"}, "would come back as about")]:  # 10 KiB for the runs
        r = recipe(t, "pack", t / "ds", a, **env)
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.splitlines()) == 1, (env, r.stderr)
    assert "a lease brings back 1.01 MiB" in r.stderr  # the last: the projection names the limit
    assert not (t / "pack").exists() and not list(t.glob("pack.*"))


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

    # Where both runs do not fit in what comes back, the first comes back whole and the second stays there.
    pack = t / "pack"
    fits = tar_bytes(pack / "manifest.tsv") + tar_bytes(pack / "runs" / "1", pack / "runs" / "1.log")
    room = fits + tar_bytes(pack / "runs" / "2", pack / "runs" / "2.log") // 2
    r = recipe(t, "run", t / "out2", DEVICE="cpu", SECONDS_LEFT="300", RESERVE="30", TRAIN_ARGS="--max-tokens 400",
               BACK_MIB=f"{1 + room / 2**20:.6f}")
    assert r.returncode == 1, r.stdout + r.stderr
    log = (t / "out2" / "gpu-resume.log").read_text()
    assert f"# run 2 ({b}): " in log and "does not fit in what comes back" in log and "1 run(s) in 1 part(s)" in log, log
    listed = subprocess.run(["tar", "-tf", t / "out2" / "state.tar.00"], capture_output=True, text=True).stdout.split()
    assert "runs/1/last/trainer.pt" in listed and not any(name.startswith("runs/2") for name in listed), listed

    # Parts that did not all come back are refused whole, changing nothing.
    (t / "cut").mkdir()
    part = (t / "out" / "state.tar.00").read_bytes()
    (t / "cut" / "state.tar.00").write_bytes(part[: len(part) // 2])
    r = recipe(t, "unpack", t / "cut")
    assert r.returncode == 2 and "incomplete or damaged" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert tokens(a) == before[a] and tokens(b) == before[b] and not list(t.glob("pack.*"))

    # From the state where only a came back, a is put back and b, which did not come back, stays as it was.
    r = recipe(t, "unpack", t / "out2")
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"run 2 ({b}) did not come back" in r.stderr and f"{a}: put back" in r.stdout
    assert tokens(a) > before[a] and tokens(b) == before[b]

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
