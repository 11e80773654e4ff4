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
from ..runs import COLUMNS, aligned, evals_text, table
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc runs runs/

  groc runs results/work quickstart --sort test_ppl

  groc runs runs/ --csv > runs.csv

  groc runs runs/ --json | jq '.[] | select(.status == "unfinished") | .run'

  groc runs docs/records/table2-cpu

  groc eval runs/tied data/ptb && groc eval runs/tied data/wiki && groc runs runs/tied --json | jq '.[0].evals'

One row per run directory found under the directories given (a run holds config.json; symbolic links
below them are not followed): status (done;
record, a finished run kept without its checkpoints, as recipes/table2-cpu.sh keeps each row; running
(pid N) while a train or finetune process writes it; unfinished, which --resume continues; or damaged
with why), kind, stage (train or finetune), parameters, dataset, epochs, stop_reason,
best_valid_ppl, test_ppl with test_dataset and test_vocab (model or union): a test split's perplexity without a
cache, on the run's own dataset where there is one; evals: every evaluation of the run found, each as
"dataset/split ppl" (with union and +cache where they apply; in --json a list of objects with dataset, split,
vocab, cache, perplexity). Evaluations are those 'groc eval' keeps inside each run (RUN/evals/), a record's
own, and 'groc eval' JSON files saved under the same directories (a relative run path is tried from here,
then from the JSON's directory and those above it); each counts only while the checkpoint it scored is
unchanged. minutes (of training; so far, for a run not done), groc_version; evals last, the widest. Columns: """ + ", ".join(COLUMNS) + "."


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
        writer.writerows({**r, "evals": evals_text(r["evals"])} for r in rows)
        write_stdout(buffer.getvalue())
    elif rows:
        write_stdout(aligned(rows) + "\n")
    else:
        from ..console import log

        log(f"no run directories under {', '.join(map(str, directories))}")


def register(app: typer.Typer) -> None:
    app.command("runs", epilog=EPILOG, help=SUMMARIES["runs"])(runs)
