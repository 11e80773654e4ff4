"""--threads (issue 17): the default is the process's share of the idle cores, never more cores
than are free, and what a user sets wins."""

import os

import pytest
import torch

from groc_cli.errors import GrocError
from groc_cli.runtime import cpu_count, default_threads, set_threads
from tests.conftest import REPO, run_groc


@pytest.mark.parametrize("cpus, busy, env, expected", [
    (2, 0, {}, 2),                                   # idle 2-core machine: both cores
    (2, 1, {}, 1),                                   # one other busy process: the one free core
    (2, 3, {}, 1),                                   # fully loaded: still one thread, never zero
    (16, 3, {}, 13),                                 # 16 cores, 3 busy
    (16, 0, {"LOCAL_WORLD_SIZE": "4"}, 4),           # torchrun, 4 processes on the node: a quarter each
    (16, 14, {"LOCAL_WORLD_SIZE": "4"}, 2),          # ... and fewer when the node is busy
    (4, 4, {"OMP_NUM_THREADS": "3"}, 3),             # the user's OMP_NUM_THREADS is used as given
    (2, 0, {"OMP_NUM_THREADS": "100000"}, 2),        # ... up to the cores (issue 30)
    (2, 0, {"OMP_NUM_THREADS": "junk"}, 2),          # a value that is not a count is ignored
])
def test_auto_threads(cpus, busy, env, expected):
    assert default_threads(cpus=cpus, busy=busy, env=env) == expected


