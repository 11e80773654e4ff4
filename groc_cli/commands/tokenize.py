"""groc tokenize: Moses tokenization as a stream stage."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Optional

import typer

from ..artifacts import atomic_file, claim_output
from ..console import emit_json, write_stdout
from ..errors import GrocError
from ..text.io import open_input
from ..text.tokenizer import TokenizeOptions, decode_lines, tokenize_lines
from ._inputs import UTF8_ERRORS, Utf8Errors
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc tokenize book.txt --lower -o book.tok

  zcat news.2007.en.gz | groc tokenize --lower -j 2 | head -n 87000 > train.txt
"""


def tokenize(
    input: Optional[str] = typer.Argument(None, metavar="[INPUT|-]", help="Text file to tokenize; '-' or nothing reads stdin."),
    output: str = typer.Option("-", "-o", "--output", help="Where to write tokens; '-' is stdout."),
    lower: bool = typer.Option(False, "--lower", help="Lowercase the tokens (the paper lowercased its cross-domain data)."),
    escape: bool = typer.Option(False, "--escape/--no-escape", help="Escape & < > ' \" [ ] as XML entities, as Moses does by default."),
    jobs: int = typer.Option(1, "-j", "--jobs", min=1, help="Worker processes; line order is kept."),
    errors: Utf8Errors = UTF8_ERRORS,
    force: bool = typer.Option(False, "--force", help="Replace OUTPUT if it exists."),
    json_out: bool = typer.Option(False, "--json", help="With -o FILE: print lines, tokens and seconds as JSON on stdout."),
) -> None:
    """Moses-tokenize text (sacremoses, English), one output line per input line."""
    errors = errors.value
    if json_out and output == "-":
        raise GrocError("--json needs -o FILE: without it the tokens are what goes to stdout")
    options = TokenizeOptions(lower=lower, escape=escape)
    started = time.perf_counter()
    stream = open_input(input, "INPUT")
    name = "stdin" if input in (None, "-") else input
    # Closed on the way out, whatever the way: its worker processes end before groc does.
    lines = tokenize_lines(decode_lines(stream, errors=errors, name=name), options, jobs=jobs)
    with contextlib.closing(lines):
        if output == "-":
            for line in lines:
                write_stdout(line + "\n")
            write_stdout("", flush=True)
            return
        target = Path(output)
        count_lines = count_tokens = 0
        with claim_output(target, force, kind="file", inputs=(input,)), atomic_file(target, "w") as handle:
            for line in lines:
                handle.write(line + "\n")
                if json_out:  # counted only for the record
                    count_lines += 1
                    count_tokens += len(line.split())
    if json_out:
        emit_json({"input": name, "output": str(target), "lines": count_lines, "tokens": count_tokens,
                   "lower": lower, "escape": escape, "seconds": round(time.perf_counter() - started, 3)})


def register(app: typer.Typer) -> None:
    app.command("tokenize", epilog=EPILOG, help=SUMMARIES["tokenize"])(tokenize)
