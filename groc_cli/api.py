"""A trained run as a Python object: score sentences, next-word distributions, composed embeddings,
generated text (``generation.py``).

    from groc_cli import load_run
    run = load_run("runs/ptb-groc")
    run.score(["the cat sat", "a dog"])   # per sentence: log_prob (natural log), tokens, perplexity
    run.generate("the cat", max_tokens=20, seed=1, vocab="words.txt")   # samples (GroC: any vocabulary)

Conventions, the same as ``groc eval`` (see docs/api.md):

* every sentence ends with ``<eos>``, which is scored (datasets store one after each line);
* a sentence is read after ``<eos>`` from the checkpoint's start state: the mean state the
  model is in after an ``<eos>`` of held-out text (``start_state.py``), so that it
  reads a lone sentence as a line that follows another line of a dataset; runs trained before
  start states existed start from zeros (``reset=False`` carries the state from one sentence
  to the next instead);
* open vocabulary (``groc eval --vocab union``) over the model's words plus the sentence's new
  words: GroC composes the new words from their characters (and lexicon); a table model
  reads them as ``<unk>`` and mixes a uniform share u = 0.01 into every prediction,
  p = (1 - u) p_model + u / |vocabulary|. ``vocab="model"`` is eval's closed vocabulary
  (unknown words are scored as ``<unk>``).

The loading is ``groc eval``'s (``run_storage.Run.build``), and so is the scoring: a line's
evaluation vocabulary (``evaluation.vocab.line_vocab``), the model's chunks
(``evaluation.stream.model_chunks``), the uniform share (``evaluation.perplexity``) and any cache
the registry holds that scores lines as they come (``evaluation.cached``). Nothing here is
imported by ``import groc_cli``, so the package stays cheap to import.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import torch

from .errors import GrocError, SettingError, as_setting_error
from .evaluation.cached import CachedStream
from .evaluation.perplexity import mix_uniform, uniform_share
from .evaluation.settings import EvalSettings
from .evaluation.stream import Chunk, model_chunks
from .evaluation.vocab import VOCAB_MODES, StreamIds, line_vocab
from .generation import GenerateSettings, Sample, generation_vocab, renormalised, sample_stream
from .models.common import SoftmaxComposed
from .runtime import resolve_device
from .scoring import batch_log_probs, line_cache
from .settings import check_type
from .text.dataset import EOS, UNK
from .run_storage import Run
from .start_state import load_start_state

#: Sentences up to this many predictions are scored together by ``score`` (one LSTM call over a
#: batch of them, padded): one sentence at a time spent most of its time in per-call overhead
#: (about 33 ms a three-word sentence on a paper-size model). Longer ones go through eval's chunks.
BATCH_POSITIONS = 256
#: Padded positions (batch x longest sentence) per batched LSTM call.
BATCH_TOKENS = 8192

#: Composed embeddings of words outside the model's vocabulary kept between sentences (GroC);
#: the memo is emptied when it grows past this, so memory stays bounded on endless input.
NEW_WORD_MEMO = 50_000


@dataclass
class SentenceScore:
    """One sentence's score: ``log_prob`` is the natural-log total over ``tokens`` predictions
    (its words and the final <eos>); ``word_log_probs`` pairs each of them with its log-prob."""

    log_prob: float
    tokens: int
    word_log_probs: list[tuple[str, float]] = field(default_factory=list)

    @property
    def perplexity(self) -> float:
        mean = -self.log_prob / self.tokens
        return math.exp(mean) if mean < 700 else math.inf


class Composer:
    """GroC: the rows of any words over ``model`` (``index``: its words' ids): its own rows for its
    words, and for the others the rows its output layer composes (``compose_words``: each word as
    in eval's union vocabulary, its rows independent of the other words in eval mode), kept in
    ``memo`` up to ``NEW_WORD_MEMO`` words."""

    def __init__(self, model, index: dict[str, int]):
        self.model, self.index = model, index
        self.memo: dict[str, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def rows(self, words: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(output rows, biases, input rows) of ``words``."""
        known = [self.index.get(w) for w in words]
        new = [w for w, i in zip(words, known) if i is None]
        if new:
            missing = [w for w in dict.fromkeys(new) if w not in self.memo]
            if len(self.memo) + len(missing) > NEW_WORD_MEMO:
                self.memo.clear()
                missing = list(dict.fromkeys(new))
            if missing:
                c = self.model.output_layer.compose_words(missing)
                self.memo.update((w, (c.weight[i], c.bias[i], c.input_weight[i])) for i, w in enumerate(missing))
            composed = tuple(torch.stack(rows) for rows in zip(*(self.memo[w] for w in new)))
            if len(new) == len(words):
                return composed
        base = self.model.compose(grad=False)
        table = (base.weight, base.bias, base.input_weight)
        if new:
            table = tuple(torch.cat(pair) for pair in zip(table, composed))
        places, j = [], len(self.index)
        for i in known:
            places.append(j if i is None else i)
            j += i is None
        at = torch.tensor(places, dtype=torch.long, device=base.weight.device)
        return tuple(t[at] for t in table)

    def view(self, after: list[str], rows=None):
        """The output view over ``rows`` (of ``rows``; None: the model's words) followed by the
        words ``after`` (GroC; a table model's view is its own)."""
        base = self.model.compose(grad=False)
        if not self.model.output_layer.composes_unseen_words or (rows is None and not after):
            return base
        if rows is None:
            rows = (base.weight, base.bias, base.input_weight)
        if after:
            rows = tuple(torch.cat(pair) for pair in zip(rows, self.rows(after)))
        return SoftmaxComposed(rows[0], rows[1], grad=False, input_weight=rows[2])


class LoadedRun:
    """A run's model in eval mode; see the module docstring for the scoring conventions."""

    def __init__(self, path: Path, checkpoint: str = "best", device: str = "cpu", vocab: str = "union",
                 lexicon: str | Path | None = None, threads: str | int | None = "auto"):
        _check_arguments(path=path, checkpoint=checkpoint, device=device, vocab=vocab, lexicon=lexicon, threads=threads)
        from .runtime import set_threads, settle_vector_math

        if threads is not None:  # as the commands do: torch's own default oversubscribes a busy machine
            set_threads(threads)
        settle_vector_math()  # torch's own thread count too (None): the same numbers every time
        self.run = Run(Path(path))
        self.kind = self.run.model_config.output
        self.vocab_mode = vocab
        self.device = resolve_device(device)
        table = None
        if lexicon is not None:  # GroC: another lexicon for the words it composes (eval's --lexicon)
            from .evaluation.stream import load_lexicon

            table = load_lexicon(lexicon, self.kind)
        self.model, words, self.counts = self.run.build(checkpoint, lexicon=table, device=self.device)
        self.model.eval()
        self._start = load_start_state(self.run.checkpoint(checkpoint), self.model)
        self.vocab: list[str] = list(words)
        self.index = {w: i for i, w in enumerate(self.vocab)}
        if UNK not in self.index or EOS not in self.index:
            raise GrocError(f"run {self.run.path}: its vocabulary lacks {UNK} or {EOS}, which scoring needs")
        self.composer = Composer(self.model, self.index)  # GroC: rows of any words

    # -- what the run is -------------------------------------------------------------------
    @property
    def config(self) -> dict:
        """The run's config.json: model and training settings, dataset checksum, versions."""
        return self.run.config

    @property
    def composes(self) -> bool:
        """Whether the model embeds any word from its characters (GroC: its output layer
        ``composes_unseen_words``)."""
        return self.model.output_layer.composes_unseen_words

    def to(self, device: str | torch.device) -> "LoadedRun":
        self.device = resolve_device(str(device))
        self.model.to(self.device)
        if self._start is not None:
            self._start = [(h.to(self.device), c.to(self.device)) for h, c in self._start]
        self.composer.memo.clear()
        return self

    # -- composition (GroC) ------------------------------------------------------------------
    def embed_words(self, words: Sequence[str]) -> torch.Tensor:
        """GroC: composed output embeddings [len(words), emb] of any words, seen or not."""
        words = _words(words, "embed_words")
        if not self.composes:
            raise GrocError(f"embed_words composes words from their characters: GroC runs only (this run is {self.kind})")
        if not words:
            return torch.empty(0, self.run.model_config.emb)
        with torch.no_grad():
            return self.composer.rows(words)[0].cpu()

    # -- scoring -----------------------------------------------------------------------------
    def start_state(self):
        """The LSTM state a sentence starts from (see the module docstring)."""
        if self._start is None:
            return self.model.init_state(1)
        return [(h.clone(), c.clone()) for h, c in self._start]

    def _line(self, tokens: list[str], state=None, hidden: bool = False) -> tuple[Chunk, np.ndarray]:
        """``tokens`` + <eos> after <eos> through eval's path: the evaluation vocabulary of the line
        (``vocab.line_vocab``), the model's chunks from ``state`` (None: the start state) and step 3's
        uniform share (``perplexity``). Returns the line as one Chunk (``hidden``: with its hidden
        states; ``state``: the state after the final <eos>) and its log-probs after the share."""
        vocab = line_vocab(self.vocab, self.index, [EOS, *tokens, EOS], self.vocab_mode, self.composes)
        with torch.no_grad():
            # Time chunks with the state carried, and the softmax of each chunk in row blocks, as eval's:
            # memory is bounded by the chunk and LOGIT_BYTES, not by the line (a 5-million-character
            # line built a 23.7 GB tokens x vocabulary matrix).
            chunks = model_chunks(self.model, vocab, self.device, EvalSettings.chunk, composed=self.composer.view(vocab.added),
                                  state=self.start_state() if state is None else state)
            line = Chunk.join([c if hidden else dataclasses.replace(c, hidden=None) for c in chunks], hidden)
        u = uniform_share(self.composes, self.vocab_mode)
        if u == 0:
            return line, line.logp
        return line, mix_uniform(torch.from_numpy(line.logp), u, vocab.size).numpy()

    def score_tokens(self, tokens: list[str], state=None, hidden_out: list | None = None):
        """Log-probs (natural) of ``tokens`` + <eos> after <eos>, from ``state`` (None: fresh);
        returns (log-probs as a list of floats, the state after the final <eos>). The hidden
        states that predicted them are appended to ``hidden_out`` when given (for caches)."""
        line, logp = self._line(_words(tokens, "score_tokens"), state, hidden_out is not None)
        if hidden_out is not None:
            hidden_out.append(line.hidden)
        return logp.tolist(), line.state

    def score_stream(self, sentences: Iterable[Sequence[str] | str], reset: bool = True, cache: str = "none",
                     cache_weight: float = EvalSettings.cache_weight, **cache_settings) -> Iterator[SentenceScore]:
        """``score`` one sentence at a time, for inputs too long to hold. ``cache``: none or a cache
        ``groc eval --cache`` runs that scores lines as they come (``line_cache_kinds()``: unigram,
        local and any other registered one that does not need the stream's length; not unbounded),
        with its settings by name (``theta``, ``cache_size``, ...; ``cache_weight`` is the cache's
        share); its memory runs over all the sentences, as over the lines of one document. The
        settings are checked here (SettingError naming the setting), before any sentence is read."""
        check_type("reset", reset, bool)
        cached = line_cache(self, cache, cache_weight, cache_settings)
        return self._scores(_sentences(sentences, "score_stream"), reset, cached)

    def _scores(self, sentences, reset: bool, cached: CachedStream | None) -> Iterator[SentenceScore]:
        # One stream starts, as groc eval's does, from zeros; lone sentences from the start state.
        state = None if reset else self.model.init_state(1)
        ids = StreamIds(self.vocab, self.index, self.vocab_mode) if cached is not None else None
        for sentence in sentences:
            tokens = _words(sentence, "score", split=True)
            line, logp = self._line(tokens, None if reset else state, hidden=cached is not None)
            state = None if reset else line.state
            if cached is not None:  # the cache reads stream-wide ids, and the line in one piece
                ((_, _, final),) = cached.run([(dataclasses.replace(line, targets=ids(tokens + [EOS])), logp)])
                logp = final[:, 0]
            yield _score(tokens, logp)

    def score(self, sentences: Iterable[Sequence[str] | str], reset: bool = True) -> list[SentenceScore]:
        """Score sentences (token lists, or strings split on whitespace); ``reset=False``
        reads them as one stream (the state carries over, as in ``groc eval``)."""
        if isinstance(sentences, (str, bytes, bytearray)):
            raise SettingError("score takes a list of sentences; wrap a single sentence in a list")
        if not reset:  # one stream: each line starts from the state the previous one left
            return list(self.score_stream(_sentences(sentences, "score"), reset))
        check_type("reset", reset, bool)
        lines = [_words(sentence, "score", split=True) for sentence in _sentences(sentences, "score")]
        scores: list[SentenceScore | None] = [None] * len(lines)
        short = sorted((i for i, t in enumerate(lines) if len(t) + 1 <= BATCH_POSITIONS), key=lambda i: len(lines[i]))
        batch: list[int] = []
        for i in short + [None]:  # by length, so that a batch pads little
            if batch and (i is None or (len(batch) + 1) * (len(lines[i]) + 1) > BATCH_TOKENS):
                for j, logp in zip(batch, batch_log_probs(self, [lines[j] for j in batch])):
                    scores[j] = _score(lines[j], logp)
                batch = []
            if i is not None:
                batch.append(i)
        for i, tokens in enumerate(lines):  # the long ones, in eval's time chunks
            if scores[i] is None:
                scores[i] = _score(tokens, self._line(tokens)[1])
        return scores

    # -- generation --------------------------------------------------------------------------
    def generation_vocab(self, vocab: str | Path | Sequence[str] | None = None) -> list[str] | None:
        """The words a sample is drawn from: None for the run's own; for GroC, those ``vocab`` names (a
        list, a word-list file or a dataset directory), once each, with <eos> (``generation.generation_vocab``)."""
        return generation_vocab(self, vocab)

    def generate(self, prompts: Iterable[Sequence[str] | str] | str = ("",), vocab: str | Path | Sequence[str] | None = None,
                 **settings) -> list[Sample]:
        """Samples continuing each prompt (a string split on whitespace, or a token list; "" starts a
        line from nothing), ``num_samples`` per prompt, in order. ``vocab``: see ``generation_vocab``;
        ``settings``: max_tokens, temperature (0: greedy), top_k, top_p, seed, num_samples, unk (False: never draw <unk>)
        (``generation.GenerateSettings``). Each sample has ``words``, ``log_probs``, ``text``, ``stop``."""
        return [sample for sample, word in self.generate_stream(prompts, vocab, **settings) if word is None]

    def generate_stream(self, prompts: Iterable[Sequence[str] | str] | str = ("",),
                        vocab: str | Path | Sequence[str] | None = None, **settings) -> Iterator[tuple[Sample, str | None]]:
        """``generate`` one word at a time: (sample, word) as each word is drawn, then (sample, None)
        when the sample ends (its ``stop`` set). Prompts are read as they come (a file streams)."""
        try:
            with as_setting_error():
                s = GenerateSettings(**settings)
        except TypeError as exc:
            raise SettingError(f"generate: {exc}") from None
        prompts = _sentences([prompts] if isinstance(prompts, str) else prompts, "generate")
        words = self.generation_vocab(vocab)
        yield from sample_stream(self, (_words(prompt, "generate", split=True) for prompt in prompts), words, s)

    def log_probs(self, prefix: Sequence[str] | str) -> torch.Tensor:
        """Next-word log-probabilities (natural log) over ``vocab`` after <eos> + ``prefix``,
        in closed vocabulary: a tensor of len(vocab) that sums (in probability) to 1.
        ``dict(zip(run.vocab, run.log_probs("the").tolist()))`` gives a word -> log-prob dict."""
        tokens = _words(prefix, "log_probs", split=True)
        # GroC reads new words of the prefix by their composed input rows; table models as <unk>.
        vocab = line_vocab(self.vocab, self.index, [EOS, *tokens], self.vocab_mode, self.composes)
        with torch.no_grad():
            composed = self.composer.view(vocab.added)
            x = torch.from_numpy(vocab.inputs).to(self.device).view(-1, 1)
            hidden, _ = self.model(x, self.start_state(), composed)
            # renormalised over the model's own words
            lp = renormalised(composed.log_probs(hidden[-1:, 0].float())[0], len(self.vocab))
        return lp.cpu()


def _words(value, caller: str, split: bool = False) -> list[str]:
    """The words of ``value``, a sequence of str tokens (``split``: or one str, split on whitespace,
    where ``caller`` documents it). Every entry point checks its words here: a str where a list is
    expected would be read one character a word, bytes or numbers as words that never occur."""
    if isinstance(value, str):
        if "\x00" in value:  # as the command line refuses a line with a NUL byte
            raise SettingError(f"{caller}: a NUL character in {value[:40]!r}; words are text")
        if split:
            return value.split()
        raise SettingError(f"{caller} takes a list of words, not a str (which it would read one character a word); "
                        f"wrap it: [{value[:20]!r}]")
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, Iterable):
        raise SettingError(f"{caller} takes a list of str words, got {type(value).__name__}")
    words = list(value)
    for w in words:
        if not isinstance(w, str) or not w or len(w.split()) != 1 or w.split()[0] != w or "\x00" in w:
            raise SettingError(f"{caller}: each word must be a non-empty str without whitespace, got {w!r}"
                            + (" (decode bytes first)" if isinstance(w, (bytes, bytearray)) else ""))
    return words


def _score(tokens: list[str], logp: np.ndarray) -> SentenceScore:
    logps = logp.tolist()
    return SentenceScore(float(sum(logps)), len(logps), list(zip(tokens + [EOS], logps)))


def _sentences(value, caller: str) -> Iterable:
    """``value`` as an iterable of sentences; SettingError for a number, None or bytes."""
    if isinstance(value, (bytes, bytearray)) or not isinstance(value, Iterable):
        raise SettingError(f"{caller} takes a list of sentences (str, or lists of str words), got {type(value).__name__}")
    return value


def _check_arguments(path, checkpoint, device, vocab, lexicon, threads) -> None:
    """``load_run``'s arguments, each a SettingError naming it (never a TypeError from Path or torch)."""
    for name, value in (("path", path), ("checkpoint", checkpoint), ("device", device), ("vocab", vocab)):
        if value is None:
            raise SettingError(f"`{name}` None: give a value")
    check_type("path", path, Path)
    check_type("checkpoint", checkpoint, str)
    if checkpoint not in ("best", "last"):
        raise SettingError(f"`checkpoint` {checkpoint!r}: expected best or last")
    check_type("device", device, str)
    check_type("vocab", vocab, str)
    if vocab not in VOCAB_MODES:
        raise SettingError(f"`vocab` {vocab!r}: expected one of {', '.join(VOCAB_MODES)}")
    if lexicon is not None:
        check_type("lexicon", lexicon, Path)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, str))):
        raise SettingError(f"`threads` {threads!r}: expected a whole number of at least 1, auto, or None")


def load_run(path: str | Path, checkpoint: str = "best", device: str = "cpu", vocab: str = "union",
             lexicon: str | Path | None = None, threads: str | int | None = "auto") -> LoadedRun:
    """Load a run directory written by ``groc train`` or ``groc finetune`` (``checkpoint``:
    best or last; ``device``: cpu, cuda, cuda:N or auto; ``vocab``: union or model; ``lexicon``:
    GroC, a lexicon table from ``groc lexicon`` for the words it composes, instead of the run's;
    ``threads``: torch's CPU threads in this process as the commands set them, a number or auto,
    the cores other work leaves free; None leaves torch's setting as it is)."""
    _check_arguments(path, checkpoint, device, vocab, lexicon, threads)
    return LoadedRun(Path(path), checkpoint, device, vocab, lexicon, threads)
