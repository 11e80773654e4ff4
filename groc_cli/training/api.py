"""Training as one library call, ``run_training(job, train_config, ...)``, that starts from a new
model (``groc train``) or from a trained run (``groc finetune``); the commands only parse flags."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Iterator

import torch
import torch.distributed as dist

from ..version import __version__
from ..artifacts.atomic import reclaim_incomplete, replace_path
from ..artifacts.destinations import check_destination, special_kind
from ..artifacts.diskfull import disk_full, quota_exceeded
from ..artifacts.integrity import sha256_file
from ..artifacts.io import write_json
from ..artifacts.locks import output_lock
from ..console import log
from ..errors import DamagedInput, GrocError, as_setting_error, first_line
from ..environment import environment
from ..models import KINDS, Lexicon, ModelConfig, build_model, output_layer_class
from ..models.lexicon import unlisted_warning
from ..runtime import init_distributed, resolve_device, tune_allocator
from ..settings import MISSING, default_of
from ..text.dataset import open_dataset
from .data import batchify, model_ids, token_counts
from .config import TrainConfig
from .loop import Trainer
from ..run_storage import RUN_FORMAT, RUN_FORMAT_VERSION, Run, copy_lexicon, load_checkpoint, read_lexicon, write_vocab
from .seed import seed_everything
from ..start_state import write_start_states


def check_lexicon(path: Path | None, vocab: list[str], kind: str) -> Lexicon | None:
    """The lexicon table at ``path`` when output layer ``kind`` ``needs_lexicon`` (None for the
    others), checked against the training vocabulary ``vocab`` (empty: not checked). A lexicon
    given to an output layer that reads none is refused: it would be dropped without a word."""
    if not output_layer_class(kind).needs_lexicon:
        if path is not None:
            readers = " or ".join(k for k in KINDS if output_layer_class(k).needs_lexicon)
            raise GrocError(f"`lexicon` is used by `output` {readers} only, not by {kind}; drop `lexicon`")
        return None
    if path is None:
        raise GrocError(f"`output` {kind} needs `lexicon` LEXICON.parquet (build it with 'groc lexicon --vocab "
                        "DATASET -o ...')")
    path = Path(path)
    if not path.is_file():
        raise GrocError(f"`lexicon` {path}: no such file; build it with 'groc lexicon --vocab DATASET -o {path}'")
    lexicon = read_lexicon(path, f"build it again with 'groc lexicon --vocab DATASET -o {path} --force'")
    meta = lexicon.meta
    if (meta.get("arguments") or {}).get("vocab"):
        missing = [w for w in vocab if w not in lexicon.words]
        if missing:
            raise GrocError(
                f"`lexicon` {path} was built for another vocabulary: {len(missing):,} of {len(vocab):,} training words "
                f"are missing (e.g. {missing[0]!r}); rebuild it with 'groc lexicon --vocab DATASET'"
            )
    return lexicon


def _param_report(model) -> int:
    n = model.num_parameters()
    threads = torch.get_num_threads()
    log(f"|Θ| = {n:,} parameters ({n / 1e6:.2f}M); {threads} CPU thread{'s' if threads > 1 else ''}")
    return n


@dataclass(kw_only=True)
class TrainJob:
    """What a training job reads and where it writes, besides its model and training settings
    (``ModelConfig``, ``TrainConfig``): the same for a new run (``groc train``) and a finetuned
    one (``groc finetune``).

    dataset: the dataset directory whose train split is trained on (its valid split, if any,
    picks the best checkpoint); output_dir: the run directory to create, or to continue with
    ``resume``; lexicon: the lexicon table an output layer that reads one trains with (a
    finetuned run's default: its source run's copy); device: auto, cpu, cuda or cuda:N;
    force: replace an existing run in output_dir once the new one is complete; verify: read
    every split of the dataset before any work; given: the settings the user gave explicitly
    (by name; a dict's values are not read; None: those of ``train_config`` and ``model_config``
    whose values differ from their defaults), so that ``resume`` refuses those that differ from
    the run's instead of dropping them silently, and takes the budgets and intervals among them
    (``RESUME_MAY_CHANGE``) from ``train_config``; the run's own values hold for the rest."""

    dataset: Path
    output_dir: Path
    lexicon: Path | None = None
    device: str = "auto"
    resume: bool = False
    force: bool = False
    verify: bool = False
    given: dict[str, str] | None = None