@pytest.mark.parametrize("files, expected", [
    ({"cpu.max": "max 100000\n"}, None),                                               # v2, no quota
    ({"cpu.max": "250000 100000\n"}, 3),                                               # docker --cpus 2.5
    ({"cpu.max": "50000 100000\n"}, 1),                                                # half a CPU: one thread
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),     # v1, no quota
    ({"cpu/cpu.cfs_quota_us": "200000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2),    # v1, 2 CPUs
    ({}, None),                                                                        # no cgroup file system
])
def test_a_containers_cpu_quota_is_read_from_cgroup_v2_or_v1(tmp_path, files, expected):
    from groc_cli.cores import cgroup_cpu_limit

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_limit(tmp_path) == expected


def test_threads_in_a_container_with_a_cpu_quota_are_the_quota_not_the_cores_it_sees(tmp_path, monkeypatch):
    """A Kubernetes CPU limit or docker --cpus leaves every core in the affinity mask: threads sized
    to the mask were throttled by the quota. Busy cores are then the container's own other work,
    not the host's other tenants, who do not spend its quota."""
    from groc_cli import cores
    from groc_cli.cores import bounded_threads
    from groc_cli.runtime import busy_cores

    (tmp_path / "cpu.max").write_text("100000 100000\n")
    (tmp_path / "cpu.stat").write_text("usage_usec 5000000\nuser_usec 4000000\n")
    monkeypatch.setattr(cores, "CGROUP", tmp_path)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert cpu_count() == 1
    assert busy_cores() == 0  # the container's usage did not grow, whatever the host does
    assert default_threads(env={}) == 1
    assert bounded_threads(8, "`jobs`") == 1


def test_busy_cores_in_a_container_are_its_cgroups_cpu_time_less_this_process(tmp_path, monkeypatch):
    import threading

    from groc_cli import cores
    from groc_cli.runtime import _busy_in_cgroup

    stat = tmp_path / "cpu.stat"
    monkeypatch.setattr(cores, "CGROUP", tmp_path)
    for used, limit, expected in ((0.2, 4, 1), (10.0, 4, 4)):  # one core's worth over 0.2 s; far more than the quota
        stat.write_text("usage_usec 1000000\n")
        later = threading.Timer(0.05, lambda: stat.write_text(f"usage_usec {1000000 + int(used * 1e6)}\n"))
        later.start()
        assert _busy_in_cgroup(0.2, limit) == expected
        later.join()
    (tmp_path / "cpu.stat").unlink()
    assert _busy_in_cgroup(0.01, 4) == 0  # unreadable: nothing known to be busy


@pytest.mark.slow
def test_busy_cores_sees_a_process_started_just_now():
    """A spinning process started a moment ago counts (the 1-minute load average would lag)."""
    import subprocess
    import sys
    import time

    from groc_cli.runtime import busy_cores

    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        seen = max(busy_cores() for _ in range(3))
    finally:
        hog.kill()
    assert seen >= 1


def test_set_threads_applies_the_count_and_refuses_nonsense(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    before = torch.get_num_threads()
    try:
        two = min(2, cpu_count())
        assert set_threads("2") == two and torch.get_num_threads() == two and os.environ["OMP_NUM_THREADS"] == str(two)
        for bad in ("0", "-1", "two", "1.5"):
            with pytest.raises(GrocError, match="^threads .*: expected a whole number"):
                set_threads(bad)
    finally:
        torch.set_num_threads(before)


FIRST_TANH = """
import torch
from groc_cli.runtime import set_threads
set_threads(2)
torch.randn(300, 300) @ torch.randn(300, 300)  # MKL's first call, as a model's first product
x = torch.randn(11048, 256, generator=torch.Generator().manual_seed(0)) * 3  # GroC's pooled features
first, second = torch.tanh(x), torch.tanh(x)
print(int(torch.equal(first, second)), float((first.double() - torch.tanh(x.double())).abs().max()))
"""


@pytest.mark.slow
def test_the_first_vector_math_call_at_two_threads_is_as_exact_as_every_later_one():
    """The first torch.tanh of a process at 2 threads sometimes ran one thread's half on a less exact
    path of MKL's vector math (off by 9e-5), so two runs of the same training command gave different
    models. Several fresh processes: each one's first call is exact and equals its second."""
    import subprocess
    import sys

    for _ in range(8):
        out = subprocess.run([sys.executable, "-c", FIRST_TANH], cwd=REPO, capture_output=True, check=True).stdout
        same, error = out.decode().split()
        assert same == "1" and float(error) < 1e-6, (same, error)


@pytest.mark.slow
def test_every_torch_stage_takes_threads(tmp_path):
    for stage in ("train", "finetune", "dump", "eval", "score"):
        assert "--threads" in run_groc(stage, "--help").stdout.decode(), stage
    r = run_groc("train", REPO / "no-such-dataset", "-o", tmp_path / "r", "--threads", "0")
    assert r.returncode == 2 and "--threads '0'" in r.stderr.decode() and not (tmp_path / "r").exists()


@pytest.mark.slow
def test_more_threads_or_processes_than_cores_are_one_warning_and_the_cores(tmp_path):
    """--threads 100000 printed a false "vocab.parquet is damaged" and segfaulted; --threads 5000 ran
    50x slower without a word; -j 100000 would start as many processes. One warning line, the cores."""
    cores = cpu_count()
    data, run = tmp_path / "data", tmp_path / "run"
    run_groc("prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split", "3000,500",
             "-o", data, check=True)
    r = run_groc("train", data, "-o", run, "--emb", "8", "--hidden", "8", "--max-epochs", "1", "--threads", "100000",
                 env={"OMP_NUM_THREADS": ""})
    warnings = [line for line in r.stderr.decode().splitlines() if "warning" in line]
    assert r.returncode == 0 and (run / "last" / "model.safetensors").is_file(), r.stderr.decode()
    assert len(warnings) == 1 and "--threads 100000" in warnings[0] and f"using {cores}" in warnings[0], warnings
    text = tmp_path / "text.txt"
    text.write_text("The cat sat.\nOn the mat.\n" * 600)
    r = run_groc("tokenize", text, "-j", "100000")
    warnings = [line for line in r.stderr.decode().splitlines() if "warning" in line]
    assert r.returncode == 0 and r.stdout.decode().splitlines()[:2] == ["The cat sat .", "On the mat ."]
    assert len(warnings) == 1 and "-j 100000" in warnings[0] and f"using {cores}" in warnings[0], warnings


@pytest.mark.slow
def test_runs_started_together_share_the_cores(tmp_path):
    """Two `--threads auto` processes started at the same instant: the second takes what the first
    left (claims decided one at a time), not every core again."""
    import subprocess
    import sys

    code = ("import sys, time; from pathlib import Path; from groc_cli.runtime import claim_auto_threads, cpu_count; "
            "n = claim_auto_threads(Path(sys.argv[1])); print(n, cpu_count(), flush=True); time.sleep(2)")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, env=env, stdout=subprocess.PIPE)
             for _ in range(2)]
    got = [tuple(map(int, p.communicate()[0].split())) for p in procs]
    cpus = got[0][1]
    assert all(p.returncode == 0 for p in procs)
    first, second = sorted((n for n, _ in got), reverse=True)
    assert second <= max(1, cpus - first), got  # not every core twice (without claims: both took them all)
    assert not list(tmp_path.glob("[0-9]*")), "a finished process leaves its claim behind"


def test_auto_gives_threads_back_when_another_run_claims_them_and_takes_them_again(tmp_path, monkeypatch):
    """A run that took every core gives back what a later run claims (at its next rebalance), and
    takes it again when that run ends: runs side by side end with one thread each, not 2 + 1."""
    import tempfile

    import torch

    from groc_cli import runtime

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the claims directory
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "cpu_count", lambda: 4)
    monkeypatch.setattr(runtime, "busy_cores", lambda interval=0.2: 0)
    monkeypatch.setattr(runtime, "_AUTO", {})
    before = torch.get_num_threads()
    try:
        assert runtime.set_threads("auto") == 4 and torch.get_num_threads() == 4
        assert runtime._AUTO["claims"].parent == tmp_path
        assert runtime.rebalance_threads() is None  # not due yet
        runtime._AUTO["due"] = 0
        assert runtime.rebalance_threads() is None  # due, nothing changed
        (runtime._AUTO["claims"] / str(os.getppid())).write_text("3")  # a live process claims 3
        runtime._AUTO["due"] = 0
        assert runtime.rebalance_threads() == 1 and torch.get_num_threads() == 1
        assert (runtime._AUTO["claims"] / str(os.getpid())).read_text() == "1"
        (runtime._AUTO["claims"] / str(os.getppid())).unlink()  # it ended
        runtime._AUTO["due"] = 0
        assert runtime.rebalance_threads() == 4 and torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(before)
