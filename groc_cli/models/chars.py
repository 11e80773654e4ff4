"""Character-level word encoder and the deduplicated string table.

Surface encoding (paper Sec. 3.1; Józefowicz et al., 2016; Kim et al., 2016): UTF-8
bytes of a word between begin/end markers, a byte embedding (``char_emb``), one
convolution per filter width with max-pooling over positions, an activation
(``char_activation``: tanh by default, the authors' code uses selu) and ``highway_layers``
highway layers (``highway_activation``: relu by default). The byte alphabet is fixed (256 + 3 symbols), so no
parameter depends on the vocabulary.

Default sizes (``CharEncoderSettings`` in ``config.py``): 16-dim byte embeddings, 256 filters of widths 1-5
(32, 32, 64, 64, 64) and one highway layer; c_x then has 256 dimensions and GroC's
projection maps [c; r; d] (768) to d.

Speed choices (profiled on penn with ``benchmarks/train_throughput.py``; each one
is exact, none changes the function computed):

* the byte embedding and the convolution are both linear, so they are folded into one
  [max_width * 259, filters] table per step and each window is a lookup-and-sum
  (``embedding_bag``) instead of an im2col matrix product; filters of all widths share
  one weight whose entries past a filter's width are masked to zero;
* max-pooling uses ``amax`` and a hand-written backward that sends the gradient only
  to each (word, filter)'s arg-max window, as a scatter into the small table
  (``WindowConvMax``): autograd's dense [strings * positions, filters] gradient and
  the ``Conv1d`` weight-gradient kernels dominated a training step before;
* no convolution bias and the activation after the max-pool: both are monotone, so
  max(tanh(conv + b)) == tanh(max(conv) + b) with far less elementwise work (the same for
  relu and selu);
* strings are bucketed by byte length, so a bucket needs no masking; windows start at
  every byte of the word but the final EOW and overhang its end into PAD bytes that
  embed to zero, so a word encodes to the same vector alone or in any batch;
* every distinct string (vocabulary, relation words, definition words) is encoded
  once per composition and relation/definition encodings are gathered by index
  (``StringTable``);
* the length buckets of a full composition are planned once per vocabulary
  (``BucketPlan``, ``PlanCache``), and on CUDA neighbouring lengths share a bucket.
* Words longer than ``max_word_chars`` bytes keep their first and last halves, so
  that both prefixes and inflectional suffixes stay visible.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .kernels import linear
from .lexicon import PAPER_DEFINITION_WORDS, PAPER_RELATIONS

PAD, BOW, EOW = 0, 1, 2
NUM_SYMBOLS = 256 + 3


def encode_word(word: str, max_chars: int) -> list[int]:
    data = word.encode("utf-8")
    if len(data) > max_chars:
        head = max_chars - max_chars // 2
        data = data[:head] + data[len(data) - max_chars // 2 :] if max_chars // 2 else data[:head]
    return [BOW] + [b + 3 for b in data] + [EOW]


class CharEncoder(nn.Module):
    """chars [n, L] (+ true lengths [n]) -> surface encodings [n, out_dim]: the sum of the filter
    counts, or ``projection`` with a projection after the highway (no bias; the authors' code's
    1024 -> d ``_char_linear``).

    All filter widths share one [max_width * char_emb, filters] weight whose entries past
    a filter's own width are held at zero by a constant mask, and the convolution runs
    as a lookup-and-sum over per-offset byte tables (see ``forward``). On CPU this is
    several times faster than one ``Conv1d`` per width, whose weight-gradient kernels
    dominated a training step, and than the equivalent im2col matrix product.
    """

    def __init__(self, char_emb: int, filters: list[tuple[int, int]], highway_layers: int,
                 activation=torch.tanh, highway_activation=F.relu, projection: int | None = None) -> None:
        super().__init__()
        # Both must be monotone non-decreasing (tanh, relu, selu): they are applied after the max-pool.
        self.activation, self.highway_activation = activation, highway_activation
        self.embedding = nn.Embedding(NUM_SYMBOLS, char_emb, padding_idx=PAD)
        self.char_emb = char_emb
        self.max_width = max(w for w, _ in filters)
        self.out_dim = self.n_filters = sum(n for _, n in filters)
        widths = torch.tensor([w for w, n in filters for _ in range(n)], dtype=torch.long)
        weight = torch.empty(self.max_width * char_emb, self.out_dim)
        col = 0
        for w, n in filters:
            bound = 1.0 / (w * char_emb) ** 0.5  # nn.Conv1d's default bound
            nn.init.uniform_(weight[:, col : col + n], -bound, bound)
            col += n
        # Row k * char_emb + j of the weight sees byte k of the window.
        mask = (torch.arange(self.max_width).repeat_interleave(char_emb)[:, None] < widths[None, :]).float()
        self.conv_weight = nn.Parameter(weight * mask)
        self.register_buffer("conv_mask", mask, persistent=False)
        self.register_buffer("filter_widths", widths, persistent=False)
        # Window offset k only reaches filters wider than k; with widths in non-decreasing
        # order (the default) those are a suffix of the columns, starting here. The backward
        # skips the rest, whose table entries the constant mask holds at zero anyway.
        ordered = bool((widths[1:] >= widths[:-1]).all())
        self.offset_first_filter = tuple(
            int((widths <= k).sum()) if ordered else 0 for k in range(self.max_width)
        )
        self.register_buffer("offset_shift", torch.arange(self.max_width) * NUM_SYMBOLS, persistent=False)
        keep = torch.ones(NUM_SYMBOLS, 1)
        keep[PAD] = 0
        self.register_buffer("pad_keep", keep, persistent=False)
        self.conv_bias = nn.Parameter(torch.zeros(self.out_dim))
        self.highways = nn.ModuleList(nn.Linear(self.out_dim, 2 * self.out_dim) for _ in range(highway_layers))
        for hw in self.highways:
            # Open the carry gate at the start (Srivastava et al., 2015).
            nn.init.constant_(hw.bias[self.out_dim :], -1.0)
        if projection is not None:
            self.projection = nn.Linear(self.n_filters, projection, bias=False)
            self.out_dim = projection

    def forward(self, chars: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.finish(self.pool(chars, lengths, self.folded_table()))

    def folded_table(self) -> torch.Tensor:
        """Byte embedding and convolution are both linear, so they fold into one table per
        window offset, T_k = E W_k ([bytes, filters]; 1.3 MB, cache resident). Computed
        once per composition and shared by every length bucket."""
        W, V = self.max_width, NUM_SYMBOLS
        weight = (self.conv_weight * self.conv_mask).view(W, self.char_emb, self.n_filters)
        emb = self.embedding.weight * self.pad_keep  # PAD embeds to 0 and gets no gradient
        return torch.matmul(emb.unsqueeze(0), weight).reshape(W * V, self.n_filters)

    def pool(self, chars: torch.Tensor, lengths: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
        """Max over windows of the convolution (before bias and tanh), one length bucket."""
        return self.pool_rows([self.window_rows(chars, lengths)], table)

    def window_rows(self, chars: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One bucket (chars [n, L], true lengths [n]) as the table rows of its windows
        ([n, windows, max_width]) and a mask of the windows that start on padding (None when
        no row is shorter than L)."""
        W = self.max_width
        n, L = chars.shape
        # Windows start at every byte of the word but the final EOW (a window of EOW and
        # padding only adds a per-filter constant) and overhang the end into PAD bytes,
        # which embed to zero: a word's encoding does not depend on how far its row is
        # padded, i.e. on the batch it is encoded in.
        starts = max(L - 1, 1)
        windows = F.pad(chars, (0, W - 1), value=PAD).unfold(1, W, 1)[:, :starts]  # [n, starts, W]
        invalid = None
        if n and bool(lengths.min() < L):
            # Rows shorter than the batch's longest: windows starting on padding lose.
            invalid = torch.arange(starts, device=chars.device)[None, :] >= (lengths[:, None] - 1)
        return windows + self.offset_shift, invalid

    def pool_rows(self, buckets: list[tuple[torch.Tensor, torch.Tensor | None]], table: torch.Tensor) -> torch.Tensor:
        """``pool`` for several buckets from ``window_rows``, their rows stacked in order: one
        autograd node, so the backward fills one table gradient instead of one per bucket
        and no concatenation is recorded."""
        tensors = [t for bucket in buckets for t in bucket]
        return WindowConvMax.apply(table, self.offset_first_filter, *tensors)

    def finish(self, pooled: torch.Tensor) -> torch.Tensor:
        """Bias, activation (tanh by default) and the highway layers, row-wise: applied once to
        every bucket's pooled features together (one large matrix product instead of one per
        bucket)."""
        # The activation after the max-pool: both are monotone, so this equals max(act(.)).
        h = self.activation(pooled + self.conv_bias)
        for hw in self.highways:
            transform, gate = linear(h, hw.weight, hw.bias).chunk(2, dim=-1)
            gate = torch.sigmoid(gate)
            h = gate * self.highway_activation(transform) + (1 - gate) * h
        if hasattr(self, "projection"):
            h = linear(h, self.projection.weight)
        return h


