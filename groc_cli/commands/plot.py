"""groc plot: training and validation curves of one or several runs, as a PNG."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import typer

from ..artifacts.io import read_parquet
from ..artifacts.locks import claim_output
from ..console import emit_json, log
from ..errors import GrocError
from ._inputs import RECORD_JSON
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc plot runs/ptb-tied runs/ptb-groc -o curves.png

  groc plot runs/emma-* -o curves.png --smooth 200

Reads each run's steps.parquet (the training loss of every step) and metrics.parquet (training and
validation perplexity per epoch), both written while it trains, so a run still training or killed
can be plotted too. Needs matplotlib (pip install 'groc-cli\\[plots]'). Prints one JSON object.
"""

_RETRAIN = "it is written by 'groc train' and 'groc finetune' as they go"


def _number(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def read_curves(run: Path) -> dict:
    """A run's per-step (tokens, loss) and per-epoch (epoch, train ppl, valid ppl) rows."""
    if not (run / "config.json").is_file():
        raise GrocError(f"{run} is not a run directory (no config.json); give directories written by 'groc train'")
    steps, epochs = [], []
    if (run / "steps.parquet").exists():
        t = read_parquet(run / "steps.parquet", {"tokens": _number, "loss": _number}, _RETRAIN)
        steps = list(zip(t.column("tokens").to_pylist(), t.column("loss").to_pylist()))
    if (run / "metrics.parquet").exists():
        t = read_parquet(run / "metrics.parquet", {"epoch": _number, "train_ppl": _number, "valid_ppl": _number},
                         _RETRAIN)
        epochs = list(zip(*(t.column(c).to_pylist() for c in ("epoch", "train_ppl", "valid_ppl"))))
    if not steps and not epochs:
        raise GrocError(f"run {run} has no metrics yet (steps.parquet, metrics.parquet): it has not trained a step")
    return {"steps": steps, "epochs": epochs}


def _names(runs: list[Path]) -> list[str]:
    """Each run's directory name, or its path where two share a name."""
    names = [r.name for r in runs]
    return [str(r) if names.count(r.name) > 1 else r.name for r in runs]


def plot_command(
    runs: list[Path] = typer.Argument(..., metavar="RUN...", help="Run directories from 'groc train' or 'groc finetune'."),
    output: Path = typer.Option(..., "-o", "--output", help="The figure to write: PNG, or JPEG, PDF or SVG by its ending (.jpg, .pdf, .svg)."),
    smooth: int = typer.Option(50, "--smooth", min=1, help="Steps in the moving average of the training loss."),
    title: str = typer.Option("", "--title", help="A title above the two panels."),
    force: bool = typer.Option(False, "--force", help="Replace an existing -o file."),
    json_out: bool = RECORD_JSON,
) -> None:
    """Draw training loss per step and training/validation perplexity per epoch of one or several runs."""
    if len(set(map(Path.resolve, runs))) != len(runs):
        raise GrocError("a run is named twice; give each run once")
    with claim_output(output, force, "-o", "file", inputs=tuple(runs)):
        from ..plots import figure_format, require_matplotlib, training_curves

        figure_format(output)
        require_matplotlib()
        curves = {name: read_curves(run) for name, run in zip(_names(runs), runs)}
        training_curves(curves, output, smooth=smooth, title=title)
    log(f"wrote {output}: {len(runs)} run{'s' if len(runs) > 1 else ''}")
    if json_out:
        emit_json({"output": str(output), "runs": [str(r) for r in runs],
                   "steps": {n: len(c["steps"]) for n, c in curves.items()},
                   "epochs": {n: len(c["epochs"]) for n, c in curves.items()}})


def register(app: typer.Typer) -> None:
    app.command("plot", epilog=EPILOG, help=SUMMARIES["plot"])(plot_command)
