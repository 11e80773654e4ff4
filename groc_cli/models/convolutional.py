"""Convolutional output embeddings (Józefowicz et al., 2016, "CNN softmax").

E_out_v = W_o highway(charCNN(v)) (the character encoder of ``chars``), plus a per-word
linear "correction": logits_v = h . E_out_v + (h M) . corr_v + b_v, with corr a
|V| x ``correction`` table and M a d x ``correction`` projection of the hidden state.
Input embeddings are a separate lookup table (paper Sec. 4.1).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from .chars import PlanCache, StringTable
from .common import (OutputLayer, SoftmaxComposed, char_encoder, init_char_encoder, remap_rows, replace_parameter,
                     uniform_, variational_dropout)
from .registry import register_output_layer


@register_output_layer("convolutional")
class ConvolutionalOutput(OutputLayer):
    def __init__(self, config, vocab: list[str], generator=None) -> None:
        super().__init__(config, vocab)
        d, r, V = config.emb, config.init_range, len(vocab)
        self.embedding = nn.Parameter(uniform_(torch.empty(V, d), r, generator))
        self.bias = nn.Parameter(uniform_(torch.empty(V), r, generator))
        self.chars = char_encoder(config)
        self.out_proj = nn.Linear(self.chars.out_dim, d)
        init_char_encoder(self.chars, self.out_proj, config, generator)
        if config.correction > 0:
            self.correction = nn.Parameter(uniform_(torch.empty(V, config.correction), r, generator))
            self.correction_proj = nn.Linear(d, config.correction, bias=False)
        self._build_table(self.vocab)

    def _build_table(self, vocab: list[str]) -> None:
        table = StringTable(vocab, max_chars=self.config.max_word_chars)
        device = self.embedding.device
        self.register_buffer("_chars", table.chars.to(device), persistent=False)
        self.register_buffer("_lengths", table.lengths.to(device), persistent=False)
        self._plans = PlanCache()  # the composition's length buckets, built once

    def embed(self, ids: torch.Tensor, composed) -> torch.Tensor:
        return F.embedding(ids, self.embedding)

    def compose(self, grad: bool = True) -> SoftmaxComposed:
        chunk = None if grad else self.config.compose_chunk
        ctx = contextlib.nullcontext() if grad else torch.no_grad()
        with ctx:
            c = self._plans.encode(self.chars, self._chars, self._lengths, chunk)
            weight = variational_dropout(self.out_proj(c), self.config.out_dropout, self.training)
            hidden_fn = None
            if hasattr(self, "correction"):
                weight = torch.cat([weight, self.correction.to(weight.dtype)], dim=-1)
                proj = self.correction_proj
                hidden_fn = lambda h: torch.cat([h, proj(h).to(h.dtype)], dim=-1)  # noqa: E731
        return SoftmaxComposed(weight, self.bias, hidden_fn=hidden_fn, grad=grad)

    def set_vocab(self, words: list[str], counts=None, generator=None) -> None:
        r = self.config.init_range
        for name in ("embedding", "bias", "correction"):
            if hasattr(self, name):
                replace_parameter(self, name, remap_rows(getattr(self, name), self.vocab, words, r, generator))
        self.vocab = list(words)
        self._build_table(self.vocab)
