"""Flags shared by `train` and `finetune`, and the progress display."""

from __future__ import annotations

import contextlib
import math
import time

import typer

from ..console import err, log
from ..errors import GrocError
from ..training.loop import TrainConfig


def train_config(ctx, lr, batch_size, eval_batch_size, bptt, clip, max_epochs, lr_decay, lr_patience, patience,
                 max_tokens, max_minutes, seed, amp, checkpoint_every, log_every, deterministic) -> TrainConfig:
    with setting_errors(ctx):
        return TrainConfig(lr=lr, batch_size=batch_size, eval_batch_size=eval_batch_size, bptt=bptt, clip=clip,
                           max_epochs=max_epochs, lr_decay=lr_decay, lr_patience=lr_patience, patience=patience,
                           max_tokens=max_tokens, max_minutes=max_minutes, seed=seed, amp=amp,
                           checkpoint_every=checkpoint_every, log_every=log_every, deterministic=deterministic)


def flags(ctx) -> dict[str, str]:
    """Each parameter of the command by its setting name, with the flag that sets it."""
    return {p.name: max(p.opts, key=len) for p in ctx.command.params if p.opts and p.opts[0].startswith("-")}


def given(ctx) -> dict[str, str]:
    """The settings given on the command line (not left at their defaults), with their flags."""
    return {name: flag for name, flag in flags(ctx).items()
            if getattr(ctx.get_parameter_source(name), "name", "DEFAULT") != "DEFAULT"}


@contextlib.contextmanager
def setting_errors(ctx):
    """The library's validation names a setting ("lr must be ..."); say the command's flag instead."""
    try:
        yield
    except ValueError as exc:
        name, _, rest = str(exc).partition(" ")
        flag = flags(ctx).get(name)
        raise GrocError(f"{flag} {rest}" if flag else str(exc)) from None


class StepProgress:
    """Loss, perplexity, tokens/s and ETA on stderr: a live line on a terminal, a log line every N steps otherwise."""

    def __init__(self, log_every: int):
        self.log_every = log_every
        self.live = err.is_terminal
        self.last = time.perf_counter()
        self.last_tokens = 0

    def __call__(self, trainer, steps_per_epoch: int) -> None:
        pos = trainer.pos
        step_in_epoch = math.ceil(pos.batch / trainer.config.bptt)
        if not self.live and pos.step % self.log_every:
            return
        loss = pos.epoch_loss / max(pos.epoch_tokens, 1)
        rate = pos.epoch_tokens / max(pos.epoch_seconds, 1e-9)
        eta = (steps_per_epoch - step_in_epoch) * pos.epoch_seconds / max(step_in_epoch, 1)
        line = (f"epoch {pos.epoch} step {step_in_epoch}/{steps_per_epoch}  loss {loss:.3f}  ppl {math.exp(min(loss, 50)):.1f}  "
                f"{rate:,.0f} tok/s  epoch ETA {eta:,.0f}s")
        if self.live:
            err.print(line, end="\r", markup=False)
        else:
            log(line)


LR = typer.Option(1e-3, "--lr", help="Adam learning rate (paper B.1: 1e-3).")
BATCH = typer.Option(20, "--batch-size", min=1, help="Parallel streams per step (paper: 20).")
EVAL_BATCH = typer.Option(10, "--eval-batch-size", min=1, help="Streams for validation.")
BPTT = typer.Option(35, "--bptt", min=1, help="Unrolled steps (paper: 35).")
CLIP = typer.Option(0.1, "--clip", min=0.0, help="Gradient-norm clip (paper: 0.1; 0 disables).")
LR_DECAY = typer.Option(0.1, "--lr-decay", min=0.0, max=1.0, help="Learning-rate factor after --lr-patience bad epochs.")
LR_PATIENCE = typer.Option(4, "--lr-patience", min=1, help="Epochs without validation improvement before decaying the learning rate (paper: 4).")
PATIENCE = typer.Option(8, "--patience", min=1, help="Epochs without validation improvement before stopping (paper: 8).")
MAX_TOKENS = typer.Option(None, "--max-tokens", min=1, help="Stop after this many training tokens.")
MAX_MINUTES = typer.Option(None, "--max-minutes", min=0.0, help="Stop after this many minutes of training.")
SEED = typer.Option(1, "--seed", help="Seed for initialisation, dropout and --update-prob draws.")
AMP = typer.Option(False, "--amp/--no-amp", help="bfloat16 mixed precision on CUDA (ignored on CPU). Off by default: "
                   "the convolutional output layer diverged under it at the paper's size (docs/reproduction.md).")
CKPT = typer.Option(0, "--checkpoint-every", min=0, help="Also checkpoint every N steps (0: at epoch ends).")
LOG_EVERY = typer.Option(100, "--log-every", min=1, help="Steps between progress lines when stderr is not a terminal.")
DETERMINISTIC = typer.Option(False, "--deterministic", help="Deterministic kernels (slower on GPU).")
DEVICE = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N.")
RESUME = typer.Option(False, "--resume", help="Continue the run in -o from its last checkpoint.")
FORCE = typer.Option(False, "--force", help="Delete an existing run directory in -o and start over.")
JSON = typer.Option(False, "--json", help="Print the final summary as JSON on stdout.")
