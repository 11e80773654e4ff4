"""Pieces shared by the output-layer families: dropout masks, the residual output
network, table resizing for vocabulary changes, and the ``Composed`` softmax views."""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .chars import CharEncoder
from .kernels import linear

ACT: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "selu": F.selu,
    "tanh": torch.tanh,
}


def dim_mask(like: torch.Tensor, p: float, training: bool) -> torch.Tensor | None:
    """Variational dropout mask over the last dimension, shared by every row
    (every word of the vocabulary / every time step), as in Gal & Ghahramani (2016)
    and Pappas & Henderson (2019). None when dropout is off."""
    if not training or p <= 0:
        return None
    mask = like.new_empty((1,) * (like.dim() - 1) + (like.size(-1),)).bernoulli_(1 - p)
    return mask / (1 - p)


def variational_dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    mask = dim_mask(x, p, training)
    return x if mask is None else x * mask


class LockedDropout(nn.Module):
    """Same dropout mask at every time step of a [T, B, H] sequence (Merity et al., 2018)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p <= 0:
            return x
        mask = x.new_empty(1, x.size(1), x.size(2)).bernoulli_(1 - self.p) / (1 - self.p)
        return x * mask


class ResidualOutputNet(nn.Module):
    """Depth-k residual network g over input embeddings (paper Eq. 4):
    E^(j) = act(W_j drop(E^(j-1)) + b_j) + E_in, E^(0) = E_in, with variational dropout
    between layers. With k = 0 the dropout is applied to E_in itself so that the output
    dropout rate r of Table 8 still means something."""

    def __init__(self, dim: int, depth: int, activation: str, dropout: float) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.act = ACT[activation]
        self.dropout = dropout

    def forward(self, e_in: torch.Tensor, masks: list[torch.Tensor | None] | None = None) -> torch.Tensor:
        masks = masks if masks is not None else self.sample_masks(e_in)
        if not self.layers:
            return e_in if masks[0] is None else e_in * masks[0]
        e = e_in
        for layer, mask in zip(self.layers, masks):
            e = self.act(layer(e if mask is None else e * mask)) + e_in
        return e

    def sample_masks(self, like: torch.Tensor) -> list[torch.Tensor | None]:
        """One mask per layer; sampled once per composition so that chunks of the
        vocabulary composed separately see the same mask."""
        return [dim_mask(like, self.dropout, self.training) for _ in range(max(1, len(self.layers)))]


def uniform_(t: torch.Tensor, init_range: float, generator: torch.Generator | None = None) -> torch.Tensor:
    with torch.no_grad():
        if generator is None:
            return t.uniform_(-init_range, init_range)
        fresh = torch.rand(t.shape, generator=generator, dtype=torch.float32)
        return t.copy_((fresh * 2 - 1) * init_range)


#: The authors' code initialises its char-CNN, highway and projection weights in ±0.1 (its --init).
AUTHORS_CHAR_RANGE = 0.1


def char_encoder(config) -> CharEncoder:
    """The char-CNN of a groc or convolutional layer, as config says (filters, activations)."""
    return CharEncoder(config.char_emb, config.char_filters, config.highway_layers,
                       ACT[config.char_activation], ACT[config.highway_activation],
                       projection=config.emb if config.char_projection else None)


def init_char_encoder(chars: nn.Module, projection: nn.Linear, config, generator: torch.Generator | None = None) -> None:
    """A char-CNN (and the projection of its encodings) as config.char_init says; the byte
    embedding's padding row stays at zero. 'uniform' leaves the convolution, highway and
    projection as their constructors made them."""
    with torch.no_grad():
        if config.char_init == "uniform":
            uniform_(chars.embedding.weight, config.init_range, generator)
        else:
            chars.embedding.weight.normal_(generator=generator)
        if config.char_init == "authors":
            uniform_(chars.conv_weight, AUTHORS_CHAR_RANGE, generator).mul_(chars.conv_mask)
            for highway in chars.highways:
                uniform_(highway.weight, AUTHORS_CHAR_RANGE, generator)
            if hasattr(chars, "projection"):
                uniform_(chars.projection.weight, AUTHORS_CHAR_RANGE, generator)
            uniform_(projection.weight, AUTHORS_CHAR_RANGE, generator)
            if projection.bias is not None:
                projection.bias.zero_()
        chars.embedding.weight[0].zero_()  # PAD


def remap_rows(
    old: torch.Tensor,
    old_words: list[str],
    new_words: list[str],
    init_range: float = 0.0,
    generator: torch.Generator | None = None,
    new_rows: str = "random",
) -> torch.Tensor:
    """A new per-word table: rows of words in both vocabularies are copied (matched by
    string); rows of new words are fresh U(-init_range, init_range) draws (``new_rows="random"``)
    or the mean row of ``old`` (``new_rows="mean"``, no draw)."""
    new = old.new_empty((len(new_words),) + tuple(old.shape[1:]))
    if new_rows == "mean":
        with torch.no_grad():
            new.copy_(old.detach().mean(0).expand_as(new))
    else:
        uniform_(new, init_range, generator)
    index = {w: i for i, w in enumerate(old_words)}
    pairs = [(j, index[w]) for j, w in enumerate(new_words) if w in index]
    if pairs:
        dst = torch.tensor([p[0] for p in pairs], dtype=torch.long, device=old.device)
        src = torch.tensor([p[1] for p in pairs], dtype=torch.long, device=old.device)
        with torch.no_grad():
            new[dst] = old.detach()[src]
    return new


def replace_parameter(module: nn.Module, name: str, value: torch.Tensor) -> None:
    """Swap a parameter for one of a different shape. Optimizers built before this
    hold the old tensor: rebuild them after ``set_vocab``."""
    setattr(module, name, nn.Parameter(value.detach().clone(), requires_grad=getattr(module, name).requires_grad))


class Composed:
    """Everything vocabulary-wide computed once per step: the output distribution view.

    ``grad`` tells whether the composition was recorded by autograd (GroC's sparse
    updates compose without it and re-embed the batch's input words with it)."""

    grad: bool = True
    size: int = 0

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class SoftmaxComposed(Composed):
    """logits = hidden' E_out^T + b, where hidden' = hidden_fn(hidden) (identity,
    Press & Wolf's projection P, or the convolutional correction features). The
    log-softmax is always taken in float32, also under autocast."""

    def __init__(
        self,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        hidden_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
        grad: bool = True,
        input_weight: torch.Tensor | None = None,
    ) -> None:
        self.weight = weight
        self.bias = bias
        self.hidden_fn = hidden_fn
        self.grad = grad
        self.size = weight.size(0)
        self.input_weight = input_weight

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.hidden_fn is not None:
            hidden = self.hidden_fn(hidden)
        return linear(hidden, self.weight, self.bias)

    def log_probs(self, hidden: torch.Tensor) -> torch.Tensor:
        lead = hidden.shape[:-1]
        out = F.log_softmax(self.logits(hidden.reshape(-1, hidden.size(-1))).float(), dim=-1)
        return out.reshape(*lead, out.size(-1))

    def nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits = self.logits(hidden.reshape(-1, hidden.size(-1))).float()
        return F.cross_entropy(logits, targets.reshape(-1), reduction="none").reshape(targets.shape)


class OutputLayer(nn.Module):
    """Interface of one output-embedding family (paper Table 2). A subclass registers itself
    for ``output`` with ``registry.register_output_layer`` and declares its capabilities as
    class attributes; training and evaluation read these instead of the kind's name
    (docs/extending.md):

    * ``needs_lexicon``: training needs a lexicon table (``lexicon``), passed to
      ``from_config``; a run keeps a copy, which evaluation reads back (and ``lexicon``
      may replace). Layers without it refuse ``lexicon``.
    * ``composes_unseen_words``: ``set_vocab`` gives any word, seen in training or not,
      output and input rows computed from the parameters (no fresh random rows), and
      ``compose`` returns a ``SoftmaxComposed`` with ``input_weight``; ``compose_words`` gives the
      view over any words without changing the vocabulary (``load_run``'s new words). Open-vocabulary
      evaluation (``vocab`` union) then scores new words with the model itself (and
      ``downweight_new`` applies) and reads them as inputs by their composed rows; without
      it new words get no model mass (a uniform share is mixed in) and are read as <unk>.
    * ``sparse_updates``: ``update_prob`` < 1 makes a training step compose the vocabulary
      with autograd only with that probability (paper B.4); ``embed`` must then re-embed
      the batch's inputs with autograd when given a composition made without it.
    """

    needs_lexicon: bool = False
    composes_unseen_words: bool = False
    sparse_updates: bool = False

    def __init__(self, config, vocab: list[str]) -> None:
        super().__init__()
        self.config = config
        self.vocab = list(vocab)

    @classmethod
    def from_config(cls, config, vocab: list[str], lexicon=None,
                    generator: torch.Generator | None = None) -> "OutputLayer":
        """The layer for ``vocab`` as ``config`` says. ``lexicon`` reaches layers that
        declare ``needs_lexicon``; every parameter is initialised from ``generator`` (the
        global RNG when None), in a fixed order, so that a seed gives the same model."""
        return cls(config, vocab, generator)

    @classmethod
    def check_vocab_size(cls, config, size: int, where: str) -> None:
        """ValueError when ``config`` cannot serve a training vocabulary of ``size`` words
        (``where`` names it in the message, e.g. "the vocabulary of data/ptb"); checked
        before a new run trains. Nothing by default."""

    def embed(self, ids: torch.Tensor, composed: Composed) -> torch.Tensor:
        """Input embeddings [*ids.shape, emb] of vocabulary ids, given this step's composition."""
        raise NotImplementedError

    def compose(self, grad: bool = True) -> Composed:
        """The vocabulary-wide output view of one step (``grad``: recorded by autograd)."""
        raise NotImplementedError

    def set_vocab(self, words: list[str], counts=None, generator: torch.Generator | None = None) -> None:
        """Serve ``words`` from now on; rows of words already in ``self.vocab`` are kept."""
        raise NotImplementedError

    def compose_words(self, words: list[str]) -> Composed:
        """Layers that ``composes_unseen_words``: the view over ``words`` alone that ``set_vocab(words)``
        then ``compose(grad=False)`` gives, this layer's own vocabulary unchanged."""
        raise NotImplementedError

    def unlisted(self, words: list[str]) -> list[str]:
        """Layers that ``needs_lexicon``: the words of ``words`` that its lexicon table has no row for,
        which it composes without what the table would give them; none for the other layers."""
        return []

    def regularization(self) -> torch.Tensor:
        """A penalty added to the training loss (zero by default)."""
        return next(self.parameters()).new_zeros(())
