"""The score stage: each line's log-probability, token count and perplexity under a run, as text
lines streamed as they are scored (``groc score``, KenLM's `query` for groc runs).

``run_score(ScoreSettings(...), load_run(run_dir, vocab=settings.vocab), lines)`` is ``groc
score``; the command parses its flags into these settings (and the cache's, ``EvalSettings``'),
reads its input and writes each line this yields.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Iterator

from .console import strict_json
from .evaluation.settings import EvalSettings
from .errors import SettingError
from .settings import check_fields, setting


@dataclass
class ScoreSettings:
    """How ``groc score`` reads its lines and writes their scores; the command-line options are
    generated from these fields (the cache's from ``EvalSettings`` and the cache registry)."""

    tokenize: bool = setting(False, "Moses-tokenize each line first (raw text); by default lines are already tokenized "
                             "(split on whitespace).", negation=False)
    lower: bool = setting(False, "With `tokenize`: lowercase, as 'groc tokenize --lower'.", negation=False)
    vocab: str = setting("union", "union: open vocabulary, as 'eval `vocab` union' (GroC composes unseen words; table "
                         "models give them a uniform share of 0.01), over the model's words plus the line's new words. "
                         "model: closed vocabulary, unseen words scored as <unk>.", choices=("model", "union"))
    reset_per_line: bool = setting(True, "Score each line from the run's start state (the mean state after <eos> of "
                                   "held-out text; default), or carry the state from line to line as one document "
                                   "starting from zeros (as 'groc eval').", negation="one-stream")
    log10: bool = setting(False, "Write base-10 log-probabilities (KenLM's convention) instead of natural logs.",
                          negation=False)
    per_word: bool = setting(False, "Add each token's log-probability (the line's words, then <eos>).", negation=False)
    as_json: bool = setting(False, "One JSON object per line instead of TSV.", flag="--json", negation=False)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.lower and not self.tokenize:
            raise SettingError("`lower` applies with `tokenize` only (tokenized input is scored as it is)")


def run_score(settings: ScoreSettings, run, lines: Iterable[str], cache: str = "none",
              cache_weight: float = EvalSettings.cache_weight, **cache_settings) -> Iterator[str]:
    """The output lines (without their newlines) of scoring ``lines`` (text) with ``run`` (a
    ``LoadedRun``): a TSV header, then one line per input line as it is scored (one JSON object
    per line with ``as_json``). ``cache`` and its settings as ``LoadedRun.score_stream``'s, which
    checks them here (SettingError naming the setting), before any line is read."""
    if settings.tokenize:
        from .text.tokenizer import TokenizeOptions, tokenize_line

        options = TokenizeOptions(lower=settings.lower)
        lines = (tokenize_line(line, options) for line in lines)
    scores = run.score_stream((line.split() for line in lines), reset=settings.reset_per_line, cache=cache,
                              cache_weight=cache_weight, **cache_settings)
    return _rows(settings, scores)


def _rows(settings: ScoreSettings, scores) -> Iterator[str]:
    scale = 1 / math.log(10) if settings.log10 else 1.0
    base = "log10" if settings.log10 else "ln"
    if not settings.as_json:
        yield "\t".join([f"{base}_prob", "tokens", "perplexity"] + (["word_log_probs"] if settings.per_word else []))
    for result in scores:
        total = result.log_prob * scale
        if settings.as_json:
            row = {f"{base}_prob": total, "tokens": result.tokens, "perplexity": result.perplexity}
            if settings.per_word:
                row["words"] = [[w, lp * scale] for w, lp in result.word_log_probs]
            yield strict_json(row)
        else:
            cells = [f"{total:.6f}", str(result.tokens), f"{result.perplexity:.3f}"]
            if settings.per_word:
                cells.append(" ".join(f"{lp * scale:.6f}" for _, lp in result.word_log_probs))
            yield "\t".join(cells)
