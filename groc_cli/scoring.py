"""The score stage: each line's log-probability, token count and perplexity under a run, as text
lines streamed as they are scored (``groc score``, KenLM's `query` for groc runs).

``run_score(ScoreSettings(...), load_run(run_dir, vocab=settings.vocab), lines)`` is ``groc
score``; the command parses its flags into these settings (and the cache's, ``EvalSettings``'),
reads its input and writes each line this yields. ``LoadedRun.score`` scores short lines together
(``batch_log_probs``) and ``score_stream`` builds its cache here (``line_cache``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Iterator

from .console import strict_json
from .evaluation.settings import EvalSettings, check_unit, line_cache_kinds
from .errors import SettingError
from .settings import check_fields, check_type, default_of, hints, inapplicable, same_as, setting
from .text.tokenizer import TextInput, check_text_input, text_lines


#: Layouts of ``groc score``'s output: its own TSV, or KenLM query's (``kenlm_rows``).
LAYOUTS = ("tsv", "kenlm")


@dataclass
class ScoreSettings:
    """How ``groc score`` reads its lines and writes their scores; the command-line options are
    generated from these fields (the cache's from ``EvalSettings`` and the cache registry)."""

    tokenize: bool = same_as(TextInput, "tokenize")
    lower: bool = same_as(TextInput, "lower")
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
    layout: str = setting("tsv", "tsv: a header, then log-probability, tokens and perplexity per line. kenlm: as KenLM's "
                          "query, always in log10: per line 'word=id n log10prob' for each word and </s>, tab-separated "
                          "(id in the run's vocabulary, an out-of-vocabulary word gets <unk>'s; n: the tokens the "
                          "prediction reads in its line, <eos> before it included, where KenLM writes its n-gram's "
                          "length), then 'Total: T OOV: K'; after the last line the perplexity including and "
                          "excluding OOVs, OOVs and Tokens.", flag="--format", choices=LAYOUTS)

    def __post_init__(self) -> None:
        check_fields(self)
        check_text_input(self, "tokenized input is scored as it is")
        if self.layout == "kenlm" and self.as_json:
            raise SettingError("`as_json` and `layout` kenlm are two layouts of the same scores; pick one")


def run_score(settings: ScoreSettings, run, lines: Iterable[str], cache: str = "none",
              cache_weight: float = EvalSettings.cache_weight, **cache_settings) -> Iterator[str]:
    """The output lines (without their newlines) of scoring ``lines`` (text) with ``run`` (a
    ``LoadedRun``): a TSV header, then one line per input line as it is scored (one JSON object
    per line with ``as_json``). ``cache`` and its settings as ``LoadedRun.score_stream``'s, which
    checks them here (SettingError naming the setting), before any line is read."""
    scores = run.score_stream((line.split() for line in text_lines(lines, settings)), reset=settings.reset_per_line, cache=cache,
                              cache_weight=cache_weight, **cache_settings)
    if settings.layout == "kenlm":
        from .text.dataset import UNK

        return kenlm_rows(scores, run.index, run.index[UNK])
    return _rows(settings, scores)


def kenlm_rows(scores, index: dict[str, int], unk: int) -> Iterator[str]:
    """The lines KenLM's `query` writes for the same sentences, in log10 (its FullPrint): per sentence
    ``word=id n logprob`` tab-separated for each word and ``</s>``, then ``Total: T OOV: K``; after the
    last, the corpus's perplexity including and excluding OOV tokens, its OOVs and its tokens. An OOV is
    a word outside the run's vocabulary (id: <unk>'s), scored as the run's vocabulary mode scores it; n,
    KenLM's n-gram length, is the number of tokens the prediction reads within its line (<eos> before
    it included: the first word reads 1 token and is written 2, as a bigram after <s>)."""
    scale = 1 / math.log(10)
    total = oov_total = 0.0
    tokens = oovs = 0
    for result in scores:
        cells, line_total, line_oov = [], 0.0, 0
        last = len(result.word_log_probs) - 1
        for i, (word, lp) in enumerate(result.word_log_probs):
            lp10 = lp * scale
            shown = "</s>" if i == last else word
            known = index.get(word)
            if known is None:
                line_oov += 1
                oov_total += lp10
            cells.append(f"{shown}={unk if known is None else known} {i + 2} {lp10:g}")
            line_total += lp10
        total += line_total
        tokens += len(result.word_log_probs)
        oovs += line_oov
        yield "\t".join(cells + [f"Total: {line_total:g} OOV: {line_oov}"])
    yield f"Perplexity including OOVs:\t{_ppl10(total, tokens):g}"
    yield f"Perplexity excluding OOVs:\t{_ppl10(total - oov_total, tokens - oovs):g}"
    yield f"OOVs:\t{oovs}"
    yield f"Tokens:\t{tokens}"


def _ppl10(log10_total: float, count: int) -> float:
    if count == 0:
        return math.nan
    mean = -log10_total / count
    return 10.0 ** mean if mean < 300 else math.inf


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


def line_cache(run, kind: str, weight: float, settings: dict):
    """The cache of ``run``'s (a ``LoadedRun``) ``score_stream``: None for none, else a ``CachedStream``
    of the registry's ``kind``, with its settings checked and built as ``groc eval``'s."""
    kinds = line_cache_kinds()
    check_type("cache", kind, str)
    if kind not in kinds:
        raise SettingError(f"`cache` {kind!r}: expected one of {', '.join(kinds)} (the others need the whole "
                           "stream first: 'groc eval')")
    try:
        s = EvalSettings(vocab=run.vocab_mode, cache=kind, cache_weight=weight, **settings)
    except TypeError as exc:
        raise SettingError(f"score_stream: {exc}") from None
    check_type("cache_weight", weight, float)
    from .caches.registry import setting_fields

    fields = {f.name: (f, c) for f, c in setting_fields()}
    for name, value in settings.items():
        check_type(name, value, hints(fields[name][1]).get(name))
    # A cache's setting given (other than its default: the command passes every one) with another
    # cache is refused, as on the command line, not dropped.
    given = {name for name, value in settings.items() if value != default_of(fields[name][0])}
    given |= {"cache_weight"} if weight != EvalSettings.cache_weight else set()
    found = inapplicable(EvalSettings, {"cache": kind, "cache_weight": weight, **settings}, given)
    if found is not None:
        name, owners = found
        raise SettingError(f"`{name}` is a setting of `cache` {owners}, not of {kind}; drop it or choose one of those")
    if kind == "none":
        return None
    from .caches import CacheContext
    from .console import log
    from .evaluation.cached import CachedStream, CacheSetup, check_caches

    check_unit("cache_weight", weight)
    plan = check_caches(s)
    context = CacheContext(dim=run.run.model_config.emb, split="input", device=run.device.type,
                           torch_device=str(run.device), log=log)
    return CachedStream(CacheSetup(plan, context))


def batch_log_probs(run, lines: list[list[str]]) -> list:
    """Each line's log-probs (numpy) as ``run`` (a ``LoadedRun``) scores it alone (from the start state,
    with its own evaluation vocabulary and uniform share), the lines side by side in one LSTM call
    (``LoadedRun.score``'s short lines). GroC in union mode outputs the model's words and every
    line's new words, each line's softmax without the other lines' new words, so a line's numbers
    are those it gets alone (to float rounding)."""
    import numpy as np
    import torch

    from .evaluation.perplexity import mix_uniform, uniform_share
    from .evaluation.stream import rows_per_block
    from .evaluation.vocab import line_vocab
    from .text.dataset import EOS

    vocabs = [line_vocab(run.vocab, run.index, [EOS, *t, EOS], run.vocab_mode, run.composes) for t in lines]
    size = len(run.vocab)
    own_rows = run.composes and run.vocab_mode == "union"
    added = list(dict.fromkeys(w for v in vocabs for w in v.added)) if own_rows else []
    where = {w: size + k for k, w in enumerate(added)}
    lengths = [len(v.targets) - 1 for v in vocabs]

    def joint(v, ids: np.ndarray) -> np.ndarray:  # a line's union ids as ids of the batch's union
        if not own_rows or not v.added:
            return ids
        table = np.array([where[w] for w in v.added], dtype=np.int64)
        return np.where(ids >= size, table[np.maximum(ids - size, 0)], ids)

    x = np.full((max(lengths), len(lines)), run.index[EOS], dtype=np.int64)
    for b, (v, n) in enumerate(zip(vocabs, lengths)):
        x[:n, b] = joint(v, v.inputs[:n])
    targets = np.concatenate([joint(v, v.targets[1:]) for v in vocabs])
    with torch.no_grad():
        view = run.composer.view(added)
        state = [(h.expand(-1, len(lines), -1).contiguous(), c.expand(-1, len(lines), -1).contiguous())
                 for h, c in run.start_state()]
        hidden, _ = run.model(torch.from_numpy(x).to(run.device), state, view)
        h = torch.cat([hidden[:n, b] for b, n in enumerate(lengths)]).float()
        mask = None
        if added:  # the columns of new words that are not a row's line's own
            mask = torch.ones(len(h), len(added), dtype=torch.bool)
            at = 0
            for v, n in zip(vocabs, lengths):
                if v.added:
                    mask[at:at + n, [where[w] - size for w in v.added]] = False
                at += n
            mask = mask.to(h.device)
        out_size = view.size
        y = torch.from_numpy(np.minimum(targets, out_size - 1)).to(h.device)
        logp = np.empty(len(h), dtype=np.float64)
        step = rows_per_block(out_size)
        for s in range(0, len(h), step):
            e = min(s + step, len(h))
            if mask is None:
                lp = view.log_probs(h[s:e])
            else:
                logits = view.logits(h[s:e]).float()
                logits[:, size:] = logits[:, size:].masked_fill(mask[s:e], -math.inf)
                lp = torch.log_softmax(logits, dim=-1)
            logp[s:e] = lp.gather(1, y[s:e, None])[:, 0].double().cpu().numpy()
    logp[targets >= out_size] = -np.inf  # as eval's chunks: table models give words without a row no mass
    u = uniform_share(run.composes, run.vocab_mode)
    out, at = [], 0
    for v, n in zip(vocabs, lengths):
        line = logp[at:at + n]
        at += n
        out.append(line if u == 0 else mix_uniform(torch.from_numpy(line), u, v.size).numpy())
    return out
