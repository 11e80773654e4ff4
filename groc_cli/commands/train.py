"""groc train: one training loop, seven swappable output layers (paper Table 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..console import emit_json
from ..errors import GrocError
from ..models import KINDS, ModelConfig
from ..training.api import train_new
from . import _training_flags as F

EPILOG = """[bold]Examples[/bold]

  groc train data/ptb -o runs/ptb-tied --output tied --emb 300

  groc train data/ptb -o runs/ptb-groc --output groc --lexicon ptb.lexicon.parquet --out-depth 1

  groc train data/ptb -o runs/small --output groc --lexicon lex.parquet --hidden 256 --emb 128 --max-minutes 5

  torchrun --nproc_per_node 2 -m groc_cli train data/ptb -o runs/ddp --output tied
"""


def _cutoffs(text: Optional[str]) -> Optional[list[int]]:
    if text is None:
        return None
    try:
        return [int(float(x.lower().replace("k", "e3"))) for x in text.split(",") if x.strip()]
    except ValueError:
        raise GrocError(f"--cutoffs {text!r}: expected increasing integers like 2000,7000 or 2k,7k") from None


def train(
    ctx: typer.Context,
    dataset: Path = typer.Argument(..., help="Dataset directory from 'groc prepare'."),
    output_dir: Path = typer.Option(..., "-o", "--output-dir", help="Run directory to create."),
    output: str = typer.Option("tied", "--output", help=f"Output layer: {', '.join(KINDS)}."),
    lexicon: Optional[Path] = typer.Option(None, "--lexicon", help="Lexicon table from 'groc lexicon' (needed by --output groc)."),
    emb: int = typer.Option(300, "--emb", min=1, help="Embedding size (paper: 300 PTB, 256 WikiText-2)."),
    hidden: int = typer.Option(1024, "--hidden", min=1, help="LSTM units of all but the last layer (paper: 1024)."),
    layers: int = typer.Option(2, "--layers", min=1, help="LSTM layers; the last has --emb units."),
    dropout: float = typer.Option(0.65, "--dropout", min=0.0, max=0.99, help="Hidden-unit dropout (paper: 0.65)."),
    emb_dropout: float = typer.Option(0.0, "--emb-dropout", min=0.0, max=0.99, help="Dropout on input embeddings."),
    out_dropout: float = typer.Option(0.0, "--out-dropout", min=0.0, max=0.99, help="Variational dropout on output embeddings (Table 7 r)."),
    out_depth: int = typer.Option(1, "--out-depth", min=0, max=4, help="Residual output network depth k (deep-residual, groc)."),
    out_activation: str = typer.Option("relu", "--out-activation", help="relu, selu or tanh (output network and GroC bias)."),
    projection_reg: float = typer.Option(0.0, "--projection-reg", min=0.0, help="tied: λ of a d×d projection penalised by λ‖P‖² (Press & Wolf)."),
    cutoffs: Optional[str] = typer.Option(None, "--cutoffs", help="adaptive: bin edges, e.g. 2000,7000 (default: 0.2n,0.7n as in Table 7's '253')."),
    adaptive_div: float = typer.Option(4.0, "--adaptive-div", min=1.0, help="adaptive: capacity divisor per bin."),
    correction: int = typer.Option(128, "--correction", min=0, help="convolutional: per-word linear correction size (Table 7 cor)."),
    relations: bool = typer.Option(True, "--relations/--no-relations", help="groc: relational encoding (ablation, Table 3)."),
    definitions: bool = typer.Option(True, "--definitions/--no-definitions", help="groc: definitional encoding (ablation, Table 3)."),
    update_prob: float = typer.Option(1.0, "--update-prob", min=0.0, max=1.0, help="groc: probability a step updates output-embedding parameters (paper B.4)."),
    highway_layers: int = typer.Option(1, "--highway-layers", min=0, help="Highway layers after the char-CNN (groc, convolutional)."),
    init_range: float = typer.Option(0.05, "--init-range", min=0.0, help="Uniform initialisation range (paper: 0.05)."),
    lr: float = F.LR, batch_size: int = F.BATCH, eval_batch_size: int = F.EVAL_BATCH, bptt: int = F.BPTT,
    clip: float = F.CLIP, max_epochs: int = typer.Option(100, "--max-epochs", min=1, help="Most epochs (early stopping usually ends sooner)."),
    lr_decay: float = F.LR_DECAY, lr_patience: int = F.LR_PATIENCE, patience: int = F.PATIENCE,
    max_tokens: Optional[int] = F.MAX_TOKENS, max_minutes: Optional[float] = F.MAX_MINUTES, seed: int = F.SEED,
    amp: bool = F.AMP, checkpoint_every: int = F.CKPT, log_every: int = F.LOG_EVERY, deterministic: bool = F.DETERMINISTIC,
    device: str = F.DEVICE, resume: bool = F.RESUME, force: bool = F.FORCE, json_out: bool = F.JSON,
) -> None:
    """Train an LSTM language model with the chosen output layer; writes weights, config and per-epoch metrics."""
    if output not in KINDS:
        raise GrocError(f"--output {output!r}: expected one of {', '.join(KINDS)}")
    if out_activation not in ("relu", "selu", "tanh"):
        raise GrocError(f"--out-activation {out_activation!r}: expected relu, selu or tanh")
    if lexicon is not None and output != "groc":
        raise GrocError("--lexicon is used by --output groc only")
    if resume and force:
        raise GrocError("--resume and --force contradict each other; pick one")
    with F.setting_errors(ctx):
        model_config = ModelConfig(
            output=output, emb=emb, hidden=hidden, layers=layers, dropout=dropout, emb_dropout=emb_dropout,
            out_dropout=out_dropout, out_depth=out_depth, out_activation=out_activation, projection_reg=projection_reg,
            cutoffs=_cutoffs(cutoffs), adaptive_div=adaptive_div, correction=correction, relations=relations,
            definitions=definitions, update_prob=update_prob, highway_layers=highway_layers, init_range=init_range,
        )
    train_config = F.train_config(ctx, lr, batch_size, eval_batch_size, bptt, clip, max_epochs, lr_decay, lr_patience,
                                  patience, max_tokens, max_minutes, seed, amp, checkpoint_every, log_every, deterministic)
    summary = train_new(dataset, output_dir, model_config, train_config, lexicon, device, resume, force,
                        F.StepProgress(log_every), given=F.given(ctx))
    if json_out:
        emit_json(summary)


def register(app: typer.Typer) -> None:
    app.command("train", epilog=EPILOG, help="Train a language model (lookup, tied, bilinear, deep-residual, adaptive, convolutional or groc output).")(train)
