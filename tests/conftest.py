import os
import signal
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
    """Run the real CLI in a subprocess; stdout and stderr are kept apart."""
    result = subprocess.run(
        [sys.executable, "-m", "groc_cli", *map(str, args)],
        input=input, capture_output=True, cwd=cwd, env={**os.environ, **TEST_ENV, **(env or {})},
    )
    if check and result.returncode != 0:
        raise AssertionError(f"groc {' '.join(map(str, args))} failed:\n{result.stderr.decode()}")
    return result


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
