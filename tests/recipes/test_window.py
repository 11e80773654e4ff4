"""recipes/gpu-table2.sh: bad arguments and an absent or busy GPU stop it before any work, and its
CPU dry run (SCALE=tiny) goes through start, status, a refused second start, a run that dies and
one killed, wait and collect, as a GPU window would; unpack gives groc compare its files back."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from groc_cli.evaluation.compare import compare
from groc_cli.settings import toml_loads
from tests.conftest import TEST_ENV, run_env
from tests.recipes.test_lib import REPO, recipe_env

SCRIPT = REPO / "recipes" / "gpu-table2.sh"
KINDS = ["lookup", "convolutional", "tied", "bilinear", "deep-residual", "adaptive", "groc"]


def window(tmp_path: Path, *args, env_extra=None, **env):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env={**recipe_env(tmp_path, **TEST_ENV, **env), **(env_extra or {})})


def stand_in_nvidia_smi(folder: Path, gpu: str, apps: str = "", rc: int = 0) -> str:
    """A PATH whose nvidia-smi answers the two queries gpu-table2.sh makes."""
    folder.mkdir(exist_ok=True)
    (folder / "nvidia-smi").write_text(f"""#!/bin/sh
case "$*" in
  *query-gpu*) printf '%s\\n' "{gpu}" ;;
  *query-compute-apps*) printf '{apps}' ;;