def run_training(job: TrainJob, train_config: TrainConfig, *, model_config: ModelConfig | None = None,
                 source_run: Path | None = None, progress=None) -> dict:
    """Train a run and return its summary: a new model built from ``model_config`` (``groc
    train``), or the trained run ``source_run`` continued on the job's dataset with the union of
    its vocabulary and the dataset's (``groc finetune``; paper 5.1). Everything else (the device,
    the dataset's checks, `resume` and `force`, the lexicon, seeding, the run directory and the
    training loop) is the same job either way."""
    if (model_config is None) == (source_run is None):
        raise TypeError("run_training takes model_config (a new model) or source_run (a trained run), not both")
    start = _NewModel(model_config) if source_run is None else _FromRun(Path(source_run))
    with _run_lock(job.output_dir):
        return _run(job, train_config, start, progress)


def _run(job: TrainJob, train_config: TrainConfig, start, progress) -> dict:
    device = resolve_device(job.device)
    tune_allocator()
    rank, world, device = init_distributed(device)
    start.open()
    dataset = open_dataset(job.dataset, job.verify)
    if not dataset.has_split("train") or dataset.vocab_size == 0:
        raise GrocError(f"dataset {job.dataset} has no train split; {start.prepare_hint}")
    run_dir = Path(job.output_dir)
    inputs = (*start.inputs, job.dataset, job.lexicon)
    lexicon_path = job.lexicon
    extended: dict = {}
    if job.resume:
        run = Run(run_dir)
        if run.dataset_checksum != dataset.checksum:
            raise GrocError(start.other_dataset(run_dir, job.dataset))
        given = job.given if job.given is not None else _set_by_caller(train_config, getattr(start, "model_config", None))
        start.resume(run, train_config, given)
        extended = _budget_overrides(run.config["train"], train_config, given)
        train_config = TrainConfig.from_dict({**run.config["train"], **extended})
        lexicon_path = start.resumed_lexicon(run, lexicon_path)
    else:
        check_new_run_dir(run_dir, job.force, rank, inputs=inputs)
    model, words, counts, train, valid = start.build(dataset, job.dataset, lexicon_path, train_config, device)
    saved = load_checkpoint(model, run_dir / "last") if job.resume else None
    start.loaded(model, world, job.dataset, words)
    n_params = _param_report(model)
    config = start.record(dataset, job.dataset, train_config, lexicon_path, n_params, world, device)
    with run_output(run_dir, job.resume, job.force, rank, inputs=inputs) as target:
        if rank == 0 and not job.resume:
            write_vocab(target, words, counts)
            if start.lexicon_copy is not None:
                copy_lexicon(start.lexicon_copy, target)
            write_json(config, target / "config.json")
        # A resumed run's record takes the budgets it trains with (config.json re-runs it), written
        # with its next checkpoint.
        record = {**run.config, "train": {**run.config["train"], **extended}} if extended else None
        trainer = _trainer(model, train, valid, train_config, target, device, rank, world)
        trainer.pending_record = record
        if saved is not None:
            _resume(trainer, saved, train_config, target, run_dir)
        return _train(trainer, progress, valid if valid is not None else train, target, run_dir, config["parameters"],
                      rank, world)


def _dataset_record(dataset, dataset_dir: Path) -> dict:
    return {"path": str(dataset_dir), "checksum": dataset.checksum, "vocab_size": dataset.vocab_size}


