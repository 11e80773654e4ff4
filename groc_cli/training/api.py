"""Training and finetuning as library calls; the `train`/`finetune` commands only parse flags."""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict
from pathlib import Path

import pyarrow.parquet as pq
import torch
import torch.distributed as dist

from .. import __version__
from ..artifacts import read_metadata, sha256_file, write_json
from ..console import log
from ..errors import GrocError
from ..models import Lexicon, ModelConfig, build_model
from ..text.dataset import open_dataset
from .data import batchify, model_ids, token_counts
from .loop import TrainConfig, Trainer
from .run import RUN_FORMAT, RUN_FORMAT_VERSION, Run, copy_lexicon, write_vocab
from .seed import seed_everything


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise GrocError("--device cuda: no CUDA device is available here; use --device cpu")
    if name not in ("cpu",) and not name.startswith("cuda"):
        raise GrocError(f"--device {name!r}: expected auto, cpu, cuda or cuda:N")
    return torch.device(name)


def tune_allocator() -> None:
    """Keep freed large blocks in the process (glibc's default hands every large block back to
    the OS, so each training step page-faults its activations in again: 3-8x slower CPU steps
    measured in benchmarks/train_throughput.py). Same effect as MALLOC_MMAP_THRESHOLD_ and
    MALLOC_TRIM_THRESHOLD_ in the environment; a no-op where glibc is absent."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-1, 1 << 36)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD (glibc caps it at 32 MiB on 64-bit)
    except (OSError, AttributeError):
        pass


def init_distributed(device: torch.device) -> tuple[int, int, torch.device]:
    """Under torchrun (WORLD_SIZE > 1): one process per device, gloo on CPU, NCCL on GPUs."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, device
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda" and local >= torch.cuda.device_count():
        raise GrocError(
            f"torchrun started process {local} on this node but only {torch.cuda.device_count()} CUDA device(s) are "
            "visible: use --nproc_per_node at most that many, or --device cpu for CPU processes (gloo)")
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank()
    if device.type == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    return rank, world, device


def check_lexicon(path: Path | None, vocab: list[str], needed: bool) -> Lexicon | None:
    if not needed:
        return None
    if path is None:
        raise GrocError("--output groc needs --lexicon LEXICON.parquet (build it with 'groc lexicon --vocab DATASET -o ...')")
    path = Path(path)
    if not path.is_file():
        raise GrocError(f"--lexicon {path}: no such file; build it with 'groc lexicon --vocab DATASET -o {path}'")
    try:
        meta = read_metadata(path)
        lexicon = Lexicon.from_parquet(path)
        words = set(pq.read_table(path, columns=["word"]).column("word").to_pylist())
    except Exception as exc:
        raise GrocError(f"--lexicon {path} is not a groc lexicon table ({str(exc).splitlines()[0]})") from None
    if meta.get("stage") != "lexicon":
        raise GrocError(f"--lexicon {path} was not written by 'groc lexicon'")
    if (meta.get("arguments") or {}).get("vocab"):
        missing = [w for w in vocab if w not in words]
        if missing:
            raise GrocError(
                f"--lexicon {path} was built for another vocabulary: {len(missing):,} of {len(vocab):,} training words "
                f"are missing (e.g. {missing[0]!r}); rebuild it with 'groc lexicon --vocab DATASET'"
            )
    return lexicon


def _param_report(model) -> int:
    n = model.num_parameters()
    log(f"|Θ| = {n:,} parameters ({n / 1e6:.2f}M)")
    return n


def train_new(dataset_dir: Path, run_dir: Path, model_config: ModelConfig, train_config: TrainConfig,
              lexicon_path: Path | None, device_name: str, resume: bool, force: bool, progress) -> dict:
    device = resolve_device(device_name)
    tune_allocator()
    rank, world, device = init_distributed(device)
    dataset = open_dataset(dataset_dir)
    if not dataset.has_split("train") or dataset.vocab_size == 0:
        raise GrocError(f"dataset {dataset_dir} has no train split; prepare it with --train")
    run_dir = Path(run_dir)
    if resume:
        run = Run(run_dir)
        if run.config["dataset"]["checksum"] != dataset.checksum:
            raise GrocError(f"--resume: run {run_dir} was trained on another dataset (checksum differs from {dataset_dir})")
        model_config = run.model_config
        train_config = TrainConfig.from_dict({**run.config["train"], **_budget_overrides(train_config)})
        lexicon_path = run.lexicon_path
    else:
        _check_new_run_dir(run_dir, force, rank)
    vocab = dataset.vocab
    lexicon = check_lexicon(lexicon_path, vocab, model_config.output == "groc")
    train = model_ids(vocab, dataset, "train")
    counts = token_counts(train, len(vocab))
    valid = model_ids(vocab, dataset, "valid") if dataset.has_split("valid") else None
    if valid is None:
        log("warning: the dataset has no valid split; the schedule and best checkpoint follow the training loss")
    seed_everything(train_config.seed, train_config.deterministic)
    model = build_model(model_config, vocab, lexicon=lexicon, counts=counts).to(device)
    if world > 1:
        for p in model.parameters():
            dist.broadcast(p.data, 0)
    n_params = _param_report(model)
    config = {
        "format": RUN_FORMAT, "format_version": RUN_FORMAT_VERSION, "groc_version": __version__,
        "stage": "train", "model": model_config.to_dict(), "train": asdict(train_config),
        "dataset": {"path": str(dataset_dir), "checksum": dataset.checksum, "vocab_size": dataset.vocab_size},
        "lexicon": {"sha256": sha256_file(lexicon_path)} if lexicon is not None else None,
        "parameters": n_params, "world_size": world, "device": str(device.type),
    }
    if rank == 0 and not resume:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_vocab(run_dir, vocab, counts)
        if lexicon is not None:
            copy_lexicon(lexicon_path, run_dir)
        write_json(config, run_dir / "config.json")
    return _fit(model, train, valid, train_config, run_dir, device, rank, world, resume, progress, config)