esac
exit {rc}
""")
    (folder / "nvidia-smi").chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


@pytest.mark.slow
def test_bad_arguments_and_no_usable_gpu_stop_before_any_work(tmp_path):
    cases = [
        (["frobnicate"], {}, 2, "unknown verb 'frobnicate'"),
        ([], {}, 2, "unknown verb ''"),
        (["collect"], {}, 2, "collect needs one directory"),
        (["wait", "soon"], {}, 2, "wait takes one number of minutes, not 'soon'"),
        (["start", "extra"], {}, 2, "start takes no arguments"),
        (["start"], {"MINUTES": "abc"}, 2, "MINUTES must be a positive number of minutes, not 'abc'"),
        (["start"], {"MINUTES": "0"}, 2, "MINUTES must be a positive number"),
        (["start"], {"SCALE": "small"}, 2, "SCALE must be paper or tiny, not 'small'"),
        (["start"], {"DATASET": "wiki"}, 2, "DATASET must be ptb or wt2, not 'wiki'"),
        (["start"], {"JOBS": "0"}, 2, "JOBS must be a whole number of at least 1, not '0'"),
        (["start"], {"KINDS": "tied bogus"}, 2, "KINDS takes lookup convolutional tied bilinear deep-residual adaptive "
                                               "groc, not 'bogus'"),
        (["status"], {"SCALE": "tiny"}, 2, "nothing was started in"),
        (["collect", str(tmp_path / "out")], {"SCALE": "tiny"}, 2, "nothing was started in"),
    ]
    for args, env, code, message in cases:
        r = window(tmp_path, *args, **env)
        assert r.returncode == code and message in r.stderr, (args, env, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and not r.stdout, (args, r.stderr)

    # SCALE=paper (the default) checks the GPU: absent, unusable, busy, or a torch without CUDA.
    no_smi = ":".join(d for d in os.environ["PATH"].split(":") if not (Path(d) / "nvidia-smi").exists())
    r = window(tmp_path, "start", env_extra={"PATH": no_smi})
    assert r.returncode == 2 and "no NVIDIA GPU here: nvidia-smi is not on PATH" in r.stderr
    path = stand_in_nvidia_smi(tmp_path / "broken", "NVIDIA-SMI has failed because it couldn't communicate with the "
                               "NVIDIA driver", rc=9)
    r = window(tmp_path, "start", env_extra={"PATH": path})
    assert r.returncode == 2 and "nvidia-smi finds no usable GPU: NVIDIA-SMI has failed" in r.stderr
    gpu = "NVIDIA H100 80GB HBM3, 2301 MiB, 81559 MiB, 580.159.04"
    path = stand_in_nvidia_smi(tmp_path / "busy", gpu, apps="4242, python3, 2300 MiB\\n")
    r = window(tmp_path, "start", env_extra={"PATH": path})
    assert r.returncode == 3 and "the GPU is busy: 1 process(es) use it (4242, python3, 2300 MiB)" in r.stderr
    assert "BUSY_OK=1" in r.stderr
    path = stand_in_nvidia_smi(tmp_path / "idle", gpu)
    r = window(tmp_path, "start", env_extra={"PATH": path})
    if not __import__("torch").cuda.is_available():
        assert r.returncode == 2 and "cannot use the GPU (a CPU build" in r.stderr
    for r_line in r.stderr.strip().splitlines():
        assert r_line.startswith("gpu-table2: ")
    assert not (tmp_path / "results" / "work" / "ptb").exists()  # no dataset was prepared
    # and no window: a refused start leaves no state folder (a later status would call it started)
    assert not list(tmp_path.rglob("window.lock")) and not list(tmp_path.rglob("paper-ptb"))


def wait_for(predicate, what: str, seconds: float = 300):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


# The groc the runs see: bilinear's training fails at once; tied trains, then hangs (until killed), as
# a run still going when the window closes.
STAND_IN = r'''groc() {
  if [ "$1" = train ] && [[ " $* " == *"/ptb-bilinear "* ]]; then
    echo "groc: error: simulated failure of bilinear" >&2; return 1
  fi
  if [ "$1" = train ] && [[ " $* " == *"/ptb-tied "* ]]; then
    command groc "$@" || return
    touch "$TIED_TRAINED"; while :; do sleep 0.2; done
  fi
  command groc "$@"
}'''


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("setsid") is None or shutil.which("flock") is None, reason="needs setsid and flock")
def test_tiny_dry_run_start_status_collect(tmp_path, data_dir, wordnet):
    env = {"SCALE": "tiny", "DATA": str(data_dir), "TIED_TRAINED": str(tmp_path / "tied-trained"), "JOBS": "2"}
    script = f"{STAND_IN}; export -f groc; bash {SCRIPT} \"$@\""

    def run(*args):
        return subprocess.run(["bash", "-c", script, "gpu-table2", *args], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, env=recipe_env(tmp_path, **TEST_ENV, **env))

    started = run("start")
    assert started.returncode == 0, started.stderr
    assert "started 7 runs of at most 20 minutes on CPU (SCALE=tiny)" in started.stderr
    state = tmp_path / "results" / "gpu-table2" / "tiny-ptb"
    wait_for(lambda: (tmp_path / "tied-trained").exists(), "tied's training")
    tied_pid = int((state / "tied.pid").read_text())

    status = run("status")
    lines = dict(line.split(None, 1) for line in status.stdout.splitlines())
    assert status.returncode == 0 and list(lines) == KINDS, status.stdout
    assert lines["tied"].startswith("training")
    # While a run lives: a second start is refused (and starts nothing), and so is collect.
    again = run("start")
    assert again.returncode == 3 and "runs of this window are still live" in again.stderr
    assert int((state / "tied.pid").read_text()) == tied_pid
    early = run("collect", str(tmp_path / "early"))
    assert early.returncode == 3 and "still live" in early.stderr and not (tmp_path / "early").exists()

    os.killpg(tied_pid, signal.SIGKILL)  # the window closes on tied: no exit status
    waited = run("wait", "3")
    assert waited.returncode == 0, waited.stderr
    lines = dict(line.split(None, 1) for line in waited.stdout.splitlines())
    assert lines["bilinear"].split()[:3] == ["died", "epoch", "0"]
    assert "exit 1: groc: error: simulated failure of bilinear" in lines["bilinear"]
    assert lines["tied"].startswith("stopped") and "killed: no exit status" in lines["tied"]
    for kind in ("lookup", "convolutional", "deep-residual", "adaptive", "groc"):
        assert lines[kind].split()[:3] == ["finished", "epoch", "2"] and lines[kind].endswith("max-epochs"), lines[kind]

    out = tmp_path / "back"
    collected = run("collect", str(out))
    assert collected.returncode == 0, collected.stderr
    assert "bilinear has no checkpoint to evaluate" in collected.stderr
    files = sorted(p.name for p in out.iterdir())
    assert files == ["commands.log", "environment.json", "metrics.parquet", "per-token.parquet", "runs.json",
                     "table2.md", "table2.parquet"]
    assert all((out / f).stat().st_size <= 16 * 2**20 for f in files) and not list(tmp_path.glob("back.partial*"))
    assert collected.stdout == (out / "table2.md").read_text()

    rows = {r["output"]: r for r in pq.read_table(out / "table2.parquet").to_pylist()}
    assert list(rows) == KINDS
    assert rows["bilinear"]["ended"] == "died" and rows["bilinear"]["test_ppl"] is None
    assert rows["tied"]["ended"].startswith("stopped") and rows["tied"]["test_ppl"] > 1  # its best checkpoint
    for kind in ("lookup", "convolutional", "deep-residual", "adaptive", "groc"):
        assert rows[kind]["ended"] == "finished: max-epochs" and rows[kind]["epochs"] == 2 and rows[kind]["test_ppl"] > 1
    # The regularization each row records is its config file's (a change there flows through).
    for kind in set(KINDS) - {"bilinear"}:
        model = toml_loads((REPO / "recipes" / "configs" / "penn" / f"{kind}.toml").read_text())["model"]
        row = rows[kind]
        assert row["emb_dropout"] == model.get("emb_dropout", 0.0) and row["dropout"] == model["dropout"]
        assert row["layer_dropout"] == model.get("layer_dropout", model["dropout"])
        assert row["out_dropout"] == model.get("out_dropout", 0.0) and row["precision"] == "float32"

    metrics = pq.read_table(out / "metrics.parquet").to_pylist()
    assert sorted({m["output"] for m in metrics}) == sorted(set(KINDS) - {"bilinear"})
    tokens = pq.read_table(out / "per-token.parquet")
    assert tokens.column_names == ["position", "word", "in_train", "train_freq", *[k for k in KINDS if k != "bilinear"]]
    record = json.loads((out / "runs.json").read_text())
    assert record["runs"]["bilinear"]["state"] == "died"
    assert any("simulated failure" in line for line in record["runs"]["bilinear"]["log_tail"])
    assert record["runs"]["groc"]["evaluation"]["perplexity"] == rows["groc"]["test_ppl"]
    environment = json.loads((out / "environment.json").read_text())
    assert {"torch", "torch_cuda", "gpus", "cpu", "python"} <= set(environment)
    assert "groc eval" in (out / "commands.log").read_text() and "groc train" in (out / "commands.log").read_text()

    again = run("collect", str(out))
    assert again.returncode == 2 and "is not an empty directory" in again.stderr

    # Later, on a CPU: the per-token files back, as groc eval wrote them, for groc compare (Figure 3).
    unpacked = run("unpack", str(out), str(tmp_path / "unpacked"))
    assert unpacked.returncode == 0, unpacked.stderr
    result = compare(tmp_path / "unpacked" / "ptb-tied.test.tokens.parquet",
                     tmp_path / "unpacked" / "ptb-groc.test.tokens.parquet")
    assert result["overall"]["words"] == tokens.num_rows
    assert result["overall"]["ppl_a"] == pytest.approx(rows["tied"]["test_ppl"], rel=1e-5)  # float32 log-probabilities
    evaluation = json.loads((tmp_path / "unpacked" / "ptb-groc.test.json").read_text())
    assert evaluation["perplexity"] == rows["groc"]["test_ppl"]

    lease_resumes_the_window(tmp_path, data_dir, rows)



LEASE = REPO / "recipes" / "gpu-lease.sh"


def image_env(tmp_path: Path, **env) -> dict:
    """The lent image's PATH: a python3 with torch, no groc and no python (the shims must come from the lease)."""
    bin_dir = tmp_path / "image-bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    full = run_env({"PATH": f"{bin_dir}:/usr/bin:/bin", "RESULTS": str(tmp_path / "results"), **env})
    full.pop("PYTHONPATH", None)
    return full


