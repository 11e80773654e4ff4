"""One training loop for every output layer (GUIDE: no copy-pasted loop per model).

Paper B.1 defaults: Adam 1e-3, batch 20, BPTT 35, gradient-norm clip 0.1, learning rate
x0.1 after 4 epochs without validation improvement, early stop after 8. Zaremba et al.'s
(2014) schedule, which Press & Wolf's small models use, is settings too: plain SGD
(``optimizer=sgd``) and a learning rate that follows the epoch count (``schedule=epochs``).
Checkpoints carry
the optimizer, the schedule, every RNG state, the carried hidden state and the data
position, so resuming ends with the same weights and metrics as an uninterrupted run.

A run directory holds two metrics tables: `metrics.parquet`, one row per epoch (train and
validation perplexity), and `steps.parquet`, one row per optimizer step (loss, learning rate,
gradient norm, tokens/s), rewritten atomically at most every STEPS_FLUSH_SECONDS and before
every checkpoint, so a killed run keeps what it logged.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable

import pyarrow as pa
import torch
import torch.distributed as dist

from .. import interrupts
from ..artifacts.atomic import atomic_group
from ..artifacts.io import provenance, write_json, write_parquet
from ..console import log
from ..cpu import has_bf16
from ..errors import GrocError
from ..runtime import rebalance_threads
from ..run_storage import write_weights
from .config import TrainConfig
from .graphed import READ_EVERY, GraphedEval, StaticStep, graph_unsupported, make_graph_optimizer, tensor_lr
from .seed import rng_state, set_rng_state


STEPS_FLUSH_SECONDS = 10.0
STEP_COLUMNS = (("step", pa.int64()), ("epoch", pa.int64()), ("tokens", pa.int64()), ("loss", pa.float64()),
                ("objective", pa.float64()), ("lr", pa.float64()), ("grad_norm", pa.float64()),
                ("tokens_per_s", pa.float64()), ("seconds", pa.float64()))
STEPS_SCHEMA = pa.schema(STEP_COLUMNS)
class NonFiniteLoss(GrocError):
    pass


@dataclass
class Position:
    """Where training stands; a trainer.pt's "position" (``_position`` checks one read back)."""

    epoch: int = 1
    batch: int = 0  # index into the epoch's time axis
    step: int = 0
    tokens: int = 0
    seconds: float = 0.0
    epoch_loss: float = 0.0
    epoch_tokens: int = 0
    epoch_seconds: float = 0.0
    best_valid: float = math.inf
    bad_epochs: int = 0
    lr_bad_epochs: int = 0


def _position(saved) -> Position:
    """A saved position, each field of its type (a number of another type would fail mid-training)."""
    if not isinstance(saved, dict) or set(saved) - {f.name for f in fields(Position)}:
        raise TypeError("position does not hold the fields of a training position")
    for f in fields(Position):
        value = saved.get(f.name, f.default)
        number = (int,) if isinstance(f.default, int) else (int, float)
        if isinstance(value, bool) or not isinstance(value, number):
            raise TypeError(f"position.{f.name} is {type(value).__name__}, not {number[-1].__name__}")
    return Position(**saved)


