"""Tiny trained runs shared by the evaluation tests (trained once per session).

Everything runs on one thread: these models are tiny, and on a shared 2-core machine
two intra-op threads per process make a token-by-token loop 100x slower."""

import pytest
import torch

from tests.conftest import run_groc

TINY = ["--emb", "16", "--hidden", "24", "--batch-size", "4", "--bptt", "12", "--eval-batch-size", "4", "--seed", "3"]
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def groc1(*args, check=False):
    """run_groc on one thread."""
    return run_groc(*args, check=check, env=ONE_THREAD)


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def runs(tmp_path_factory, data_dir):
    """a: PTB slice (train 2500 / valid 800); wiki: WikiText-2 slice with many words the
    runs never saw; tied and groc runs trained briefly on a."""
    root = tmp_path_factory.mktemp("eval")
    groc1("prepare", "--train", data_dir / "ptb" / "ptb.valid.txt", "--split", "2500,800", "-o", root / "a", check=True)
    groc1("prepare", "--train", data_dir / "wikitext-2" / "wiki.valid.tokens", "--split", "300,600", "-o", root / "wiki",
          check=True)
    groc1("lexicon", "--vocab", root / "a", "-o", root / "lex.parquet", check=True)
    groc1("train", root / "a", "-o", root / "tied", "--output-layer", "tied", "--max-tokens", "300", *TINY, check=True)
    groc1("train", root / "a", "-o", root / "groc", "--output-layer", "groc", "--lexicon", root / "lex.parquet",
          "--max-tokens", "48", *TINY, check=True)
    return root
