import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GROC_SHARED_DATA", REPO.parent / "shared" / "data"))


# Tiny models in tests: one thread each (2 cores shared by pytest and its subprocesses;
# OpenMP spin-waiting made tiny jobs many times slower on a loaded machine).
TEST_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def default_signals() -> None:
    """preexec_fn for a groc that a test interrupts: SIGINT and SIGTERM as in an interactive shell,
    whatever the shell that started pytest ignored (a background job ignores SIGINT)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_DFL)


def run_env(env: dict | None = None) -> dict:
    """The environment a test's `groc` runs with: the test's own, one thread, then the run's settings."""
    return {**os.environ, **TEST_ENV, **(env or {})}


def run_groc(*args, input=None, cwd=None, check=False, env=None, timeout=None):
    """Run the real CLI in its own process: a child forked by tests/zygote.py from an interpreter that
    has imported torch under the same start-up environment, or `python -m groc_cli` where forking is
    off; stdout and stderr are kept apart."""
    argv, env = [*map(str, args)], run_env(env)
    if _forkable(env):
        result = _zygote(env).run(argv, input, os.fspath(cwd or os.getcwd()), env, timeout)
    else:
        result = subprocess.run([sys.executable, "-m", "groc_cli", *argv], input=input, capture_output=True,
                                cwd=cwd, env=env, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"groc {' '.join(map(str, args))} failed:\n{result.stderr.decode()}")
    return result


# What a forked child cannot change after its fork server's start-up: variables read by the
# interpreter, the C library, OpenMP (GNU's, torch's CPU wheel) or torch's import. A run is forked by
# a server started with the same values of these (a thread count aside, which the child sets); a
# test that changes one gets a server of its own, which costs what a fresh interpreter does.
_STARTUP = ("PYTHON", "LC_", "LANG", "LD_", "MALLOC_", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS", "TORCH",
            "CUDA", "CUBLAS", "NVIDIA", "ARROW", "NUMPY", "TMP", "TEMP", "HOME")
_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_SERVERS: dict = {}  # start-up variables -> _Zygote, the most recently used last
_MAX_SERVERS = 2


def _startup_key(env: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(_STARTUP) and k not in _THREADS))


def _forkable(env: dict) -> bool:
    if os.environ.get("GROC_TESTS_FRESH_PYTHON") == "1" or not hasattr(socket, "send_fds"):
        return False
    threads = env.get("OMP_NUM_THREADS")
    return threads is None or (threads.isdigit() and int(threads) >= 1)  # anything else: OpenMP's own answer


class _Zygote:
    """The client side of tests/zygote.py: a server started with a run's environment."""

    def __init__(self, env: dict):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.zygote", str(theirs.fileno())], cwd=REPO,
                                     env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL)
        theirs.close()

    def run(self, argv, input, cwd, env, timeout=None) -> subprocess.CompletedProcess:
        """As subprocess.run(..., capture_output=True, timeout=timeout) would answer."""
        import threading
        import time

        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            socket.send_fds(self.sock, [json.dumps({"args": argv, "cwd": cwd, "env": env}).encode()],
                            [stdin_r, stdout_w, stderr_w])
        finally:
            for f in (stdin_r, stdout_w, stderr_w):
                os.close(f)
        pid = self._reply()
        out, err = [], []

        def drain(fd, chunks):
            with open(fd, "rb", buffering=0) as f:
                while chunk := f.read(1 << 16):
                    chunks.append(chunk)

        def feed():
            with open(stdin_w, "wb") as f:
                try:
                    f.write(input or b"")
                except BrokenPipeError:  # the child did not read it all, as subprocess.run allows
                    pass

        threads = [threading.Thread(target=feed, daemon=True)]
        threads += [threading.Thread(target=drain, args=(fd, chunks), daemon=True)
                    for fd, chunks in ((stdout_r, out), (stderr_r, err))]
        for t in threads:
            t.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        cmd = [sys.executable, "-m", "groc_cli", *argv]
        if any(t.is_alive() for t in threads):  # as subprocess.run does: kill the child, then raise
            os.kill(pid, signal.SIGKILL)
            self._reply()
            for t in threads[1:]:
                t.join(10)
            raise subprocess.TimeoutExpired(cmd, timeout, b"".join(out), b"".join(err))
        return subprocess.CompletedProcess(cmd, self._reply(), b"".join(out), b"".join(err))

    def _reply(self) -> int:
        reply = self.sock.recv(64)
        if not reply:
            raise RuntimeError(f"the test fork server (tests/zygote.py) has gone: exit {self.proc.wait()}")
        return json.loads(reply)

    def close(self) -> None:
        self.sock.close()
        self.proc.wait(timeout=60)


def _zygote(env: dict) -> _Zygote:
    key = _startup_key(env)
    server = _SERVERS.pop(key, None)
    if server is None or server.proc.poll() is not None:
        while len(_SERVERS) >= _MAX_SERVERS:
            _SERVERS.pop(next(iter(_SERVERS))).close()
        server = _Zygote(env)
    _SERVERS[key] = server
    return server


@pytest.fixture(autouse=True)
def _thread_count_stays_in_its_test():
    """groc's set_threads writes OMP_NUM_THREADS (for FAISS and for worker processes): a test that calls
    it in-process must not hand its count to the subprocesses of the tests after it on the same worker
    (monkeypatch.delenv of a variable that was not set restores nothing)."""
    before = os.environ.get("OMP_NUM_THREADS")
    yield
    if before is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = before


@pytest.fixture
def groc():
    return run_groc


@pytest.fixture(scope="session")
def data_dir():
    if not DATA.is_dir():
        pytest.skip(f"shared corpora not found at {DATA}")
    return DATA


@pytest.fixture(scope="session")
def wordnet():
    from groc_cli.lexicon.wordnet import open_wordnet

    return open_wordnet("auto").reader


def pytest_configure(config):
    import torch

    torch.set_num_threads(1)


def pytest_sessionfinish(session, exitstatus):
    while _SERVERS:
        _SERVERS.popitem()[1].close()
