"""groc compare: median loss difference per training-frequency bin between two evaluations (paper Figure 3)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..console import emit_json
from ..evaluation.compare import CompareSettings, run_compare
from ._inputs import RECORD_JSON
from . import SUMMARIES
from . import _settings as S

EPILOG = """[bold]Examples[/bold]

  groc eval runs/ptb-tied data/ptb --per-token tied.parquet && groc eval runs/ptb-groc data/ptb --per-token groc.parquet

  groc compare tied.parquet groc.parquet --plot fig3.png

  groc compare tied.parquet groc.parquet --bins 1,10,100,1000 --column model -o bins.parquet

  groc compare tied.parquet groc.parquet | jq '.bins[] | [.bin, .median_diff]'

  groc compare tied.parquet groc.parquet --words 10     # the words that make the gap

Sign: diff = loss(B) - loss(A) in nats per word; negative means B, the second file, is better.
Prints one JSON object on stdout (inputs, settings, bins, overall) and a table on stderr.
"""


@S.with_settings(CompareSettings, after="b")
def compare_command(
    ctx: typer.Context,
    a: Path = typer.Argument(..., metavar="A", help="Per-token Parquet of the baseline A (from 'groc eval --per-token')."),
    b: Path = typer.Argument(..., metavar="B", help="Per-token Parquet of the run B compared with it, on the same dataset and split."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Also write the bins table as Parquet "
                                          "(bin, lo, hi, words, types, median_diff, mean_diff, ppl_a, ppl_b)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Draw the median difference per bin as a bar chart: PNG, or JPEG, PDF or SVG by the file's ending "
                                        "(needs matplotlib: pip install 'groc-cli\\[plots]')."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --output or --plot file."),
    json_out: bool = RECORD_JSON,
    **settings,
) -> None:
    """Median loss difference per training-frequency bin between two per-token files (the GroC paper's Figure 3)."""
    with S.setting_errors(ctx):
        chosen = CompareSettings(**settings)
    record = run_compare(chosen, a, b, output, plot, force)
    if json_out:
        emit_json(record)


def register(app: typer.Typer) -> None:
    app.command("compare", epilog=EPILOG, help=SUMMARIES["compare"])(compare_command)
