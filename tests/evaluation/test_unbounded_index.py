"""`groc eval --cache unbounded`: indexes FAISS builds but the cache cannot use are refused in
one line before any work, and `--datastore disk` gives the in-memory results. Tiny runs from
conftest.py (16-dimensional states)."""

import json

import faiss
import numpy as np
import pytest

from groc_cli.errors import GrocError
from groc_cli.evaluation import perplexity
from groc_cli.evaluation.perplexity import EvalSettings, evaluate
from tests.conftest import TINY
from tests.evaluation.conftest import groc1 as run_groc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def states(runs, tmp_path_factory):
    """float16 states, as `groc dump` writes them by default."""
    out = tmp_path_factory.mktemp("unbounded") / "valid"
    run_groc("dump", runs / "tied", runs / "a", "--split", "valid", "-o", out, "--device", "cpu", check=True)
    return out


def one(runs, states, **kw):
    return evaluate(runs / "tied", runs / "a", EvalSettings(device="cpu", **kw), states_dir=states,
                    vocab_given=False, split_given=False)


@pytest.fixture
def no_work(monkeypatch):
    """Fail if evaluation gets as far as building the cache stream."""
    def refuse(*args, **kwargs):
        raise AssertionError("the error came after the work had started")

    monkeypatch.setattr(perplexity, "CachedStream", refuse)


# Each of these reached the user as a traceback (IDMap, NSG, Residual), was accepted with
# kernel weights computed from the wrong distances (LSH, L2norm), or failed only after the
# index had been trained, without naming --index (PCA wider than the states).
@pytest.mark.parametrize("index, message", [
    ("IDMap,Flat", "drop 'IDMap'"),
    ("NSG32,Flat", "cannot add states later"),
    ("Residual2x4,PQ8", "cannot search"),
    ("LSH", "Hamming distance"),
    ("L2norm,Flat", "drop 'L2norm'"),
    ("PCA32,Flat", "PCA cannot output 32 dimensions from 16-dimensional vectors; use PCA8"),
])
def test_index_the_cache_cannot_use_is_refused_before_any_work(runs, states, no_work, index, message):
    with pytest.raises(GrocError, match=message) as info:
        one(runs, states, cache="unbounded", index=index, knn=8)
    text = str(info.value)
    assert text.startswith(f"index '{index}'") and "\n" not in text


# These crashed the process today (a segmentation fault, an abort).
@pytest.mark.parametrize("index, message", [
    ("IVF4,ITQ16,SH2", "Hamming distance"),
    ("IVF4,PQ4,Refine(IVF4,Flat)", "use ',RFlat'"),
])
def test_index_that_crashed_faiss_is_one_line_on_stderr(runs, states, index, message):
    r = run_groc("eval", runs / "tied", runs / "a", "--states", states, "--cache", "unbounded", "--index", index,
                 "--knn", "8")
    err = r.stderr.decode().strip()
    assert r.returncode == 2 and err.startswith(f"groc: error: --index '{index}'") and message in err
    assert len(err.splitlines()) == 1 and not r.stdout


def test_index_load_of_an_inner_product_index_is_refused(runs, states, tmp_path):
    path = tmp_path / "ip.faiss"
    index = faiss.index_factory(16, "IVF4,Flat", faiss.METRIC_INNER_PRODUCT)
    index.train(np.random.default_rng(0).standard_normal((400, 16)).astype(np.float32))
    faiss.write_index(index, str(path))
    model = json.loads((states / "meta.json").read_text())["model_checksum"]  # trained on these states, as recorded
    path.with_name("ip.faiss.json").write_text(json.dumps({"factory": "IVF4,Flat", "dim": 16,
                                                           "states": {"dim": 16, "model_checksum": model}}))
    with pytest.raises(GrocError, match="inner product") as info:
        one(runs, states, cache="unbounded", index="IVF4,Flat", knn=8, index_load=str(path))
    assert str(info.value).startswith("cache unbounded: trained index") and "\n" not in str(info.value)


def test_flat_index_saved_then_loaded(runs, states, tmp_path):
    path = tmp_path / "flat.faiss"
    saved = one(runs, states, cache="unbounded", index="Flat", knn=8, index_save=str(path))
    loaded = one(runs, states, cache="unbounded", index="Flat", knn=8, index_load=str(path))
    assert loaded["perplexity"] == saved["perplexity"]


def test_datastore_disk_gives_the_in_memory_results(runs, states, tmp_path):
    path = tmp_path / "ivf.faiss"
    kw = dict(cache="unbounded", index="IVF4,PQ4,RFlat", nprobe=2, cache_weight=0.2)
    r = run_groc("eval", runs / "tied", runs / "a", "--states", states, "--cache", "unbounded", "--index", kw["index"],
                 "--nprobe", "2", "--cache-weight", "0.2", "--knn", "16", "--index-train", "600", "--index-save", path,
                 "--datastore", "disk", check=True)
    disk = json.loads(r.stdout)
    assert disk["cache_config"]["datastore"] == "stored_states" and disk["settings"]["datastore"] == "disk"
    memory = one(runs, states, knn=16, index_load=str(path), **kw)
    assert memory["cache_config"]["datastore"] == "memory"
    assert disk["perplexity"] == memory["perplexity"] < memory["model_perplexity"]
    grid = dict(grid="knn=4,16;kernel=gaussian,epanechnikov", index_load=str(path), **kw)
    assert one(runs, states, datastore="disk", **grid)["grid"] == one(runs, states, **grid)["grid"]


