"""groc score: per-line log-probabilities of text, streaming (KenLM's `query` for groc runs)."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
from pathlib import Path
from typing import Optional

import typer

from ..console import strict_json, write_stdout
from ..evaluation.settings import EvalSettings, line_cache_kinds
from ..errors import GrocError, SettingError
from ..settings import hints
from . import SUMMARIES
from ._inputs import THREADS, UTF8_ERRORS, Checkpoint, Utf8Errors, Vocab, checkpoint_option
from ._settings import cache_parameters, command_function, option_parameter, resolve, setting_errors


def _declared(cls: type, name: str):
    """The option of a setting `groc eval` declares (its default and help written there only)."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    return option_parameter(f, hints(cls)[name]).default


EPILOG = """[bold]Examples[/bold]

  groc score runs/ptb-groc test.txt | head

  groc tokenize --lower < raw.txt | groc score runs/ptb-tied - --json --per-word

  groc score runs/ptb-groc notes.txt --tokenize --lower --log10 --one-stream | sort -t$'\\t' -k3,3g

  groc score runs/ptb-tied document.txt --one-stream --cache local --cache-weight 0.1 --theta 0.3

Writes one line per input line as soon as it is scored: TSV with a header naming the log base
(ln_prob, or log10_prob with --log10; tokens; perplexity; --per-word adds word_log_probs, one
value per token and <eos>),
or with --json one JSON object per line. --cache local|unigram as in 'groc eval' (not unbounded, which needs the
whole stream first).
"""


def score(
    ctx: typer.Context,
    run_dir: Path = typer.Argument(..., help="Run directory from 'groc train' or 'groc finetune'."),
    input: Optional[str] = typer.Argument(None, metavar="[FILE|-]", help="Text, one sentence a line; '-' or nothing reads stdin."),
    tokenize: bool = typer.Option(False, "--tokenize", help="Moses-tokenize each line first (raw text); by default lines are "
                                  "already tokenized (split on whitespace)."),
    lower: bool = typer.Option(False, "--lower", help="With --tokenize: lowercase, as 'groc tokenize --lower'."),
    vocab: Vocab = typer.Option(Vocab.union, "--vocab", help="union: open vocabulary, as 'eval --vocab union' (GroC composes unseen "
                              "words; table models give them a uniform share of 0.01), over the model's words plus the "
                              "line's new words. model: closed vocabulary, unseen words scored as <unk>."),
    reset_per_line: bool = typer.Option(True, "--reset-per-line/--one-stream", help="Score each line from the run's start "
                                        "state (the mean state after <eos> of held-out text; default), or carry the state "
                                        "from line to line as one document starting from zeros (as 'groc eval')."),
    log10: bool = typer.Option(False, "--log10", help="Write base-10 log-probabilities (KenLM's convention) instead of natural logs."),
    per_word: bool = typer.Option(False, "--per-word", help="Add each token's log-probability (the line's words, then <eos>)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line instead of TSV."),
    cache: str = typer.Option("none", "--cache"),  # its help lists the caches registered (``command``)
    cache_weight: float = _declared(EvalSettings, "cache_weight"),
    checkpoint: Checkpoint = checkpoint_option(),
    device: str = typer.Option("cpu", "--device", help="auto, cpu, cuda or cuda:N (lines are scored one at a time)."),
    errors: Utf8Errors = UTF8_ERRORS,
    threads: str = THREADS,
    **cache_settings,
) -> None:
    """Log-probability, token count and perplexity of each line; every line ends with a scored <eos>."""
    errors, vocab, checkpoint = errors.value, vocab.value, checkpoint.value
    if lower and not tokenize:
        raise GrocError("--lower applies with --tokenize only (tokenized input is scored as it is)")
    # As 'groc eval' builds its settings: a cache's setting given with another --cache is refused, not dropped.
    resolve(ctx, {"eval": EvalSettings}, {"cache": cache, "cache_weight": cache_weight, **cache_settings}, None, None)
    from ..api import load_run
    from ..runtime import set_threads
    from ..text.io import open_input
    from ..text.tokenizer import TokenizeOptions, decode_lines, tokenize_line

    set_threads(threads)
    stream = open_input(input, "FILE")
    model = load_run(run_dir, checkpoint=checkpoint, device=device, vocab=vocab)
    name = "stdin" if input in (None, "-") else input
    lines = decode_lines(stream, errors=errors, name=name)
    if tokenize:
        options = TokenizeOptions(lower=lower)
        lines = (tokenize_line(line, options) for line in lines)
    with setting_errors(ctx, SettingError):  # the cache's settings, checked before any line is read
        scores = model.score_stream((line.split() for line in lines), reset=reset_per_line, cache=cache,
                                    cache_weight=cache_weight, **cache_settings)
    scale = 1 / math.log(10) if log10 else 1.0
    base = "log10" if log10 else "ln"
    if not as_json:
        write_stdout("\t".join([f"{base}_prob", "tokens", "perplexity"] + (["word_log_probs"] if per_word else [])) + "\n")
    with contextlib.closing(stream):
        for result in scores:
            total = result.log_prob * scale
            if as_json:
                row = {f"{base}_prob": total, "tokens": result.tokens, "perplexity": result.perplexity}
                if per_word:
                    row["words"] = [[w, lp * scale] for w, lp in result.word_log_probs]
                text = strict_json(row)
            else:
                cells = [f"{total:.6f}", str(result.tokens), f"{result.perplexity:.3f}"]
                if per_word:
                    cells.append(" ".join(f"{lp * scale:.6f}" for _, lp in result.word_log_probs))
                text = "\t".join(cells)
            write_stdout(text + "\n", flush=True)


def command():
    """score with an option per setting of the caches it offers (``line_cache_kinds``: the
    registered ones that score lines as they come), after --cache-weight, and --cache's help
    naming them; generated when the command is registered, as eval's."""
    own = [p for p in inspect.signature(score, eval_str=True).parameters.values() if p.kind is not p.VAR_KEYWORD]
    kinds = line_cache_kinds()
    cache = typer.Option("none", "--cache", help=f"{', '.join(kinds[:-1])} or {kinds[-1]}, as 'groc eval --cache' (not "
                         "a cache that needs the whole stream first, as unbounded); its memory carries over from line "
                         "to line, as over the lines of one document.")
    own = [p.replace(default=cache) if p.name == "cache" else p for p in own]
    at = [p.name for p in own].index("cache_weight") + 1
    return command_function(score, own[:at] + cache_parameters(kinds[1:]) + own[at:])


def register(app: typer.Typer) -> None:
    app.command("score", epilog=EPILOG, help=SUMMARIES["score"])(command())