class _NewModel:
    """The first way to start a job: a new model from its settings, over the dataset's vocabulary."""

    prepare_hint = "prepare it with `train`"
    inputs: tuple = ()

    def __init__(self, model_config: ModelConfig):
        self.model_config = model_config
        self.lexicon_copy: Path | None = None

    def open(self) -> None:
        pass

    @staticmethod
    def other_dataset(run_dir: Path, dataset_dir: Path) -> str:
        return f"`resume`: run {run_dir} was trained on another dataset (checksum differs from {dataset_dir})"

    def resume(self, run: Run, train_config: TrainConfig, given: dict) -> None:
        """The run's own model settings; those given that differ from the run's are refused."""
        _check_resumed_settings(run.config, model_config=self.model_config, train_config=train_config, given=given)
        self.model_config = run.model_config

    @staticmethod
    def resumed_lexicon(run: Run, lexicon_path: Path | None) -> Path | None:
        return _resumed_lexicon(run, lexicon_path)

    def build(self, dataset, dataset_dir: Path, lexicon_path: Path | None, train_config: TrainConfig, device):
        vocab = dataset.vocab
        with as_setting_error():  # a setting that cannot serve this vocabulary (adaptive's cutoffs)
            layer = output_layer_class(self.model_config.output)
            layer.check_vocab_size(self.model_config, len(vocab), f"the vocabulary of {dataset_dir}")
        self.lexicon = check_lexicon(lexicon_path, vocab, self.model_config.output)
        self.lexicon_copy = lexicon_path if self.lexicon is not None else None
        train = model_ids(vocab, dataset, "train")
        counts = token_counts(train, len(vocab))
        valid = model_ids(vocab, dataset, "valid") if dataset.has_split("valid") else None
        if valid is None:
            log("warning: the dataset has no valid split; the schedule and best checkpoint follow the training loss")
        seed_everything(train_config.seed, train_config.deterministic)
        model = build_model(self.model_config, vocab, lexicon=self.lexicon, counts=counts).to(device)
        return model, vocab, counts, train, valid

    def loaded(self, model, world: int, dataset_dir: Path, words: list[str]) -> None:
        if world > 1:  # every process starts from rank 0's weights
            for p in model.parameters():
                dist.broadcast(p.data, 0)

    def record(self, dataset, dataset_dir: Path, train_config: TrainConfig, lexicon_path: Path | None, n_params: int,
               world: int, device) -> dict:
        return {
            "format": RUN_FORMAT, "format_version": RUN_FORMAT_VERSION, "groc_version": __version__,
            "stage": "train", "model": self.model_config.to_dict(), "train": asdict(train_config),
            "dataset": _dataset_record(dataset, dataset_dir),
            "lexicon": {"sha256": sha256_file(lexicon_path)} if self.lexicon is not None else None,
            "parameters": n_params, "world_size": world, "device": str(device.type),
            "environment": environment(str(device), self.lexicon_copy),
        }


