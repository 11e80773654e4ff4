"""``tensorboard`` DIR: a run's curves through TensorBoard's own event writer.

The same numbers as `steps.parquet` and `metrics.parquet` (the run directory keeps those either
way): per optimizer step `train/loss` (nats a token), `train/objective` (what was minimized, with
regularizers), `train/lr`, `train/grad_norm` and `train/tokens_per_s`; per epoch
`epoch/train_ppl`, `epoch/valid_ppl` and `epoch/lr`. A resumed run writes its whole history again
with `purge_step` at its first step, so a directory used twice holds each step once.

Needs the `tensorboard` package (`pip install 'groc-cli[tensorboard]'`); asking for it without that
package is refused before any work.
"""

from __future__ import annotations

from pathlib import Path

from ..console import is_main_process
from ..errors import GrocError

STEP_SCALARS = ("loss", "objective", "lr", "grad_norm", "tokens_per_s")
EPOCH_SCALARS = ("train_ppl", "valid_ppl", "lr")


def writer_class():
    """torch.utils.tensorboard.SummaryWriter, or a one-line error naming the missing package."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        raise GrocError("`tensorboard` needs the tensorboard package: pip install 'groc-cli[tensorboard]' (or pip install tensorboard)") from None
    return SummaryWriter


class TensorBoardLog:
    """A training observer (called as progress(trainer, steps_per_epoch) after every step) that
    writes the steps and epochs it has not written yet; close() writes the rest."""

    def __init__(self, log_dir: Path):
        self.log_dir = Path(log_dir)
        self.cls = writer_class()
        self.writer = None
        self.trainer = None
        self.steps = 0  # rows of trainer.steps written
        self.epochs = 0  # rows of trainer.metrics written

    def __call__(self, trainer, steps_per_epoch: int | None = None) -> None:
        self.trainer = trainer
        if not is_main_process() or not trainer.steps:
            return
        if self.writer is None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self.writer = self.cls(str(self.log_dir), purge_step=int(trainer.steps[0][0]))
        from .loop import STEP_COLUMNS

        names = [name for name, _ in STEP_COLUMNS]
        for row in trainer.steps[self.steps:]:
            values = dict(zip(names, row))
            for name in STEP_SCALARS:
                self.writer.add_scalar(f"train/{name}", values[name], global_step=int(values["step"]))
        self.steps = len(trainer.steps)
        for row in trainer.metrics[self.epochs:]:
            for name in EPOCH_SCALARS:
                if row.get(name) is not None:
                    self.writer.add_scalar(f"epoch/{name}", row[name], global_step=int(row["epoch"]))
        self.epochs = len(trainer.metrics)

    def close(self) -> None:
        if self.trainer is not None:
            self(self.trainer)  # the last epoch's row comes after the last step
        if self.writer is not None:
            self.writer.close()

    def __enter__(self) -> "TensorBoardLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
