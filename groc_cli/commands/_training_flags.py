"""Options of `train` and `finetune` that are not settings of the run, their checks, and the progress display."""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Iterator

import typer

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column

from ..console import err, log
from ..errors import GrocError


class StepProgress:
    """Training progress on stderr: on a terminal a rich progress bar over the epoch's steps with
    loss, perplexity and tokens/s; otherwise a log line every N steps. The ETA is the time to the
    end of the epoch or to the budget (--max-tokens, --max-minutes), whichever comes first. Use as
    a context manager around training."""

    def __init__(self, log_every: int, log_seconds: float = 0.0):
        self.log_every = log_every
        self.log_seconds = log_seconds
        self.logged = time.monotonic()
        self.live = err.is_terminal
        self.bar: Progress | None = None
        self.task = None
        self.epoch = None

    def __enter__(self) -> "StepProgress":
        if self.live:
            # The step count and the figures never wrap (rich would cut them to "308/…" in an
            # 80-column terminal); the bar gives way instead.
            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                MofNCompleteColumn(table_column=Column(no_wrap=True)),
                                TextColumn("{task.fields[info]}", table_column=Column(no_wrap=True)), TimeElapsedColumn(),
                                console=err, transient=True)
            self.bar.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()

    @staticmethod
    def eta(trainer, steps_per_epoch: int, step_in_epoch: int) -> tuple[float, str]:
        """Seconds left and what ends first: the epoch or a budget."""
        pos, cfg = trainer.pos, trainer.config
        per_step = pos.epoch_seconds / max(step_in_epoch, 1)
        options = [((steps_per_epoch - step_in_epoch) * per_step, "epoch")]
        if cfg.max_tokens is not None and pos.epoch_tokens:
            options.append((max(cfg.max_tokens - pos.tokens, 0) * pos.epoch_seconds / pos.epoch_tokens, "--max-tokens"))
        if cfg.max_minutes is not None:
            options.append((max(60 * cfg.max_minutes - pos.seconds, 0.0), "--max-minutes"))
        return min(options)

    def __call__(self, trainer, steps_per_epoch: int) -> None:
        pos = trainer.pos
        step_in_epoch = math.ceil(pos.batch / trainer.config.bptt)
        if not self.live and pos.step % self.log_every and not (
                self.log_seconds and time.monotonic() - self.logged >= self.log_seconds):
            return
        self.logged = time.monotonic()
        loss = pos.epoch_loss / max(pos.epoch_tokens, 1)
        rate = pos.epoch_tokens / max(pos.epoch_seconds, 1e-9)
        eta, until = self.eta(trainer, steps_per_epoch, step_in_epoch)
        ppl = math.exp(min(loss, 50))
        if self.bar is not None:  # compact, to fit an 80-column terminal beside the bar
            if self.epoch != pos.epoch:
                if self.task is not None:
                    self.bar.remove_task(self.task)
                self.task = self.bar.add_task(f"epoch {pos.epoch}", total=steps_per_epoch, info="")
                self.epoch = pos.epoch
            info = f"loss {loss:.3f} ppl {ppl:.1f} {rate:,.0f} tok/s {'' if until == 'epoch' else until + ' '}ETA {eta:,.0f}s"
            self.bar.update(self.task, completed=step_in_epoch, info=info)
        else:
            log(f"epoch {pos.epoch} step {step_in_epoch}/{steps_per_epoch}  loss {loss:.3f}  ppl {ppl:.1f}  "
                f"{rate:,.0f} tok/s  {'epoch' if until == 'epoch' else until} ETA {eta:,.0f}s")


@contextlib.contextmanager
def observers(log_every: int, tensorboard: Path | None, log_seconds: float = 0.0) -> Iterator:
    """The training observer: the progress display, and with --tensorboard DIR TensorBoard's writer."""
    with StepProgress(log_every, log_seconds) as progress:
        if tensorboard is None:
            yield progress
            return
        from ..training.tensorboard import TensorBoardLog

        with TensorBoardLog(tensorboard) as board:
            def both(trainer, steps_per_epoch: int) -> None:
                progress(trainer, steps_per_epoch)
                board(trainer, steps_per_epoch)

            yield both


COMMON = {
    "device": typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    "resume": typer.Option(False, "--resume", help="Continue the run in -o from its last checkpoint."),
    "force": typer.Option(False, "--force", help="Replace an existing run in -o once the new one is complete."),
    "json_out": typer.Option(False, "--json", help="Print the final summary as JSON on stdout."),
    "tensorboard": typer.Option(None, "--tensorboard", metavar="DIR",
                                help="Also write the training curves as TensorBoard events to DIR (tensorboard --logdir "
                                     "DIR); needs pip install 'groc-cli\\[tensorboard]'. steps.parquet and metrics.parquet in "
                                     "the run are written either way."),
}


def check_start(resume: bool, force: bool, config: Path | None, overrides: list[str] | None, threads: str) -> None:
    """The flags of a training job that contradict each other, refused before any work; the CPU threads."""
    if resume and force:
        raise GrocError("--resume and --force contradict each other; pick one")
    from ..runtime import set_threads  # torch: not for --help

    set_threads(threads)
    if resume and (config is not None or overrides):
        raise GrocError("--resume continues with the run's own settings: drop --config and KEY=VALUE overrides")