class _FromRun:
    """The second way to start a job: a trained run's best weights, whose vocabulary becomes the
    union of its own and the dataset's (new words are composed by GroC, random rows elsewhere)."""

    prepare_hint = "prepare the target-domain data with `train`"

    def __init__(self, source_dir: Path):
        self.source_dir = source_dir
        self.inputs = (source_dir,)

    def open(self) -> None:
        self.source = Run(self.source_dir)
        self.lexicon_copy = self.source.lexicon_path

    @staticmethod
    def other_dataset(run_dir: Path, dataset_dir: Path) -> str:
        return f"`resume`: run {run_dir} was finetuned on another dataset"

    @staticmethod
    def resume(run: Run, train_config: TrainConfig, given: dict) -> None:
        """The training settings given that differ from the run's are refused (the model's are the source run's)."""
        _check_resumed_settings(run.config, train_config=train_config, given=given)

    @staticmethod
    def resumed_lexicon(run: Run, lexicon_path: Path | None) -> Path | None:
        return lexicon_path  # the given one, or the source run's

    def build(self, dataset, dataset_dir: Path, lexicon_path: Path | None, train_config: TrainConfig, device):
        source = self.source
        lexicon = check_lexicon(lexicon_path, [], source.model_config.output) if lexicon_path else source.read_lexicon()
        if self.lexicon_copy is not None:
            self.lexicon_copy = lexicon_path or self.lexicon_copy
        seed_everything(train_config.seed, train_config.deterministic)
        model, old_words, _ = source.build("best", lexicon=lexicon, device="cpu")
        old = set(old_words)
        self.new_words = [w for w in dataset.vocab if w not in old]
        words = old_words + self.new_words
        train = model_ids(words, dataset, "train")
        counts = token_counts(train, len(words))
        model.set_vocab(words, counts, generator=torch.Generator().manual_seed(train_config.seed))
        valid = model_ids(words, dataset, "valid") if dataset.has_split("valid") else None
        return model.to(device), words, counts, train, valid

    def loaded(self, model, world: int, dataset_dir: Path, words: list[str]) -> None:
        old = len(words) - len(self.new_words)
        log(f"finetuning {self.source_dir} on {dataset_dir}: vocabulary {old:,} + {len(self.new_words):,} new = "
            f"{len(words):,}")
        warning = unlisted_warning(model.output_layer, words, "the finetuning vocabulary", self.source_dir)
        if warning:
            log(warning)

    def record(self, dataset, dataset_dir: Path, train_config: TrainConfig, lexicon_path: Path | None, n_params: int,
               world: int, device) -> dict:
        source = self.source
        return {**source.config, "stage": "finetune", "train": asdict(train_config),
                "dataset": _dataset_record(dataset, dataset_dir),
                "finetuned_from": {"path": str(self.source_dir), "model_sha256": source.model_checksum("best"),
                                   "dataset": source.config["dataset"]},
                "parameters": n_params, "world_size": world, "device": str(device.type),
                "environment": environment(str(device), lexicon_path or source.lexicon_path)}


# Settings a resumed run may change: the budgets, and how often it reports and checkpoints
# (neither changes what is computed).
RESUME_MAY_CHANGE = ("max_epochs", "max_tokens", "max_minutes", "log_every", "log_seconds", "checkpoint_every",
                     "checkpoint_minutes")


def _set_by_caller(*configs) -> dict[str, str]:
    """A Python caller names no flags: the settings it set are those whose values differ from their
    defaults (a setting without a default counts as set)."""
    out = {}
    for cfg in configs:
        for f in fields(cfg) if cfg is not None else ():
            default = default_of(f)
            if default is MISSING or getattr(cfg, f.name) != default:
                out[f.name] = f.name
    return out


def _budget_overrides(stored: dict, cfg: TrainConfig, given: dict) -> dict:
    """The settings of RESUME_MAY_CHANGE given for the resumed run that differ from the run's own;
    the rest are the run's (a setting left at its default is not given: resuming a run trained
    with `max_epochs` 5 without `max_epochs` keeps 5)."""
    return {k: getattr(cfg, k) for k in RESUME_MAY_CHANGE if k in given and stored.get(k) != getattr(cfg, k)}


def check_new_run_dir(run_dir: Path, force: bool, rank: int, inputs: tuple = ()) -> None:
    """Before any work: a new run directory, or `force` over an existing run (replaced only once the
    new run is complete); never one of the stage's inputs."""
    if rank != 0:
        return
    empty = _empty_dir(run_dir)
    # a device or FIFO is refused by check_destination whatever `force` says, so it is not "a run to replace"
    if run_dir.exists() and not force and not empty and not special_kind(run_dir):
        raise GrocError(f"run directory {run_dir} already exists; pass `resume` to continue it or `force` to start over")
    check_destination(run_dir, force or empty, "-o", "run directory", inputs)


def _empty_dir(path: Path) -> bool:
    """An existing empty directory (made by `mkdir -p`, or by a recipe): a new run may use it."""
    return path.is_dir() and not path.is_symlink() and not any(path.iterdir())


