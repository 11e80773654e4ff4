"""Run storage: the run directory's format (written, read and verified) for training,
evaluation and the API alike: configuration, vocabulary, weights and checkpoints.

    RUN/
      config.json          model + training configuration, dataset checksum, |Θ|, versions
      vocab.parquet        the vocabulary the model was trained with (word, count)
      lexicon.parquet      copy of the lexicon (GroC), so the run is self-contained
      metrics.parquet      one row per epoch
      best/model.safetensors   weights with the best validation perplexity so far
      last/model.safetensors   weights at the last checkpoint
      last/trainer.pt          optimizer, schedule, RNG states, data position (torch.load weights_only=True)
      best/, last/start_state.safetensors   where a line starts when scored alone (start_state.py)
      summary.json         written when training ends
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
from pathlib import Path

import pyarrow as pa
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from .version import __version__
from .artifacts.atomic import atomic_dir, atomic_path, umask
from .artifacts.integrity import sha256_file
from .artifacts.io import METADATA_KEY, provenance, read_json, read_parquet, write_parquet
from .errors import DamagedInput, GrocError, first_line
from .formats import RUN_FORMAT
from .json_input import parse_json
from .models import Lexicon, ModelConfig, build_model, output_layer_class
from .models.lexicon import MAX_ENTRIES

RUN_FORMAT_VERSION = 1
#: The safetensors metadata key holding what the weights are (see weights_metadata).
WEIGHTS_KEY = "groc"


def write_vocab(run_dir: Path, words: list[str], counts: list[int]) -> None:
    table = pa.table({"word": pa.array(words, type=pa.string()), "count": pa.array(counts, type=pa.int64())})
    with atomic_path(run_dir / "vocab.parquet") as tmp:
        write_parquet(table, tmp, provenance("train", what="model vocabulary"))


def read_vocab(run_dir: Path) -> tuple[list[str], list[int]]:
    table = read_parquet(run_dir / "vocab.parquet", {"word": pa.types.is_string, "count": pa.types.is_integer},
                         retrain_advice(run_dir))
    return table.column("word").to_pylist(), table.column("count").to_pylist()


_LEXICON_COLUMNS = {"word": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
                    "relations": pa.types.is_list, "definition": pa.types.is_list}


def read_lexicon(path: Path, rebuild: str) -> Lexicon:
    """A lexicon table from 'groc lexicon' (every reader's one path); a missing, truncated, foreign
    or inconsistent file (a word listed twice, more entries than its ``max_relations`` or
    ``max_definition`` recorded) is one DamagedInput naming it and `rebuild`."""
    table = read_parquet(Path(path), _LEXICON_COLUMNS, rebuild)
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    try:
        meta = parse_json(raw) if raw else {}
        arguments = meta.get("arguments") or {}
    except (ValueError, AttributeError):
        raise DamagedInput(path, "has provenance that is not a JSON object", rebuild) from None
    if meta.get("stage") != "lexicon":
        raise DamagedInput(path, "was not written by 'groc lexicon'", rebuild)
    limits = {k: arguments.get(k) if isinstance(arguments.get(k), int) and 0 <= arguments[k] <= MAX_ENTRIES
              else MAX_ENTRIES for k in ("max_relations", "max_definition")}
    try:
        lexicon = Lexicon.from_table(table, **limits)
    except ValueError as exc:
        raise DamagedInput(path, str(exc), rebuild) from None
    lexicon.meta = meta
    return lexicon


def _relexicon(run_dir: Path) -> str:
    return (f"copy the lexicon table the run was trained with to {run_dir / 'lexicon.parquet'} "
            f"('groc lexicon' writes one), or {retrain_advice(run_dir)}")


def retrain_advice(run_dir: Path) -> str:
    """What rebuilds the run at `run_dir`, for a message that refuses a damaged part of it."""
    return f"re-train the run ('groc train' or 'groc finetune' with -o {run_dir} --force)"


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
    """Write `directory`/model.safetensors (and trainer.pt when `extra` is given) atomically as a unit."""
    with atomic_dir(directory) as tmp:
        write_weights(model, tmp, extra)


def write_weights(model: torch.nn.Module, directory: Path, extra: dict[str, object] | None = None) -> None:
    """model.safetensors (and trainer.pt when `extra` is given) into the existing `directory`, which
    the caller swaps into place. Each tensor is stored once, under the first of its names (a tied
    embedding once)."""
    model = unwrapped(model)
    state = model.state_dict()
    tensors = {names[0]: state[names[0]].to("cpu").contiguous() for names in _alias_groups(state)}
    # One metadata key: safetensors writes its metadata map in no fixed order, and the same
    # weights must give the same bytes (a run's config.json re-runs it bit for bit).
    save_file(tensors, str(directory / "model.safetensors"),
              metadata={WEIGHTS_KEY: weights_metadata(model, tensors_checksum(tensors))})
    # safetensors creates the file private (0600); weights are an output like any other.
    os.chmod(directory / "model.safetensors", 0o666 & ~umask())
    if extra is not None:
        # Serialized in memory and written by Python: torch.save's own writer reports a full disk
        # as a C++ traceback ("file write failed"), Python's as ENOSPC.
        buffer = io.BytesIO()
        torch.save(extra, buffer)
        with open(directory / "trainer.pt", "wb") as handle:
            handle.write(buffer.getbuffer())


def weights_metadata(model: torch.nn.Module, tensors_sha256: str | None = None) -> str:
    """What a weights file holds, as JSON in its safetensors metadata, so the file alone says what
    it is: the model's settings (config.json's "model"), its vocabulary's size and checksum (the
    words themselves are the run's vocab.parquet), the tool version, and the checksum of the
    tensors as written (``tensors_checksum``: names, dtypes, shapes and bytes), by which a read
    tells that the file is the one the run wrote (a header edited to another dtype is not)."""
    words = list(model.vocab)
    meta = {"format": "groc-weights", "version": __version__, "model": model.config.to_dict(),
            "vocab_size": len(words), "vocab_sha256": vocab_checksum(words)}
    if tensors_sha256 is not None:
        meta["tensors_sha256"] = tensors_sha256
    return json.dumps(meta, sort_keys=True)


def tensors_checksum(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 over each tensor in name order: its name, dtype, shape and bytes. The header's dtype
    and shape are part of it, so a file whose header was changed (same bytes, read as another
    dtype) no longer matches what its writer recorded."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        digest.update(f"{name}\0{str(t.dtype).removeprefix('torch.')}\0{list(t.shape)}\0".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy().data)
    return digest.hexdigest()


def vocab_checksum(words: list[str]) -> str:
    """The checksum of a vocabulary in its order (weights record it: row i is word i)."""
    return hashlib.sha256("\n".join(words).encode("utf-8")).hexdigest()


def read_weights_metadata(path: Path) -> dict:
    """The metadata weights_metadata stored in ``path`` ({} for weights written before it existed)."""
    with safe_open(str(path), framework="pt") as handle:
        meta = handle.metadata() or {}
    try:
        found = parse_json(meta[WEIGHTS_KEY]) if WEIGHTS_KEY in meta else {}
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise ValueError(f"its {WEIGHTS_KEY!r} metadata is not a JSON object")
    return found


def load_weights(model: torch.nn.Module, directory: Path) -> None:
    """Load `directory`/model.safetensors into `model`, built from the run's config.json and
    vocab.parquet; a damaged file, or one those no longer describe, is one line naming it."""
    path = directory / "model.safetensors"
    if not path.exists():
        raise GrocError(f"{path} not found: the run has no such checkpoint yet")
    model = unwrapped(model)
    other = "last" if directory.name == "best" else "best"
    retrain = f"{retrain_advice(directory.parent)}, or use its {other} checkpoint (`checkpoint` {other})"
    try:
        stored = load_file(str(path))
        recorded = read_weights_metadata(path)
    except (SafetensorError, OSError, ValueError) as exc:
        raise DamagedInput(path, f"is not a readable checkpoint ({first_line(exc)})", retrain) from None
    words = list(getattr(model, "vocab", ()))
    if recorded.get("vocab_sha256") not in (None, vocab_checksum(words)):
        # Same size, other order (two words swapped): every row would score another word, silently.
        raise DamagedInput(directory.parent / "vocab.parquet", f"is not the vocabulary the weights in {path} were "
                           f"trained with (its checksum differs from the one they record)",
                           "restore the run's vocab.parquet, or " + retrain_advice(directory.parent))
    state, missing = {}, []
    for names in _alias_groups(model.state_dict()):
        # Any one name of an alias group may be stored (older runs kept another name).
        found = next((n for n in names if n in stored), None)
        if found is None:
            missing += names
        else:
            state.update({n: stored[found] for n in names})
    unexpected = sorted(set(stored) - set(state))
    expected = model.state_dict()
    retyped = next((f"{n} is {str(t.dtype).removeprefix('torch.')}, the model holds "
                    f"{str(expected[n].dtype).removeprefix('torch.')}" for n, t in state.items()
                    if n in expected and t.dtype != expected[n].dtype), None)
    if retyped is not None:
        # Read as if it were right, another dtype's bytes are other numbers (perplexity inf).
        raise DamagedInput(path, f"declares another dtype than the run's model ({retyped})", retrain)
    resized = [f"{n}: {list(t.shape)} in the file, {list(expected[n].shape)} from config.json" for n, t in state.items()
               if t.shape != expected[n].shape]
    if missing or unexpected or resized:
        found = resized[:1] or [f"missing {missing[:3]}, unexpected {unexpected[:3]}"]
        raise DamagedInput(directory.parent / "config.json", f"(with vocab.parquet) no longer describes the weights in "
                           f"{path} ({found[0]})", "restore it, or " + retrain_advice(directory.parent))
    nonfinite = next((n for n, t in state.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())), None)
    if nonfinite is not None:
        raise DamagedInput(path, f"holds NaN or infinite values ({nonfinite})", retrain)
    recorded_sum = recorded.get("tensors_sha256")
    if recorded_sum is not None and recorded_sum != tensors_checksum(stored):
        raise DamagedInput(path, "is not the file the run wrote (its tensors differ from the checksum its metadata "
                           "records)", retrain)
    model.load_state_dict(state, strict=True)


#: What trainer.pt holds (loop.Trainer._trainer_state writes it).
TRAINER_KEYS = ("optimizer", "position", "metrics", "rng", "update_gen", "hidden")


def load_checkpoint(model: torch.nn.Module, directory: Path) -> dict:
    """Resume from `directory` (a run's last/): its weights go into `model` and its trainer state is
    returned, both checked before any work, so that damage is one line naming the file rather than
    a traceback (or advice to resume again) once the run is under way."""
    saved = load_trainer_state(directory)
    groups = saved["optimizer"].get("param_groups") if isinstance(saved["optimizer"], dict) else None
    if not groups or sum(len(group.get("params", ())) for group in groups) != len(list(unwrapped(model).parameters())):
        raise DamagedInput(directory / "trainer.pt", "holds an optimizer state for another model, so the run cannot "
                           "resume", _unusable(directory))
    load_weights(model, directory)
    return saved


def _unusable(directory: Path) -> str:
    return f"{retrain_advice(directory.parent)}; its best checkpoint still evaluates ('groc eval --checkpoint best')"


def load_trainer_state(directory: Path) -> dict:
    path = directory / "trainer.pt"
    if not path.exists():
        raise GrocError(f"{path} not found: nothing to resume from; train without `resume`")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, KeyError, ValueError, pickle.UnpicklingError, OSError) as exc:
        # torch's own messages (a miniz error, a bare pickle opcode, "Invalid argument" from a
        # truncated zip's seek) say nothing about the file.
        raise DamagedInput(path, f"is truncated or damaged (torch.load: {type(exc).__name__}), so the run cannot resume",
                           _unusable(directory)) from None
    if not isinstance(saved, dict) or any(key not in saved for key in TRAINER_KEYS):
        raise DamagedInput(path, "is not a training state groc wrote, so the run cannot resume", _unusable(directory))
    problem = _trainer_problem(saved)
    if problem:
        raise DamagedInput(path, f"holds a training state of the wrong form ({problem}), so the run cannot resume",
                           _unusable(directory))
    return saved


def _trainer_problem(saved: dict) -> str | None:
    """What in a loaded trainer.pt has another type than Trainer._trainer_state writes (checked before
    any work: a string where a number was would fail mid-training, with a traceback)."""
    position, rng = saved["position"], saved["rng"]
    if not isinstance(position, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                 for v in position.values()):
        return "position is not a record of numbers"
    if not isinstance(saved["metrics"], list) or not all(isinstance(m, dict) for m in saved["metrics"]):
        return "metrics is not a list of per-epoch records"
    if not isinstance(saved["hidden"], list) or not all(isinstance(t, torch.Tensor) for t in saved["hidden"]):
        return "hidden is not a list of tensors"
    if not isinstance(saved["optimizer"], dict):
        return "optimizer is not a state dict"
    tensors = [saved["update_gen"]] + ([rng.get("torch")] if isinstance(rng, dict) else [])
    if not isinstance(rng, dict) or not {"python", "numpy", "torch"} <= set(rng) or not all(
            isinstance(t, torch.Tensor) and t.dtype == torch.uint8 for t in tensors):
        return "its random-number states are not those torch and numpy keep"
    return None


def unwrapped(model):
    """The model a DistributedDataParallel wrapper holds (or `model` itself)."""
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
        self.config = read_json(self.path / "config.json", "run configuration", retrain_advice(self.path))
        if self.config.get("format") != RUN_FORMAT:
            raise GrocError(f"{self.path} is not a groc run directory")
        try:
            self.model_config = ModelConfig.from_dict(self.config["model"])
            self.dataset_checksum = self.config["dataset"]["checksum"]
        except (KeyError, TypeError, ValueError) as exc:
            raise DamagedInput(self.path / "config.json", f"does not hold a run's settings ({first_line(exc)})",
                               retrain_advice(self.path)) from None

    @property
    def lexicon_path(self) -> Path | None:
        path = self.path / "lexicon.parquet"
        return path if path.exists() else None

    def read_lexicon(self) -> Lexicon | None:
        """The lexicon a run whose output layer ``needs_lexicon`` (GroC) was trained with (its
        copy in the run directory); None for the other output layers."""
        if not output_layer_class(self.model_config.output).needs_lexicon:
            return None
        return read_lexicon(self.path / "lexicon.parquet", _relexicon(self.path))

    def checkpoint(self, which: str = "best") -> Path:
        directory = self.path / which
        if not (directory / "model.safetensors").exists():
            raise GrocError(f"run {self.path} has no {which} checkpoint yet (training has not finished an epoch)")
        return directory

    def model_checksum(self, which: str = "best") -> str:
        return sha256_file(self.checkpoint(which) / "model.safetensors")

    def build(self, which: str = "best", lexicon: Lexicon | None = None, device: str | torch.device = "cpu"):
        words, counts = read_vocab(self.path)
        if lexicon is None:
            lexicon = self.read_lexicon()
        try:
            model = build_model(self.model_config, words, lexicon=lexicon, counts=counts)
        except ValueError as exc:
            raise DamagedInput(self.path / "config.json", f"does not describe a model for vocab.parquet ({exc})",
                               retrain_advice(self.path)) from None
        load_weights(model, self.checkpoint(which))
        return model.to(device), words, counts
