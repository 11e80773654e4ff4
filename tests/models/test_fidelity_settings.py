"""The settings that bring the authors' code's choices within reach (docs/reproduction.md,
fidelity table): each is off by default and leaves the default model exactly as it was."""

from __future__ import annotations

import torch

from groc_cli.training.loop import TrainConfig, Trainer
from tests.models.test_models import VOCAB, make


def train_steps(model, cfg: TrainConfig, steps: int = 5) -> list[torch.Tensor]:
    torch.manual_seed(5)
    cols = torch.randint(0, len(VOCAB), (steps * cfg.bptt + 1, cfg.batch_size))
    cfg.max_tokens = steps * cfg.bptt * cfg.batch_size
    trainer = Trainer(model, cols, None, cfg, run_dir=".", device=torch.device("cpu"))
    trainer.checkpoint = lambda *a, **k: None  # no files: the loop only
    trainer._write_metrics = lambda *a, **k: None
    trainer.train()
    return [p.detach().clone() for p in model.parameters()]


def test_layer_dropout_defaults_to_dropout():
    a = train_steps(make("tied", seed=1), TrainConfig(batch_size=3, bptt=4))
    b = train_steps(make("tied", seed=1, layer_dropout=0.1), TrainConfig(batch_size=3, bptt=4))
    c = train_steps(make("tied", seed=1, layer_dropout=0.5), TrainConfig(batch_size=3, bptt=4))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))


def test_activation_regularization_and_adam_settings_change_training_only_when_set():
    base = train_steps(make("tied", seed=1), TrainConfig(batch_size=3, bptt=4))
    same = train_steps(make("tied", seed=1), TrainConfig(batch_size=3, bptt=4, ar_alpha=0.0, tar_beta=0.0, adam_eps=1e-8))
    assert all(torch.equal(x, y) for x, y in zip(base, same))
    for changed in (dict(ar_alpha=2.0), dict(tar_beta=1.0), dict(weight_decay=0.1), dict(adam_eps=1e-3)):
        other = train_steps(make("tied", seed=1), TrainConfig(batch_size=3, bptt=4, **changed))
        assert not all(torch.equal(x, y) for x, y in zip(base, other)), changed


def test_char_init_normal_and_authors():
    layers = {init: make("groc", seed=2, char_init=init).output_layer for init in ("uniform", "normal", "authors")}
    emb = {init: layer.chars.embedding.weight.detach() for init, layer in layers.items()}
    assert emb["uniform"].abs().max() <= 0.05 and float(emb["normal"][1:].std()) > 0.5
    assert all(torch.all(e[0] == 0) for e in emb.values())  # padding
    # 'normal' changes the byte embedding only; 'authors' also the convolution, highway and projection.
    uniform, normal, authors = layers["uniform"], layers["normal"], layers["authors"]
    assert torch.equal(uniform.project.weight, normal.project.weight)
    assert torch.equal(uniform.chars.conv_weight, normal.chars.conv_weight)
    assert float(authors.chars.conv_weight.detach().abs().max()) <= 0.1 and not torch.equal(authors.chars.conv_weight, uniform.chars.conv_weight)
    assert float(authors.project.weight.detach().abs().max()) > 0.05 >= float(uniform.project.weight.detach().abs().max())
    assert torch.all(authors.project.bias == 0) and torch.all(authors.chars.conv_weight[authors.chars.conv_mask == 0] == 0)
    # Words are told apart from the start: the composed rows are far less alike than with 'uniform'.
    def spread(layer):
        layer.eval()
        w = layer.compose(grad=False).weight
        return float((w - w.mean(0)).norm(dim=1).mean())
    assert spread(authors) > 5 * spread(uniform)


def test_bias_activation_and_dropout():
    biases = {}
    for act in ("relu", "tanh"):
        model = make("groc", seed=3, bias_activation=act, out_activation="relu")
        model.eval()
        biases[act] = model.compose(grad=False).bias
    # Same weights, so the same pre-activations x: relu(x) is 0 where tanh(x) is negative, and x where it is not.
    negative = biases["tanh"] < 0
    assert negative.any() and (~negative).any() and biases["tanh"].abs().max() < 1
    assert torch.all(biases["relu"][negative] == 0)
    assert torch.allclose(biases["relu"][~negative], torch.atanh(biases["tanh"][~negative]), atol=1e-6)
    dropped = make("groc", seed=3, bias_dropout=0.5, bias_activation="tanh")
    dropped.train()
    torch.manual_seed(0)
    b1 = dropped.compose(grad=False).bias
    torch.manual_seed(1)
    b2 = dropped.compose(grad=False).bias
    assert not torch.equal(b1, b2)  # a fresh dropout mask on the estimator's input each step


def test_combine_add_is_one_projection_of_the_summed_forms():
    """combine='add' (the authors' default): e_x = W (c + r + d) + b with one f x d weight, so it
    equals combine='concat' whose three blocks are that same W."""
    add = make("groc", seed=4, combine="add").output_layer
    concat = make("groc", seed=4).output_layer
    f = add.chars.out_dim
    assert tuple(add.project.weight.shape) == (concat.project.weight.shape[0], f)
    with torch.no_grad():
        concat.load_state_dict({k: v for k, v in add.state_dict().items() if not k.startswith("project.")}, strict=False)
        concat.project.weight.copy_(add.project.weight.repeat(1, 3))
        concat.project.bias.copy_(add.project.bias)
    add.eval(), concat.eval()
    assert torch.allclose(add.compose_inputs(), concat.compose_inputs(), atol=1e-6)
    some = torch.tensor([1, 3, 5])
    assert torch.allclose(add.compose_inputs(some), add.compose_inputs()[some], atol=1e-6)


def test_char_activations():
    """char_activation/highway_activation: the authors' code uses selu for both; tanh/relu stay
    the default, so a default model is unchanged."""
    base = make("groc", seed=5).output_layer
    same = make("groc", seed=5, char_activation="tanh", highway_activation="relu").output_layer
    selu = make("groc", seed=5, char_activation="selu", highway_activation="selu").output_layer
    for layer in (base, same, selu):
        layer.eval()
    assert torch.equal(base.compose_inputs(), same.compose_inputs())
    pooled = torch.randn(4, base.chars.out_dim)
    h = base.chars.finish(pooled)
    assert not torch.equal(selu.chars.finish(pooled), h)
    selu.chars.highways = torch.nn.ModuleList()  # without the highway: selu of the pooled features
    assert torch.allclose(selu.chars.finish(pooled), torch.nn.functional.selu(pooled + selu.chars.conv_bias))
