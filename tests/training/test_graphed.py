"""The training step restructured for CUDA graphs (groc_cli/training/graphed.py): static buffers for the inputs
and the carried state, per-step values summed on the device and read in batches. On CPU it runs without
capture and must train exactly as the eager step does: the same per-step losses, gradient norms and
weights, across an epoch's last, shorter window, an epoch boundary and a validation. On CUDA (marked gpu)
the captured graph is compared with the eager step the same way."""

import math

import pytest
import torch

from groc_cli.models import ModelConfig, build_model
from groc_cli.training.loop import Trainer, TrainConfig

VOCAB = [f"w{i}" for i in range(40)] + ["<unk>", "<eos>"]


def columns(n: int, batch: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, len(VOCAB), (n, batch), generator=g)


def trained(kind: str, static: bool | None, tmp_path, device="cpu", **model_settings):
    torch.manual_seed(0)
    config = ModelConfig(output=kind, emb=12, hidden=16, dropout=0.2, emb_dropout=0.1, **model_settings)
    model = build_model(config, VOCAB).to(device)
    cfg = TrainConfig(batch_size=4, bptt=7, max_epochs=2, eval_batch_size=3, seed=1)
    # 47 rows: 46 targets per epoch, six windows of 7 and a last one of 4.
    trainer = Trainer(model, columns(47, 4, 1), columns(30, 3, 2), cfg, tmp_path / ("s" if static else "e"),
                      torch.device(device), static=static)
    torch.manual_seed(5)  # dropout draws
    result = trainer.train()
    return trainer, model, result


@pytest.mark.parametrize("kind,settings", [("tied", {}), ("groc", {"bias": "free"}), ("adaptive", {"cutoffs": [10, 25]})])
def test_the_static_step_trains_exactly_as_the_eager_step(tmp_path, kind, settings):
    eager, eager_model, eager_result = trained(kind, None, tmp_path, **settings)
    static, static_model, static_result = trained(kind, True, tmp_path, **settings)
    assert static.static is not None and eager.static is None
    assert len(eager.steps) == len(static.steps) == 14  # two epochs of seven windows
    for a, b in zip(eager.steps, static.steps):
        assert a[:4] == b[:4] and a[4] == b[4] and a[6] == b[6], (a, b)  # step, epoch, tokens, loss, objective, norm
    assert [m["valid_loss"] for m in eager.metrics] == [m["valid_loss"] for m in static.metrics]
    assert [m["train_loss"] for m in eager.metrics] == [m["train_loss"] for m in static.metrics]
    for (name, p), q in zip(eager_model.named_parameters(), static_model.parameters()):
        assert torch.equal(p, q), name
    assert eager_result["best_valid_ppl"] == static_result["best_valid_ppl"]


def test_the_static_step_keeps_the_carried_state_in_a_mid_epoch_checkpoint(tmp_path, monkeypatch):
    saved = {}
    for static in (None, True):
        torch.manual_seed(0)
        model = build_model(ModelConfig(output="tied", emb=12, hidden=16, dropout=0.0), VOCAB)
        cfg = TrainConfig(batch_size=4, bptt=7, max_epochs=1, checkpoint_every=3, seed=1)
        trainer = Trainer(model, columns(47, 4, 1), None, cfg, tmp_path / str(static), torch.device("cpu"), static=static)
        def checkpoint(best=False, t=trainer, key=static):  # what the real one records, before it writes
            t._read_steps()
            saved.setdefault(key, (t.pos.batch, t._trainer_state(), list(t.steps)))

        monkeypatch.setattr(trainer, "checkpoint", checkpoint)
        trainer.train()
    (batch, eager, eager_steps), (batch_static, state, steps) = saved[None], saved[True]
    assert batch == batch_static == 21 and len(state["hidden"]) == len(eager["hidden"]) == 4
    for a, b in zip(eager["hidden"], state["hidden"]):
        assert torch.equal(a, b) and float(a.detach().abs().sum()) > 0  # the buffers' state, not zeros
    assert len(steps) == len(eager_steps) == 3  # every step up to the checkpoint was read from the ring


def test_sparse_updates_are_not_a_static_step(tmp_path):
    model = build_model(ModelConfig(output="groc", emb=12, hidden=16, update_prob=0.5), VOCAB)
    with pytest.raises(ValueError, match="update_prob < 1 trains eagerly"):
        Trainer(model, columns(47, 4, 1), None, TrainConfig(batch_size=4, bptt=7), tmp_path, torch.device("cpu"),
                static=True)


def test_graph_optimizer_saves_a_float_learning_rate_and_decays_in_place(tmp_path):
    from groc_cli.training.graphed import make_graph_optimizer, tensor_lr

    model = build_model(ModelConfig(output="tied", emb=12, hidden=16), VOCAB)
    cfg = TrainConfig(batch_size=4, bptt=7)
    trainer = Trainer(model, columns(47, 4, 1), None, cfg, tmp_path, torch.device("cpu"))
    trainer.optimizer = torch.optim.SGD(model.parameters(), lr=torch.tensor(0.5))
    lr = trainer.optimizer.param_groups[0]["lr"]
    trainer._set_lr(0.05)
    assert trainer.optimizer.param_groups[0]["lr"] is lr and math.isclose(trainer.lr, 0.05, rel_tol=1e-6)
    saved = trainer._optimizer_state()
    assert isinstance(saved["param_groups"][0]["lr"], float)
    fresh = torch.optim.SGD(model.parameters(), lr=torch.tensor(1.0))
    fresh.load_state_dict(saved)
    tensor_lr(fresh, torch.device("cpu"))
    assert isinstance(fresh.param_groups[0]["lr"], torch.Tensor)
    assert make_graph_optimizer  # the CUDA form is checked by the gpu test below


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("kind,settings", [("tied", {}), ("groc", {}), ("groc", {"bias": "free", "char_projection": True})])
def test_the_captured_graph_trains_as_the_eager_step_on_cuda(tmp_path, kind, settings):
    torch.backends.cudnn.deterministic = True
    eager, eager_model, _ = trained(kind, False, tmp_path, device="cuda", **settings)
    graph, graph_model, _ = trained(kind, None, tmp_path, device="cuda", **settings)
    assert graph.static is not None and graph.static.graph is not None
    for a, b in zip(eager.steps, graph.steps):
        assert a[:3] == b[:3] and math.isclose(a[3], b[3], rel_tol=1e-4), (a, b)
    for p, q in zip(eager_model.parameters(), graph_model.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-3, atol=1e-4)
