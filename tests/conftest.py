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


def run_groc(*args, input=None, cwd=None, check=False, env=None):
    """Run the real CLI in its own process (`python -m groc_cli`, or a child forked by tests/zygote.py
    where that cannot differ); stdout and stderr are kept apart."""
    argv, env = [*map(str, args)], {**os.environ, **TEST_ENV, **(env or {})}
    if _forkable(env):
        return _zygote().run(argv, input, os.fspath(cwd or os.getcwd()), env)
    result = subprocess.run([sys.executable, "-m", "groc_cli", *argv], input=input, capture_output=True, cwd=cwd,
                            env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"groc {' '.join(map(str, args))} failed:\n{result.stderr.decode()}")
    return result


# What a forked child cannot change after the fork server's start-up: variables read by the
# interpreter, the C library, OpenMP (GNU's, torch's CPU wheel) or torch's import. A run whose
# environment differs from the server's in any of them gets a real subprocess. (Not KMP_*, Intel
# OpenMP's, which sacremoses's import sets in the test process: KMP_INIT_AT_FORK.)
_STARTUP = ("PYTHON", "LC_", "LANG", "LD_", "MALLOC_", "OMP_", "GOMP_", "MKL_", "OPENBLAS", "TORCH", "CUDA",
            "NVIDIA", "ARROW", "NUMPY", "TMP", "TEMP", "HOME")


def _forkable(env: dict) -> bool:
    if os.environ.get("GROC_TESTS_FRESH_PYTHON") == "1" or not hasattr(socket, "send_fds"):
        return False
    threads = env.get("OMP_NUM_THREADS")
    if threads is not None and not (threads.isdigit() and int(threads) >= 1):
        return False
    server = _ZYGOTE_ENV
    return all(env.get(k) == server.get(k) for k in {*env, *server}
               if k.startswith(_STARTUP) and k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"))


_ZYGOTE_ENV = {**os.environ, **TEST_ENV}
_SERVER: list = []


class _Zygote:
    """The client side of tests/zygote.py: one server per pytest process, started at its first run."""

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = ours
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.zygote", str(theirs.fileno())], cwd=REPO,
                                     env=_ZYGOTE_ENV, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL)
        theirs.close()

    def run(self, argv, input, cwd, env) -> subprocess.CompletedProcess:
        import threading

        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            socket.send_fds(self.sock, [json.dumps({"args": argv, "cwd": cwd, "env": env}).encode()],
                            [stdin_r, stdout_w, stderr_w])
        finally:
            for f in (stdin_r, stdout_w, stderr_w):
                os.close(f)
        out, err = [], []

        def drain(fd, chunks):
            with open(fd, "rb", buffering=0) as f:
                while chunk := f.read(1 << 16):
                    chunks.append(chunk)

        readers = [threading.Thread(target=drain, args=(fd, chunks)) for fd, chunks in ((stdout_r, out), (stderr_r, err))]
        for t in readers:
            t.start()
        with open(stdin_w, "wb") as f:
            try:
                f.write(input or b"")
            except BrokenPipeError:  # the child did not read it all, as subprocess.run allows
                pass
        for t in readers:
            t.join()
        reply = self.sock.recv(64)
        if not reply:
            raise RuntimeError(f"the test fork server (tests/zygote.py) has gone: exit {self.proc.wait()}")
        return subprocess.CompletedProcess([sys.executable, "-m", "groc_cli", *argv], json.loads(reply),
                                           b"".join(out), b"".join(err))


def _zygote() -> _Zygote:
    if not _SERVER or _SERVER[0].proc.poll() is not None:
        _SERVER[:] = [_Zygote()]
    return _SERVER[0]


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
    for server in _SERVER:
        server.sock.close()
        server.proc.wait(timeout=60)
