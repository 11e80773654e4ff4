"""The tests' fork server (tests/zygote.py): a `groc` that it forks behaves as `python -m groc_cli` does."""

import os
import re
import shutil
import subprocess
import time

import pytest

from tests import conftest
from tests.conftest import REPO, run_env, run_groc


@pytest.mark.slow
def test_a_forked_groc_answers_as_a_fresh_interpreter_does(tmp_path, monkeypatch):
    monkeypatch.delenv("GROC_TESTS_FRESH_PYTHON", raising=False)  # these tests test the fork server
    text = "The cat sat on the mat, said Mr. Smith.\n" * 4_000  # 160 kB: more than a pipe holds, both ways
    outputs = (tmp_path / "d", tmp_path / "p")
    cases = [
        (["tokenize"], text.encode(), {}),
        (["tokenize"], "Café au lait – naïve.\n".encode(), {"PYTHONIOENCODING": "ascii:backslashreplace"}),
        (["prepare", "--train", tmp_path / "missing.txt", "-o", outputs[0]], None, {}),  # one line, exit 2
        (["prepare", "--train", REPO / "groc_cli" / "data" / "austen-persuasion.txt", "--split", "300,100", "-o",
          outputs[1], "--json"], None, {}),
        (["eval", "--help"], None, {"COLUMNS": "60"}),
        (["train", "--threads", "0"], None, {}),
    ]
    for args, stdin, env in cases:
        answers = []
        for fresh in (False, True):
            for out in outputs:
                shutil.rmtree(out, ignore_errors=True)
            if fresh:
                monkeypatch.setenv("GROC_TESTS_FRESH_PYTHON", "1")
            r = run_groc(*args, input=stdin, env=env)
            monkeypatch.delenv("GROC_TESTS_FRESH_PYTHON", raising=False)
            answers.append((r.returncode, r.stdout, re.sub(rb"\(\d+\.\ds\)", b"(time)", r.stderr)))  # prepare's "(0.1s)"
            if not fresh:
                key = conftest._startup_key(run_env(env))
                assert key in conftest._SERVERS and conftest._SERVERS[key].proc.poll() is None, "not forked"
        assert answers[0] == answers[1], args
        assert answers[0][0] in (0, 2) and (answers[0][1] or answers[0][2]), args


def test_a_run_that_changes_a_start_up_variable_gets_a_server_started_with_it(monkeypatch):
    monkeypatch.delenv("GROC_TESTS_FRESH_PYTHON", raising=False)
    env = run_env()
    key = conftest._startup_key(env)
    assert conftest._startup_key({**env, "OMP_NUM_THREADS": "2", "COLUMNS": "50"}) == key  # the child sets these
    for changed in ({"PYTHONIOENCODING": "ascii"}, {"LC_ALL": "C"}, {"MALLOC_ARENA_MAX": "1"}, {"KMP_INIT_AT_FORK": "0"}):
        assert conftest._startup_key({**env, **changed}) != key, changed
    assert conftest._forkable(env) and not conftest._forkable({**env, "OMP_NUM_THREADS": ""})


@pytest.mark.slow
def test_a_timeout_kills_the_forked_groc_as_subprocess_run_does(tmp_path, monkeypatch):
    monkeypatch.delenv("GROC_TESTS_FRESH_PYTHON", raising=False)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # no writer: opening it to read blocks
    for fresh in (False, True):
        if fresh:
            monkeypatch.setenv("GROC_TESTS_FRESH_PYTHON", "1")
        start = time.monotonic()
        with pytest.raises(subprocess.TimeoutExpired):
            run_groc("tokenize", fifo, timeout=3)
        assert time.monotonic() - start < 20
    monkeypatch.delenv("GROC_TESTS_FRESH_PYTHON")
    assert run_groc("tokenize", input=b"and then it runs again\n").stdout == b"and then it runs again\n"


def _leave_as_a_forked_run(code, out_fd: int, marks) -> None:
    """In a forked child: what a groc run might leave pending at its end, then zygote._exit(code)."""
    import atexit
    import io
    import sys
    import threading

    from tests import zygote

    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "wb", closefd=False)), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "wb", closefd=False)), encoding="utf-8")
    sys.stdout.write("a result not yet flushed\n")
    atexit.register(marks["atexit"].write_text, "ran")
    threading.Thread(target=lambda: (time.sleep(0.3), marks["thread"].write_text("joined"))).start()
    zygote._exit(code)


@pytest.mark.slow
@pytest.mark.parametrize("code, status, message", [(0, 0, ""), (None, 0, ""), (3, 3, ""), (256 + 7, 7, ""),
                                                   ("groc: stopped", 1, "groc: stopped\n")])
def test_a_forked_run_ends_as_the_interpreter_would_without_its_teardown(tmp_path, code, status, message):
    """tests/zygote.py's _exit: the non-daemon threads joined, the atexit handlers run, stdout flushed, a
    SystemExit message printed, and the status the interpreter gives that SystemExit code."""
    marks = {"atexit": tmp_path / "atexit", "thread": tmp_path / "thread"}
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            _leave_as_a_forked_run(code, write_end, marks)
        finally:
            os._exit(99)  # never reached unless _exit returned or raised
    os.close(write_end)
    with open(read_end, "rb") as f:
        output = f.read().decode()
    _, wait_status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(wait_status) == status
    assert sorted(output.splitlines(keepends=True)) == sorted([*([message] if message else []), "a result not yet flushed\n"])
    assert marks["atexit"].read_text() == "ran" and marks["thread"].read_text() == "joined"
