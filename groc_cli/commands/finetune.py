"""groc finetune: continue training on a target domain with the union vocabulary (paper 5.1)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..console import emit_json
from ..errors import GrocError
from ..training.api import finetune as finetune_run
from . import _training_flags as F

EPILOG = """[bold]Examples[/bold]

  groc finetune runs/news07-groc data/news09 -o runs/news07-groc-ft09

  groc finetune runs/news07-tied data/web -o runs/tied-web --max-epochs 3 --json
"""


def finetune(
    ctx: typer.Context,
    run: Path = typer.Argument(..., help="Trained run directory."),
    dataset: Path = typer.Argument(..., help="Target-domain dataset directory (with a train split)."),
    output_dir: Path = typer.Option(..., "-o", "--output-dir", help="New run directory."),
    lexicon: Optional[Path] = typer.Option(None, "--lexicon", help="groc: lexicon covering the new words (default: the run's)."),
    lr: float = F.LR, batch_size: int = F.BATCH, eval_batch_size: int = F.EVAL_BATCH, bptt: int = F.BPTT,
    clip: float = F.CLIP, max_epochs: int = typer.Option(3, "--max-epochs", min=1, help="Epochs on the target domain (paper 5.1: 3)."),
    lr_decay: float = F.LR_DECAY, lr_patience: int = F.LR_PATIENCE, patience: int = F.PATIENCE,
    max_tokens: Optional[int] = F.MAX_TOKENS, max_minutes: Optional[float] = F.MAX_MINUTES, seed: int = F.SEED,
    amp: bool = F.AMP, checkpoint_every: int = F.CKPT, log_every: int = F.LOG_EVERY, deterministic: bool = F.DETERMINISTIC,
    device: str = F.DEVICE, resume: bool = F.RESUME, force: bool = F.FORCE, json_out: bool = F.JSON,
) -> None:
    """Finetune a trained model on new data; new words are composed (groc) or get random rows (table outputs)."""
    if resume and force:
        raise GrocError("--resume and --force contradict each other; pick one")
    train_config = F.train_config(ctx, lr, batch_size, eval_batch_size, bptt, clip, max_epochs, lr_decay, lr_patience,
                                  patience, max_tokens, max_minutes, seed, amp, checkpoint_every, log_every, deterministic)
    summary = finetune_run(run, dataset, output_dir, train_config, lexicon, device, resume, force, F.StepProgress(log_every),
                           given=F.given(ctx))
    if json_out:
        emit_json(summary)


def register(app: typer.Typer) -> None:
    app.command("finetune", epilog=EPILOG, help="Finetune a trained run on a target-domain dataset (union vocabulary, 3 epochs by default).")(finetune)
