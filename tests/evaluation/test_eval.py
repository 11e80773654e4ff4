"""`groc eval`: stream perplexity against a token-by-token loop, open vocabulary, caches,
per-token records and one-line errors. Tiny runs from conftest.py."""

import json
import math

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from groc_cli.errors import GrocError
from groc_cli.evaluation.perplexity import EvalSettings, evaluate
from groc_cli.text.dataset import UNK, open_dataset
from groc_cli.run_storage import Run
from tests.evaluation.conftest import groc1 as run_groc


def reference_ppl(run_dir, dataset_dir, split, union=False, uniform=0.0, downweight=1.0):
    """One token at a time, batch 1, carried state, full distributions: the definition."""
    model, words, _ = Run(run_dir).build("best")
    model.eval()
    ds = open_dataset(dataset_dir)
    tokens = [ds.words[i] for i in ds.ids(split)]
    vocab = list(words)
    if union:
        vocab += sorted({t for t in tokens} - set(words))
    groc = model.config.output == "groc"
    if union and groc:
        model.set_vocab(vocab)
    index = {w: i for i, w in enumerate(vocab)}
    model_index = {w: i for i, w in enumerate(model.vocab)}
    nll = 0.0
    with torch.no_grad():
        composed = model.compose(grad=False)
        state = model.init_state(1)
        for t in range(len(tokens) - 1):
            x = model_index.get(tokens[t], model_index[UNK])
            h, state = model(torch.tensor([[x]]), state, composed)
            p = composed.log_probs(h[0]).double().exp()[0]
            full = torch.zeros(len(vocab), dtype=torch.float64)
            full[: p.numel()] = p
            full[len(words):] *= downweight
            full /= full.sum()
            full = (1 - uniform) * full + uniform / len(vocab)
            y = index.get(tokens[t + 1], index[UNK])
            nll -= math.log(full[y])
    return math.exp(nll / (len(tokens) - 1))


def eval_cli(*args):
    result = run_groc("eval", *args, check=True)
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 1  # stdout holds exactly one JSON object
    return json.loads(lines[0]), result.stderr.decode()


@pytest.mark.slow
def test_stream_perplexity_equals_token_by_token_loop(runs):
    out, err = eval_cli(runs / "tied", runs / "a", "--split", "valid", "--device", "cpu")
    expected = reference_ppl(runs / "tied", runs / "a", "valid")
    assert out["perplexity"] == pytest.approx(expected, rel=1e-5)
    assert out["tokens"] == 843 and out["vocab_size"] == out["model_vocab_size"] == 928
    assert 0 < out["oov_rate"] < 1 and out["tokens_per_s"] > 0 and out["settings"]["vocab"] == "model"
    assert "perplexity" in err and "{" not in err
    # The time chunk only batches the work.
    odd = evaluate(runs / "tied", runs / "a", EvalSettings(split="valid", chunk=5, device="cpu"))
    assert odd["perplexity"] == pytest.approx(out["perplexity"], rel=1e-6)


@pytest.mark.slow
def test_union_vocabulary_is_finite_for_groc_and_tied(runs):
    out, _ = eval_cli(runs / "groc", runs / "wiki", "--split", "valid", "--vocab", "union", "--downweight-new", "0.5",
                      "--device", "cpu")
    assert out["vocab_size"] > out["model_vocab_size"] and out["new_words"] > 0 and out["oov_rate"] > 0.2
    assert math.isfinite(out["perplexity"])
    expected = reference_ppl(runs / "groc", runs / "wiki", "valid", union=True, downweight=0.5)
    assert out["perplexity"] == pytest.approx(expected, rel=1e-5)

    tied = evaluate(runs / "tied", runs / "wiki", EvalSettings(split="valid", vocab="union", device="cpu"))
    assert tied["settings"]["uniform_weight"] == 0.01 and math.isfinite(tied["perplexity"])
    assert tied["vocab_size"] == out["vocab_size"]
    expected = reference_ppl(runs / "tied", runs / "wiki", "valid", union=True, uniform=0.01)
    assert tied["perplexity"] == pytest.approx(expected, rel=1e-5)


