"""groc score: per-line log-probabilities of text, streaming (KenLM's `query` for groc runs)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer

from ..console import write_stdout
from ..evaluation.settings import EvalSettings, cache_setting_names, line_cache_kinds
from ..errors import SettingError
from ..scoring import ScoreSettings, run_score
from ..settings import cli_fields
from . import SUMMARIES
from . import _settings as S
from ._inputs import THREADS, UTF8_ERRORS, Checkpoint, Utf8Errors, checkpoint_option


EPILOG = """[bold]Examples[/bold]

  groc score runs/ptb-groc test.txt | head

  groc tokenize --lower < raw.txt | groc score runs/ptb-tied - --json --per-word

  groc score runs/ptb-groc notes.txt --tokenize --lower --log10 --one-stream | sort -t$'\\t' -k3,3g

  groc score runs/ptb-tied document.txt --one-stream --cache local --cache-weight 0.1 --theta 0.3

  groc score runs/ptb-tied test.txt --format kenlm --vocab model | tail -n 4

  groc score runs/ptb-groc news.txt --lexicon data/news.lexicon.parquet

Writes one line per input line as soon as it is scored: TSV with a header naming the log base
(ln_prob, or log10_prob with --log10; tokens; perplexity; --per-word adds word_log_probs, one
value per token and <eos>),
or with --json one JSON object per line. --format kenlm writes KenLM query's layout instead, in log10:
per line "word=id n log10prob" for each word and </s>, tab-separated, then "Total: T OOV: K"; at the
end "Perplexity including OOVs:", "Perplexity excluding OOVs:", "OOVs:" and "Tokens:" lines. --cache local|unigram as in 'groc eval' (not unbounded, which needs the
whole stream first).
"""

LEXICON = typer.Option(None, "--lexicon", help="GroC: use this lexicon table from 'groc lexicon' instead of the run's "
                       "own, for every word: one over the scored text's words gives its new words their relations and "
                       "definitions (without a row a word is composed from its characters alone).")


def score(
    ctx: typer.Context,
    run_dir: Path = typer.Argument(..., help="Run directory from 'groc train' or 'groc finetune'."),
    input: Optional[str] = typer.Argument(None, metavar="[FILE|-]", help="Text, one sentence a line; '-' or nothing reads stdin."),
    checkpoint: Checkpoint = checkpoint_option(),
    device: str = typer.Option("cpu", "--device", help="auto, cpu, cuda or cuda:N (lines are scored one at a time)."),
    lexicon: Optional[Path] = LEXICON,
    errors: Utf8Errors = UTF8_ERRORS,
    threads: str = THREADS,
    **options,
) -> None:
    """Log-probability, token count and perplexity of each line; every line ends with a scored <eos>."""
    settings = S.settings_of(ctx, ScoreSettings, options)
    cache_settings = {k: v for k, v in options.items() if k not in {f.name for f in cli_fields(ScoreSettings)}}
    # As 'groc eval' builds its settings: a cache's setting given with another --cache is refused, not dropped.
    S.resolve(ctx, {"eval": EvalSettings}, cache_settings, None, None)
    from ..api import load_run
    from ..runtime import set_threads
    from ..text.io import open_input
    from ..text.tokenizer import decode_lines

    set_threads(threads)
    stream = open_input(input, "FILE")
    model = load_run(run_dir, checkpoint=checkpoint.value, device=device, vocab=settings.vocab, lexicon=lexicon)
    lines = decode_lines(stream, errors=errors.value, name="stdin" if input in (None, "-") else input)
    with S.setting_errors(ctx, SettingError):  # the cache's settings, checked before any line is read
        rows = run_score(settings, model, lines, **cache_settings)
    with contextlib.closing(stream):
        for row in rows:
            write_stdout(row + "\n", flush=True)


def command():
    """score with an option per setting (ScoreSettings', then eval's --cache, --cache-weight and the
    settings of the caches it offers: ``line_cache_kinds``, the registered ones that score lines as
    they come), --cache's help naming them; generated when the command is registered, as eval's."""
    kinds = line_cache_kinds()
    cache = (f"{', '.join(kinds[:-1])} or {kinds[-1]}, as 'groc eval --cache' (not a cache that needs the whole stream "
             "first, as unbounded); its memory carries over from line to line, as over the lines of one document.")
    offered = {"cache", "cache_weight", *cache_setting_names(kinds[1:])}
    return S.with_settings(ScoreSettings, EvalSettings, only={EvalSettings: offered}, helps={"cache": cache},
                           after="input")(score)


def register(app: typer.Typer) -> None:
    app.command("score", epilog=EPILOG, help=SUMMARIES["score"])(command())
