"""Zaremba et al.'s (2014) training recipe, which Press & Wolf's small models use: plain SGD, a
learning rate that follows the epoch count, and their code's loss and penalty scales converted to
groc's per-token mean loss (docs/reproduction.md, "Press & Wolf's small models")."""

from __future__ import annotations

import copy
import json

import pyarrow.parquet as pq
import pytest
import torch

from groc_cli.training.loop import TrainConfig, Trainer
from tests.conftest import TINY, run_groc
from tests.models.test_models import VOCAB, make

# conftest's tiny model, without dropout and initialised as Zaremba et al.'s is
MODEL = [*TINY, "--dropout", "0", "--init-range", "0.1"]
ZAREMBA = ["--optimizer", "sgd", "--schedule", "epochs", "--lr", "20", "--lr-decay", "0.5", "--lr-decay-after", "4",
           "--clip", "0.25"]


@pytest.fixture(scope="module")
def ptb_slice(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("zaremba")
    run_groc("prepare", "--train", data_dir / "ptb" / "ptb.valid.txt", "--split", "1500,400", "-o", root / "ptb",
             check=True)
    return root / "ptb"


@pytest.mark.slow
def test_the_small_models_schedule_epoch_by_epoch_and_across_a_resume(ptb_slice, tmp_path):
    """Zaremba et al.'s code (and the TensorFlow tutorial) run epochs 1-5 at the full rate and halve it
    after every later epoch: lr · 0.5^max(0, epoch - 1 - 4)."""
    run = tmp_path / "run"
    first = run_groc("train", ptb_slice, "-o", run, "--output-layer", "lookup", *MODEL, *ZAREMBA, "--max-epochs", "3",
                     "--json")
    assert first.returncode == 0, first.stderr.decode()
    run_groc("train", ptb_slice, "-o", run, "--resume", "--max-epochs", "8", check=True)
    rates = [m["lr"] for m in pq.read_table(run / "metrics.parquet").to_pylist()]
    assert rates == [20.0] * 5 + [10.0, 5.0, 2.5]
    config = json.loads((run / "config.json").read_text())["train"]
    assert (config["optimizer"], config["schedule"], config["lr_decay_after"]) == ("sgd", "epochs", 4)
    steps = pq.read_table(run / "steps.parquet").to_pylist()
    assert {s["lr"] for s in steps if s["epoch"] == 6} == {10.0}


@pytest.mark.slow
def test_settings_of_another_optimizer_or_schedule_are_refused(ptb_slice, tmp_path):
    for extra, message in ((["--optimizer", "sgd", "--adam-eps", "1e-6"], "--adam-eps is a setting of optimizer adam"),
                           (["--lr-decay-after", "6"], "--lr-decay-after is a setting of schedule epochs"),
                           (["--schedule", "epochs", "--lr-patience", "2"], "--lr-patience is a setting of schedule plateau")):
        result = run_groc("train", ptb_slice, "-o", tmp_path / "run", *MODEL, *extra)
        assert result.returncode == 2 and message in result.stderr.decode()
        assert not (tmp_path / "run").exists()


def _tensorflow_step(model, x, y, state, lr: float, clip: float, batch: int):
    """One step as Press & Wolf's ptb_word_lm*.py take it: cost = Σ NLL / batch (summed over the BPTT
    steps), + tf.nn.l2_loss(P) / (batch · 6.5) with PR, gradients clipped to a global norm and a plain
    gradient-descent update."""
    composed = model.compose()
    hidden, state = model(x, state, composed)
    nll = composed.nll(hidden.reshape(-1, hidden.size(-1)), y.reshape(-1))
    cost = nll.sum() / batch
    projection = getattr(model.output_layer, "projection", None)
    if projection is not None:
        cost = cost + projection.pow(2).sum() / 2 / (batch * 6.5)
    model.zero_grad()
    cost.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    return model.detach_state(state)


@pytest.mark.parametrize("kind,pr,init", [("lookup", False, "identity"), ("tied", True, "identity"),
                                          ("lookup", True, "identity"), ("tied", True, "authors")])
def test_lr_clip_and_projection_penalty_match_the_reference_codes_scale(kind, pr, init):
    """groc's per-token mean loss with lr·T, clip/T and projection_reg 1/(13·B·T) takes the same steps as
    the reference code's summed cost with lr, clip and l2_loss(P)/(6.5·B) (T: BPTT steps, B: batch)."""
    B, T, steps = 3, 5, 3
    lam = 1 / (13 * B * T) if pr else 0.0
    model = make(kind, seed=4, dropout=0.0, out_dropout=0.0, projection_reg=lam, projection_init=init)
    if init == "authors":  # their proj and proj_b: random like every weight, and a bias after it
        assert not torch.equal(model.output_layer.projection, torch.eye(16))
        assert model.output_layer.projection_bias.abs().max() <= 0.05
    elif pr:  # a projection away from the identity, so that the penalty's gradient matters
        with torch.no_grad():
            model.output_layer.projection.mul_(3.0)
    reference = copy.deepcopy(model)
    torch.manual_seed(5)
    cols = torch.randint(0, len(VOCAB), (steps * T + 1, B))
    cfg = TrainConfig(optimizer="sgd", lr=1.0 * T, clip=5.0 / T, batch_size=B, bptt=T, max_tokens=steps * T * B)
    trainer = Trainer(model, cols, None, cfg, run_dir=".", device=torch.device("cpu"))
    trainer._write_metrics = lambda *a, **k: None
    trainer.checkpoint = lambda *a, **k: None
    trainer.train()
    state = reference.init_state(B)
    for i in range(steps):
        x, y = cols[i * T : (i + 1) * T], cols[i * T + 1 : (i + 1) * T + 1]
        state = _tensorflow_step(reference, x, y, state, lr=1.0, clip=5.0, batch=B)
    for (name, a), b in zip(model.named_parameters(), reference.parameters()):
        assert torch.allclose(a, b, atol=1e-5), name
    if pr:  # the penalty moved P: without it the weights differ
        assert model.regularization() > 0


def test_projection_init_needs_the_projection():
    from groc_cli.models import ModelConfig

    with pytest.raises(ValueError, match="projection_init applies to the projection of projection_reg > 0"):
        ModelConfig(output="tied", projection_init="authors")
    assert ModelConfig(output="lookup", projection_reg=0.1, projection_init="authors").projection_init == "authors"
