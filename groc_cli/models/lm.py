"""The language model: lookup/compositional input embeddings, an LSTM prefix encoder
(AWD-LSTM layout, Merity et al., 2018) and one of seven output layers (paper Table 2).

Training-step protocol (one loop serves every kind)::

    composed = model.compose(grad=model.sample_update(generator))  # once per step
    hidden, state = model(ids, state, composed)                    # [T, B, emb]
    loss = composed.nll(hidden, targets).mean() + model.regularization()

Evaluation: ``model.eval()`` and ``torch.no_grad()``; ``model.compose(grad=False)`` is
computed once (in chunks of ``compose_chunk`` strings, so 200K-word vocabularies fit
in memory) and cached until a parameter or the vocabulary changes.
"""

from __future__ import annotations

import torch
from torch import nn

from .common import Composed, LockedDropout, OutputLayer, uniform_
from .config import ModelConfig
from .lexicon import Lexicon
from .registry import output_layer_class
from ..cpu import bf16_lstm
from ..errors import SettingError, out_of_memory

State = list[tuple[torch.Tensor, torch.Tensor]]


class LanguageModel(nn.Module):
    def __init__(self, config: ModelConfig, output_layer: OutputLayer, generator: torch.Generator | None = None):
        super().__init__()
        self.config = config
        self.output_layer = output_layer
        sizes = [config.emb] + [config.hidden] * (config.layers - 1) + [config.emb]
        # The last layer has `emb` units so its output meets the output embeddings
        # directly (Merity et al., 2018); tied/lookup then give ~10M/13M on penn (Table 2).
        self.rnns = nn.ModuleList(nn.LSTM(sizes[i], sizes[i + 1]) for i in range(config.layers))
        for p in self.rnns.parameters():
            uniform_(p, config.init_range, generator)
        self.input_dropout = LockedDropout(config.emb_dropout)
        self.hidden_dropout = LockedDropout(config.dropout)
        between = config.dropout if config.layer_dropout is None else config.layer_dropout
        self.layer_dropout = LockedDropout(between)
        self.last_raw: torch.Tensor | None = None  # the last layer's output before dropout (for TAR)
        self._vocab_version = 0
        self._eval_cache: tuple[tuple, Composed] | None = None

    # -- vocabulary ---------------------------------------------------------------
    @property
    def vocab(self) -> list[str]:
        return self.output_layer.vocab

    def set_vocab(self, words: list[str], counts=None, generator: torch.Generator | None = None) -> None:
        """Change the vocabulary. GroC recomposes (|Θ| unchanged); table kinds keep the
        rows of shared words and draw fresh rows for new ones. Rebuild optimizers after."""
        words = list(words)
        _check_vocab(words)
        self.output_layer.set_vocab(words, counts, generator)
        self._vocab_version += 1
        self._eval_cache = None

    # -- state ----------------------------------------------------------------------
    def init_state(self, batch_size: int) -> State:
        weight = next(self.rnns.parameters())
        return [
            (weight.new_zeros(1, batch_size, rnn.hidden_size), weight.new_zeros(1, batch_size, rnn.hidden_size))
            for rnn in self.rnns
        ]

    @staticmethod
    def detach_state(state: State) -> State:
        return [(h.detach(), c.detach()) for h, c in state]

    # -- composition ------------------------------------------------------------------
    def sample_update(self, generator: torch.Generator | None = None) -> bool:
        """Whether this training step composes with autograd (paper B.4): always for
        layers without ``sparse_updates``; with probability ``update_prob`` (a setting every
        such layer's config has) for those with it (GroC)."""
        if not self.output_layer.sparse_updates or self.config.update_prob >= 1.0:
            return True
        p = self.config.update_prob
        return bool(torch.rand((), generator=generator) < p)

    def compose(self, grad: bool = True) -> Composed:
        """Vocabulary-wide output view for one step (training) or for a whole evaluation.
        Without autograd in eval mode the result is cached until parameters change."""
        cacheable = not grad and not self.training
        if cacheable:
            key = (
                self._vocab_version,
                tuple((p.data_ptr(), p._version) for p in self.parameters()),
                torch.is_autocast_enabled(),
            )
            if self._eval_cache is not None and self._eval_cache[0] == key:
                return self._eval_cache[1]
        composed = self.output_layer.compose(grad=grad)
        if cacheable:
            self._eval_cache = (key, composed)
        else:
            self._eval_cache = None
        return composed

    # -- forward ------------------------------------------------------------------------
    def forward(self, ids: torch.Tensor, state: State | None = None, composed: Composed | None = None):
        """ids [T, B] -> (LSTM output after dropout [T, B, emb], new state)."""
        if composed is None:
            composed = self.compose(grad=torch.is_grad_enabled())
        if state is None:
            state = self.init_state(ids.size(1))
        x = self.input_dropout(self.output_layer.embed(ids, composed))
        new_state = []
        last = len(self.rnns) - 1
        float32_rnn = x.device.type == "cpu" and torch.is_autocast_enabled("cpu") and not bf16_lstm()
        for i, rnn in enumerate(self.rnns):
            if float32_rnn:  # autocast on a CPU whose oneDNN has no bfloat16 LSTM: the LSTM alone in float32
                with torch.autocast("cpu", enabled=False):
                    x, s = rnn(x.float(), state[i])
            else:
                x, s = rnn(x, state[i])
            new_state.append(s)
            if i == last:
                self.last_raw = x if self.training else None
            x = (self.hidden_dropout if i == last else self.layer_dropout)(x)
        return x, new_state

    def regularization(self) -> torch.Tensor:
        return self.output_layer.regularization()

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _check_vocab(vocab: list[str]) -> None:
    if not vocab:
        raise ValueError("vocabulary is empty")
    if len(set(vocab)) != len(vocab):
        raise ValueError("vocabulary contains duplicate words")
    if not all(isinstance(w, str) and w for w in vocab):
        raise ValueError("vocabulary entries must be non-empty strings")


def build_model(
    config: ModelConfig,
    vocab: list[str],
    lexicon: Lexicon | None = None,
    counts: list[int] | None = None,
    generator: torch.Generator | None = None,
) -> LanguageModel:
    """A LanguageModel for ``vocab`` (ids sorted by descending training frequency) with
    the output layer registered for ``config.output`` (``registry``). ``lexicon`` is
    used by layers that declare ``needs_lexicon`` (GroC) only; ``counts`` is accepted for
    interface symmetry (adaptive bins come from the id order). The output layer's
    parameters are drawn before the LSTM's."""
    config.validate()
    vocab = list(vocab)
    _check_vocab(vocab)
    if counts is not None and len(counts) != len(vocab):
        raise ValueError(f"counts has {len(counts)} entries for a vocabulary of {len(vocab)}")
    try:
        layer: OutputLayer = output_layer_class(config.output).from_config(config, vocab, lexicon, generator)
        return LanguageModel(config, layer, generator)
    except (MemoryError, RuntimeError) as exc:
        if not out_of_memory(exc):
            raise
        # Named by its sizes, which a config file can make absurd (emb = 1e17), not by torch's allocator.
        raise SettingError(f"emb {config.emb} with hidden {config.hidden} and {config.layers} layers over {len(vocab):,} "
                           "words needs more memory than this process may allocate; choose smaller sizes") from None
