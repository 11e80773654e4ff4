"""Tiny trained runs shared by the evaluation tests (trained once per session).

Everything runs on one thread: these models are tiny, and on a shared 2-core machine
two intra-op threads per process make a token-by-token loop 100x slower."""

import pytest
import torch

from tests.conftest import run_groc

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
def runs(tmp_path_factory, data_dir, tiny_run):
    """a: PTB slice (train 2500 / valid 800); wiki: WikiText-2 slice with many words the
    runs never saw; tied and groc runs trained briefly on a (tiny_run's, linked here)."""
    root = tmp_path_factory.mktemp("eval")
    a = tiny_run.data(data_dir / "ptb" / "ptb.valid.txt", "2500,800")
    lexicon = tiny_run.lexicon(a)
    for name, path in (("a", a), ("wiki", tiny_run.data(data_dir / "wikitext-2" / "wiki.valid.tokens", "300,600")),
                       ("lex.parquet", lexicon), ("tied", tiny_run("tied", data=a, max_tokens=300)),
                       ("groc", tiny_run("groc", data=a, lexicon=lexicon, max_tokens=48))):
        (root / name).symlink_to(path)
    return root
