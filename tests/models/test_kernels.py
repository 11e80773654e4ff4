"""The output layer's matrix products on CPU (groc_cli/models/kernels.py): oneDNN's computes what
torch's does, to float rounding, for every shape and stride the composition and softmax give it; torch's is
torch's own, bit for bit; the choice is the environment's, checked, and recorded."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from groc_cli.cpu import CpuInfo
from groc_cli.environment import describe, environment
from groc_cli.errors import GrocError
from groc_cli.models import kernels
from groc_cli.models.kernels import cpu_matmul, linear
from tests.conftest import REPO, run_groc
from tests.models.test_models import VOCAB, make

needs_onednn = pytest.mark.skipif(kernels._onednn_op() is None, reason="this torch has no oneDNN linear")


def _with_grads(fn, *tensors):
    leaves = [t.detach().clone().requires_grad_() for t in tensors]
    out = fn(*leaves)
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(5))
    (out * weights).sum().backward()
    return out.detach(), [t.grad for t in leaves]


# (rows, inputs, outputs, weight's column block or None, bias, add_to): the highway (bias), the
# projection's word block (a column block of a wider weight, bias) and its relation block (added),
# one row, and empty operands (no positions to score; which oneDNN refuses, so torch computes them).
CASES = [(300, 32, 64, None, True, False), (250, 24, 16, (24, 48), True, False), (250, 24, 16, (48, 72), False, True),
         (1, 8, 4, None, False, False), (0, 8, 4, None, True, False), (5, 0, 4, None, True, False)]


@needs_onednn
@pytest.mark.parametrize("rows,inputs,outputs,block,bias,add", CASES)
def test_onednn_products_and_gradients_equal_torchs(rows, inputs, outputs, block, bias, add):
    g = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, inputs, generator=g)
    wide = torch.randn(outputs, 96 if block else inputs, generator=g)
    b = torch.randn(outputs, generator=g) if bias else None
    y0 = torch.randn(rows, outputs, generator=g) if add else None

    def product(x, wide, *rest):
        weight = wide[:, block[0] : block[1]] if block else wide
        return linear(x, weight, rest[0] if bias else None, add_to=rest[-1] if add else None)

    tensors = [x, wide] + ([b] if bias else []) + ([y0] if add else [])
    with cpu_matmul("torch"):
        expected, expected_grads = _with_grads(product, *tensors)
    with cpu_matmul("onednn"):
        got, grads = _with_grads(product, *tensors)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    for name, a, e in zip(("x", "weight", "bias or add_to", "add_to"), grads, expected_grads):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-4, msg=name)


def test_torchs_choice_is_torchs_own_product_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    x, w, b, y = (torch.randn(*s, generator=g) for s in ((70, 12), (9, 12), (9,), (70, 9)))
    with cpu_matmul("torch"):
        assert torch.equal(linear(x, w, b), F.linear(x, w, b))
        assert torch.equal(linear(x, w, add_to=y), torch.addmm(y, x, w.t()))
        with pytest.raises(ValueError, match="either bias or add_to"):
            linear(x, w, b, add_to=y)
    with cpu_matmul("onednn" if kernels._onednn_op() else "torch"):  # float64 always takes torch's
        assert torch.equal(linear(x.double(), w.double()), F.linear(x.double(), w.double()))


@needs_onednn
@pytest.mark.parametrize("kind", ["groc", "convolutional", "tied"])
def test_a_models_loss_and_gradients_are_the_same_with_either_library(kind, monkeypatch):
    calls = []
    apply = kernels._OneDnnLinear.apply
    monkeypatch.setattr(kernels._OneDnnLinear, "apply", lambda *a: calls.append(a[0].shape) or apply(*a))

    def composed_with(choice):
        model = make(kind, vocab=VOCAB + ["mississippi", "unseen"], seed=3)
        with cpu_matmul(choice):
            composed = model.compose()
            ids = torch.arange(len(model.vocab)).view(-1, 2)
            hidden, _ = model(ids, model.init_state(2), composed)
            loss = composed.nll(hidden.reshape(-1, hidden.size(-1)), ids.reshape(-1)).mean()
            loss.backward()
        return loss.detach(), {n: p.grad for n, p in model.named_parameters() if p.grad is not None}

    loss, grads = composed_with("onednn")
    # the softmax's logits, the highway of a composing kind and GroC's three projection blocks took oneDNN
    assert len(calls) == {"tied": 1, "convolutional": 2, "groc": 5}[kind], calls
    expected_loss, expected = composed_with("torch")
    torch.testing.assert_close(loss, expected_loss)
    assert set(grads) == set(expected) and (kind == "tied" or any("highways" in n for n in grads))
    for name, grad in expected.items():
        torch.testing.assert_close(grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_auto_takes_onednn_on_amd_cpus_with_avx512_kernels_only(monkeypatch):
    for vendor, capability, expected in (("AuthenticAMD", "AVX512", "onednn"), ("AuthenticAMD", "AVX2", "torch"),
                                         ("GenuineIntel", "AVX512", "torch"), ("", "DEFAULT", "torch")):
        monkeypatch.setattr(kernels, "cpuinfo", lambda vendor=vendor: CpuInfo("a CPU", vendor, frozenset()))
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda capability=capability: capability)
        kernels._auto.cache_clear()
        try:
            want = expected if kernels._onednn_op() is not None else "torch"
            assert kernels.choice() == want, (vendor, capability)
        finally:
            kernels._auto.cache_clear()


def test_the_choice_comes_from_the_environment_and_is_recorded(monkeypatch):
    monkeypatch.setenv(kernels.ENV, "torch")
    record = environment()
    assert record["cpu_matmul"] == "torch" and "oneDNN" not in describe(record)
    assert environment("cuda")["cpu_matmul"] is None  # a GPU run's products are not the CPU's
    if kernels._onednn_op() is not None:
        monkeypatch.setenv(kernels.ENV, "oneDNN")
        assert environment()["cpu_matmul"] == "onednn" and ", oneDNN matmul," in describe(environment())
    monkeypatch.setenv(kernels.ENV, "mkl")
    with pytest.raises(GrocError, match="GROC_CPU_MATMUL must be one of auto, onednn, torch, got 'mkl'"):
        kernels.choice()


@pytest.mark.slow
def test_a_bad_choice_stops_training_with_one_line_and_no_run(tmp_path):
    books = REPO / "groc_cli" / "data"
    run_groc("prepare", "--train", books / "austen-persuasion.txt", "--split", "3000,500,500", "-o", tmp_path / "data",
             check=True)
    result = run_groc("train", tmp_path / "data", "-o", tmp_path / "run", "--max-tokens", "48", "--emb", "8",
                      "--hidden", "8", env={kernels.ENV: "fast"})
    assert result.returncode == 2
    assert result.stderr.decode().strip().splitlines()[-1] == (
        "groc: error: GROC_CPU_MATMUL must be one of auto, onednn, torch, got 'fast'")
    assert not (tmp_path / "run").exists()
