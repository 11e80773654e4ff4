"""The state a line starts from when lines are scored one by one (``groc score``, ``load_run``).

A model trained on a stream of lines has read each line after the previous one's ``<eos>``; it
has seen the all-zero LSTM state only at the start of each batch column, a few times an epoch.
Scoring a line from zeros is therefore out of its training distribution (on the quickstart's
Persuasion lines it cost a third in perplexity). A checkpoint's start state is instead the mean
of the states the model is in right after reading ``<eos>`` over the first lines of held-out
text: what "the start of a line" looks like to it. Written beside the weights as
``start_state.safetensors`` at the end of ``groc train`` and ``groc finetune``.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from .artifacts.atomic import atomic_path, umask
from .errors import DamagedInput, first_line
from .run_storage import load_weights, retrain_advice, unwrapped
from .text.dataset import EOS

FILE = "start_state.safetensors"
MAX_LINES = 1000


def compute_start_state(model, ids: torch.Tensor, eos: int, max_lines: int = MAX_LINES):
    """Mean (h, c) per LSTM layer after each ``<eos>`` of the 1-D id stream ``ids`` (first
    ``max_lines`` lines, read as one stream from zeros), in eval mode; None without an ``<eos>``."""
    ends = (ids == eos).nonzero().flatten().tolist()[:max_lines]
    if not ends:
        return None
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    try:
        with torch.no_grad():
            composed = model.compose(grad=False)
            state = model.init_state(1)
            sums = [(torch.zeros_like(h), torch.zeros_like(c)) for h, c in state]
            start = 0
            for end in ends:  # each line's tokens and its <eos>, from the state the line before left
                _, state = model(ids[start : end + 1].view(-1, 1).to(device), state, composed)
                sums = [(sh + h, sc + c) for (sh, sc), (h, c) in zip(sums, state)]
                start = end + 1
    finally:
        model.train(was_training)
    return [(sh / len(ends), sc / len(ends)) for sh, sc in sums]


def save_start_state(state, directory: Path) -> None:
    tensors = {}
    for i, (h, c) in enumerate(state):
        tensors[f"h.{i}"] = h.detach().float().cpu().contiguous()
        tensors[f"c.{i}"] = c.detach().float().cpu().contiguous()
    with atomic_path(Path(directory) / FILE) as tmp:
        save_file(tensors, str(tmp))
        os.chmod(tmp, 0o666 & ~umask())


def load_start_state(directory: Path, model):
    """A checkpoint's start state for ``model`` (batch size 1), or None where the checkpoint has
    none (runs written before start states, datasets without ``<eos>``). A file that is there but
    unreadable, of another shape than the model's layers, or not finite is one DamagedInput: scoring
    from zeros instead would print a much worse perplexity without a word."""
    path = Path(directory) / FILE
    if not path.exists():
        return None
    fix = (f"{retrain_advice(Path(directory).parent)}, or delete {path} to score lines from the zero state "
           "(as runs written before start states)")
    try:
        stored = load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise DamagedInput(path, f"is not a readable start state, truncated or damaged ({first_line(exc)})", fix) from None
    zeros = model.init_state(1)
    state = []
    for i, (h0, c0) in enumerate(zeros):
        for name, value, like in ((f"h.{i}", stored.get(f"h.{i}"), h0), (f"c.{i}", stored.get(f"c.{i}"), c0)):
            if value is None or value.shape != like.shape:
                shape = "missing" if value is None else list(value.shape)
                raise DamagedInput(path, f"does not fit the model ({name}: {shape}, the model's is {list(like.shape)})", fix)
            if not bool(torch.isfinite(value).all()):
                raise DamagedInput(path, f"holds NaN or infinite values ({name})", fix)
        state.append((stored[f"h.{i}"].to(h0), stored[f"c.{i}"].to(c0)))
    if len(stored) != 2 * len(zeros):
        raise DamagedInput(path, f"holds {len(stored)} tensors, the model's {len(zeros)} layers need {2 * len(zeros)}", fix)
    return state


def write_start_states(model, ids: torch.Tensor, run_dir: Path) -> None:
    """Compute and save each checkpoint's start state (best, last) from held-out ``ids`` (none
    for a vocabulary without ``<eos>``); the model's own weights are restored afterwards."""
    model = unwrapped(model)
    words = list(model.vocab)
    if EOS not in words:
        return
    eos = words.index(EOS)
    kept = {k: v.detach().clone() for k, v in model.state_dict().items()}
    try:
        for which in ("best", "last"):
            directory = Path(run_dir) / which
            if (directory / "model.safetensors").exists():
                load_weights(model, directory)
                state = compute_start_state(model, ids, eos)
                if state is not None:
                    save_start_state(state, directory)
    finally:
        model.load_state_dict(kept)