class WindowConvMax(torch.autograd.Function):
    """Convolution over byte windows followed by max-pooling over positions, for one or
    more length buckets: ``apply(table, first_filter, bags_1, invalid_1, bags_2, ...)``
    with bags [n_b, P_b, W] (table rows per window offset) and invalid [n_b, P_b] or None;
    the output stacks the buckets' [n_b, filters] rows.

    Forward: y[n, p] = sum_k T[bags[n, p, k]] (``embedding_bag``), max over p with
    ``amax`` (``max(dim)`` with indices is several times slower on CPU; on CUDA it is the
    faster one and is used there).
    Backward: only the arg-max window of each (word, filter) receives gradient, so the
    table gradient is a scatter of n * filters * width values instead of the dense
    [n * positions, filters] gradient that autograd would build and reduce (ties go to
    the first maximal window, as ``max`` does)."""

    @staticmethod
    def forward(ctx, table: torch.Tensor, first_filter: tuple[int, ...] | None, *buckets: torch.Tensor | None) -> torch.Tensor:
        ctx.table_shape = table.shape
        # Always float32, also under bfloat16 autocast (--amp): the table gradient sums a
        # contribution per (word, filter, offset) into each byte's row, thousands per row,
        # and a bfloat16 accumulator (8-bit mantissa) drops every term below 1/256 of the
        # running sum. With it, GroC and the convolutional output layer stalled or diverged
        # in paper-scale CUDA training. A gather, a sum and a max gain nothing from bfloat16.
        ctx.table_dtype = table.dtype
        table = table.to(torch.promote_types(table.dtype, torch.float32))  # float64 stays (gradcheck)
        needs_grad = ctx.needs_input_grad[0]
        outs, saved = [], []
        for bags, invalid in zip(buckets[0::2], buckets[1::2]):
            n, P, W = bags.shape
            y = F.embedding_bag(bags.reshape(n * P, W), table, mode="sum").view(n, P, table.size(1))
            if invalid is not None:
                y.masked_fill_(invalid[:, :, None], float("-inf"))
            if needs_grad and y.is_cuda:
                # On CUDA one max-with-indices kernel beats the rank trick below (H100, a
                # [4000, 10, 256] bucket: 29 us against 198 us). Ties may go to any maximal
                # window there: each is a valid subgradient.
                values, position = y.max(dim=1)
                outs.append(values)
                saved += [bags, position]
                continue
            values = y.amax(dim=1)
            outs.append(values)
            if not needs_grad:
                continue
            # The backward needs each (word, filter)'s first maximal window: an [n, F] index
            # kept instead of the [n, P, F] activations. It comes from ``amax`` over one byte
            # per window: rank P - p where the window attains the maximum and 0 elsewhere,
            # so the largest rank is the first maximal window (ties resolved as ``max``
            # does). Ranks fit a byte for windows up to 255 positions. ``y >= max`` marks
            # the same windows as ``y == max`` (and none for a NaN maximum) and is about a
            # quarter faster on CPU.
            if P < 256:
                rank = torch.arange(P, 0, -1, dtype=torch.uint8, device=y.device)[None, :, None]
                hit = torch.mul(y >= values[:, None, :], rank)  # uint8 [n, P, F]
                # A NaN maximum matches no window (rank 0): clamp keeps the index in range,
                # and the training loop stops on the non-finite loss.
                position = (P - hit.amax(dim=1).long()).clamp_(max=P - 1)
            else:
                position = y.argmax(dim=1)
            saved += [bags, position]
        ctx.first_filter = first_filter or (0,) * (buckets[0].size(2) if buckets else 0)
        ctx.save_for_backward(*saved)
        return torch.cat(outs) if len(outs) > 1 else outs[0]

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        saved = ctx.saved_tensors
        rows_total, n_filters = ctx.table_shape
        # One scatter per bucket and window offset k into the table, along its rows (column
        # f's target is table[row, f], addressed by the kernel: no index arithmetic pass):
        # filter f gets grad[n, f] at the byte that word n's arg-max window holds at offset
        # k. Offset k reaches only filters wider than k (``first_filter``). Each entry sums
        # its terms in the same order as a flat scatter would, so the gradient is the same
        # to the bit.
        grad = grad.to(torch.promote_types(grad.dtype, torch.float32))
        grad_table = grad.new_zeros(rows_total, n_filters)
        start = 0
        for bags, position in zip(saved[0::2], saved[1::2]):
            g = grad[start : start + bags.size(0)]
            start += bags.size(0)
            for k, first in enumerate(ctx.first_filter):
                rows = bags[:, :, k].gather(1, position[:, first:])  # table row at offset k
                grad_table[:, first:].scatter_add_(0, rows, g[:, first:])
        # No gradient for first_filter and the bucket tensors (every input after the table).
        return (grad_table.to(ctx.table_dtype),) + (None,) * (len(ctx.needs_input_grad) - 1)


