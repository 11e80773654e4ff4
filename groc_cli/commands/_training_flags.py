"""Options of `train` and `finetune` that are not settings of the run, and the progress display."""

from __future__ import annotations

import math
import time

import typer

from ..console import err, log


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


COMMON = {
    "device": typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    "resume": typer.Option(False, "--resume", help="Continue the run in -o from its last checkpoint."),
    "force": typer.Option(False, "--force", help="Replace an existing run in -o once the new one is complete."),
    "json_out": typer.Option(False, "--json", help="Print the final summary as JSON on stdout."),
}
