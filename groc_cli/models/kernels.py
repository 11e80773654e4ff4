"""The output layer's matrix products on CPU: torch's (MKL) or oneDNN's (issue 28, part 3).

Every output layer but adaptive ends in a softmax whose logits are one product with the output
embeddings, and GroC and the convolutional layer compose those embeddings, in every training step,
with a highway layer over every distinct string of the vocabulary and its lexicon and a projection
over every word: on PTB at 2 x 200 these products are most of a step. torch's CPU wheels run them
in MKL, which on AMD CPUs takes its AVX2 code path even where the CPU has AVX-512; oneDNN, which
torch also ships, dispatches by instruction set alone. On a 2-core AMD EPYC of the Zen 5
generation (AVX-512) oneDNN ran these shapes 1.5-2.2 times faster than MKL (docs/benchmarks.md).
The products are the same to float rounding (the sums run in another order), so a model's
numbers differ in their last digits between the two, as they do between CPUs with and without
AVX-512.

``linear(x, weight, bias)`` is ``F.linear`` with that choice. ``GROC_CPU_MATMUL`` selects it:
``auto`` (the default: oneDNN on AMD CPUs where torch runs its AVX-512 kernels, torch's elsewhere
and on GPUs), ``onednn`` or ``torch``; ``choice()`` says which a CPU product uses here, and the
environment record holds it (``cpu_matmul``). The LSTM's products stay torch's.
"""

from __future__ import annotations

import contextlib
import functools
import os

import torch
import torch.nn.functional as F

from ..cpu import cpuinfo, torch_capability
from ..errors import GrocError

ENV = "GROC_CPU_MATMUL"
CHOICES = ("auto", "onednn", "torch")
_override: list[str] = []


@functools.lru_cache(maxsize=1)
def _onednn_op():
    """torch's oneDNN linear for dense tensors (``x W^T + b``), or None where this torch lacks it."""
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        return torch.ops.mkldnn._linear_pointwise
    except (AttributeError, RuntimeError):
        return None


@functools.lru_cache(maxsize=1)
def _auto() -> str:
    amd_avx512 = cpuinfo().vendor == "AuthenticAMD" and (torch_capability() or "").startswith("AVX512")
    return "onednn" if amd_avx512 and _onednn_op() is not None else "torch"


def choice() -> str:
    """'onednn' or 'torch': what a float32 product on CPU runs here (``GROC_CPU_MATMUL``, else auto)."""
    wanted = _override[-1] if _override else os.environ.get(ENV, "auto").strip().lower() or "auto"
    if wanted not in CHOICES:
        raise GrocError(f"{ENV} must be one of {', '.join(CHOICES)}, got {wanted!r}")
    if wanted == "auto":
        return _auto()
    if wanted == "onednn" and _onednn_op() is None:
        raise GrocError(f"{ENV}=onednn but this torch has no oneDNN linear (torch.ops.mkldnn._linear_pointwise)")
    return wanted


@contextlib.contextmanager
def cpu_matmul(wanted: str):
    """Within the block, ``choice()`` resolves ``wanted`` (one of CHOICES) instead of the environment."""
    if wanted not in CHOICES:
        raise ValueError(f"cpu_matmul must be one of {', '.join(CHOICES)}, got {wanted!r}")
    _override.append(wanted)
    try:
        yield
    finally:
        _override.pop()


def _plain(t: torch.Tensor) -> torch.Tensor:
    # oneDNN reads row-major and transposed operands in place, but takes a path ~500 times slower
    # for other strides (a column block of the projection's weight): copy those, they are small.
    return t if t.is_contiguous() or t.t().is_contiguous() else t.contiguous()


class _OneDnnLinear(torch.autograd.Function):
    """``x W^T + b`` and its gradients, every product in oneDNN: dx = dy W, dW = (x^T dy)^T."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        x, weight = _plain(x), _plain(weight)
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _onednn_op()(x, weight, bias, "none", [], "")

    @staticmethod
    def backward(ctx, dy: torch.Tensor):
        x, weight = ctx.saved_tensors
        dy = _plain(dy)
        op = _onednn_op()
        dx = op(dy, weight.t(), None, "none", [], "") if ctx.needs_input_grad[0] else None
        # x^T dy runs faster than dy^T x here (both operands transposed views); W's gradient is small.
        dw = op(x.t(), dy.t(), None, "none", [], "").t().contiguous() if ctx.needs_input_grad[1] else None
        db = dy.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return dx, dw, db


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, *,
           add_to: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` for a 2-D ``x`` (plus ``add_to``, as ``torch.addmm(add_to, x, weight.t())``
    without a bias), in oneDNN where ``choice()`` says so (float32 on CPU, outside autocast, no empty operand:
    oneDNN refuses those), else exactly as torch computes it."""
    if x.device.type == "cpu" and x.dtype == torch.float32 and x.dim() == 2 and weight.dtype == torch.float32 \
            and x.numel() and weight.numel() and not torch.is_autocast_enabled("cpu") and choice() == "onednn":
        y = _OneDnnLinear.apply(x, weight, bias)
        return y if add_to is None else add_to + y
    if add_to is None:
        return F.linear(x, weight, bias)
    if bias is not None:
        raise ValueError("linear: give either bias or add_to")
    return torch.addmm(add_to, x, weight.t())
