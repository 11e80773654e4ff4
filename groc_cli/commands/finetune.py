"""groc finetune: continue training on a target domain with the union vocabulary (paper 5.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..console import emit_json
from ..models import ModelConfig
from ..training.config import TrainConfig
from . import _settings as S
from ._inputs import THREADS, VERIFY
from ._training_flags import COMMON, check_start, observers
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc finetune runs/news07-groc data/news09 -o runs/news07-groc-ft09

  groc finetune runs/news07-tied data/web -o runs/tied-web --max-epochs 3 --json

  groc finetune runs/news07-tied data/web -o runs/tied-web-slow lr=0.0001
"""


@S.with_settings(TrainConfig, defaults={"max_epochs": 3}, helps={"max_epochs": "Epochs on the target domain (paper 5.1: 3)."})
def finetune(
    ctx: typer.Context,
    run: Path = typer.Argument(..., help="Trained run directory."),
    dataset: Path = typer.Argument(..., help="Target-domain dataset directory (with a train split)."),
    overrides: Optional[list[str]] = S.OVERRIDES,
    output_dir: Path = typer.Option(..., "-o", "--output-dir", help="New run directory."),
    lexicon: Optional[Path] = typer.Option(None, "--lexicon", help="groc: lexicon covering the new words (default: the run's)."),
    config: Optional[Path] = S.CONFIG,
    device: str = COMMON["device"], resume: bool = COMMON["resume"], force: bool = COMMON["force"],
    json_out: bool = COMMON["json_out"], tensorboard: Optional[Path] = COMMON["tensorboard"], verify: bool = VERIFY, threads: str = THREADS,
    **settings,
) -> None:
    """Finetune a trained model on new data; new words are composed (groc) or get random rows (table outputs)."""
    check_start(resume, force, config, overrides, threads)
    from ..training.api import TrainJob, run_training  # torch: not for --help

    # The model's settings are the trained run's; a --config (even a run's config.json) gives training settings only.
    built = S.resolve(ctx, {"model": ModelConfig, "train": TrainConfig}, settings, config, overrides, fixed=("model",))
    job = TrainJob(dataset=dataset, output_dir=output_dir, lexicon=lexicon, device=device, resume=resume, force=force,
                   verify=verify, given=S.given(ctx))
    with observers(built["train"].log_every, tensorboard, built["train"].log_seconds) as progress:
        summary = run_training(job, built["train"], source_run=run, progress=progress)
    if json_out:
        emit_json(summary)


def register(app: typer.Typer) -> None:
    app.command("finetune", epilog=EPILOG, help=SUMMARIES["finetune"])(finetune)
