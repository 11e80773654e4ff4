"""Run directories: configuration, vocabulary, weights and checkpoints.

    RUN/
      config.json          model + training configuration, dataset checksum, |Θ|, versions
      vocab.parquet        the vocabulary the model was trained with (word, count)
      lexicon.parquet      copy of the lexicon (GroC), so the run is self-contained
      metrics.parquet      one row per epoch
      best/model.safetensors   weights with the best validation perplexity so far
      last/model.safetensors   weights at the last checkpoint
      last/trainer.pt          optimizer, schedule, RNG states, data position (torch.load weights_only=True)
      summary.json         written when training ends
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..artifacts import atomic_dir, atomic_path, provenance, read_json, sha256_file, write_parquet
from ..errors import GrocError
from ..models import Lexicon, ModelConfig, build_model

RUN_FORMAT = "groc-run"
RUN_FORMAT_VERSION = 1


def write_vocab(run_dir: Path, words: list[str], counts: list[int]) -> None:
    table = pa.table({"word": pa.array(words, type=pa.string()), "count": pa.array(counts, type=pa.int64())})
    with atomic_path(run_dir / "vocab.parquet") as tmp:
        write_parquet(table, tmp, provenance("train", what="model vocabulary"))


def read_vocab(run_dir: Path) -> tuple[list[str], list[int]]:
    table = pq.read_table(run_dir / "vocab.parquet")
    return table.column("word").to_pylist(), table.column("count").to_pylist()


def _alias_groups(state: dict[str, torch.Tensor]) -> list[list[str]]:
    """A state dict's names grouped by the tensor they name: a tied embedding appears under two
    names but is one tensor. Only exact aliases (same data, shape and strides) are grouped:
    cuDNN packs an LSTM's weights into one flat buffer on CUDA, and those views are
    distinct tensors that merely share storage."""
    groups: dict[tuple, list[str]] = {}
    for name, t in state.items():
        groups.setdefault((t.device, t.data_ptr(), t.dtype, tuple(t.shape), t.stride()), []).append(name)
    return list(groups.values())


def save_weights(model: torch.nn.Module, directory: Path, extra: dict[str, object] | None = None) -> None:
    """Write `directory`/model.safetensors (and trainer.pt when `extra` is given) atomically as a unit.
    Each tensor is stored once, under the first of its names (a tied embedding once)."""
    model = _unwrap(model)
    state = model.state_dict()
    tensors = {names[0]: state[names[0]].to("cpu").contiguous() for names in _alias_groups(state)}
    with atomic_dir(directory) as tmp:
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        if extra is not None:
            torch.save(extra, tmp / "trainer.pt")


def load_weights(model: torch.nn.Module, directory: Path) -> None:
    path = directory / "model.safetensors"
    if not path.exists():
        raise GrocError(f"{path} not found: the run has no such checkpoint yet")
    model = _unwrap(model)
    try:
        stored = load_file(str(path))
    except (SafetensorError, OSError) as exc:
        raise GrocError(f"{path} is not a readable checkpoint ({exc}): the file is damaged or was not written by groc") from None
    state, missing = {}, []
    for names in _alias_groups(model.state_dict()):
        # Any one name of an alias group may be stored (older runs kept another name).
        found = next((n for n in names if n in stored), None)
        if found is None:
            missing += names
        else:
            state.update({n: stored[found] for n in names})
    unexpected = sorted(set(stored) - set(state))
    if missing or unexpected:
        raise GrocError(f"{path} does not match the model in config.json (missing {missing[:3]}, unexpected {unexpected[:3]})")
    model.load_state_dict(state, strict=True)


def load_trainer_state(directory: Path) -> dict:
    path = directory / "trainer.pt"
    if not path.exists():
        raise GrocError(f"{path} not found: nothing to resume from; train without --resume")
    return torch.load(path, map_location="cpu", weights_only=True)


def _unwrap(model):
    return getattr(model, "module", model)


def copy_lexicon(lexicon_path: Path, run_dir: Path) -> None:
    with atomic_path(run_dir / "lexicon.parquet") as tmp:
        shutil.copyfile(lexicon_path, tmp)


class Run:
    """A trained (or training) run directory."""

    def __init__(self, path: Path):
        self.path = Path(path)
        if not self.path.is_dir():
            raise GrocError(f"run {self.path}: not a directory; create it with 'groc train DATASET -o {self.path}'")
        self.config = read_json(self.path / "config.json", "run configuration")
        if self.config.get("format") != RUN_FORMAT:
            raise GrocError(f"{self.path} is not a groc run directory")
        self.model_config = ModelConfig.from_dict(self.config["model"])

    @property
    def lexicon_path(self) -> Path | None:
        path = self.path / "lexicon.parquet"
        return path if path.exists() else None

    def checkpoint(self, which: str = "best") -> Path:
        directory = self.path / which
        if not (directory / "model.safetensors").exists():
            raise GrocError(f"run {self.path} has no {which} checkpoint yet (training has not finished an epoch)")
        return directory

    def model_checksum(self, which: str = "best") -> str:
        return sha256_file(self.checkpoint(which) / "model.safetensors")

    def build(self, which: str = "best", lexicon: Lexicon | None = None, device: str | torch.device = "cpu"):
        words, counts = read_vocab(self.path)
        if lexicon is None and self.lexicon_path is not None:
            lexicon = Lexicon.from_parquet(self.lexicon_path)
        model = build_model(self.model_config, words, lexicon=lexicon, counts=counts)
        load_weights(model, self.checkpoint(which))
        return model.to(device), words, counts
