"""Output layers built on per-word tables: lookup, tied, bilinear, deep-residual.

* lookup: separate input and output tables plus a per-word bias (Eq. 3).
* tied: E_out = E_in (Inan et al., 2017; Press & Wolf, 2017).
* lookup and tied with ``projection_reg > 0``: a d x d projection P is inserted before
  the output embedding and penalised by lambda * ||P||^2 (Press & Wolf, Sec. 5, "PR"); P
  starts at the identity so the untrained model equals the one without it, or, with
  ``projection_init = "authors"``, as their code builds it: random, with a bias after it.
* bilinear: E_out = E_in W (Gulordava et al., 2018).
* deep-residual: E_out = g(E_in), the depth-k residual network with variational
  dropout between layers (Pappas & Henderson, 2019).

Following the paper (Sec. 4.1, "we apply variational dropout to all output
embeddings") every kind drops output-embedding dimensions with one mask shared
across the vocabulary, rate ``out_dropout``.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from .common import (
    OutputLayer,
    ResidualOutputNet,
    SoftmaxComposed,
    remap_rows,
    replace_parameter,
    uniform_,
    variational_dropout,
)
from .registry import register_output_layer


@register_output_layer("lookup", "tied", "bilinear", "deep-residual")
class TableOutput(OutputLayer):
    """Per-word tables, one class for four kinds (``config.output`` picks the output side)."""

    def __init__(self, config, vocab: list[str], generator: torch.Generator | None = None) -> None:
        super().__init__(config, vocab)
        kind, d, r = config.output, config.emb, config.init_range
        self.kind = kind
        V = len(vocab)
        self.embedding = nn.Parameter(uniform_(torch.empty(V, d), r, generator))
        self.bias = nn.Parameter(uniform_(torch.empty(V), r, generator))
        if kind == "lookup":
            self.out_embedding = nn.Parameter(uniform_(torch.empty(V, d), r, generator))
        if kind in ("lookup", "tied") and config.projection_reg > 0:
            if config.projection_init == "authors":  # ptb_word_lm_WT_PR.py: proj and proj_b, uniform like every weight
                self.projection = nn.Parameter(uniform_(torch.empty(d, d), r, generator))
                self.projection_bias = nn.Parameter(uniform_(torch.empty(d), r, generator))
            else:
                self.projection = nn.Parameter(torch.eye(d))
        if kind == "bilinear":
            self.bilinear = nn.Parameter(torch.eye(d) + uniform_(torch.empty(d, d), r, generator))
        elif kind == "deep-residual":
            self.net = ResidualOutputNet(d, config.out_depth, config.out_activation, config.out_dropout)
            for p in self.net.parameters():
                uniform_(p, r, generator)

    def embed(self, ids: torch.Tensor, composed) -> torch.Tensor:
        return F.embedding(ids, self.embedding)

    def compose(self, grad: bool = True) -> SoftmaxComposed:
        ctx = contextlib.nullcontext() if grad else torch.no_grad()
        p, training = self.config.out_dropout, self.training
        hidden_fn = None
        with ctx:
            if self.kind in ("lookup", "tied"):
                weight = variational_dropout(self.out_embedding if self.kind == "lookup" else self.embedding, p, training)
                if hasattr(self, "projection"):
                    projection, shift = self.projection, getattr(self, "projection_bias", None)
                    if shift is None:
                        hidden_fn = lambda h: h @ projection.to(h.dtype)  # noqa: E731
                    else:
                        hidden_fn = lambda h: h @ projection.to(h.dtype) + shift.to(h.dtype)  # noqa: E731
            elif self.kind == "bilinear":
                weight = variational_dropout(self.embedding @ self.bilinear, p, training)
            else:
                weight = self.net(self.embedding)
        return SoftmaxComposed(weight, self.bias, hidden_fn=hidden_fn, grad=grad)

    def regularization(self) -> torch.Tensor:
        if hasattr(self, "projection"):
            return self.config.projection_reg * self.projection.pow(2).sum()
        return self.embedding.new_zeros(())

    def set_vocab(self, words: list[str], counts=None, generator: torch.Generator | None = None) -> None:
        r = self.config.init_range
        for name in ("embedding", "out_embedding", "bias"):
            if hasattr(self, name):
                replace_parameter(self, name, remap_rows(getattr(self, name), self.vocab, words, r, generator))
        self.vocab = list(words)
