"""groc prepare: text files -> dataset directory (splits as Parquet, vocabulary, manifest)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..console import emit_json
from ..text.prepare import PrepareSettings, run_prepare
from . import SUMMARIES
from . import _settings as S

EPILOG = """[bold]Examples[/bold]

  groc prepare --train ptb.train.txt --valid ptb.valid.txt --test ptb.test.txt -o data/ptb

  groc prepare --train news.2007.en --tokenize --lower --split 2M,2M,10M -o data/news07

  groc tokenize --lower raw.txt | groc prepare --train - --split 90K,10K -o data/sample

  groc prepare --train sentences.txt --split 900K,50K,rest --shuffle --seed 1 --drop-blank-lines -o data/shuffled
"""


@S.with_settings(PrepareSettings, after="output")
def prepare(
    ctx: typer.Context,
    train: Optional[str] = typer.Option(None, "--train", help="Training text, one sentence or paragraph per line ('-' reads stdin; gzip, bzip2 or xz are read as they are)."),
    valid: Optional[str] = typer.Option(None, "--valid", help="Validation text."),
    test: Optional[str] = typer.Option(None, "--test", help="Test text."),
    output: Path = typer.Option(..., "-o", "--output", help="Dataset directory to create."),
    force: bool = typer.Option(False, "--force", help="Replace the output directory if it exists."),
    json_out: bool = typer.Option(False, "--json", help="Print the manifest as JSON on stdout."),
    **settings,
) -> None:
    """Build a dataset directory: each split as Parquet token ids, a vocabulary with per-split counts, and a manifest."""
    sources = {name: path for name, path in (("train", train), ("valid", valid), ("test", test)) if path is not None}
    with S.setting_errors(ctx):
        chosen = PrepareSettings(**settings)
    manifest = run_prepare(chosen, sources, output, force)
    if json_out:
        emit_json(manifest)


def register(app: typer.Typer) -> None:
    app.command("prepare", epilog=EPILOG, help=SUMMARIES["prepare"])(prepare)
