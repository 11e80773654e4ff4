"""GroC: grounded compositional input and output embeddings (paper Sec. 3.1-3.3).

e_x   = W [c_x; r_x; d_x] + b          (3d x d projection, Sec. 3.1; combine='add': W (c_x + r_x + d_x) + b)
c_x   = highway(charCNN(bytes of x))   surface encoding
r_x   = mean of c over x's lexicon relations   (0 when none / ``relations=False``)
d_x   = mean of c over x's definition words    (0 when none / ``definitions=False``)
E_in  = stacked e_x over the vocabulary (input embeddings are rows of it)
E_out = depth-k residual net over E_in with variational dropout (Eq. 4)
b_v   = act(w . e_out_v + a)           (Eq. 5; act: bias_activation, default out_activation)
        or a free per-word bias        (``bias = "free"``: the authors' code without its predict_bias)

With the composed bias no parameter depends on the vocabulary: ``set_vocab`` only rebuilds
the string table. A free bias is the one per-word parameter: ``set_vocab`` keeps the biases of
words in both vocabularies (matched by string) and gives a new word the mean bias of the
words the layer had.

Cost. A composition encodes every distinct string once (``chars.StringTable``), then
gathers relation/definition means with ``embedding_bag``. With ``update_prob`` p < 1
(paper B.4) a step composes with autograd only with probability p; otherwise the
vocabulary is composed under ``torch.no_grad`` (fresh values, no stale cache) and only the
batch's distinct input words (plus their relation/definition strings) are composed with
autograd, so the output-only parameters (residual net, bias w/a) receive no gradient
and the character encoder is trained through the input side alone.
"""

from __future__ import annotations

import contextlib
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .chars import PlanCache, StringTable, csr_rows, encode_strings
from .common import (ACT, OutputLayer, ResidualOutputNet, SoftmaxComposed, char_encoder, init_char_encoder, remap_rows,
                     replace_parameter, uniform_)
from .kernels import linear
from .lexicon import Lexicon
from .registry import register_output_layer

_TABLE_KEYS = ("chars", "lengths", "rel_offsets", "rel_indices", "def_offsets", "def_indices")


class _Table(NamedTuple):
    """A vocabulary's string table as ``compose_inputs`` reads it: its number of words, the length
    buckets of its strings and the tensors of ``_TABLE_KEYS``."""

    size: int
    plans: PlanCache
    chars: torch.Tensor
    lengths: torch.Tensor
    rel_offsets: torch.Tensor
    rel_indices: torch.Tensor
    def_offsets: torch.Tensor
    def_indices: torch.Tensor


