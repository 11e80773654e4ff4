"""GroC with a free per-word bias (`bias = "free"`, the authors' Table 2 setting) through every stage that
reads a run: train, eval (closed and open vocabulary), finetune to a new vocabulary, score, generate with a
vocabulary chosen then, and the Python API. New words get the mean bias of the words the model had."""

import json

import pytest
import torch
from safetensors.torch import load_file

from tests.conftest import REPO, run_groc

pytestmark = pytest.mark.slow

BOOKS = REPO / "groc_cli" / "data"


@pytest.fixture(scope="module")
def work(tmp_path_factory, tiny_run):
    """data, far: Persuasion and The Man Who Was Thursday, tokenized and lower-cased; lex.parquet: both
    vocabularies' lexicon; run: a free-bias GroC run on data (tiny_run's, linked here)."""
    root = tmp_path_factory.mktemp("free-bias")
    data = tiny_run.data(BOOKS / "austen-persuasion.txt", "4000,1000", "--tokenize", "--lower")
    far = tiny_run.data(BOOKS / "chesterton-thursday.txt", "3000,1000", "--tokenize", "--lower")
    lexicon = tiny_run.lexicon(data, far)
    for name, path in (("data", data), ("far", far), ("lex.parquet", lexicon),
                       ("run", tiny_run("groc", data=data, lexicon=lexicon, max_tokens=96, bias="free"))):
        (root / name).symlink_to(path)
    return root


def _out(result) -> str:
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


def test_the_run_records_and_trains_one_bias_per_word(work):
    config = json.loads((work / "run" / "config.json").read_text())
    assert config["model"]["bias"] == "free"
    weights = load_file(str(work / "run" / "best" / "model.safetensors"))
    vocab_size = json.loads((work / "data" / "manifest.json").read_text())["vocab_size"]
    assert weights["output_layer.free_bias"].shape == (vocab_size,)
    assert not any(name.startswith("output_layer.bias_w") for name in weights)
    # trained: no longer the U(±0.05) draw everywhere
    assert weights["output_layer.free_bias"].abs().max() > 0.05


def test_eval_scores_closed_and_open_vocabularies(work):
    closed = json.loads(_out(run_groc("eval", work / "run", work / "far", "--split", "valid")))
    union = json.loads(_out(run_groc("eval", work / "run", work / "far", "--split", "valid", "--vocab", "union",
                                     "--lexicon", work / "lex.parquet")))
    for record in (closed, union):
        assert 1 < record["perplexity"] < float("inf")
    assert union["vocab_size"] > closed["vocab_size"]


def test_finetuning_to_a_new_vocabulary_keeps_known_biases_and_gives_new_words_the_mean(work):
    run_groc("finetune", work / "run", work / "far", "-o", work / "tuned", "--max-tokens", "24", "--batch-size", "4", "--bptt", "12", "--seed", "3", check=True)
    source = load_file(str(work / "run" / "best" / "model.safetensors"))["output_layer.free_bias"]
    old, new = _vocab(work / "run"), _vocab(work / "tuned")
    assert new[: len(old)] == old and len(new) > len(old)
    # Compare the finetuned model before its first step: the union vocabulary with the source's weights.
    from groc_cli.run_storage import Run

    model, built_words, _ = Run(work / "run").build("best")
    model.set_vocab(new)
    bias = model.output_layer.free_bias.detach()
    assert torch.equal(bias[: len(old)], source)
    assert torch.allclose(bias[len(old):], source.mean().expand(len(new) - len(old)))


def _vocab(run) -> list[str]:
    import pyarrow.parquet as pq

    return pq.read_table(run / "vocab.parquet").column("word").to_pylist()


def test_score_generate_and_the_api_read_unseen_words(work):
    text = b"the professor spoke of anarchy and gloves\n"
    scored = json.loads(_out(run_groc("score", work / "run", "-", "--json", input=text)).splitlines()[0])
    assert scored["tokens"] == 8 and scored["ln_prob"] < 0
    words = work / "words.txt"
    words.write_text("the\nanarchy\nprofessor\ngloves\n<eos>\n")
    sample = _out(run_groc("generate", work / "run", "the", "--vocab", words, "--max-tokens", "6", "--seed", "1"))
    assert set(sample.split()) <= {"the", "anarchy", "professor", "gloves"}
    from groc_cli import load_run

    run = load_run(work / "run")
    api = run.score(["the professor spoke of anarchy and gloves"])[0]
    assert api.tokens == 8 and api.log_prob == pytest.approx(scored["ln_prob"], abs=1e-3)
    # An unseen word's bias is the mean of the model's.
    trained = run.model.output_layer.free_bias.detach()
    _, bias, _ = run.composer.rows(["zyzzyvas"])
    assert float(bias[0].detach()) == pytest.approx(float(trained.mean()), abs=1e-6)
