"""Evaluation vocabularies: closed (the model's) or open (model ∪ the split's types, paper 5.1).

The evaluation vocabulary always starts with the model's words in the model's order, so
ids below ``model_size`` mean the same word for the model and for the evaluation; in
union mode the split's other types follow (in dataset id order, i.e. by frequency), so
"new word" is simply ``id >= model_size``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..console import log
from ..errors import GrocError
from ..models import output_layer_class
from ..text.dataset import UNK, Dataset
from ..training.run import read_vocab

VOCAB_MODES = ("model", "union")


@dataclass
class EvalVocab:
    mode: str
    words: list[str]  # evaluation vocabulary; words[:model_size] is the model's vocabulary
    model_size: int
    inputs: np.ndarray  # [N] int64 ids fed to the model (model ids, or union ids for GroC)
    targets: np.ndarray  # [N] int64 ids in the evaluation vocabulary
    oov: np.ndarray  # [N] bool: token not in the model's vocabulary

    @property
    def size(self) -> int:
        return len(self.words)

    @property
    def new_words(self) -> int:
        return self.size - self.model_size


def build_eval_vocab(model_words: list[str], dataset: Dataset, split: str, mode: str, compose_inputs: bool) -> EvalVocab:
    """``compose_inputs``: the model can embed any word (GroC), so in union mode its inputs
    use union ids too; table models read <unk> for words they have no row for."""
    if mode not in VOCAB_MODES:
        raise GrocError(f"--vocab {mode!r}: expected one of {', '.join(VOCAB_MODES)}")
    index = {w: i for i, w in enumerate(model_words)}
    if UNK not in index:
        raise GrocError("the model's vocabulary has no <unk>; it cannot score words outside it")
    unk = index[UNK]
    split_ids = dataset.ids(split)  # the dataset's width: indexing needs no int64 copy of the split
    if split_ids.size < 2:
        raise GrocError(f"the {split} split has {split_ids.size} token(s); at least 2 are needed to predict anything")
    # dataset id -> model id (or -1)
    to_model = np.fromiter((index.get(w, -1) for w in dataset.words), dtype=np.int64, count=len(dataset.words))
    model_ids = to_model[split_ids]
    oov = model_ids < 0
    closed = np.where(oov, unk, model_ids)
    if mode == "model":
        return EvalVocab(mode, list(model_words), len(model_words), closed, closed, oov)
    present = np.unique(split_ids)
    new_dataset_ids = present[to_model[present] < 0]
    words = list(model_words) + [dataset.words[i] for i in new_dataset_ids]
    to_eval = to_model.copy()
    to_eval[new_dataset_ids] = np.arange(len(model_words), len(words))
    targets = to_eval[split_ids]
    return EvalVocab(mode, words, len(model_words), targets if compose_inputs else closed, targets, oov)


def untrained_unk_warning(model_words: list[str], model_counts: list[int], vocab: EvalVocab, compose_inputs: bool) -> str | None:
    """A warning when a table model will read <unk> for words outside its vocabulary although
    <unk> never occurred in its training data: that input row was only ever pushed down as
    an output, never learned as an input, and can derail the prefix network (seen on web
    text with a Reuters model whose every training word is in its vocabulary: in-vocabulary
    tokens went from 7.8 to 13.1 nats). GroC composes every input, so it is not affected."""
    if compose_inputs:
        return None
    inputs = int(vocab.oov[:-1].sum())  # the last token is only ever a target
    unk = model_words.index(UNK)
    if inputs == 0 or model_counts[unk] > 0:
        return None
    total = len(vocab.oov) - 1
    return (f"warning: <unk> never occurred in this model's training data, so its input embedding is untrained, "
            f"but {inputs:,} of the {total:,} inputs here ({100 * inputs / total:.1f}%) are outside the model's vocabulary "
            f"and are read as <unk>; perplexities may be far worse than the model's own. A vocabulary that maps rare "
            f"training words to <unk> (groc prepare --min-count 2) trains that row.")


def run_eval_vocab(run, dataset: Dataset, split: str, mode: str) -> tuple[list[str], list[int], EvalVocab]:
    """The run's vocabulary (words, training counts) and the evaluation vocabulary of
    ``split``, for ``eval`` and ``dump`` alike; logs ``untrained_unk_warning`` if it applies."""
    model_words, model_counts = read_vocab(run.path)
    compose_inputs = output_layer_class(run.model_config.output).composes_unseen_words
    vocab = build_eval_vocab(model_words, dataset, split, mode, compose_inputs)
    warning = untrained_unk_warning(model_words, model_counts, vocab, compose_inputs)
    if warning:
        log(warning)
    return model_words, model_counts, vocab
