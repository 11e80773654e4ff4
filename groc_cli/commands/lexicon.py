"""groc lexicon: WordNet relations and definitions per word -> lexicon.parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..console import emit_json
from ..lexicon.build import run_lexicon
from ..lexicon.extract import LexiconSettings
from . import SUMMARIES
from . import _settings as S

EPILOG = """[bold]Examples[/bold]

  groc lexicon --vocab data/ptb -o ptb.lexicon.parquet

  groc lexicon -o wordnet.parquet                       (every single-word WordNet lemma)

  groc lexicon --vocab data/ptb --keep-fraction 0.5 --seed 1 -o ptb.half.parquet
"""


@S.with_settings(LexiconSettings, after="vocab")
def lexicon(
    ctx: typer.Context,
    output: Path = typer.Option(..., "-o", "--output", help="Lexicon table to write (Parquet)."),
    vocab: Optional[list[Path]] = typer.Option(None, "--vocab", help="Dataset directory (all its types), run directory (its model's words), vocab.parquet or word list; repeat to combine; default: every WordNet lemma."),
    force: bool = typer.Option(False, "--force", help="Replace OUTPUT if it exists."),
    json_out: bool = typer.Option(False, "--json", help="Print coverage and counts as JSON on stdout."),
    **settings,
) -> None:
    """Extract each word's WordNet relations (synonyms, hyponyms) and definition into a Parquet table."""
    with S.setting_errors(ctx):
        chosen = LexiconSettings(**settings)
    record = run_lexicon(chosen, output, vocab, force)
    if json_out:
        emit_json(record)


def register(app: typer.Typer) -> None:
    app.command("lexicon", epilog=EPILOG, help=SUMMARIES["lexicon"])(lexicon)