def finetune(run_src: Path, dataset_dir: Path, run_dir: Path, train_config: TrainConfig, lexicon_path: Path | None,
             device_name: str, resume: bool, force: bool, progress) -> dict:
    """Continue training on a target domain; the vocabulary becomes the union of the model's and the new data's."""
    device = resolve_device(device_name)
    tune_allocator()
    rank, world, device = init_distributed(device)
    source = Run(run_src)
    dataset = open_dataset(dataset_dir)
    if not dataset.has_split("train") or dataset.vocab_size == 0:
        raise GrocError(f"dataset {dataset_dir} has no train split; prepare the target-domain data with --train")
    if resume:
        run = Run(run_dir)
        if run.config["dataset"]["checksum"] != dataset.checksum:
            raise GrocError(f"--resume: run {run_dir} was finetuned on another dataset")
        train_config = TrainConfig.from_dict({**run.config["train"], **_budget_overrides(train_config)})
    else:
        _check_new_run_dir(run_dir, force, rank)
    lexicon = None
    if source.model_config.output == "groc":
        lexicon = check_lexicon(lexicon_path, [], True) if lexicon_path else Lexicon.from_parquet(source.lexicon_path)
    seed_everything(train_config.seed, train_config.deterministic)
    model, old_words, old_counts = source.build("best", lexicon=lexicon, device="cpu")
    old = set(old_words)
    new_words = [w for w in dataset.vocab if w not in old]
    words = old_words + new_words
    train = model_ids(words, dataset, "train")
    counts = token_counts(train, len(words))
    model.set_vocab(words, counts, generator=torch.Generator().manual_seed(train_config.seed))
    model = model.to(device)
    log(f"finetuning {run_src} on {dataset_dir}: vocabulary {len(old_words):,} + {len(new_words):,} new = {len(words):,}")
    n_params = _param_report(model)
    valid = model_ids(words, dataset, "valid") if dataset.has_split("valid") else None
    config = {**source.config, "stage": "finetune", "train": asdict(train_config),
              "dataset": {"path": str(dataset_dir), "checksum": dataset.checksum, "vocab_size": dataset.vocab_size},
              "finetuned_from": {"path": str(run_src), "model_sha256": source.model_checksum("best"),
                                 "dataset": source.config["dataset"]},
              "parameters": n_params, "world_size": world, "device": str(device.type)}
    if rank == 0 and not resume:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_vocab(run_dir, words, counts)
        if source.lexicon_path is not None:
            copy_lexicon(lexicon_path or source.lexicon_path, run_dir)
        write_json(config, run_dir / "config.json")
    return _fit(model, train, valid, train_config, run_dir, device, rank, world, resume, progress, config)


def _budget_overrides(cfg: TrainConfig) -> dict:
    # On --resume the stored configuration wins, except the budgets a user may extend.
    return {k: getattr(cfg, k) for k in ("max_epochs", "max_tokens", "max_minutes") if getattr(cfg, k) is not None}


def _check_new_run_dir(run_dir: Path, force: bool, rank: int) -> None:
    if run_dir.exists():
        if not force:
            raise GrocError(f"run directory {run_dir} already exists; pass --resume to continue it or --force to start over")
        if rank == 0:
            shutil.rmtree(run_dir)
    parent = run_dir.parent if str(run_dir.parent) else Path(".")
    if not parent.exists():
        raise GrocError(f"output directory {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK):
        raise GrocError(f"cannot write to {parent}: permission denied")


def _fit(model, train, valid, cfg: TrainConfig, run_dir: Path, device, rank, world, resume, progress, config) -> dict:
    train_cols = batchify(train, cfg.batch_size, rank, world)
    valid_cols = batchify(valid, cfg.eval_batch_size) if valid is not None else None

    def on_epoch(row: dict) -> None:
        valid_text = f", valid ppl {row['valid_ppl']:.2f}" if row["valid_ppl"] is not None else ""
        log(f"epoch {row['epoch']}{' (partial)' if row['partial'] else ''}: train ppl {row['train_ppl']:.2f}{valid_text}, "
            f"lr {row['lr']:.2g}, {row['tokens_per_s']:,.0f} tokens/s, {row['seconds']:.1f}s")

    trainer = Trainer(model, train_cols, valid_cols, cfg, run_dir, device, on_epoch=on_epoch)
    if resume:
        trainer.resume()
        log(f"resuming {run_dir} at epoch {trainer.pos.epoch}, step {trainer.pos.step}")
    result = trainer.train(progress=progress)
    summary = {"run": str(run_dir), "parameters": config["parameters"], **result,
               "final": trainer.metrics[-1] if trainer.metrics else None}
    if rank == 0:
        write_json(summary, run_dir / "summary.json")
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()
    return summary
