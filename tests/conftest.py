import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
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


# The tiny model of every test that trains one and does not test a size: seconds on one thread.
TINY = ["--emb", "16", "--hidden", "24", "--batch-size", "4", "--bptt", "12", "--eval-batch-size", "4", "--seed", "3"]
BOOKS = REPO / "groc_cli" / "data"


class TinyRuns:
    """The `tiny_run` fixture: tiny datasets, lexicons and runs, each built once per pytest process for
    its arguments and then shared by every test that asks for the same ones.

    tiny_run(kind="tied", data=None, lexicon=None, max_tokens=300, **overrides) trains
    `groc train DATA --output-layer KIND [--lexicon LEX] --max-tokens N` with TINY, where an override
    replaces a TINY flag or adds one (`init_range=1.0` is `--init-range 1.0`; max_tokens=None leaves
    the budget to the other flags); data defaults to tiny_run.data(), and a GroC run's lexicon to
    tiny_run.lexicon(data).
    tiny_run.data(text, split, *flags) is `groc prepare --train TEXT --split SPLIT FLAGS`;
    tiny_run.lexicon(*datasets) is `groc lexicon --vocab D ...`.
    tiny_run.small(kind, **overrides): 100 tokens of an 8-unit model on tiny_run.small_data(), the run
    of the tests that damage, forge, pack or resume one (what it learnt does not matter to them).
    Shared means read-only: a test that changes a run, or counts what is recorded in it (`groc eval`
    keeps its JSON under RUN/evals/), works on a copy: tiny_run.copy(path, dest)."""

    def __init__(self, root: Path):
        self.root, self.built = Path(root).resolve(), {}

    def _once(self, key: tuple, name: str, build) -> Path:
        """build(out) once per key; each output in a folder of its own, under the name a test would give it."""
        if key not in self.built:
            out = Path(tempfile.mkdtemp(dir=self.root)) / name
            build(out)
            self.built[key] = out
        return self.built[key]

    def data(self, text=BOOKS / "austen-persuasion.txt", split="4000,1000", *flags) -> Path:
        args = ["--train", text, "--split", split, *flags]
        return self._once(("data", *map(str, args)), "data",
                          lambda out: run_groc("prepare", *args, "-o", out, check=True))

    def lexicon(self, *datasets) -> Path:
        args = [arg for d in datasets or (self.data(),) for arg in ("--vocab", d)]
        return self._once(("lexicon", *map(str, args)), "lex.parquet",
                          lambda out: run_groc("lexicon", *args, "-o", out, check=True))

    def __call__(self, kind="tied", data=None, lexicon=None, max_tokens=300, **overrides) -> Path:
        data = Path(data or self.data()).resolve()  # a test's link to a shared dataset names the same run
        lexicon = Path(lexicon).resolve() if lexicon else self.lexicon(data) if kind == "groc" else None
        flags = dict(zip(TINY[::2], TINY[1::2]))
        flags.update({"--" + name.replace("_", "-"): str(value) for name, value in overrides.items()})
        args = ["--output-layer", kind, *(["--lexicon", lexicon] if lexicon else []),
                *(["--max-tokens", str(max_tokens)] if max_tokens is not None else []),
                *(arg for pair in flags.items() for arg in pair)]
        return self._once(("run", str(data), *map(str, args)), kind,
                          lambda out: run_groc("train", data, "-o", out, *args, check=True))

    def small_data(self, min_count=2) -> Path:
        """Persuasion, 3000 and 800 tokens; at --min-count 2 the run trains <unk> (eval has no warning to give)."""
        return self.data(BOOKS / "austen-persuasion.txt", "3000,800", "--min-count", str(min_count))

    def small(self, kind="tied", **overrides) -> Path:
        """A run of 100 tokens of an 8-unit model on small_data() (overrides as tiny_run's)."""
        return self(kind, data=self.small_data(), **{"max_tokens": 100, "emb": 8, "hidden": 8, **overrides})

    @staticmethod
    def copy(path, dest) -> Path:
        """A private copy of a shared run, dataset (a folder) or lexicon (a file) at dest, for a test to change."""
        dest = Path(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if Path(path).is_dir() else shutil.copyfile)(path, dest)
        return dest


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A factory of tiny runs, datasets and lexicons shared within this process (TinyRuns)."""
    return TinyRuns(tmp_path_factory.mktemp("tiny"))


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