@pytest.mark.parametrize("kw, message", [
    (dict(datastore="disk", index="IVF4,PQ4"), "index 'IVF4,PQ4' has no exact refinement stage"),
    (dict(datastore="disk", index="IVF4,PQ4,RFlat", states=False), "add states DIR"),
    (dict(datastore="disk", cache="local"), "cache unbounded only"),
    (dict(datastore="ssd"), "datastore 'ssd': expected one of memory, disk"),
    (dict(nprobe=0), "nprobe 0"),
])
def test_bad_datastore_settings_fail_in_one_line_before_any_work(runs, states, no_work, kw, message):
    kw = {"cache": "unbounded", "knn": 8, **kw}
    states = states if kw.pop("states", True) else None
    with pytest.raises(GrocError, match=message) as info:
        evaluate(runs / "tied", runs / "a", EvalSettings(device="cpu", split="valid", **kw), states_dir=states)
    assert "\n" not in str(info.value)



@pytest.fixture(scope="module")
def spread(runs, tmp_path_factory):
    """A tied run whose states differ (U(-1, 1) weights) and its float16 valid states. The tied
    run above barely moves from its U(-0.05, 0.05) start: its states agree to 1e-4, so their
    neighbours are float32 rounding noise, which FAISS and torch round differently."""
    root = tmp_path_factory.mktemp("spread")
    run_groc("train", runs / "a", "-o", root / "run", "--output-layer", "tied", "--init-range", "1.0", "--max-tokens",
             "300", *TINY, check=True)
    run_groc("dump", root / "run", runs / "a", "--split", "valid", "-o", root / "valid", "--device", "cpu", check=True)
    return root


def test_search_torch_gives_faiss_flat_perplexity_in_memory_and_from_disk(runs, spread):
    kw = dict(cache="unbounded", index="Flat", knn=16, cache_weight=0.2)
    flat = evaluate(spread / "run", runs / "a", EvalSettings(device="cpu", **kw), states_dir=spread / "valid",
                    vocab_given=False, split_given=False)
    r = run_groc("eval", spread / "run", runs / "a", "--states", spread / "valid", "--cache", "unbounded", "--index",
                 "Flat", "--knn", "16", "--cache-weight", "0.2", "--search", "torch", "--device", "cpu", check=True)
    ours = json.loads(r.stdout)
    assert "exact nearest-neighbour search in torch on cpu" in r.stderr.decode()
    assert ours["cache_config"]["search"] == "torch (cpu)" and ours["settings"]["search"] == "torch"
    assert flat["cache_config"]["search"] == "faiss"  # auto on the CPU: FAISS
    assert ours["perplexity"] == pytest.approx(flat["perplexity"], rel=1e-7)
    assert ours["perplexity"] < flat["model_perplexity"] / 2
    disk = evaluate(spread / "run", runs / "a", EvalSettings(device="cpu", search="torch", datastore="disk", **kw),
                    states_dir=spread / "valid", vocab_given=False, split_given=False)
    assert disk["perplexity"] == ours["perplexity"] and disk["cache_config"]["datastore"] == "stored_states"


@pytest.mark.parametrize("kw, message", [
    (dict(search="torch", index="IVF4,PQ4"), "search torch is exact search, in place of FAISS's 'Flat': give index Flat"),
    (dict(search="torch", cache="local"), "search torch applies to cache unbounded only"),
    (dict(search="gpu"), "search 'gpu': expected one of auto, faiss, torch"),
    (dict(datastore="disk", index="Flat"), "or search exactly with index Flat and search torch"),
])
def test_bad_search_settings_fail_in_one_line_before_any_work(runs, states, no_work, kw, message):
    kw = {"cache": "unbounded", "knn": 8, **kw}
    with pytest.raises(GrocError, match=message) as info:
        evaluate(runs / "tied", runs / "a", EvalSettings(device="cpu", split="valid", **kw), states_dir=states)
    assert "\n" not in str(info.value)


def test_index_load_of_an_index_trained_on_another_models_states_is_refused(runs, states, tmp_path, monkeypatch):
    """The record beside a saved index names the weights whose states trained it: another model's
    index (or one without that record) loaded silently before (issue 91)."""
    path = tmp_path / "flat.faiss"
    one(runs, states, cache="unbounded", index="Flat", knn=8, index_save=str(path))
    record = json.loads(path.with_name("flat.faiss.json").read_text())
    assert record["states"]["model_checksum"] == json.loads((states / "meta.json").read_text())["model_checksum"]
    assert record["states"]["dim"] == 16
    monkeypatch.setattr(perplexity, "CachedStream", lambda *a, **k: pytest.fail("the error came after the work began"))
    for change, message in ((lambda r: r["states"].update(model_checksum="0" * 64), "another model's states"),
                            (lambda r: r["states"].update(dim=32), "32-dimensional"),
                            (lambda r: r.pop("states"), "does not say which states"),
                            (lambda r: None, "is missing")):
        edited = json.loads(json.dumps(record))
        change(edited)
        if message == "is missing":
            path.with_name("flat.faiss.json").unlink()
        else:
            path.with_name("flat.faiss.json").write_text(json.dumps(edited))
        with pytest.raises(GrocError, match=message) as info:
            one(runs, states, cache="unbounded", index="Flat", knn=8, index_load=str(path))
        assert str(info.value).startswith(f"index_load {path}") and "\n" not in str(info.value)