@pytest.mark.slow
def test_table_model_warns_when_unk_inputs_were_never_trained(runs, tmp_path, tiny_run):
    """Raw text prepared with every training word in the vocabulary has no <unk> to train
    on: a table model that then reads <unk> for new words is warned about (eval and dump);
    PTB, whose text has <unk>, and GroC, which composes inputs, are not."""
    from pathlib import Path

    emma = Path(__file__).resolve().parents[2] / "groc_cli" / "data" / "austen-emma.txt"
    tied = tiny_run("tied", data=tiny_run.data(emma, "3000,500", "--tokenize", "--lower"), max_tokens=200)
    _, err = eval_cli(tied, runs / "wiki", "--split", "valid", "--vocab", "union", "--device", "cpu")
    assert "<unk> never occurred in this model's training data" in err and "--min-count 2" in err
    dumped = run_groc("dump", tied, runs / "wiki", "--split", "valid", "-o", tmp_path / "states", check=True)
    assert "<unk> never occurred" in dumped.stderr.decode()
    for run in ("tied", "groc"):
        _, err = eval_cli(runs / run, runs / "wiki", "--split", "valid", "--vocab", "union", "--device", "cpu")
        assert "never occurred" not in err
    # The advice works: with --min-count 2 the words seen once are read as <unk> in training,
    # the run counts them, and the warning is gone.
    emma2 = tiny_run.data(emma, "3000,500", "--tokenize", "--lower", "--min-count", "2")
    tied2 = tiny_run("tied", data=emma2, max_tokens=200)
    oov = json.loads((emma2 / "manifest.json").read_text())["splits"]["train"]["oov_tokens"]
    words, counts = pq.read_table(tied2 / "vocab.parquet").to_pydict().values()
    assert oov > 0 and counts[words.index(UNK)] == oov
    _, err = eval_cli(tied2, runs / "wiki", "--split", "valid", "--vocab", "union", "--device", "cpu")
    assert "never occurred" not in err


@pytest.mark.slow
def test_caches_run_and_weight_zero_is_no_cache(runs):
    def ppl(**kw):
        return evaluate(runs / "tied", runs / "a", EvalSettings(split="valid", device="cpu", **kw))

    base = ppl()
    assert base["perplexity"] == base["model_perplexity"]
    for kw in (dict(cache="unigram"), dict(cache="local", theta=0.3, cache_size=100),
               dict(cache="unbounded", index="Flat", knn=8),
               dict(cache="unbounded", index="IVF4,Flat", knn=8, index_train=300, nprobe=2)):
        out = ppl(cache_weight=0.2, **kw)
        assert math.isfinite(out["perplexity"]) and out["perplexity"] != base["perplexity"], kw
        assert out["model_perplexity"] == pytest.approx(base["perplexity"], rel=1e-9)
        assert out["cache_config"]["kind"] == kw["cache"]
    assert ppl(cache="local", cache_weight=0.0)["perplexity"] == pytest.approx(base["perplexity"], rel=1e-12)
    assert ppl(cache="unbounded", index="Flat", knn=4, cache_weight=0.0)["perplexity"] == pytest.approx(
        base["perplexity"], rel=1e-12)


