"""Token streams for language modeling: mapping dataset ids into a model's vocabulary and
cutting them into batch columns (Merity et al.'s batchify)."""

from __future__ import annotations

import numpy as np
import torch

from ..errors import GrocError
from ..text.dataset import Dataset, model_index, word_ids


def id_map(model_vocab: list[str], dataset: Dataset) -> np.ndarray:
    """For every dataset id, the model's id of the same word, or the model's <unk>."""
    index, unk = model_index(model_vocab)
    return word_ids(index, dataset.words, unk)


def model_ids(model_vocab: list[str], dataset: Dataset, split: str) -> torch.Tensor:
    return torch.from_numpy(id_map(model_vocab, dataset)[dataset.ids(split).astype(np.int64)])


def token_counts(ids: torch.Tensor, vocab_size: int) -> list[int]:
    """Training occurrences of each model word as the model reads them: <unk> counts every
    token outside the vocabulary (the dataset's own count_train only counts a literal <unk>)."""
    return torch.bincount(ids, minlength=vocab_size).tolist()


def batchify(ids: torch.Tensor, batch_size: int, rank: int = 0, world: int = 1) -> torch.Tensor:
    """[N] -> [N // (B * world), B]: B parallel streams per process (this rank's share)."""
    streams = batch_size * world
    length = ids.numel() // streams
    if length < 2:
        raise GrocError(f"{ids.numel()} tokens are too few for a batch size of {batch_size} x {world} process(es)")
    columns = ids[: length * streams].view(streams, length).t().contiguous()
    return columns[:, rank * batch_size : (rank + 1) * batch_size].contiguous()