@contextlib.contextmanager
def run_output(run_dir: Path, resume: bool, force: bool, rank: int, inputs: tuple = ()) -> Iterator[Path]:
    """The directory a run is written to (the caller holds the run's lock, `_run_lock`).

    A new run trains in place, so that an interrupted one can be resumed; if it fails before its
    first checkpoint, the directory is removed (there is nothing to resume). `force` over an
    existing run trains aside and swaps the new run in only when it is complete: a rejected or
    interrupted replacement leaves the old run as it was (GUIDE 13)."""
    if rank != 0:  # only rank 0 writes; the others never touch the directory
        yield run_dir
        return
    empty = not resume and _empty_dir(run_dir)
    if not resume:
        check_new_run_dir(run_dir, force, rank, inputs)
    aside = not resume and run_dir.exists() and not empty
    created = not resume and not aside
    if run_dir.parent.is_dir():
        reclaim_incomplete(run_dir)  # what a killed writer of this run left beside it (it may be gigabytes)
    if aside:
        # The pid in the name, as every output's: a later writer reclaims it if this process is killed.
        target = Path(tempfile.mkdtemp(prefix=f".{run_dir.name}.incomplete-{os.getpid()}-", dir=run_dir.parent))
    else:
        target = run_dir
        target.mkdir(exist_ok=resume or empty)
    try:
        yield target
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt)
        if aside:
            shutil.rmtree(target, ignore_errors=True)
            where = f"the new run was discarded and {run_dir} is unchanged"
        elif created and not (target / "last" / "model.safetensors").exists():
            shutil.rmtree(target, ignore_errors=True)
            if empty:  # leave the directory as it was found
                target.mkdir(exist_ok=True)
            where = f"nothing was trained, so {run_dir} was {'emptied' if empty else 'removed'}"
        else:
            where = f"the last checkpoint is kept in {run_dir / 'last'}: continue with `resume`"
        if interrupted:
            log(f"stopped: {where}")
            raise
        if isinstance(exc, GrocError):
            said = GrocError(f"{exc.text}; {where}")
            said.exit_code = exc.exit_code
            raise said from None
        if disk_full(exc, run_dir.parent):
            problem = "disk quota exceeded writing" if quota_exceeded(exc) else "no space left on the device of"
            raise GrocError(f"{problem} {run_dir}; {where}") from None
        raise
    if aside:
        replace_path(target, run_dir)


def _run_lock(run_dir: Path):
    """The run directory's lock, held by the process that writes it (rank 0 under torchrun) from
    before any work until the run is complete, so that a second writer is refused at once."""
    if int(os.environ.get("RANK", "0")) != 0:
        return contextlib.nullcontext()
    return output_lock(Path(run_dir))


def _resumed_lexicon(run: Run, given: Path | None) -> Path | None:
    """The lexicon a resumed run trains on: its own copy (run/lexicon.parquet), which the weights
    were built with. A `lexicon` given too is taken only if it holds the same bytes (the checksum
    config.json records); another one would be set aside silently, so it is refused. A run that
    records no lexicon (tied) gets the given one, which ``check_lexicon`` then refuses."""
    if given is None:
        return run.lexicon_path
    recorded = (run.config.get("lexicon") or {}).get("sha256")
    if recorded is None:
        return given
    if not Path(given).is_file():
        raise GrocError(f"`lexicon` {given}: no such file; a resumed run keeps its own lexicon copy, so drop `lexicon`")
    if sha256_file(Path(given)) != recorded:
        raise GrocError(f"`lexicon` {given} differs from the lexicon run {run.path} was trained with (a resumed run "
                        f"keeps its own copy, {run.path / 'lexicon.parquet'}): drop `lexicon`, or start over with `force`")
    return run.lexicon_path or given


