"""Ctrl-C, SIGTERM and closed pipes with worker processes (-j 2), as a shell delivers them: the
signal goes to the whole process group, the reader of a pipe goes away (docs/stages.md, "Outputs")."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import default_signals, run_env
from tests.test_outputs import leftovers, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def big_text(data_dir, tmp_path_factory) -> Path:
    """About 2.6M words of raw text: minutes of Moses tokenization, so a signal lands mid-work."""
    path = tmp_path_factory.mktemp("interrupts") / "big.txt"
    with open(path, "wb") as out:
        for source in sorted((data_dir / "gutenberg").glob("*.txt")) + sorted((data_dir / "reuters").glob("*.txt")):
            out.write(source.read_bytes())
    return path


def _busy_children(pid: int) -> list[int]:
    """The child processes of `pid` that have used at least half a second of CPU."""
    busy = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and int(fields[11]) + int(fields[12]) >= os.sysconf("SC_CLK_TCK") // 2:
            busy.append(int(entry.name))
    return busy


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads worker processes from /proc")
@pytest.mark.parametrize("stage", ["prepare", "tokenize"])
@pytest.mark.parametrize("signum,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_signal_to_the_process_group_ends_workers_quietly(big_text, tmp_path, stage, signum, code, word):
    out = tmp_path / "out"
    args = (["prepare", "--train", big_text, "--tokenize", "-o", out] if stage == "prepare"
            else ["tokenize", big_text, "-o", out]) + ["-j", "2", "--errors", "replace"]
    proc = subprocess.Popen([sys.executable, "-m", "groc_cli", *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=run_env(), start_new_session=True,
                            preexec_fn=default_signals)
    wait_for(lambda: len(_busy_children(proc.pid)) >= 2, "two busy workers", proc)
    workers = _busy_children(proc.pid)
    os.killpg(proc.pid, signum)
    _, err = proc.communicate(timeout=120)
    lines = [line for line in err.decode().splitlines() if not line.startswith("reading ")]
    assert (proc.returncode, lines) == (code, [f"groc: {word}"]), err.decode()
    assert not any(_alive(pid) for pid in workers)
    assert list(tmp_path.iterdir()) == [] and leftovers(tmp_path) == []


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_reader_that_stops_early_is_a_normal_end(big_text, jobs):
    groc = f"{sys.executable} -m groc_cli tokenize {big_text} -j {jobs} --errors replace"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", f"{groc} | head -n 5"], capture_output=True,
                            env=run_env(), timeout=120)
    assert (result.returncode, result.stderr) == (0, b"")
    assert len(result.stdout.decode().splitlines()) == 5


def test_a_worker_killed_alone_is_one_line_not_a_hang(big_text, tmp_path):
    # One worker dies (the OOM killer, a stray kill -9) while the rest of groc goes on: the parent
    # sees its pipe end at once, stops, and leaves no output (it used to be able to wait forever).
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "groc_cli", "tokenize", str(big_text), "-o", str(out), "-j", "2",
                             "--errors", "replace"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=run_env(), start_new_session=True, preexec_fn=default_signals)
    wait_for(lambda: len(_busy_children(proc.pid)) >= 2, "two busy workers", proc)
    workers = _busy_children(proc.pid)
    os.kill(workers[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and err.decode().strip().splitlines() == [
        "groc: error: a tokenizer worker process ended unexpectedly (exit status -9); run again, or with -j 1"]
    assert not any(_alive(pid) for pid in workers)
    assert list(tmp_path.iterdir()) == [] and leftovers(tmp_path) == []


def test_workers_end_when_groc_is_killed(big_text, tmp_path):
    # kill -9 of groc alone (no group signal, no clean-up in groc): its workers see their task pipe
    # end and exit, rather than staying behind as orphans.
    proc = subprocess.Popen([sys.executable, "-m", "groc_cli", "tokenize", str(big_text), "-o", str(tmp_path / "out"),
                             "-j", "2", "--errors", "replace"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=run_env(), start_new_session=True, preexec_fn=default_signals)
    wait_for(lambda: len(_busy_children(proc.pid)) >= 2, "two busy workers", proc)
    workers = _busy_children(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 30
    try:
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(pid) for pid in workers), "the workers outlived groc by 30 s"
    finally:
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
