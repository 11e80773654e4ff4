"""groc tokenize: Moses tokenization as a stream stage."""

from __future__ import annotations

from typing import Optional

import typer

from ..console import emit_json
from ..errors import GrocError
from ..text.io import run_tokenize
from ..text.tokenizer import TokenizeSettings
from ._inputs import UTF8_ERRORS, Utf8Errors
from . import SUMMARIES
from . import _settings as S

EPILOG = """[bold]Examples[/bold]

  groc tokenize book.txt --lower -o book.tok

  zcat news.2007.en.gz | groc tokenize --lower -j 2 | head -n 87000 > train.txt
"""


@S.with_settings(TokenizeSettings, after="output")
def tokenize(
    ctx: typer.Context,
    input: Optional[str] = typer.Argument(None, metavar="[INPUT|-]", help="Text file to tokenize (gzip, bzip2 or xz too); '-' or nothing reads stdin."),
    output: str = typer.Option("-", "-o", "--output", help="Where to write tokens; '-' is stdout."),
    errors: Utf8Errors = UTF8_ERRORS,
    force: bool = typer.Option(False, "--force", help="Replace OUTPUT if it exists."),
    json_out: bool = typer.Option(False, "--json", help="With -o FILE: print lines, tokens and seconds as JSON on stdout."),
    **settings,
) -> None:
    """Moses-tokenize text (sacremoses, English), one output line per input line."""
    if json_out and output == "-":
        raise GrocError("--json needs -o FILE: without it the tokens are what goes to stdout")
    with S.setting_errors(ctx):
        chosen = TokenizeSettings(**settings)
    record = run_tokenize(chosen, input, output, force, errors.value, record=json_out)
    if json_out:
        emit_json(record)


def register(app: typer.Typer) -> None:
    app.command("tokenize", epilog=EPILOG, help=SUMMARIES["tokenize"])(tokenize)