def _check_resumed_settings(stored: dict, *, given: dict, model_config: ModelConfig | None = None,
                            train_config: TrainConfig | None = None) -> None:
    """`resume` continues with the run's stored settings; a setting given on the command line that
    differs from them is refused rather than silently ignored (budgets may be extended)."""
    budgets = set(RESUME_MAY_CHANGE)
    differ = []
    for section, cfg in (("model", model_config), ("train", train_config)):
        if cfg is None:
            continue
        for name, value in asdict(cfg).items():
            if name in given and name not in budgets and name in stored[section] and stored[section][name] != value:
                differ.append(f"`{name}` {_show(value)} (the run has {_show(stored[section][name])})")
    if differ:
        raise GrocError(f"`resume` continues with the run's own settings, and {'; '.join(differ)}: drop "
                        f"{'that flag' if len(differ) == 1 else 'those flags'}, or start over with `force`")


def _show(value) -> str:
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _trainer(model, train, valid, cfg: TrainConfig, run_dir: Path, device, rank: int, world: int) -> Trainer:
    """The training loop over this process's share of ``train`` (``rank`` of ``world``), validated on
    ``valid``, logging a line an epoch and writing its checkpoints to ``run_dir``."""
    train_cols = batchify(train, cfg.batch_size, rank, world)
    valid_cols = batchify(valid, cfg.eval_batch_size) if valid is not None else None

    def on_epoch(row: dict) -> None:
        valid_text = f", valid ppl {row['valid_ppl']:.2f}" if row["valid_ppl"] is not None else ""
        log(f"epoch {row['epoch']}{' (partial)' if row['partial'] else ''}: train ppl {row['train_ppl']:.2f}{valid_text}, "
            f"lr {row['lr']:.2g}, {row['tokens_per_s']:,.0f} tokens/s, {row['seconds']:.1f}s")

    return Trainer(model, train_cols, valid_cols, cfg, run_dir, device, on_epoch=on_epoch)


def _resume(trainer: Trainer, saved: dict, cfg: TrainConfig, run_dir: Path, final_dir: Path) -> None:
    """``trainer`` at the position of the training state ``saved`` (final_dir/last/trainer.pt), with a
    line that says where it resumes, or why there is nothing left to train."""
    try:
        trainer.resume(saved)
    except (TypeError, ValueError, KeyError, IndexError, RuntimeError, AttributeError) as exc:
        # A trainer.pt whose fields have other types or shapes than the trainer writes: one line, not a traceback.
        raise DamagedInput(final_dir / "last" / "trainer.pt", f"holds a training state of the wrong form "
                           f"({first_line(exc)}), so the run cannot resume",
                           "re-train the run; its best checkpoint still evaluates ('groc eval --checkpoint best')") from None
    spent = trainer.spent_budget()
    if trainer.stopped_early():
        log(f"{final_dir} has already ended by early stopping ({trainer.pos.bad_epochs} epochs without validation "
            f"improvement, `patience` {cfg.patience}): nothing to train")
    elif spent:
        spent = spent.replace("-", "_")
        log(f"{final_dir} has already spent its budget (`{spent}` {getattr(cfg, spent):g}): "
            f"nothing to train; give a larger `{spent}` with `resume` to continue")
    else:
        log(f"resuming {run_dir} at epoch {trainer.pos.epoch}, step {trainer.pos.step}")


def _train(trainer: Trainer, progress, start_text, run_dir: Path, final_dir: Path, parameters: int, rank: int,
           world: int) -> dict:
    """Train to the end, then write where a line starts (from ``start_text``) and the summary; the summary."""
    result = trainer.train(progress=progress)
    if rank == 0:  # where a line starts when lines are scored one by one (groc score, load_run)
        write_start_states(trainer.model, start_text, run_dir)
    summary = {"run": str(final_dir), "parameters": parameters, **result,
               "final": trainer.metrics[-1] if trainer.metrics else None}
    if rank == 0:
        write_json(summary, run_dir / "summary.json")
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return summary
