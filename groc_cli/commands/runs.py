"""groc runs: a table of run directories (kind, parameters, dataset, epochs, perplexities, time)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import List

import typer

from ..console import write_stdout
from ..errors import GrocError
from ..runs import COLUMNS, aligned, table
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc runs runs/

  groc runs results/work quickstart --sort test_ppl

  groc runs runs/ --csv > runs.csv

  groc runs runs/ --json | jq '.[] | select(.status == "unfinished") | .run'

  groc runs docs/records/table2-cpu

One row per run directory found under the directories given (a run holds config.json): status (done;
record, a finished run kept without its checkpoints, as recipes/table2-cpu.sh keeps each row; running
(pid N) while a train or finetune process writes it; unfinished, which --resume continues; or damaged
with why), kind, stage (train or finetune), parameters, dataset, epochs, stop_reason,
best_valid_ppl, test_ppl (from a 'groc eval' JSON under the same directories, or a record's own: split test, no cache;
its relative run path is tried from here, then from the JSON's directory and those above it, and it
counts only while the checkpoint it scored is unchanged;
test_vocab says model or union), minutes (of training; so far, for a run not done), groc_version. Columns: """ + ", ".join(COLUMNS) + "."


def runs(
    directories: List[Path] = typer.Argument(..., help="Directories holding run directories (searched recursively), or runs."),
    sort: str = typer.Option("run", "--sort", help="The column to sort by (numbers ascending, empty cells last)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array of rows instead of the table."),
    as_csv: bool = typer.Option(False, "--csv", help="CSV with a header instead of the table."),
) -> None:
    """A table of the runs under DIRECTORIES: one row per run, aligned; --json or --csv for scripts."""
    if as_json and as_csv:
        raise GrocError("--json and --csv are two formats of the same rows; pick one")
    if sort not in COLUMNS:
        raise GrocError(f"--sort {sort!r}: expected one of {', '.join(COLUMNS)}")
    rows = table(directories, sort)
    if as_json:
        write_stdout(json.dumps(rows) + "\n")
    elif as_csv:
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        write_stdout(buffer.getvalue())
    elif rows:
        write_stdout(aligned(rows) + "\n")
    else:
        from ..console import log

        log(f"no run directories under {', '.join(map(str, directories))}")


def register(app: typer.Typer) -> None:
    app.command("runs", epilog=EPILOG, help=SUMMARIES["runs"])(runs)
