"""`groc dump` + `groc eval --states`: caches from dumped states give the live numbers, and
states from other weights or another dataset are refused."""

import json

import numpy as np
import pytest

from groc_cli.errors import GrocError
from groc_cli.evaluation.perplexity import EvalSettings, evaluate
from groc_cli.evaluation.states import DumpSettings, dump_states
from tests.evaluation.conftest import groc1

pytestmark = pytest.mark.slow


def test_dump_then_eval_states_matches_live_eval(runs, tmp_path):
    states = tmp_path / "st"
    r = groc1("dump", runs / "tied", runs / "a", "--split", "valid", "-o", states, "--dtype", "float32", "--device", "cpu",
              check=True)
    meta = json.loads(r.stdout)
    assert meta["predictions"] == 843 and meta["files"]["hidden"]["shape"] == [843, 16]
    assert meta["files"]["hidden"]["dtype"] == "float32"
    assert meta["files"]["hidden"]["integrity"]["bytes"] == (states / "hidden.npy").stat().st_size
    assert np.load(states / "targets.npy").dtype == np.uint32
    assert json.loads((states / "meta.json").read_text())["model_checksum"] == meta["model_checksum"]
    for kw in (dict(), dict(cache="local", cache_size=50), dict(cache="unbounded", index="Flat", knn=8)):
        live = evaluate(runs / "tied", runs / "a", EvalSettings(split="valid", device="cpu", **kw))
        # --split and --vocab default to the states' own
        dumped = evaluate(runs / "tied", runs / "a", EvalSettings(device="cpu", **kw), states_dir=states,
                          vocab_given=False, split_given=False)
        assert dumped["perplexity"] == pytest.approx(live["perplexity"], rel=1e-6), kw
        assert dumped["tokens"] == live["tokens"] and dumped["states"] == str(states)


def test_union_states_keep_the_new_word_mass(runs, tmp_path):
    states = tmp_path / "union"
    dump_states(runs / "groc", runs / "wiki", states, DumpSettings(split="valid", vocab="union", device="cpu"))
    assert (states / "new_mass.npy").exists() and np.load(states / "hidden.npy").dtype == np.float16
    settings = dict(split="valid", vocab="union", downweight_new=0.5, device="cpu")
    live = evaluate(runs / "groc", runs / "wiki", EvalSettings(**settings))
    dumped = evaluate(runs / "groc", runs / "wiki", EvalSettings(**settings), states_dir=states)
    assert dumped["perplexity"] == pytest.approx(live["perplexity"], rel=1e-9)
    assert dumped["vocab_size"] == live["vocab_size"] > live["model_vocab_size"]


def test_states_from_other_weights_or_data_are_refused(runs, tmp_path):
    states = tmp_path / "st"
    dump_states(runs / "tied", runs / "a", states, DumpSettings(split="valid", device="cpu"))
    with pytest.raises(GrocError, match="other weights"):
        evaluate(runs / "groc", runs / "a", EvalSettings(split="valid", device="cpu"), states_dir=states)
    with pytest.raises(GrocError, match="another dataset"):
        evaluate(runs / "tied", runs / "wiki", EvalSettings(split="valid", device="cpu"), states_dir=states)
    with pytest.raises(GrocError, match="^vocab union: the states .* dumped with vocab model; drop vocab "):
        evaluate(runs / "tied", runs / "a", EvalSettings(split="valid", vocab="union", device="cpu"), states_dir=states)
    with pytest.raises(GrocError, match="already exists"):
        dump_states(runs / "tied", runs / "a", states, DumpSettings(split="valid", device="cpu"))
    r = groc1("dump", runs / "tied", runs / "a", "--split", "test", "-o", tmp_path / "nope")
    assert r.returncode != 0 and "no test split" in r.stderr.decode() and not (tmp_path / "nope").exists()