def world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def evaluate_loss(model, columns: torch.Tensor, chunk: int = 256, amp: bool = False, graphed=None) -> tuple[float, int]:
    """Summed NLL and token count over [N, B] columns, hidden state carried across chunks (``graphed``: a
    ``GraphedEval`` of the same batch and chunk, which runs them as CUDA graphs)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    if graphed is not None:
        try:
            return graphed.loss(columns.to(device))
        finally:
            model.train(was_training)
    total, count = 0.0, 0
    with torch.no_grad(), _autocast(device, amp):
        composed = model.compose(grad=False)
        state = model.init_state(columns.size(1))
        for i in range(0, columns.size(0) - 1, chunk):
            n = min(chunk, columns.size(0) - 1 - i)
            x = columns[i : i + n].to(device)
            y = columns[i + 1 : i + 1 + n].to(device)
            hidden, state = model(x, state, composed)
            nll = composed.nll(hidden.reshape(-1, hidden.size(-1)).float(), y.reshape(-1))
            total += float(nll.double().sum())
            count += y.numel()
    model.train(was_training)
    return total, count


def make_optimizer(parameters, config: TrainConfig) -> torch.optim.Optimizer:
    if config.optimizer == "sgd":
        return torch.optim.SGD(parameters, lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.Adam(parameters, lr=config.lr, eps=config.adam_eps, weight_decay=config.weight_decay)


def _autocast(device: torch.device, amp: bool, graph: bool = False):
    if amp and device.type == "cuda":
        # Inside a captured graph autocast must not cache casts across replays (torch.cuda.graphs' advice).
        return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False if graph else None)
    if amp and device.type == "cpu":  # the custom kernels keep their sums in float32 (models/chars.py)
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return torch.autocast(device.type, enabled=False)


class Trainer:
    """``static`` (None: as ``config.graph`` and the device decide) trains through ``graphed.StaticStep``:
    captured as CUDA graphs on CUDA, and on any device without capture when True (the CPU test of the
    restructured step)."""

    def __init__(self, model, train_cols: torch.Tensor, valid_cols: torch.Tensor | None, config: TrainConfig,
                 run_dir: Path, device: torch.device, on_epoch: Callable[[dict], None] | None = None,
                 static: bool | None = None):
        self.model = model
        self.train_cols = train_cols
        self.valid_cols = valid_cols
        self.config = config
        self.run_dir = Path(run_dir)
        self.device = device
        self.rank, self.world = world()
        self.capture = False
        if config.amp and device.type == "cpu" and has_bf16() is False:
            log("warning: `amp` on a CPU without bfloat16 instructions (AMX, AVX512_BF16): torch emulates them, "
                "which may train slower than float32")
        if static is None and config.graph and device.type == "cuda":
            reason = graph_unsupported(model, config, device, self.world)
            if reason is None:
                static = self.capture = True
            else:
                log(f"training without CUDA graphs: {reason}")
        if self.capture:
            self.optimizer = make_graph_optimizer(model.parameters(), config, device)
        else:
            self.optimizer = make_optimizer(model.parameters(), config)
        self.static = None
        if static and model.output_layer.sparse_updates and model.config.update_prob < 1.0:
            raise ValueError("the static step composes with autograd every step: update_prob < 1 trains eagerly")
        if static:
            self.static = StaticStep(model, self.optimizer, config, train_cols.size(1), device,
                                     lambda: _autocast(device, config.amp, graph=self.capture), self._activation_penalty,
                                     capture=self.capture)
            self.train_dev = train_cols.to(device)
        self.graphed_eval = None
        if self.capture and valid_cols is not None:
            self.graphed_eval = GraphedEval(model, valid_cols.size(1), 256, device,
                                            lambda: _autocast(device, config.amp, graph=True))
        self._unread: list[tuple] = []  # the host's part of the step rows the ring has not been read for
        self._eager_row: tuple = ()
        self.update_gen = torch.Generator().manual_seed(config.seed + 7919)
        self.pos = Position()
        self.metrics: list[dict] = []
        self.steps: list[tuple] = []  # one row of STEP_COLUMNS per optimizer step
        self._steps_flushed = time.monotonic()
        self._checkpointed = time.monotonic()
        self.state = None
        self.on_epoch = on_epoch
        # A run record (config.json) to write with the next checkpoint, in its atomic group: a resumed
        # run's new budgets are recorded when it has trained with them, and not if that checkpoint fails.
        self.pending_record: dict | None = None

    # -- checkpoints -------------------------------------------------------------------
    def _optimizer_state(self) -> dict:
        # A learning rate kept as a device tensor for the graphs is saved as a float, as an eager run's is.
        state = self.optimizer.state_dict()
        for group in state["param_groups"]:
            if isinstance(group.get("lr"), torch.Tensor):
                group["lr"] = float(group["lr"])
        return state

    def _trainer_state(self) -> dict:
        if self.static is not None and self.pos.batch > 0:  # mid-epoch: the state the buffers carry
            self.state = self.static.get_state()
        return {
            "optimizer": self._optimizer_state(),
            "position": asdict(self.pos),
            "metrics": [dict(m) for m in self.metrics],
            "rng": rng_state(),
            "update_gen": self.update_gen.get_state(),
            "hidden": [t.cpu() for pair in self.state for t in pair] if self.state is not None else [],
        }

    def resume(self, saved: dict) -> None:
        """Continue from `saved`, the trainer state that run.load_checkpoint returned (it has
        already put the checkpoint's weights into the model)."""
        self.optimizer.load_state_dict(saved["optimizer"])
        if self.capture:
            tensor_lr(self.optimizer, self.device)
        self.pos = _position(saved["position"])
        if not isinstance(saved["metrics"], list) or not all(isinstance(m, dict) for m in saved["metrics"]):
            raise TypeError("metrics is not a list of per-epoch records")
        self.metrics = list(saved["metrics"])
        if not isinstance(saved["hidden"], list) or not all(isinstance(t, torch.Tensor) for t in saved["hidden"]):
            raise TypeError("hidden is not a list of tensors")
        set_rng_state(saved["rng"])
        self.update_gen.set_state(saved["update_gen"])
        flat = saved["hidden"]
        self.state = [(flat[i].to(self.device), flat[i + 1].to(self.device)) for i in range(0, len(flat), 2)] or None
        self.steps = self._logged_steps()

    def _logged_steps(self) -> list[tuple]:
        """The per-step rows logged before the checkpoint being resumed (the later ones of a killed
        run are dropped: they are trained again). An unreadable log restarts empty."""
        import pyarrow.parquet as pq

        path = self.run_dir / "steps.parquet"
        if self.rank != 0 or not path.is_file():
            return []
        try:
            table = pq.read_table(path, columns=[name for name, _ in STEP_COLUMNS])
        except (pa.ArrowException, OSError):
            log(f"warning: {path} is unreadable; the per-step log restarts at step {self.pos.step + 1}")
            return []
        return [row for row in zip(*(table.column(n).to_pylist() for n, _ in STEP_COLUMNS)) if row[0] <= self.pos.step]

    def checkpoint(self, best: bool = False) -> None:
        """All of the run's state or none of it: last/ (weights and trainer state), best/ when this
        checkpoint is the best so far, metrics.parquet and steps.parquet are written aside together
        and swapped in only when every one is complete, so a full disk or an error part-way leaves
        the previous checkpoint whole (a best/ newer than last/ would not be)."""
        self._checkpointed = time.monotonic()
        if self.rank != 0:
            return
        self._read_steps()  # every step up to here is in the record
        with atomic_group(self.run_dir) as aside:
            if best:
                write_weights(self.model, aside(self.run_dir / "best", directory=True))
            write_weights(self.model, aside(self.run_dir / "last", directory=True), self._trainer_state())
            self._write_metrics(aside)
            if self.pending_record is not None:
                write_json(self.pending_record, aside(self.run_dir / "config.json"))
        self.pending_record = None

    def _write_metrics(self, aside=None) -> None:
        """metrics.parquet (per epoch) and steps.parquet (per step): replaced atomically on their own
        (the periodic flush of steps.parquet), or as part of a checkpoint's `aside`."""
        if self.rank != 0:
            return
        if aside is None:
            with atomic_group(self.run_dir) as aside:
                return self._write_metrics(aside)
        self._steps_flushed = time.monotonic()
        if self.steps:
            columns = [pa.array(list(c), type=t) for c, (_, t) in zip(zip(*self.steps), STEP_COLUMNS)]
            write_parquet(pa.Table.from_arrays(columns, schema=STEPS_SCHEMA), aside(self.run_dir / "steps.parquet"),
                          provenance("train", what="per-step metrics"))
        if self.metrics:
            columns = {k: [m.get(k) for m in self.metrics] for k in self.metrics[0]}
            write_parquet(pa.table(columns), aside(self.run_dir / "metrics.parquet"),
                          provenance("train", what="per-epoch metrics"))

    def spent_budget(self) -> str | None:
        """The budget a resumed run has already used up ('max-tokens', 'max-minutes', 'max-epochs'), if any."""
        cfg = self.config
        if cfg.max_tokens is not None and self.pos.tokens >= cfg.max_tokens:
            return "max-tokens"
        if cfg.max_minutes is not None and self.pos.seconds >= 60 * cfg.max_minutes:
            return "max-minutes"
        if self.pos.epoch > cfg.max_epochs:
            return "max-epochs"
        return None

    def stopped_early(self) -> bool:
        """Whether early stopping ended this (resumed) run: `patience` epochs without improvement.
        Resuming it trains nothing, as a spent budget does (`patience` cannot change on resume)."""
        return self.pos.bad_epochs >= self.config.patience

    # -- the loop ------------------------------------------------------------------------
    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(lr)  # in place: a captured graph reads it where it is
            else:
                group["lr"] = lr

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def _allreduce_grads(self) -> None:
        # Data parallelism as torch DDP does it (averaged gradients), done explicitly because
        # GroC's vocabulary composition happens outside the module's forward and, with
        # --update-prob, leaves some parameters without gradients on a step.
        grads = []
        for p in self.model.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def train(self, progress: Callable | None = None) -> dict:
        cfg = self.config
        model = self.model
        steps_per_epoch = len(range(0, self.train_cols.size(0) - 1, cfg.bptt))
        # A resumed run may have nothing left to train.
        stop_reason = "early-stopping" if self.stopped_early() else self.spent_budget()
        started = time.perf_counter() - self.pos.seconds
        while self.pos.epoch <= cfg.max_epochs and stop_reason is None:
            model.train()
            if self.pos.batch == 0 or self.state is None:
                self.state = model.init_state(self.train_cols.size(1))
            epoch_start = time.perf_counter() - self.pos.epoch_seconds
            partial = False
            starts = range(self.pos.batch, self.train_cols.size(0) - 1, cfg.bptt)
            if self.static is not None:
                self.static.set_state(None if self.pos.batch == 0 else self.state)
            try:
                for i in starts:
                    # A step, its position and its records, whole: Ctrl-C here is taken when they are done (a
                    # second one at once), and what was trained is kept as a checkpoint to resume from.
                    with interrupts.deferred():
                        step_start = time.perf_counter()
                        n = min(cfg.bptt, self.train_cols.size(0) - 1 - i)
                        if self.static is not None:
                            self._static_window(i, n)
                        else:
                            self._eager_window(i, n)
                        tokens = n * self.train_cols.size(1) * self.world
                        self.pos.batch = i + n
                        self.pos.step += 1
                        self.pos.tokens += tokens
                        self.pos.epoch_tokens += tokens
                        now = time.perf_counter()
                        self.pos.epoch_seconds = now - epoch_start
                        self.pos.seconds = now - started
                        self._unread.append((self.pos.step, self.pos.epoch, self.pos.tokens, tokens // self.world,
                                             tokens / max(now - step_start, 1e-9), self.pos.seconds))
                        if self.static is None or self.static.pending >= READ_EVERY:
                            self._read_steps()
                        if time.monotonic() - self._steps_flushed >= STEPS_FLUSH_SECONDS:
                            self._write_metrics()
                        if progress is not None:
                            progress(self, steps_per_epoch)
                        rebalance_threads()
                        if cfg.max_tokens is not None and self.pos.tokens >= cfg.max_tokens:
                            stop_reason, partial = "max-tokens", True
                        elif cfg.max_minutes is not None and self.pos.seconds >= 60 * cfg.max_minutes:
                            stop_reason, partial = "max-minutes", True
                        if stop_reason:
                            partial = self.pos.batch < self.train_cols.size(0) - 1
                            break
                        if cfg.checkpoint_every and self.pos.step % cfg.checkpoint_every == 0:
                            self.checkpoint()
                        elif cfg.checkpoint_minutes and time.monotonic() - self._checkpointed >= 60 * cfg.checkpoint_minutes:
                            self.checkpoint()
            except KeyboardInterrupt:
                if not interrupts.torn() and self.world == 1 and self.pos.step > 0:
                    self.checkpoint()
                raise
            stop_reason = self._end_epoch(partial) or stop_reason
        if stop_reason is None:
            stop_reason = "max-epochs"
        return {"stop_reason": stop_reason, "epochs": len(self.metrics), "steps": self.pos.step,
                "tokens": self.pos.tokens, "seconds": round(self.pos.seconds, 2), "best_valid_ppl": _ppl(self.pos.best_valid)}

    def _eager_window(self, i: int, n: int) -> None:
        """One step on the window of ``n`` time steps at ``i``, launched op by op; its values go to the ring of
        one the trainer reads at once (``_read_steps``), after both checks and before the weights change."""
        cfg, model = self.config, self.model
        x = self.train_cols[i : i + n].to(self.device, non_blocking=True)
        y = self.train_cols[i + 1 : i + 1 + n].to(self.device, non_blocking=True)
        self.state = model.detach_state(self.state)
        with _autocast(self.device, cfg.amp):
            composed = model.compose(grad=model.sample_update(self.update_gen))
            hidden, self.state = model(x, self.state, composed)
            nll = composed.nll(hidden.reshape(-1, hidden.size(-1)).float(), y.reshape(-1))
            loss = nll.mean() + model.regularization() + self._activation_penalty(hidden)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.world > 1:
            self._allreduce_grads()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip if cfg.clip > 0 else math.inf)
        # One device sync per step for the loss, the gradient norm and the window's sum; both checks still come
        # before the weights are updated.
        nll_sum, value, norm_value = torch.stack(
            [nll.detach().double().sum(), loss.detach().double(), norm.detach().double()]).tolist()
        self._check_finite(value, norm_value, self.pos.step + 1, updated=False)
        self.optimizer.step()
        self._eager_row = (nll_sum, value, norm_value)

    def _static_window(self, i: int, n: int) -> None:
        """One step through ``StaticStep``: a replayed graph for a full window, eagerly for a shorter one."""
        if n == self.config.bptt:
            self.static.x.copy_(self.train_dev[i : i + n])
            self.static.y.copy_(self.train_dev[i + 1 : i + 1 + n])
            self.static.run()
        else:
            self.static.eager_step(self.train_dev[i : i + n], self.train_dev[i + 1 : i + 1 + n])

    def _read_steps(self) -> None:
        """The per-step values of the steps not read yet (from the device's ring in static mode: one sync every
        READ_EVERY steps) into the step rows and the epoch's loss; a non-finite one stops the run."""
        if not self._unread:
            return
        values = self.static.read() if self.static is not None else [self._eager_row]
        for (step, epoch, tokens, window, rate, seconds), (nll_sum, value, norm_value) in zip(self._unread, values):
            self._check_finite(value, norm_value, step, updated=True)
            self.pos.epoch_loss += nll_sum * self.world
            self.steps.append((step, epoch, tokens, nll_sum / window, value, self.lr, norm_value, rate, seconds))
        self._unread = []

    def _check_finite(self, value: float, norm_value: float, step: int, updated: bool) -> None:
        if not math.isfinite(value):
            raise NonFiniteLoss(f"non-finite loss ({value}) at epoch {self.pos.epoch}, step {step}: lower `lr` or `clip`")
        if not math.isfinite(norm_value):
            # A graph updates the weights before its values are read; the run stops before any checkpoint has them.
            what = "the run stops before a checkpoint keeps them" if updated and self.static is not None \
                else "the weights were not updated"
            raise NonFiniteLoss(f"non-finite gradient norm at epoch {self.pos.epoch}, step {step} ({what}): lower `lr`")

    def _activation_penalty(self, hidden: torch.Tensor) -> torch.Tensor | float:
        """AR and TAR (Merity et al. 2018, as in the authors' code): added to the training loss, never
        to the reported perplexity."""
        cfg, penalty = self.config, 0.0
        if cfg.ar_alpha:
            penalty = penalty + cfg.ar_alpha * hidden.float().pow(2).mean()
        raw = getattr(self.model, "last_raw", None)
        if cfg.tar_beta and raw is not None and raw.size(0) > 1:
            penalty = penalty + cfg.tar_beta * (raw[1:] - raw[:-1]).float().pow(2).mean()
        return penalty

    def _end_epoch(self, partial: bool) -> str | None:
        cfg = self.config
        self._read_steps()
        train_loss = self.pos.epoch_loss / max(self.pos.epoch_tokens, 1)
        valid_loss = None
        if self.valid_cols is not None:
            total, count = evaluate_loss(self.model, self.valid_cols, amp=cfg.amp, graphed=self.graphed_eval)
            valid_loss = total / count
        row = {
            "epoch": self.pos.epoch, "partial": partial, "train_loss": train_loss, "train_ppl": _ppl(train_loss),
            "valid_loss": valid_loss, "valid_ppl": _ppl(valid_loss) if valid_loss is not None else None,
            "lr": self.lr, "seconds": self.pos.epoch_seconds, "tokens": self.pos.epoch_tokens,
            "tokens_per_s": self.pos.epoch_tokens / max(self.pos.epoch_seconds, 1e-9),
        }
        self.metrics.append(row)
        # The paper's schedule (B.1): one test of improvement decides the best checkpoint, the
        # learning-rate decay after lr_patience bad epochs and early stopping after patience.
        # torch's ReduceLROnPlateau is not used: it would keep a second counter of the same test,
        # needs threshold=0 and patience=lr_patience - 1 to decay on the same epoch, has no early
        # stopping, and would add its state to trainer.pt (runs resumed from older checkpoints).
        score = valid_loss if valid_loss is not None else train_loss
        improved = score < self.pos.best_valid
        stop = None
        if improved:
            self.pos.best_valid = score
            self.pos.bad_epochs = self.pos.lr_bad_epochs = 0
        else:
            self.pos.bad_epochs += 1
            self.pos.lr_bad_epochs += 1
            if cfg.schedule == "plateau" and self.pos.lr_bad_epochs >= cfg.lr_patience:
                self._set_lr(self.lr * cfg.lr_decay)
                self.pos.lr_bad_epochs = 0
            if self.stopped_early():
                stop = "early-stopping"
        scheduled = cfg.lr_after_epoch(self.pos.epoch)
        if scheduled is not None:
            self._set_lr(scheduled)
        if self.on_epoch is not None and self.rank == 0:
            self.on_epoch(row)
        self.pos.epoch += 1
        self.pos.batch = 0
        self.pos.epoch_loss = 0.0
        self.pos.epoch_tokens = 0
        self.pos.epoch_seconds = 0.0
        self.state = None
        self.checkpoint(best=improved)  # best/ with last/: both or neither
        return stop


def _ppl(loss: float | None) -> float | None:
    if loss is None or not math.isfinite(loss):
        return None
    return math.exp(min(loss, 700.0))