def csr_rows(offsets: torch.Tensor, indices: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sub-matrix of a CSR index structure: (indices, offsets with a leading 0) of ``rows``."""
    starts = offsets[rows]
    counts = offsets[rows + 1] - starts
    new_offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
    total = int(new_offsets[-1])
    if total == 0:
        return indices.new_zeros(0), new_offsets
    shift = torch.repeat_interleave(starts - new_offsets[:-1], counts)
    return indices[torch.arange(total, device=indices.device) + shift], new_offsets


class StringTable:
    """All distinct strings a composition needs (vocabulary first, in vocabulary order,
    then relation and definition words not in the vocabulary) as byte-id rows, plus
    CSR indices from each vocabulary word to its relation / definition strings."""

    def __init__(
        self,
        vocab: list[str],
        lexicon=None,
        relations: bool = False,
        definitions: bool = False,
        max_relations: int = PAPER_RELATIONS,
        max_definition_words: int = PAPER_DEFINITION_WORDS,
        max_chars: int = 20,
    ) -> None:
        self.strings: list[str] = list(vocab)
        index: dict[str, int] = {w: i for i, w in enumerate(self.strings)}
        if len(index) != len(self.strings):
            raise ValueError("vocabulary contains duplicate words")

        def lookup(word_lists: list[list[str]]) -> tuple[torch.Tensor, torch.Tensor]:
            flat: list[int] = []
            offsets = [0]
            for words in word_lists:
                for w in words:
                    if w not in index:
                        index[w] = len(self.strings)
                        self.strings.append(w)
                    flat.append(index[w])
                offsets.append(len(flat))
            return torch.tensor(offsets, dtype=torch.long), torch.tensor(flat, dtype=torch.long)

        empty = [[] for _ in vocab]
        rel_lists = [lexicon.relations_of(w, max_relations) for w in vocab] if (lexicon and relations) else empty
        def_lists = (
            [lexicon.definition_of(w, max_definition_words) for w in vocab] if (lexicon and definitions) else empty
        )
        self.rel_offsets, self.rel_indices = lookup(rel_lists)
        self.def_offsets, self.def_indices = lookup(def_lists)
        encoded = [encode_word(s, max_chars) for s in self.strings]
        self.lengths = torch.tensor([len(e) for e in encoded], dtype=torch.long)
        self.chars = torch.full((len(encoded), int(self.lengths.max())), PAD, dtype=torch.long)
        for i, e in enumerate(encoded):
            self.chars[i, : len(e)] = torch.tensor(e, dtype=torch.long)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {
            "chars": self.chars,
            "lengths": self.lengths,
            "rel_offsets": self.rel_offsets,
            "rel_indices": self.rel_indices,
            "def_offsets": self.def_offsets,
            "def_indices": self.def_indices,
        }


class BucketPlan:
    """How a fixed set of strings is encoded: strings sorted by byte length and cut into
    buckets, each bucket's window rows (``bags``, table rows per window offset) and
    validity mask precomputed, and the permutation back to the strings' order.

    Building a plan costs host-device synchronisations (the distinct lengths, each bucket's
    shortest row) and a dozen small index kernels per bucket; a composition over an
    unchanged string table (every training step) reuses one plan and runs none of them.

    ``launch_cost`` (in windows) merges neighbouring length buckets when the padding they
    add costs fewer windows than a bucket's fixed cost: 0 keeps one bucket per byte length
    (the least arithmetic, best on CPU); on CUDA, where each bucket's forward and backward
    kernels cost more than its windows, a few larger buckets are faster. Rows shorter than
    their bucket are masked, so every grouping computes the same encodings.
    """

    def __init__(
        self,
        encoder: CharEncoder,
        chars: torch.Tensor,
        lengths: torch.Tensor,
        idx: torch.Tensor | None = None,
        chunk: int | None = None,
        launch_cost: int | None = None,
    ) -> None:
        if idx is None:
            idx = torch.arange(chars.size(0), device=chars.device)
        if launch_cost is None:
            launch_cost = CUDA_BUCKET_COST if chars.device.type == "cuda" else 0
        lens = lengths[idx]
        order = torch.argsort(lens, stable=True)
        sorted_idx, sorted_lens = idx[order], lens[order]
        uniq, counts = torch.unique_consecutive(sorted_lens, return_counts=True)
        groups = _group_lengths(uniq.tolist(), counts.tolist(), launch_cost)
        self.chunk = chunk
        self.buckets: list[tuple[torch.Tensor, torch.Tensor | None]] = []
        for start, n, L in groups:
            step = chunk or n
            for s in range(start, start + n, step):
                e = min(s + step, start + n)
                self.buckets.append(encoder.window_rows(chars[sorted_idx[s:e], :L], sorted_lens[s:e]))
        self.order = order
        self.inverse = torch.empty_like(order)
        self.inverse[order] = torch.arange(order.numel(), device=order.device)

    def encode(self, encoder: CharEncoder) -> torch.Tensor:
        """Surface encodings of the plan's strings, in their original order."""
        table = encoder.folded_table()
        chunk = self.chunk
        if chunk:  # bounded memory: one chunk's windows at a time
            pooled = torch.cat([encoder.pool_rows([b], table) for b in self.buckets], dim=0)
        else:
            pooled = encoder.pool_rows(self.buckets, table)
        step = chunk or pooled.size(0)
        parts = [encoder.finish(pooled[s : s + step]) for s in range(0, pooled.size(0), step)]
        out = torch.cat(parts, dim=0) if len(parts) > 1 else parts[0]
        return PermuteRows.apply(out, self.inverse, self.order)


class PermuteRows(torch.autograd.Function):
    """``x[perm]`` for a permutation ``perm`` whose inverse is ``inverse``: the backward is the
    gather ``grad[inverse]``, where autograd's indexing backward would accumulate into zeros
    (with a sort on CPU) as if rows could repeat."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, perm: torch.Tensor, inverse: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(inverse)
        return x.index_select(0, perm)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (inverse,) = ctx.saved_tensors
        return grad.index_select(0, inverse), None, None


class PlanCache:
    """The ``BucketPlan`` of every string of a string table, one per (chunk, device), built
    on first use. A new string table (a new vocabulary) needs a new cache."""

    def __init__(self) -> None:
        self._plans: dict = {}

    def encode(self, encoder: CharEncoder, chars: torch.Tensor, lengths: torch.Tensor, chunk: int | None) -> torch.Tensor:
        key = (chunk, chars.device)
        plan = self._plans.get(key)
        if plan is None:
            # A model moved to another device keeps no plan for the old one.
            self._plans = {k: v for k, v in self._plans.items() if k[1] == chars.device}
            plan = self._plans[key] = BucketPlan(encoder, chars, lengths, None, chunk)
        return plan.encode(encoder)


# A bucket's fixed cost on CUDA, in windows: an estimate of what its ~15 forward and backward
# kernel launches (~100 us) cost next to one window's arithmetic, not a tuned value. With it,
# penn's strings fall into a few buckets instead of one per byte length; the whole change
# (plans built once, merged buckets, max-with-indices) took GroC's H100 step from 3.6x to
# 1.8-1.9x tied's (docs/benchmarks.md).
CUDA_BUCKET_COST = 20000


def _group_lengths(lengths: list[int], counts: list[int], launch_cost: int) -> list[tuple[int, int, int]]:
    """Cut the sorted distinct byte lengths into consecutive groups (start row, rows, longest
    length) minimising sum(launch_cost + rows * windows per row) by dynamic programming."""
    m = len(lengths)
    if launch_cost <= 0 or m <= 1:
        out, start = [], 0
        for L, n in zip(lengths, counts):
            out.append((start, n, L))
            start += n
        return out
    prefix = [0]
    for n in counts:
        prefix.append(prefix[-1] + n)
    best = [0.0] + [float("inf")] * m
    cut = [0] * (m + 1)
    for j in range(1, m + 1):  # groups end at distinct length j - 1
        windows = max(lengths[j - 1] - 1, 1)
        for i in range(j):
            cost = best[i] + launch_cost + (prefix[j] - prefix[i]) * windows
            if cost < best[j]:
                best[j], cut[j] = cost, i
    groups, j = [], m
    while j > 0:
        i = cut[j]
        groups.append((prefix[i], prefix[j] - prefix[i], lengths[j - 1]))
        j = i
    return groups[::-1]


def encode_strings(
    encoder: CharEncoder,
    chars: torch.Tensor,
    lengths: torch.Tensor,
    idx: torch.Tensor | None = None,
    chunk: int | None = None,
) -> torch.Tensor:
    """Surface encodings of strings ``idx`` (all when None), batched by byte length and
    optionally in chunks of at most ``chunk`` strings (bounded memory without autograd).
    For a fixed set of strings encoded repeatedly, keep a ``BucketPlan`` instead."""
    return BucketPlan(encoder, chars, lengths, idx, chunk).encode(encoder)

