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
from ..text.dataset import UNK, Dataset, model_index, word_ids
from ..run_storage import read_vocab
from .settings import VOCAB_MODES, check_vocab  # noqa: F401 (VOCAB_MODES: for the readers of this module)


@dataclass
class EvalVocab:
    mode: str
    model_words: list[str]  # the model's vocabulary: ids below model_size
    added: list[str]  # union: the evaluated words outside it, ids model_size... (empty in model mode)
    inputs: np.ndarray  # [N] int64 ids fed to the model (model ids, or union ids for GroC)
    targets: np.ndarray  # [N] int64 ids in the evaluation vocabulary
    oov: np.ndarray  # [N] bool: token not in the model's vocabulary

    @property
    def words(self) -> list[str]:
        """The evaluation vocabulary: the model's words, then the added ones."""
        return self.model_words + self.added if self.added else self.model_words

    @property
    def model_size(self) -> int:
        return len(self.model_words)

    @property
    def size(self) -> int:
        return self.model_size + len(self.added)

    @property
    def new_words(self) -> int:
        return len(self.added)


def build_eval_vocab(model_words: list[str], dataset: Dataset, split: str, mode: str, compose_inputs: bool) -> EvalVocab:
    """``compose_inputs``: the model can embed any word (GroC), so in union mode its inputs
    use union ids too; table models read <unk> for words they have no row for."""
    check_vocab(mode)
    index, unk = model_index(model_words)
    split_ids = dataset.ids(split)  # the dataset's width: indexing needs no int64 copy of the split
    if split_ids.size < 2:
        raise GrocError(f"the {split} split has {split_ids.size} token(s); at least 2 are needed to predict anything")
    return _eval_vocab(list(model_words), index, unk, dataset.words, split_ids, mode, compose_inputs)


def line_vocab(model_words: list[str], index: dict[str, int], tokens: list[str], mode: str,
               compose_inputs: bool) -> EvalVocab:
    """The evaluation vocabulary of one token stream read alone (a line of ``groc score`` and
    ``load_run``: <eos>, its words, <eos>), as ``build_eval_vocab`` of a split holding just it;
    new words follow the model's in the order they first occur. ``index``: ``model_index``'s."""
    types = list(dict.fromkeys(tokens))
    where = {w: i for i, w in enumerate(types)}
    ids = np.fromiter((where[w] for w in tokens), dtype=np.int64, count=len(tokens))
    return _eval_vocab(model_words, index, index[UNK], types, ids, mode, compose_inputs)


def _eval_vocab(model_words: list[str], index: dict[str, int], unk: int, types, ids: np.ndarray, mode: str,
                compose_inputs: bool) -> EvalVocab:
    """``ids``: the stream as positions in ``types``, its distinct words (a dataset's vocabulary);
    union mode adds the types outside the model that occur, in ``types`` order."""
    to_model = word_ids(index, types, -1)  # type -> model id (or -1)
    model_ids = to_model[ids]
    oov = model_ids < 0
    closed = np.where(oov, unk, model_ids)
    if mode == "model":
        return EvalVocab(mode, model_words, [], closed, closed, oov)
    present = np.unique(ids)
    new_types = present[to_model[present] < 0]
    to_eval = to_model.copy()
    to_eval[new_types] = np.arange(len(model_words), len(model_words) + len(new_types))
    targets = to_eval[ids]
    return EvalVocab(mode, model_words, [types[i] for i in new_types], targets if compose_inputs else closed, targets, oov)


class StreamIds:
    """Ids of words read line by line as one stream (``load_run``'s cache memory): the model's, and
    in union mode one id per new word for the whole stream, so that the cache recognises a new
    word seen on an earlier line, as eval's union ids do over a split; <unk> in model mode."""

    def __init__(self, model_words: list[str], index: dict[str, int], mode: str):
        self.index, self.unk, self.mode, self.model_size = index, index[UNK], mode, len(model_words)
        self.added: dict[str, int] = {}

    def __call__(self, words: list[str]) -> np.ndarray:
        ids = word_ids(self.index, words, -1 if self.mode == "union" else self.unk)
        for i in np.flatnonzero(ids < 0):
            ids[i] = self.added.setdefault(words[i], self.model_size + len(self.added))
        return ids


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
