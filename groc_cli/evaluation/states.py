"""States directories: the model's side of an evaluation stream, dumped once so caches can be
tuned without running the LM again (the kNN-LM "datastore" step, self-described: a later
stage never asks for a size, dtype or dimension; urvashik/knnlm#6).

    STATES/
      meta.json       format, shapes and dtypes, each array's size and SHA-256 (``integrity``: whole,
                      or of sampled blocks for a large one), split, vocabulary mode, model and dataset checksums
      vocab.parquet   the evaluation vocabulary (word), model words first; union words follow
      hidden.npy      [n, d] float16 (default) or float32: the states that predict each target
      targets.npy     [n] uint32: target ids in the evaluation vocabulary
      logp.npy        [n] float64: the model's log p(target) (-inf: a table model's new word)
      new_mass.npy    [n] float64: GroC, union only: the model's probability of all new words

Row t is the prediction of split position t + 1 (position 0 is context only).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..artifacts.atomic import atomic_dir
from ..artifacts.diskfull import require_space
from ..artifacts.integrity import integrity_problem, integrity_record, sha256_file
from ..artifacts.io import provenance, read_json, read_parquet, write_json, write_parquet
from ..artifacts.locks import claim_output
from ..errors import DamagedInput, GrocError, first_line
from ..environment import environment
from ..formats import STATES_FORMAT
from ..console import log, progress
from ..models import output_layer_class
from ..runtime import resolve_device
from ..text.dataset import Dataset, open_dataset
from ..run_storage import Run
from ..settings import check_fields
from .settings import DumpSettings, check_reading, check_split
from .stream import Chunk, load_lexicon, load_model, model_chunks
from .vocab import VOCAB_MODES, EvalVocab, run_eval_vocab

STATES_FORMAT_VERSION = 1
def dump_states(run_dir: Path, dataset_dir: Path, out_dir: Path, settings: DumpSettings, *, force: bool = False,
                verify: bool = False) -> dict:
    """Dump ``settings.split`` of ``dataset_dir`` as the run ``run_dir`` sees it into the states
    directory ``out_dir`` (``force``: replacing one; ``verify``: every split of the dataset read
    first); returns the record meta.json holds, with ``output``."""
    started = time.perf_counter()
    s = settings
    check_fields(s)
    check_reading(s.checkpoint, s.chunk)
    run = Run(run_dir)
    dataset = open_dataset(dataset_dir, verify)
    check_split(dataset, s.split)
    out_dir = Path(out_dir)
    with claim_output(out_dir, force, "-o", "states directory", inputs=(run_dir, dataset_dir, s.lexicon)):
        return _dump(run, dataset, out_dir, s, started)


def _dump(run: Run, dataset: Dataset, out_dir: Path, s: DumpSettings, started: float) -> dict:
    split, vocab_mode, dtype, checkpoint, lexicon = s.split, s.vocab, s.dtype, s.checkpoint, s.lexicon
    lexicon_table = load_lexicon(lexicon, run.model_config.output)
    dev = resolve_device(s.device)
    _, _, vocab = run_eval_vocab(run, dataset, split, vocab_mode)
    kind = run.model_config.output
    n, dim = len(vocab.targets) - 1, run.model_config.emb
    if vocab.size > np.iinfo(np.uint32).max:
        raise GrocError(f"an evaluation vocabulary of {vocab.size} words does not fit uint32 target ids")
    model = load_model(run, checkpoint, dev, vocab, lexicon_table)
    new_mass = vocab_mode == "union" and output_layer_class(kind).composes_unseen_words
    model_checksum = run.model_checksum(checkpoint)
    meta = {
        "format": STATES_FORMAT,
        "format_version": STATES_FORMAT_VERSION,
        **provenance("dump"),
        "run": str(run.path),
        "model": kind,
        "checkpoint": checkpoint,
        "model_checksum": model_checksum,
        "lexicon": None if lexicon is None else {"path": str(lexicon), "sha256": sha256_file(Path(lexicon))},
        "dataset": str(dataset.path),
        "dataset_checksum": dataset.checksum,
        "split": split,
        "vocab": vocab_mode,
        "vocab_size": vocab.size,
        "model_vocab_size": vocab.model_size,
        "predictions": n,
        "dim": dim,
        "files": {
            "hidden": {"shape": [n, dim], "dtype": dtype},
            "targets": {"shape": [n], "dtype": "uint32"},
            "logp": {"shape": [n], "dtype": "float64"},
            **({"new_mass": {"shape": [n], "dtype": "float64"}} if new_mass else {}),
        },
        "environment": environment(str(dev), lexicon or (run.lexicon_path if output_layer_class(kind).needs_lexicon else None)),
    }
    sizes = [int(np.prod(spec["shape"])) * np.dtype(spec["dtype"]).itemsize for spec in meta["files"].values()]
    # vocab.parquet takes at most its words' bytes plus 4 a word; 64 KiB covers the headers and meta.json.
    require_space(out_dir, sum(sizes) + sum(len(w.encode()) + 4 for w in vocab.words) + (1 << 16))
    log(f"dumping {n:,} {dim}-dimensional states of the {split} split ({vocab_mode} vocabulary, {dtype})")
    with atomic_dir(out_dir) as tmp, contextlib.ExitStack() as stack:
        arrays = {name: _reserved_memmap(tmp / f"{name}.npy", spec) for name, spec in meta["files"].items()}
        advance = stack.enter_context(progress(f"dump {split}", total=n, unit="tok"))
        for c in model_chunks(model, vocab, dev, s.chunk):
            advance(len(c))
            rows = slice(c.start, c.start + len(c))
            arrays["hidden"][rows] = c.hidden
            arrays["targets"][rows] = c.targets
            arrays["logp"][rows] = c.logp
            if new_mass:
                arrays["new_mass"][rows] = c.new_mass
        for array in arrays.values():
            array.flush()
        del arrays
        for name, spec in meta["files"].items():  # checked by open_states; dumps without it are read unchecked
            spec["integrity"] = integrity_record(tmp / f"{name}.npy")
        write_parquet(pa.table({"word": pa.array(vocab.words, type=pa.string())}), tmp / "vocab.parquet",
                      provenance("dump", what="evaluation vocabulary", model_checksum=model_checksum))
        meta["seconds"] = round(time.perf_counter() - started, 3)
        write_json(meta, tmp / "meta.json")
    log(f"wrote {out_dir}: {n:,} states in {meta['seconds']:.1f}s")
    return {**meta, "output": str(out_dir)}


def _reserved_memmap(path: Path, spec: dict) -> np.memmap:
    """A writable .npy memory map whose blocks are allocated on disk before anything is written:
    a memory-mapped write into a sparse file on a full disk kills the process with SIGBUS, while
    posix_fallocate fails with ENOSPC, which atomic_dir reports in one line."""
    array = np.lib.format.open_memmap(path, mode="w+", dtype=spec["dtype"], shape=tuple(spec["shape"]))
    with open(path, "r+b") as handle:
        os.posix_fallocate(handle.fileno(), 0, handle.seek(0, os.SEEK_END))
    return array


@dataclass
class States:
    """A states directory, checked on open; `arrays` are its memory maps, `words` its vocabulary."""

    path: Path
    meta: dict
    arrays: dict[str, np.ndarray] = field(repr=False)
    words: list[str] = field(repr=False)

    def check(self, run: Run, dataset: Dataset, split: str, checkpoint: str) -> None:
        m = self.meta
        if m["model_checksum"] != run.model_checksum(checkpoint):
            raise GrocError(f"states {self.path} were dumped from other weights than {run.path} ({checkpoint}); "
                            "dump them again from this run")
        if m["dataset_checksum"] != dataset.checksum:
            raise GrocError(f"states {self.path} were dumped from another dataset than {dataset.path}; "
                            "give the dataset they came from or dump again")
        if m["split"] != split:
            raise GrocError(f"states {self.path} hold the {m['split']} split, not {split}; use `split` {m['split']}")

    def settle(self, s, vocab_given: bool, split_given: bool) -> None:
        """Evaluation settings ``s`` (EvalSettings) against these states: `vocab` and `split`
        default to theirs (``*_given`` False); another `vocab` or a `lexicon` is refused."""
        if not vocab_given:
            s.vocab = self.meta["vocab"]
        if not split_given:
            s.split = self.meta["split"]
        if s.vocab != self.meta["vocab"]:
            raise GrocError(f"`vocab` {s.vocab}: the states in {self.path} were dumped with `vocab` {self.meta['vocab']}; "
                            "drop `vocab` or dump again")
        if s.lexicon is not None:
            raise GrocError("`lexicon` cannot change states already dumped (their log-probabilities are fixed); "
                            "pass `lexicon` to 'groc dump' instead")

    def hidden(self) -> np.ndarray:
        """hidden.npy memory-mapped read-only: rows are read from disk when used."""
        return np.load(self.path / "hidden.npy", mmap_mode="r")

    def chunks(self, vocab: EvalVocab, chunk: int) -> Iterator[Chunk]:
        if self.words != vocab.words:
            raise GrocError(f"states {self.path}: vocab.parquet differs from the evaluation vocabulary; dump again")
        return self._chunks(vocab, chunk)

    def _chunks(self, vocab: EvalVocab, chunk: int) -> Iterator[Chunk]:
        arrays = self.arrays
        n = self.meta["predictions"]
        for i in range(0, n, chunk):
            e = min(i + chunk, n)
            targets = arrays["targets"][i:e].astype(np.int64)
            if not np.array_equal(targets, vocab.targets[i + 1 : e + 1]):
                raise DamagedInput(self.path / "targets.npy", "does not match the dataset split", _redump(self.path, self.meta))
            hidden = np.array(arrays["hidden"][i:e], dtype=np.float32)
            logp = np.array(arrays["logp"][i:e], dtype=np.float64)
            new_mass = np.array(arrays["new_mass"][i:e], dtype=np.float64) if "new_mass" in arrays else None
            # Cheap beside the caches' work on the same rows; a NaN row would shift every cache's result silently.
            # logp may be -inf (a table model's new word), never NaN or +inf.
            for name, values in (("hidden", hidden), ("logp", logp), ("new_mass", new_mass)):
                bad = None if values is None else _nonfinite_row(values, allow_minus_inf=name == "logp")
                if bad is not None:
                    raise DamagedInput(self.path / f"{name}.npy", f"holds a NaN or infinite value at row {i + bad:,}",
                                       _redump(self.path, self.meta))
            yield Chunk(i, hidden, targets, logp, new_mass)


def _nonfinite_row(values: np.ndarray, allow_minus_inf: bool = False) -> int | None:
    """The first row of ``values`` holding NaN or an infinity (-inf allowed where asked), or None."""
    bad = np.isnan(values) | (values == np.inf) if allow_minus_inf else ~np.isfinite(values)
    if values.ndim > 1:
        bad = bad.any(axis=tuple(range(1, values.ndim)))
    rows = np.flatnonzero(bad)
    return int(rows[0]) if len(rows) else None


#: The arrays a states directory may hold (meta.json's "files" names no others).
ARRAYS = ("hidden", "targets", "logp", "new_mass")

#: What meta.json must record for the arrays to be read (the checks against the run and dataset use the rest).
META_KEYS = ("files", "predictions", "dim", "vocab_size", "vocab", "split", "model_checksum", "dataset_checksum")


def _redump(path: Path, meta: dict | None = None) -> str:
    """The command that writes the states again: the recorded one, where meta.json still tells it."""
    try:
        run, dataset, split, vocab = meta["run"], meta["dataset"], meta["split"], meta["vocab"]
        dtype, checkpoint = meta["files"]["hidden"]["dtype"], meta["checkpoint"]
        lexicon = meta["lexicon"]["path"] if meta.get("lexicon") else None
    except (KeyError, TypeError):
        return f"re-run 'groc dump RUN DATASET --split SPLIT -o {path} --force'"
    if lexicon:  # each command line whole, as the user would type it
        return (f"re-run 'groc dump {run} {dataset} --split {split} --vocab {vocab} --dtype {dtype} "
                f"--checkpoint {checkpoint} --lexicon {lexicon} -o {path} --force'")
    return (f"re-run 'groc dump {run} {dataset} --split {split} --vocab {vocab} --dtype {dtype} "
            f"--checkpoint {checkpoint} -o {path} --force'")


def open_states(path: Path) -> States:
    """Open a states directory and check, before any work, that every array meta.json records is
    there, readable, and as long as the number of predictions it records (a truncated file or
    one from another dump would otherwise fail mid-evaluation or be read past its end)."""
    path = Path(path)
    if not path.is_dir():
        raise GrocError(f"`states` {path}: not a directory; create it with 'groc dump RUN DATASET --split S -o {path}'")
    meta = read_json(path / "meta.json", "states metadata", _redump(path))
    redump = _redump(path, meta)
    if meta.get("format") != STATES_FORMAT or meta.get("format_version") != STATES_FORMAT_VERSION:
        raise GrocError(f"`states` {path} is not a groc states directory of format version {STATES_FORMAT_VERSION}; {redump}")
    missing = [key for key in META_KEYS if key not in meta]
    files = meta.get("files")
    if missing or not isinstance(files, dict) or not {"hidden", "targets", "logp"} <= set(files):
        raise DamagedInput(path / "meta.json", f"does not record the dumped arrays (missing: {', '.join(missing) or 'files'})",
                           redump)
    # meta.json names arrays, not paths: only the ones dump writes, so no name reaches outside the directory.
    foreign = sorted(str(name) for name in files if name not in ARRAYS or not isinstance(files[name], dict))
    if foreign:
        raise DamagedInput(path / "meta.json", f"records arrays dump does not write ({', '.join(map(repr, foreign[:3]))}; "
                           f"it writes {', '.join(ARRAYS)})", redump)
    n = meta["predictions"]
    arrays = {}
    for name, spec in files.items():
        file = path / f"{name}.npy"
        if not file.is_file():
            raise DamagedInput(file, "is missing", redump)
        try:
            array = np.load(file, mmap_mode="r")
        except (ValueError, OSError, EOFError) as exc:
            raise DamagedInput(file, f"is not a readable array, truncated or damaged ({first_line(exc)})", redump) from None
        problem = integrity_problem(file, spec["integrity"]) if "integrity" in spec else None
        if problem is not None:
            raise DamagedInput(file, problem, redump)
        expected = [n, meta["dim"]] if name == "hidden" else [n]
        if list(array.shape) != expected or str(array.dtype) != spec.get("dtype"):
            raise DamagedInput(file, f"holds {list(array.shape)} {array.dtype}, but meta.json records {expected} "
                               f"{spec.get('dtype')} ({n:,} predictions)", redump)
        # One pass over the n-long arrays is cheap; hidden (n × dim) is checked chunk by chunk as it is read.
        bad = None if name in ("hidden", "targets") else _nonfinite_row(array, allow_minus_inf=name == "logp")
        if bad is not None:
            raise DamagedInput(file, f"holds a NaN or infinite value at row {bad:,}", redump)
        arrays[name] = array
    vocab_file = path / "vocab.parquet"
    words = read_parquet(vocab_file, {"word": pa.types.is_string}, redump).column("word").to_pylist()
    if len(words) != meta["vocab_size"]:
        raise DamagedInput(vocab_file, f"has {len(words):,} words, but meta.json records {meta['vocab_size']:,}", redump)
    return States(path, meta, arrays, words)