@register_output_layer("groc")
class GroCOutput(OutputLayer):
    # Reads the lexicon; composes rows of any string; update_prob < 1 composes sparsely (B.4).
    needs_lexicon = True
    composes_unseen_words = True
    sparse_updates = True

    @classmethod
    def from_config(cls, config, vocab: list[str], lexicon: Lexicon | None = None, generator=None) -> "GroCOutput":
        return cls(config, vocab, lexicon, generator)

    def __init__(self, config, vocab: list[str], lexicon: Lexicon | None = None, generator=None) -> None:
        super().__init__(config, vocab)
        d = config.emb
        self.lexicon = lexicon if lexicon is not None else Lexicon()
        self.chars = char_encoder(config)
        f = self.chars.out_dim
        self.project = nn.Linear((3 if config.combine == "concat" else 1) * f, d)
        self.net = ResidualOutputNet(d, config.out_depth, config.out_activation, config.out_dropout)
        r = config.init_range
        if config.bias == "free":
            # One trained bias per word, U(±init_range) as every per-word table's (B.1).
            self.free_bias = nn.Parameter(torch.empty(len(self.vocab)))
            bias_modules = ()
        else:
            self.bias_w = nn.Linear(d, 1)
            self.bias_act = ACT[config.bias_activation or config.out_activation]
            bias_modules = (self.bias_w,)
        for module in (self.project, self.net, *bias_modules):
            for p in module.parameters():
                uniform_(p, r, generator)
        if config.bias == "free":
            uniform_(self.free_bias, r, generator)
        init_char_encoder(self.chars, self.project, config, generator)
        self._build_table(self.vocab)

    def _build_table(self, vocab: list[str]) -> None:
        table = self._string_table(vocab)
        self.num_strings = table.lengths.numel()
        self._plans = table.plans  # the full composition's length buckets, built once
        # Non-persistent buffers: they follow .to(device) but stay out of state_dict,
        # which therefore has the same keys and shapes for every vocabulary.
        for key in _TABLE_KEYS:
            self.register_buffer("_" + key, getattr(table, key), persistent=False)

    def _string_table(self, vocab: list[str]) -> _Table:
        """The string table of ``vocab`` on the layer's device."""
        c = self.config
        table = StringTable(
            vocab,
            self.lexicon,
            relations=c.relations,
            definitions=c.definitions,
            max_relations=c.max_relations,
            max_definition_words=c.max_definition_words,
            max_chars=c.max_word_chars,
        )
        device = self.project.weight.device
        tensors = table.tensors()
        return _Table(len(vocab), PlanCache(), **{key: tensors[key].to(device) for key in _TABLE_KEYS})

    def _table(self) -> _Table:
        """The string table of the layer's own vocabulary."""
        return _Table(len(self.vocab), self._plans, *(getattr(self, "_" + key) for key in _TABLE_KEYS))

    # -- composition --------------------------------------------------------------
    def compose_inputs(self, rows: torch.Tensor | None = None, chunk: int | None = None,
                       table: _Table | None = None) -> torch.Tensor:
        """E_in rows for vocabulary ids ``rows`` (all when None) of ``table`` (None: the layer's
        own vocabulary's), every needed string encoded once."""
        table = self._table() if table is None else table
        V = table.size
        rel_off, rel_idx = table.rel_offsets, table.rel_indices
        def_off, def_idx = table.def_offsets, table.def_indices
        if rows is None:
            c_all = table.plans.encode(self.chars, table.chars, table.lengths, chunk)
            word_pos = None
        else:
            rel_idx, rel_off = csr_rows(rel_off, rel_idx, rows)
            def_idx, def_off = csr_rows(def_off, def_idx, rows)
            needed, inverse = torch.unique(torch.cat([rows, rel_idx, def_idx]), return_inverse=True)
            c_all = encode_strings(self.chars, table.chars, table.lengths, needed, chunk)
            n_rows, n_rel = rows.numel(), rel_idx.numel()
            word_pos = inverse[:n_rows]
            rel_idx = inverse[n_rows : n_rows + n_rel]
            def_idx = inverse[n_rows + n_rel :]
            V = n_rows
        use_rel = self.config.relations and rel_idx.numel() > 0
        use_def = self.config.definitions and def_idx.numel() > 0
        step = chunk or V
        f = c_all.size(1)
        # W [c; r; d] + b as W_c c + W_r r + W_d d + b: no [V, 3f] concatenation, and an
        # encoding that is zero for every word (ablation, empty lexicon) costs nothing. With
        # combine='add', W (c + r + d) + b: the three blocks are one W.
        weight = self.project.weight
        blocks = (slice(0, f), slice(f, 2 * f), slice(2 * f, 3 * f)) if self.config.combine == "concat" else (slice(None),) * 3
        out = []
        for s in range(0, V, step):
            e = min(s + step, V)
            c = c_all[s:e] if word_pos is None else c_all[word_pos[s:e]]
            y = linear(c, weight[:, blocks[0]], self.project.bias)
            for block, use, idx, off in ((1, use_rel, rel_idx, rel_off), (2, use_def, def_idx, def_off)):
                if use:
                    if s == 0 and e == V:  # the whole table: no slicing, no device sync
                        sub_idx, sub_off = idx, off
                    else:
                        sub_off = off[s : e + 1]
                        sub_idx = idx[int(sub_off[0]) : int(sub_off[-1])]
                        sub_off = sub_off - sub_off[0]
                    mean = F.embedding_bag(sub_idx, c_all, sub_off, mode="mean", include_last_offset=True)
                    y = linear(mean, weight[:, blocks[block]], add_to=y)
            out.append(y)
        return torch.cat(out, dim=0) if len(out) > 1 else out[0]

    def compose(self, grad: bool = True) -> SoftmaxComposed:
        return self._compose(self._table(), self.free_bias if self.config.bias == "free" else None, grad)

    def compose_words(self, words: list[str]) -> SoftmaxComposed:
        """The view over ``words`` alone that ``set_vocab(words)`` then ``compose(grad=False)`` gives
        (a free bias: the rows ``set_vocab`` keeps or gives), the layer's own vocabulary unchanged."""
        words = list(words)
        free = remap_rows(self.free_bias, self.vocab, words, new_rows="mean") if self.config.bias == "free" else None
        return self._compose(self._string_table(words), free, grad=False)

    def _compose(self, table: _Table, free_bias: torch.Tensor | None, grad: bool) -> SoftmaxComposed:
        """The view over ``table``'s words; ``free_bias``: their free biases (None: composed)."""
        chunk = None if grad else self.config.compose_chunk
        ctx = contextlib.nullcontext() if grad else torch.no_grad()
        with ctx:
            e_in = self.compose_inputs(None, chunk, table)
            masks = self.net.sample_masks(e_in)
            step = chunk or e_in.size(0)
            e_out = torch.cat([self.net(e_in[s : s + step], masks) for s in range(0, e_in.size(0), step)])
            bias = free_bias if free_bias is not None else self._composed_bias(e_out)
        return SoftmaxComposed(e_out, bias, grad=grad, input_weight=e_in)

    def _composed_bias(self, e_out: torch.Tensor) -> torch.Tensor:
        # Dropout on the estimator's input (the authors' --bias_drop), not on the embeddings themselves.
        bias_in = F.dropout(e_out, self.config.bias_dropout, self.training) if self.config.bias_dropout else e_out
        return self.bias_act(self.bias_w(bias_in).squeeze(-1))

    def embed(self, ids: torch.Tensor, composed: SoftmaxComposed) -> torch.Tensor:
        if not composed.grad and torch.is_grad_enabled():
            # Sparse-update step (paper B.4): re-embed only the batch's distinct input
            # words with autograd so the shared encoder still learns from the input side.
            uniq, inverse = torch.unique(ids, return_inverse=True)
            return F.embedding(inverse, self.compose_inputs(uniq))
        return F.embedding(ids, composed.input_weight)

    def set_vocab(self, words: list[str], counts=None, generator=None) -> None:
        if self.config.bias == "free":
            replace_parameter(self, "free_bias", remap_rows(self.free_bias, self.vocab, list(words), new_rows="mean"))
        self._build_table(list(words))
        self.vocab = list(words)

    def unlisted(self, words: list[str]) -> list[str]:
        """The words of ``words`` without a row in the lexicon (``Lexicon.lists``): they are composed from
        their characters alone, with no relations or definition (none when the layer reads neither)."""
        if not (self.config.relations or self.config.definitions):
            return []
        return [w for w in words if not self.lexicon.lists(w)]

    def output_only_parameters(self) -> list[nn.Parameter]:
        """Parameters used only by the output side (residual net and bias)."""
        bias = [self.free_bias] if self.config.bias == "free" else list(self.bias_w.parameters())
        return list(self.net.parameters()) + bias
