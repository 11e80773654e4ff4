"""``groc generate``'s settings: how words are drawn (``GenerateSettings``) and what is read besides the
run (``GenerateInput``). Torch-free, so that the command's help is built without loading torch;
``generation`` samples with them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from .settings import SEED_MAX, check_fields, same_as, setting
from .text.tokenizer import TextInput, check_text_input


@dataclass
class GenerateSettings:
    """How words are drawn; the command-line options are generated from these fields."""

    max_tokens: int = setting(50, "Words drawn per sample at most (a sample ends earlier at <eos>).", low=1)
    temperature: float = setting(1.0, "Divides the logits before drawing; 0 is greedy (the most probable word "
                                 "every time, the same text for every seed and sample).", low=0)
    top_k: int | None = setting(None, "Draw only among the k most probable words (default: all).", low=1)
    top_p: float | None = setting(None, "Nucleus sampling: draw only among the most probable words whose "
                                  "probabilities sum to at least p, in (0, 1] (default: all).", low=0, low_open=True, high=1)
    seed: int = setting(0, "Seed of the draws: the same seed gives the same samples on the same machine.", low=0,
                        high=SEED_MAX)
    num_samples: int = setting(1, "Samples per prompt.", low=1)
    unk: bool = setting(True, "Let samples draw <unk>, the run's word for every rare or unseen word (the default: the "
                        "model's own distribution, so <unk> may be emitted), or never draw it (no-unk: its "
                        "probability is shared among the other words, and the log-probabilities reported are over "
                        "them).", negation="no-unk")

    def __post_init__(self) -> None:
        check_fields(self)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class GenerateInput:
    """What ``groc generate`` reads besides its run: the words samples are drawn from (GroC: any
    word list, with a lexicon covering it) and how its prompts are read (``TextInput``'s settings)."""

    vocab: str | None = setting(None, "GroC: draw from these words instead of the run's own: a word list (one word a "
                                "line, optional count), a dataset directory (its vocabulary; a test-only dataset: every "
                                "word of its splits), a run directory (its model's words), or 'model'. The output layer "
                                "composes a row for each, including words the run never saw.",
                                metavar="FILE|DATASET|RUN|model")
    lexicon: Path | None = setting(None, "GroC: lexicon table from 'groc lexicon' covering `vocab`'s words (default: "
                                   "the run's own).")
    tokenize: bool = same_as(TextInput, "tokenize", help="Moses-tokenize each prompt first (raw text).")
    lower: bool = same_as(TextInput, "lower")

    def __post_init__(self) -> None:
        check_fields(self)
        check_text_input(self, "tokenized prompts are read as they are")
