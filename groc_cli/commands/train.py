"""groc train: one training loop, seven swappable output layers (paper Table 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..console import emit_json
from ..errors import GrocError, SettingError
from ..models import SIZES, ModelConfig
from ..training.config import TrainConfig
from . import _settings as S
from ._inputs import THREADS, VERIFY, choices
from ._training_flags import COMMON, check_start, observers
from . import SUMMARIES

EPILOG = """[bold]Examples[/bold]

  groc train data/ptb -o runs/ptb-tied --output-layer tied --size small     # on a CPU: 2 x 200

  groc train data/ptb -o runs/ptb-tied --output-layer tied --emb 300

  groc train data/ptb -o runs/ptb-groc --output-layer groc --lexicon ptb.lexicon.parquet --out-depth 1

  groc train data/ptb -o runs/small --output-layer groc --lexicon lex.parquet --hidden 256 --emb 128 --max-minutes 5

  groc train data/ptb -o runs/ptb-groc-k0 --config recipes/configs/penn/groc.toml --lexicon ptb.lexicon.parquet

  groc train data/ptb -o runs/again --config runs/ptb-tied/config.json lr=0.0005 max_epochs=10

  torchrun --nproc_per_node 2 -m groc_cli train data/ptb -o runs/ddp --output-layer tied
"""


Size = choices("Size", *SIZES)


SIZE = typer.Option(None, "--size", help="A named model size: 'small' (2 x 200, 200-d embeddings, dropout 0.3 on "
                    "inputs, between and after the layers: the size to train on a CPU) or 'paper' (2 x 1024, 300-d "
                    "embeddings, dropout 0.65: the defaults, for a GPU). It wins over --config; --emb, --hidden, "
                    "--layers, --dropout and --emb-dropout win over it.")
OUTPUT_DIR = typer.Option(..., "-o", "--output-dir", help="Run directory to create.")
LEXICON = typer.Option(None, "--lexicon", help="Lexicon table from 'groc lexicon' (needed by --output-layer groc).")


@S.with_settings(ModelConfig, TrainConfig)
def train(
    ctx: typer.Context,
    dataset: Path = typer.Argument(..., help="Dataset directory from 'groc prepare'."),
    overrides: Optional[list[str]] = S.OVERRIDES, output_dir: Path = OUTPUT_DIR, lexicon: Optional[Path] = LEXICON,
    config: Optional[Path] = S.CONFIG, size: Optional[Size] = SIZE,
    old_output: Optional[str] = typer.Option(None, "--output", hidden=True),
    device: str = COMMON["device"], resume: bool = COMMON["resume"], force: bool = COMMON["force"],
    json_out: bool = COMMON["json_out"], tensorboard: Optional[Path] = COMMON["tensorboard"], verify: bool = VERIFY, threads: str = THREADS,
    **settings,
) -> None:
    """Train an LSTM language model with the chosen output layer; writes weights, config and per-epoch metrics."""
    if old_output is not None:  # -o/--output names a path in every other stage
        raise GrocError(f"--output is now --output-layer (the output layer's kind): use --output-layer {old_output}")
    check_start(resume, force, config, overrides, threads)
    from ..training.api import TrainJob, run_training  # torch: not for --help

    if resume and size is not None:
        raise GrocError("--resume continues with the run's own sizes: drop --size")
    preset = None if size is None else (f"--size {size.value}", SIZES[size.value])
    if resume and "output" not in S.given(ctx):
        preset = _resumed_layer(output_dir)
    built = S.resolve(ctx, {"model": ModelConfig, "train": TrainConfig}, settings, config, overrides, preset=preset)
    job = TrainJob(dataset=dataset, output_dir=output_dir, lexicon=lexicon, device=device, resume=resume, force=force,
                   verify=verify, given=S.given(ctx))
    with observers(built["train"].log_every, tensorboard, built["train"].log_seconds) as progress, S.setting_errors(ctx, SettingError):
        summary = run_training(job, built["train"], model_config=built["model"], progress=progress)
    if json_out:
        emit_json(summary)


def _resumed_layer(output_dir: Path) -> tuple[str, dict]:
    """The output layer of the run --resume continues, as a preset: a setting of that layer, given again, is
    checked against it, not against tied's; a missing or damaged run is its own one-line error here, before
    any flag is checked."""
    from ..run_storage import Run

    layer = Run(output_dir).model_config.output
    return (f"the run's --output-layer {layer}", {"output": layer})


def register(app: typer.Typer) -> None:
    app.command("train", epilog=EPILOG, help=SUMMARIES["train"])(train)
