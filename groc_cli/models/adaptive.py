"""Adaptive input and adaptive softmax with shared weights (Baevski & Auli, 2019;
Grave et al., 2017b).

The vocabulary (ids sorted by descending frequency) is cut into bins; bin i has a
table of width d / div^i and (for i > 0) a projection P_i (d_i x d). The input
embedding of a word in bin i is T_i[x] P_i. The output side shares both: the head
scores the words of bin 0 (h . T_0[v]) plus one cluster logit per tail bin; a word of
tail bin i gets log p(cluster i | h) + log softmax((h P_i^T) T_i^T). Output tables get
the shared-mask variational dropout of all output embeddings (paper Sec. 4.1).

Default cutoffs are the paper's best penn setting "2k7k" written as fractions of the
vocabulary: bins of 0.2n, 0.5n and 0.3n words (Table 7, code 253). Explicit cutoffs
larger than a new vocabulary leave empty bins, whose cluster logit is masked, so the
parameter structure does not change with ``set_vocab``.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from .common import Composed, OutputLayer, replace_parameter, uniform_, variational_dropout
from .registry import register_output_layer

DEFAULT_FRACTIONS = (0.2, 0.7)


def bin_bounds(config, vocab_size: int) -> list[int]:
    if config.cutoffs is None:
        cuts = [int(round(f * vocab_size)) for f in DEFAULT_FRACTIONS]
    else:
        cuts = list(config.cutoffs)
    cuts = [min(max(c, 0), vocab_size) for c in cuts]
    for i in range(1, len(cuts)):
        cuts[i] = max(cuts[i], cuts[i - 1])
    return [0] + cuts + [vocab_size]


@register_output_layer("adaptive")
class AdaptiveOutput(OutputLayer):
    @classmethod
    def check_vocab_size(cls, config, size: int, where: str) -> None:
        """Explicit cutoffs must leave every bin of a new run's vocabulary some words."""
        if config.cutoffs and config.cutoffs[-1] >= size:
            raise ValueError(f"cutoffs {','.join(map(str, config.cutoffs))}: {where} has {size:,} words, and every "
                             f"cutoff must be below that")

    def __init__(self, config, vocab: list[str], generator=None) -> None:
        super().__init__(config, vocab)
        d, r = config.emb, config.init_range
        self.bounds = bin_bounds(config, len(vocab))
        n_bins = len(self.bounds) - 1
        self.dims = [max(1, int(d // (config.adaptive_div**i))) for i in range(n_bins)]
        self.tables = nn.ParameterList(
            nn.Parameter(uniform_(torch.empty(self.bounds[i + 1] - self.bounds[i], self.dims[i]), r, generator))
            for i in range(n_bins)
        )
        # P_0 is the identity (bin 0 has the full width d).
        self.projections = nn.ParameterList(
            nn.Parameter(uniform_(torch.empty(self.dims[i], d), r, generator)) for i in range(1, n_bins)
        )
        self.cluster = nn.Linear(d, n_bins - 1) if n_bins > 1 else None
        if self.cluster is not None:
            for p in self.cluster.parameters():
                uniform_(p, r, generator)

    def _input_matrix(self) -> torch.Tensor:
        parts = [self.tables[0]] + [t @ p for t, p in zip(list(self.tables)[1:], self.projections)]
        return torch.cat(parts, dim=0)

    def compose(self, grad: bool = True) -> "AdaptiveComposed":
        ctx = contextlib.nullcontext() if grad else torch.no_grad()
        p, training = self.config.out_dropout, self.training
        with ctx:
            e_in = self._input_matrix()
            out_tables = [variational_dropout(t, p, training) for t in self.tables]
        return AdaptiveComposed(self, e_in, out_tables, list(self.projections), grad)

    def embed(self, ids: torch.Tensor, composed: "AdaptiveComposed") -> torch.Tensor:
        return F.embedding(ids, composed.input_weight)

    def set_vocab(self, words: list[str], counts=None, generator=None) -> None:
        """Re-bin by the new order. A kept word moving to a bin of another width gets
        the least-squares row whose projection best reproduces its old input embedding."""
        r = self.config.init_range
        old_index = {w: i for i, w in enumerate(self.vocab)}
        old_bounds = self.bounds
        new_bounds = bin_bounds(self.config, len(words))
        with torch.no_grad():
            old_full = self._input_matrix().detach()
            pinvs = [None] + [torch.linalg.pinv(p.detach()) for p in self.projections]
            new_tables = []
            for i in range(len(new_bounds) - 1):
                lo, hi = new_bounds[i], new_bounds[i + 1]
                table = uniform_(self.tables[i].new_empty(hi - lo, self.dims[i]), r, generator)
                for j, w in enumerate(words[lo:hi]):
                    k = old_index.get(w)
                    if k is None:
                        continue
                    o = next(b for b in range(len(old_bounds) - 1) if old_bounds[b] <= k < old_bounds[b + 1])
                    if o == i:
                        table[j] = self.tables[o][k - old_bounds[o]]
                    elif i == 0:
                        table[j] = old_full[k]
                    else:
                        table[j] = old_full[k] @ pinvs[i]
                new_tables.append(table)
        for i, table in enumerate(new_tables):
            replace_parameter(self.tables, str(i), table)
        self.bounds = new_bounds
        self.vocab = list(words)


def sync_free(device: torch.device) -> bool:
    """Whether `nll` takes every row through each tail bin's softmax and keeps the bin's rows, instead of
    selecting them first. Selecting needs their number on the host (`nonzero`), which on a GPU waits for
    every queued kernel once per bin and step; with several runs sharing one GPU each wait also waits for
    the others' turns (docs/records/gpu-table2-h200: adaptive at a quarter of tied's rate, 1.38x tied's
    step alone). On the CPU that wait costs nothing and the bin's rows are the cheaper product."""
    return device.type != "cpu"


class AdaptiveComposed(Composed):
    def __init__(self, layer: AdaptiveOutput, e_in, out_tables, projections, grad: bool) -> None:
        self.layer = layer
        self.bounds = list(layer.bounds)
        self.input_weight = e_in
        self.tables = out_tables
        self.projections = projections
        self.cluster = layer.cluster
        self.grad = grad
        self.size = self.bounds[-1]

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = F.linear(hidden, self.tables[0])
        if self.cluster is not None:
            cl = self.cluster(hidden)
            empty = [self.bounds[i + 1] == self.bounds[i] for i in range(1, len(self.bounds) - 1)]
            if any(empty):  # decided on the host: asking the device would wait for it (a GPU sync a step)
                cl = cl.masked_fill(torch.tensor(empty, device=cl.device), float("-inf"))
            logits = torch.cat([logits, cl.to(logits.dtype)], dim=-1)
        return F.log_softmax(logits.float(), dim=-1)

    def _tail(self, hidden: torch.Tensor, i: int) -> torch.Tensor:
        h = F.linear(hidden, self.projections[i - 1])  # h P_i^T: [N, d_i]
        return F.log_softmax(F.linear(h, self.tables[i]).float(), dim=-1)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        lead = hidden.shape[:-1]
        hidden = hidden.reshape(-1, hidden.size(-1))
        head = self._head(hidden)
        n0 = self.bounds[1]
        parts = [head[:, :n0]]
        for i in range(1, len(self.bounds) - 1):
            if self.bounds[i + 1] > self.bounds[i]:
                parts.append(head[:, n0 + i - 1 : n0 + i] + self._tail(hidden, i))
        out = torch.cat(parts, dim=-1)
        return out.reshape(*lead, out.size(-1))

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        shape = targets.shape
        hidden = hidden.reshape(-1, hidden.size(-1))
        targets = targets.reshape(-1)
        head = self._head(hidden)
        n0 = self.bounds[1]
        head_index = targets.clone()
        out = torch.zeros(targets.shape, dtype=torch.float32, device=hidden.device)
        dense = sync_free(hidden.device)
        for i in range(1, len(self.bounds) - 1):
            lo, hi = self.bounds[i], self.bounds[i + 1]
            if hi == lo:
                continue
            in_bin = (targets >= lo) & (targets < hi)
            if dense:  # every row through the bin's softmax, the bin's rows kept: no host sync
                head_index = torch.where(in_bin, n0 + i - 1, head_index)
                picked = self._tail(hidden, i).gather(1, (targets - lo).clamp(0, hi - lo - 1)[:, None]).squeeze(1)
                out = torch.where(in_bin, -picked, out)
            else:  # the bin's rows only (nonzero waits for the device: free on the CPU)
                sel = in_bin.nonzero().squeeze(-1)
                head_index[sel] = n0 + i - 1
                if sel.numel():
                    tail = self._tail(hidden[sel], i)
                    out = out.index_put((sel,), -tail.gather(1, (targets[sel] - lo)[:, None]).squeeze(1))
        out = out - head.gather(1, head_index[:, None]).squeeze(1)
        return out.reshape(shape)
