"""`groc eval --grid` (one pass, every combination), trained-index reuse, `--lexicon` at
evaluation, and the datastore checks. Tiny runs from conftest.py."""

import json
import math

import pyarrow.parquet as pq
import pytest

from groc_cli.artifacts.io import read_metadata
from groc_cli.errors import GrocError
from groc_cli.evaluation.perplexity import EvalSettings, evaluate
from tests.evaluation.conftest import groc1 as run_groc

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def states(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("grid") / "valid"
    run_groc("dump", runs / "tied", runs / "a", "--split", "valid", "--dtype", "float32", "-o", out, "--device", "cpu",
             check=True)
    return out


def one(runs, states, **kw):
    return evaluate(runs / "tied", runs / "a", EvalSettings(device="cpu", **kw), states_dir=states,
                    vocab_given=False, split_given=False)


def test_local_grid_equals_each_setting_alone_and_marks_the_best(runs, states, tmp_path):
    table = tmp_path / "grid.parquet"
    r = run_groc("eval", runs / "tied", runs / "a", "--states", states, "--cache", "local", "--cache-size", "200",
                 "--grid", "cache-weight=0.05,0.2,0.5; theta=0.1,1.0", "--grid-out", table, check=True)
    out = json.loads(r.stdout)
    rows = out["grid"]
    assert len(rows) == 6 and {(x["theta"], x["cache_weight"]) for x in rows} == {
        (t, w) for t in (0.1, 1.0) for w in (0.05, 0.2, 0.5)}
    for row in rows:
        alone = one(runs, states, cache="local", cache_size=200, theta=row["theta"], cache_weight=row["cache_weight"])
        assert row["perplexity"] == pytest.approx(alone["perplexity"], rel=1e-9)
    best = min(rows, key=lambda x: x["perplexity"])
    assert [x["best"] for x in rows].count(True) == 1 and best["best"] and out["best"] == best
    assert out["perplexity"] == best["perplexity"] and out["model_perplexity"] > best["perplexity"] * 0.5
    assert "best" in r.stderr.decode()
    saved = pq.read_table(table).to_pylist()
    assert saved == rows
    assert read_metadata(table)["settings"]["grid"] == {"cache-weight": [0.05, 0.2, 0.5], "theta": [0.1, 1.0]}


def test_unbounded_grid_over_knn_and_kernel(runs, states):
    out = one(runs, states, cache="unbounded", index="Flat", grid="knn=4,16;kernel=gaussian,epanechnikov;cache-weight=0.1,0.3")
    assert len(out["grid"]) == 8
    for row in out["grid"][::3]:
        alone = one(runs, states, cache="unbounded", index="Flat", knn=row["knn"], kernel=row["kernel"],
                    cache_weight=row["cache_weight"])
        assert row["perplexity"] == pytest.approx(alone["perplexity"], rel=1e-9)


def test_trained_index_saved_then_reused_gives_the_same_result(runs, states, tmp_path):
    path = tmp_path / "ivf.index"
    kw = dict(cache="unbounded", index="IVF4,Flat", index_train=300, nprobe=2, knn=8, cache_weight=0.2)
    trained = one(runs, states, index_save=str(path), **kw)
    assert path.is_file() and json.loads(path.with_name("ivf.index.json").read_text())["factory"] == "IVF4,Flat"
    reused = one(runs, states, index_load=str(path), **kw)
    assert reused["perplexity"] == pytest.approx(trained["perplexity"], rel=1e-9)
    assert reused["cache_config"]["training"]["source"] == str(path)
    r = run_groc("eval", runs / "tied", runs / "a", "--states", states, "--cache", "unbounded", "--index", "IVF8,Flat", "--knn", "8",
                 "--index-load", path)
    assert r.returncode == 2 and "IVF4,Flat" in r.stderr.decode()


def test_lexicon_at_evaluation_changes_groc_only(runs, tmp_path):
    empty = tmp_path / "none.parquet"
    run_groc("lexicon", "--vocab", runs / "a", "--keep-fraction", "0", "-o", empty, check=True)

    def ppl(**kw):
        return evaluate(runs / "groc", runs / "a", EvalSettings(split="valid", device="cpu", **kw))["perplexity"]

    own = ppl()
    assert ppl(lexicon=str(runs / "lex.parquet")) == pytest.approx(own, rel=1e-9)
    assert ppl(lexicon=str(empty)) != pytest.approx(own, rel=1e-6)
    with pytest.raises(GrocError, match="GroC models only"):
        evaluate(runs / "tied", runs / "a", EvalSettings(split="valid", lexicon=str(empty)))


@pytest.mark.parametrize("kw, message", [
    (dict(cache="unbounded", index="Flat", knn=5000), "larger than the datastore"),
    (dict(cache="unbounded", index="Flat", grid="knn=8,5000"), "larger than the datastore"),
    (dict(cache="unbounded", index="IVF1024,Flat", knn=8), "inverted lists need at least 1,024"),
    (dict(cache="local", grid="knn=4"), "does not apply to the local cache"),
    (dict(cache="local", grid="theta=a,b"), "not a list of numbers"),
    (dict(cache="local", grid="cache-weight=0.1,2"), "cache_weight 2.0"),
    (dict(grid="cache-weight=0.1"), "needs a cache"),
    (dict(cache="local", index_save="x.index"), "cache unbounded only"),
])
def test_bad_grid_and_datastore_settings_fail_before_any_work(runs, kw, message):
    with pytest.raises(GrocError, match=message) as info:
        evaluate(runs / "tied", runs / "a", EvalSettings(split="valid", device="cpu", **kw))
    assert "\n" not in str(info.value)


def test_grid_refuses_per_token_and_writes_nothing(runs, states, tmp_path):
    r = run_groc("eval", runs / "tied", runs / "a", "--states", states, "--cache", "unigram", "--grid", "cache-weight=0.1,0.2",
                 "--per-token", tmp_path / "t.parquet", "--grid-out", tmp_path / "g.parquet")
    err = r.stderr.decode().strip()
    assert r.returncode == 2 and "--per-token" in err and len(err.splitlines()) == 1
    assert not list(tmp_path.iterdir())
    assert math.isfinite(one(runs, states, cache="unigram", grid="cache-weight=0.1,0.2")["perplexity"])


def test_grid_plot_draws_the_heatmap_and_refuses_what_it_cannot_draw(runs, states, tmp_path):
    pytest.importorskip("matplotlib")
    base = ["eval", runs / "tied", runs / "a", "--states", states]
    for grid, name in (("cache-weight=0.05,0.2;theta=0.1,1.0", "two.png"), ("cache-weight=0.05,0.2,0.5", "one.png")):
        out = json.loads(run_groc(*base, "--cache", "local", "--grid", grid, "--plot", tmp_path / name, check=True).stdout)
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG" and out["plot"] == str(tmp_path / name)
    refusals = ((["--cache", "local"], "add --grid"),
                (["--cache", "unbounded", "--index", "Flat", "--grid", "cache-weight=0.1,0.2;knn=4,8;kernel=gaussian"],
                 "one or two --grid settings"))
    for args, message in refusals:
        r = run_groc(*base, *args, "--plot", tmp_path / "no.png")
        assert r.returncode == 2 and message in r.stderr.decode() and len(r.stderr.decode().splitlines()) == 1
    assert not (tmp_path / "no.png").exists()
