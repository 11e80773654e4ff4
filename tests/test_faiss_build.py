"""Which FAISS groc runs (`groc --version`), and the one-line refusals without a usable one (issue 33)."""

import sys
import types

import pytest

import groc_cli
from groc_cli.cli import main
from groc_cli.evaluation.cached import check_caches
from groc_cli.evaluation.settings import EvalSettings
from groc_cli.faiss_build import FaissUnavailable, describe


@pytest.fixture
def emptied_faiss(monkeypatch):
    """The faiss an uninstall of faiss-cpu leaves beside faiss-gpu: importable, with no index in it."""
    monkeypatch.setitem(sys.modules, "faiss", types.ModuleType("faiss"))


@pytest.mark.slow
def test_version_names_the_faiss_build(capsys):
    assert main(["--version"]) == 0
    line = capsys.readouterr().out
    assert line == f"groc {groc_cli.__version__} ({describe()})\n"
    assert "FAISS " in line and (", CPU build" in line or ", GPU build" in line)


def test_a_faiss_without_an_index_is_refused_in_one_line(emptied_faiss, capsys):
    assert main(["--version"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("groc: error: faiss in ") and "imports but is unusable (it has no IndexFlatL2)" in err


def test_eval_refuses_the_unbounded_cache_before_any_work(emptied_faiss):
    check_caches(EvalSettings(cache="local"))  # the other caches need no FAISS
    with pytest.raises(FaissUnavailable, match="imports but is unusable"):
        check_caches(EvalSettings(cache="unbounded"))


def test_without_faiss_groc_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "faiss", None)  # import faiss: ModuleNotFoundError
    assert main(["--version"]) == 0
    assert "no FAISS, which the unbounded cache needs: pip install 'groc-cli[cpu]'" in capsys.readouterr().out
    with pytest.raises(FaissUnavailable, match=r"not installed: pip install 'groc-cli\[cpu\]', or 'groc-cli\[gpu\]'"):
        check_caches(EvalSettings(cache="unbounded"))
