"""One evaluation stream through the language model, in time chunks.

Batch 1, in order, hidden state carried across chunks: the LSTM runs ``chunk`` positions
at once, then the softmax of those positions is taken in row blocks small enough that a
[rows, V] block stays under ``LOGIT_BYTES`` (200K-word vocabularies included). Results are
those of a token-by-token loop. The hidden state at split position t predicts the token
at t + 1, so the first token is context only (N - 1 predictions, as ``evaluate_loss``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch

from ..console import log
from ..errors import SettingError
from ..models import output_layer_class
from ..models.lexicon import unlisted_warning
from ..runtime import rebalance_threads
from .vocab import EvalVocab

#: Budget for one [rows, V] float32 block of log-probabilities (logits and
#: log-softmax each take one, so peak is about twice this).
LOGIT_BYTES = 128 * 2**20


@dataclass
class Chunk:
    """Consecutive predictions: targets at split positions start + 1 ... start + n."""

    start: int
    hidden: np.ndarray  # float32 [n, d]: the states that predict the targets
    targets: np.ndarray  # int64 [n], evaluation-vocabulary ids
    logp: np.ndarray  # float64 [n]: model log p(target); -inf for words the model cannot output
    new_mass: np.ndarray | None  # float64 [n]: model probability of all new words (GroC, union), else None
    state: Any = None  # the LSTM state after the chunk (``model_chunks``)

    def __len__(self) -> int:
        return len(self.targets)

    @classmethod
    def join(cls, chunks: list["Chunk"], hidden: bool = True) -> "Chunk":
        """Consecutive chunks as one, with the last one's state (``hidden`` False: without the
        hidden states). ``load_run`` hands a line to its cache in one piece."""
        mass = None if chunks[0].new_mass is None else np.concatenate([c.new_mass for c in chunks])
        return cls(chunks[0].start, np.concatenate([c.hidden for c in chunks]) if hidden else None,
                   np.concatenate([c.targets for c in chunks]), np.concatenate([c.logp for c in chunks]), mass,
                   chunks[-1].state)


def rows_per_block(vocab_size: int, budget: int = LOGIT_BYTES) -> int:
    return max(1, budget // (4 * max(vocab_size, 1)))


def model_chunks(model, vocab: EvalVocab, device: torch.device, chunk: int, start: int = 0, composed=None,
                 state=None) -> Iterator[Chunk]:
    """Stream the split through ``model`` (already in eval mode, vocabulary set), ``chunk``
    positions at a time (the caller's setting: ``EvalSettings.chunk``), from ``state`` (None:
    zeros) with ``composed``, the output view (None: the model's own; ``load_run`` adds the rows
    of a line's new words to the model's)."""
    n_total = len(vocab.targets) - 1
    inputs = torch.from_numpy(vocab.inputs)
    with torch.no_grad():
        if composed is None:
            composed = model.compose(grad=False)
        if state is None:
            state = model.init_state(1)
        out_size = composed.size
        # GroC in union mode outputs the union; its new words are ids >= model_size.
        new_from = vocab.model_size if out_size > vocab.model_size else None
        rows = rows_per_block(out_size)
        for i in range(start, n_total, chunk):
            rebalance_threads()
            n = min(chunk, n_total - i)
            x = inputs[i : i + n].view(n, 1).to(device)
            hidden, state = model(x, state, composed)
            h = hidden[:, 0].float()
            y = vocab.targets[i + 1 : i + 1 + n]
            y_model = torch.from_numpy(np.minimum(y, out_size - 1)).to(device)
            logp = np.empty(n, dtype=np.float64)
            mass = np.empty(n, dtype=np.float64) if new_from is not None else None
            for s in range(0, n, rows):
                e = min(s + rows, n)
                lp = composed.log_probs(h[s:e])
                logp[s:e] = lp.gather(1, y_model[s:e, None])[:, 0].double().cpu().numpy()
                if mass is not None:
                    mass[s:e] = torch.logsumexp(lp[:, new_from:].double(), dim=1).exp().cpu().numpy()
            logp[y >= out_size] = -np.inf  # table models give words without a row no mass
            yield Chunk(i, h.cpu().numpy(), y, logp, mass, state)


def load_lexicon(path, kind: str):
    """The lexicon table at ``path`` for a run whose output layer ``needs_lexicon`` (GroC;
    None when no path is given); one-line errors for another output layer or a missing file."""
    if path is None:
        return None
    if not output_layer_class(kind).needs_lexicon:
        raise SettingError(f"`lexicon` applies to GroC models only (this run's output layer is {kind})")
    if not Path(path).is_file():
        raise SettingError(f"`lexicon` {path}: no such file; build one with 'groc lexicon'")
    from ..run_storage import read_lexicon

    return read_lexicon(Path(path), "build one with 'groc lexicon --vocab DATASET -o FILE'")


def load_model(run, checkpoint: str, device: torch.device, vocab: EvalVocab, lexicon=None):
    """The run's model in eval mode on ``device``; a layer that ``composes_unseen_words``
    (GroC) composes the union in union mode. ``lexicon`` (GroC) replaces the run's own
    lexicon table (other coverage, new words); the evaluated words that the table has no row
    for are counted in one warning."""
    model, _, _ = run.build(checkpoint, lexicon=lexicon, device=device)
    model.eval()
    if vocab.mode == "union" and model.output_layer.composes_unseen_words:
        model.set_vocab(vocab.words)
    warning = unlisted_warning(model.output_layer, vocab.words, "the evaluation vocabulary", run.path)
    if warning:
        log(warning)
    return model