def test_lease_bad_arguments(tmp_path):
    env = image_env(tmp_path, DATA=str(tmp_path))
    for args, extra, message in [([], {}, "unknown verb ''"), (["run"], {}, "run needs one directory"),
                                 (["pack", "x"], {}, "pack takes no arguments"),
                                 (["run", str(tmp_path)], {}, "is not an empty directory"),
                                 (["run", str(tmp_path / "o")], {"SECONDS_LEFT": "200"}, "leaves no minute of training"),
                                 (["run", str(tmp_path / "o")], {"RESERVE": "1m"}, "RESERVE must be a whole number"),
                                 (["run", str(tmp_path / "o")], {"DATASET": "wiki"}, "DATASET must be ptb or wt2")]:
        r = subprocess.run(["bash", str(LEASE), *args], capture_output=True, text=True, env={**env, **extra})
        assert r.returncode == 2 and message in r.stderr and len(r.stderr.splitlines()) == 1, (args, r.stderr)
    assert not (tmp_path / "o").exists()


def lease_resumes_the_window(tmp_path: Path, data_dir: Path, first: dict) -> None:
    """gpu-lease.sh run on the window above, as the lent image would run it: the killed run resumes, the dead one
    starts again, the finished ones are skipped, and DIR gets collect's 7 files and lease.log."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = image_env(tmp_path, DATA=str(data_dir), SCALE="tiny", SECONDS_LEFT="400", RESERVE="300", TMPDIR=str(scratch))
    out = tmp_path / "lease-back"
    r = subprocess.run(["bash", str(LEASE), "run", str(out)], capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(p.name for p in out.iterdir())
    assert files == ["commands.log", "environment.json", "lease.log", "metrics.parquet", "per-token.parquet",
                     "runs.json", "table2.md", "table2.parquet"], files
    rows = {r["output"]: r for r in pq.read_table(out / "table2.parquet").to_pylist()}
    assert list(rows) == KINDS and all(row["ended"] == "finished: max-epochs" for row in rows.values()), rows
    for kind in ("lookup", "convolutional", "deep-residual", "adaptive", "groc"):  # not trained again
        assert rows[kind]["test_ppl"] == first[kind]["test_ppl"]
    assert rows["bilinear"]["test_ppl"] > 1
    log = (out / "lease.log").read_text()
    assert "MINUTES=1.7" in log and "collect" in log and "done in" in log
    trains = [line for line in (out / "commands.log").read_text().splitlines() if line.startswith("+ groc train")]
    assert all(line.split().count("--max-minutes") == 1 for line in trains)  # the first start's and the lease's
    assert any(line.endswith("--max-minutes 1.7") or "--max-minutes 1.7 " in line for line in trains)
    assert sorted(p.name for p in (tmp_path / "image-bin").iterdir()) == ["python3"]  # shims: a folder of their own
    assert not list(scratch.glob("groc-lease.*"))  # and gone when the lease ends (one was left in TMPDIR a run)
