"""Sampling text from a trained run (``groc generate``, ``LoadedRun.generate``), over the run's own
vocabulary or, for GroC, over a vocabulary chosen at generation time (issue 31).

A GroC output layer composes each word's output row from its characters (and lexicon), so the
softmax can range over any word list: a target domain's words, including words the model never
saw. A table model (lookup, tied, adaptive, ...) has a row for its own words only and refuses
another vocabulary.

Each sample starts, as ``groc score`` reads a line, from the run's start state (the mean state
after ``<eos>``), reads ``<eos>`` and the prompt, then draws one word at a time until ``<eos>`` or
``max_tokens`` words. The log-probability reported with each word is the model's (natural log,
temperature 1, before top-k/top-p) over the generation vocabulary; ``temperature``, ``top_k`` and
``top_p`` only shape the draw. Draws come from one ``torch.Generator`` seeded with ``seed`` on the
CPU, so a seed gives the same text on the same machine (the model's sums, and so the last bits of
its probabilities, depend on the CPU's kernels and the thread count: docs/reproduction.md).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator

import torch

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
                                "line, optional count), a dataset directory (its vocabulary), or 'model'. The output layer "
                                "composes a row for each, including words the run never saw.", metavar="FILE|DATASET|model")
    lexicon: Path | None = setting(None, "GroC: lexicon table from 'groc lexicon' covering `vocab`'s words (default: "
                                   "the run's own).")
    tokenize: bool = same_as(TextInput, "tokenize", help="Moses-tokenize each prompt first (raw text).")
    lower: bool = same_as(TextInput, "lower")

    def __post_init__(self) -> None:
        check_fields(self)
        check_text_input(self, "tokenized prompts are read as they are")


@dataclass
class Sample:
    """One generated sample: ``words`` (without the final <eos>) with ``log_probs`` (natural log,
    the model's over the generation vocabulary); ``stop`` is "eos" or "max_tokens"."""

    prompt: str
    index: int
    words: list[str] = field(default_factory=list)
    log_probs: list[float] = field(default_factory=list)
    stop: str = "max_tokens"

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def as_dict(self) -> dict:
        return {"prompt": self.prompt, "sample": self.index, "text": self.text,
                "tokens": [[w, lp] for w, lp in zip(self.words, self.log_probs)], "stop": self.stop}


def filtered_logits(log_probs: torch.Tensor, settings: GenerateSettings) -> torch.Tensor:
    """The logits the draw is made from (1-D): temperature, then top-k, then top-p; dropped words
    at -inf. The most probable word always stays."""
    logits = log_probs / settings.temperature
    if settings.top_k is not None and settings.top_k < logits.numel():
        kth = torch.topk(logits, settings.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if settings.top_p is not None and settings.top_p < 1.0:
        ordered, order = torch.sort(logits, descending=True)
        probs = torch.softmax(ordered, 0)
        # keep a word while the words before it sum to less than p (the first always stays)
        before = torch.cumsum(probs, 0) - probs
        drop = torch.zeros_like(logits, dtype=torch.bool)
        drop[order] = before >= settings.top_p
        logits = logits.masked_fill(drop, -math.inf)
    return logits


def draw(log_probs: torch.Tensor, settings: GenerateSettings, generator: torch.Generator) -> int:
    """One word's index: the most probable at temperature 0, else a draw from the filtered logits."""
    if settings.temperature == 0:
        return int(torch.argmax(log_probs))
    probs = torch.softmax(filtered_logits(log_probs, settings), 0)
    return int(torch.multinomial(probs, 1, generator=generator))


def sample_words(step, first: torch.Tensor, eos: int, settings: GenerateSettings,
                 generator: torch.Generator) -> Iterator[tuple[int, float]]:
    """(index, log-prob) of each word drawn, starting from the log-probs ``first``; ``step(index)``
    reads the drawn word and returns the next log-probs. Ends after <eos> (which it yields) or
    ``settings.max_tokens`` words."""
    log_probs = first
    for _ in range(settings.max_tokens):
        i = draw(log_probs, settings, generator)
        yield i, float(log_probs[i])
        if i == eos:
            return
        log_probs = step(i)