@pytest.mark.slow
def test_per_token_records_match_the_summary(runs, tmp_path):
    path = tmp_path / "tokens.parquet"
    out, _ = eval_cli(runs / "tied", runs / "a", "--split", "valid", "--cache", "local", "--cache-weight", "0.1",
                      "--per-token", path, "--device", "cpu")
    table = pq.read_table(path)
    assert table.num_rows == out["tokens"]
    rows = table.to_pydict()
    assert rows["position"][0] == 1 and rows["position"][-1] == out["tokens"]
    final = np.array(rows["final_logp"])
    assert -final.mean() == pytest.approx(math.log(out["perplexity"]), rel=1e-9)
    assert -np.mean(rows["model_logp"]) == pytest.approx(math.log(out["model_perplexity"]), rel=1e-9)
    assert sum(not x for x in rows["in_train"]) == out["oov_tokens"]
    assert all(f > 0 for f, known in zip(rows["train_freq"], rows["in_train"]) if known)
    ds = open_dataset(runs / "a")
    assert rows["word"][:5] == [ds.words[i] for i in ds.ids("valid")[1:6]]
    again = run_groc("eval", runs / "tied", runs / "a", "--split", "valid", "--per-token", path)
    assert again.returncode != 0 and "--force" in again.stderr.decode()


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--cache-weight", "1.5"], "--cache-weight"),
    (["--cache", "unbounded", "--index", "Bogus99"], "--index"),
    (["--split", "test"], "no test split"),
])
def test_bad_inputs_fail_in_one_line_and_write_nothing(runs, tmp_path, args, message):
    path = tmp_path / "t.parquet"
    r = run_groc("eval", runs / "tied", runs / "a", "--split", "valid", "--per-token", path, *args)
    err = r.stderr.decode().strip()
    assert r.returncode != 0 and message in err and len(err.splitlines()) == 1 and not r.stdout
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("kw, message", [
    (dict(knn=0, cache="unbounded"), "knn"),
    (dict(cache="lru"), "cache"),
    (dict(vocab="union", uniform_weight=0.0), "uniform_weight"),
    (dict(downweight_new=0.5), "downweight_new"),
    (dict(vocab="open"), "vocab"),
    (dict(cache="unbounded", index="IVF4,Flat", index_train=2, knn=8), "inverted lists"),
])
def test_bad_settings_raise_one_line_errors(runs, kw, message):
    with pytest.raises(GrocError, match=message) as info:
        evaluate(runs / "tied", runs / "a", EvalSettings(split="valid", device="cpu", **kw))
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_unbounded_index_auto_is_exact_on_a_small_datastore_and_says_so(runs):
    out, err = eval_cli(runs / "tied", runs / "a", "--split", "valid", "--device", "cpu", "--cache", "unbounded",
                        "--knn", "8", "--cache-weight", "0.2")
    assert "unbounded cache: index auto is Flat (exact:" in err
    assert "please provide at least" not in err  # FAISS's own k-means warning
    assert out["settings"]["index"] == "auto" and out["cache_config"]["index"] == "Flat"
    flat, _ = eval_cli(runs / "tied", runs / "a", "--split", "valid", "--device", "cpu", "--cache", "unbounded",
                       "--knn", "8", "--cache-weight", "0.2", "--index", "Flat")
    assert out["perplexity"] == flat["perplexity"]


@pytest.mark.parametrize("dim,total,kw,chosen", [
    (300, 10_000_000, {}, "IVF4096,PQ30"),           # PQ's m divides the states' size
    (1024, 10_000_000, {}, "IVF4096,PQ32"),          # the paper's
    (200, 10_000_000, {"datastore": "disk"}, "IVF4096,PQ25,RFlat"),
    (256, 10_000_000, {"index_train": 100_000}, "Flat"),  # too few training states for 4,096 lists
    (256, 159_744, {}, "IVF4096,PQ32"),
    (256, 159_743, {}, "Flat"),
    (256, 10_000_000, {"search": "torch"}, "Flat"),
    (256, 10_000_000, {"index": "IVF64,Flat"}, "IVF64,Flat"),  # a given index is kept
])
def test_unbounded_index_auto_choice(dim, total, kw, chosen):
    from groc_cli.caches.unbounded import UnboundedCache, UnboundedSettings

    assert UnboundedCache.resolved(UnboundedSettings(**kw), dim, total)[0].index == chosen


def test_unbounded_index_auto_with_index_load_takes_the_saved_factory(tmp_path):
    from groc_cli.caches.unbounded import UnboundedCache, UnboundedSettings
    from groc_cli.errors import SettingError

    saved = tmp_path / "valid.index"
    saved.write_bytes(b"")
    with pytest.raises(SettingError, match="give index"):
        UnboundedCache.resolved(UnboundedSettings(index_load=saved), 64, 1000)
    (tmp_path / "valid.index.json").write_text(json.dumps({"factory": "IVF16,PQ8", "dim": 64}))
    assert UnboundedCache.resolved(UnboundedSettings(index_load=saved), 64, 1000)[0].index == "IVF16,PQ8"
