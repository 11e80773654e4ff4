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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import torch

from .generation_settings import GenerateSettings


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


def generation_vocab(run, vocab: str | Path | Sequence[str] | None) -> list[str] | None:
    """The words ``run`` (a ``LoadedRun``) draws from: None for its own vocabulary ("model" or None);
    for GroC, the words of a list, of a word-list file (one word a line, optional count) or of a
    dataset directory's vocabulary, in their order, once each, without <unk> and with <eos>
    (which ends a sample). SettingError (``vocab ...``) for a table model or an empty list."""
    from .errors import GrocError, SettingError
    from .text.dataset import EOS, UNK, read_vocab_words

    if vocab is None or (isinstance(vocab, str) and vocab == "model"):
        return None
    if not run.composes:
        raise SettingError(f"`vocab` {vocab}: a {run.kind} run has output rows for its own words only; a vocabulary "
                           "chosen at generation time needs a GroC run, which composes any word's row")
    if isinstance(vocab, (str, Path)):
        try:
            words = read_vocab_words(Path(vocab))
        except GrocError as exc:  # a file the setting names: the setting's error
            raise SettingError(exc.text) from None
    else:
        words = [str(w) for w in vocab]
    words = [w for w in dict.fromkeys(words) if w != UNK]
    if not [w for w in words if w != EOS]:
        raise SettingError("`vocab` has no words to generate (besides <unk> and <eos>)")
    return words if EOS in words else words + [EOS]


def sample_stream(run, prompts: Iterable[list[str]], words: list[str] | None,
                  settings: GenerateSettings) -> Iterator[tuple[Sample, str | None]]:
    """``LoadedRun.generate_stream``: samples of ``run`` continuing each prompt (its words), drawn
    from ``words`` (``generation_vocab``'s; None: the run's own): (sample, word) as each word is
    drawn, then (sample, None) when the sample ends. A prompt's words outside the vocabulary are
    read by their composed rows (GroC, never drawn) or as <unk> (a table model)."""
    from .console import log
    from .models.lexicon import unlisted_warning
    from .text.dataset import EOS, UNK

    out = run.vocab if words is None else words
    size = len(out)
    eos = out.index(EOS) if words is not None else run.index[EOS]
    where = {w: i for i, w in enumerate(out)}
    # A chosen vocabulary never holds <unk> (generation_vocab); the run's own does, unless refused.
    banned = where.get(UNK) if not settings.unk else None
    generator = torch.Generator().manual_seed(settings.seed)
    unseen_noted = False

    def column(ids: list[int]) -> torch.Tensor:
        return torch.tensor(ids, dtype=torch.long, device=run.device).view(-1, 1)

    with torch.no_grad():
        rows = None if words is None else run.composer.rows(words)
        warning = words and unlisted_warning(run.model.output_layer, words, "`vocab`", run.run.path)
        if warning:
            log(warning)
        for tokens in prompts:
            extra = [w for w in dict.fromkeys(tokens) if w not in where]
            if extra and not run.composes:
                if not unseen_noted:
                    log(f"note: a {run.kind} run reads words outside its vocabulary as {UNK} (e.g. "
                        f"{', '.join(extra[:3])}); a GroC run composes them")
                    unseen_noted = True
                ids = [where.get(t, run.index[UNK]) for t in tokens]
                extra = []
            else:
                ids = [where[t] if t in where else size + extra.index(t) for t in tokens]
            view = run.composer.view(extra, rows)
            hidden, state = run.model(column([eos] + ids), run.start_state(), view)
            first = next_log_probs(view, hidden[-1:, 0], size, banned)
            for k in range(settings.num_samples):
                sample = Sample(" ".join(tokens), k)
                carried = [state]

                def step(i: int) -> torch.Tensor:
                    h, carried[0] = run.model(column([i]), carried[0], view)
                    return next_log_probs(view, h[-1:, 0], size, banned)

                for i, lp in sample_words(step, first, eos, settings, generator):
                    if i == eos:
                        sample.stop = "eos"
                        break
                    sample.words.append(out[i])
                    sample.log_probs.append(lp)
                    yield sample, out[i]
                yield sample, None


def next_log_probs(view, hidden: torch.Tensor, size: int, banned: int | None = None) -> torch.Tensor:
    """Log-probs (CPU, float64) over the first ``size`` words of ``view`` after ``hidden`` [1, emb];
    ``banned`` (a word's index, <unk>'s) at -inf, the others renormalised without it."""
    lp = renormalised(view.log_probs(hidden.float())[0].double().cpu(), size)
    if banned is not None:
        lp = lp.clone()
        lp[banned] = -math.inf
        lp = lp - torch.logsumexp(lp, 0)
    return lp


def renormalised(log_probs: torch.Tensor, size: int) -> torch.Tensor:
    """Log-probs over a view's words (1-D) restricted to its first ``size`` words, renormalised."""
    if log_probs.numel() <= size:
        return log_probs
    return log_probs[:size] - torch.logsumexp(log_probs[:size], 0)
