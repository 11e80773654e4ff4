"""What each stage writes (an output's kind) and where it may write: an output is never one of
the stage's own inputs, never a special file, and ``force`` replaces only an output of the same
kind (GUIDE 13)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import GrocError
from ..formats import DATASET_FORMAT, RUN_FORMAT, STATES_FORMAT
from ..json_input import parse_json
from .io import read_metadata

#: What each stage writes, as `output_kind` names an existing path: ``force`` replaces an output
#: only with one of the same kind (GUIDE 13), never a run directory with a text file.
DIRECTORY_KINDS = {("manifest.json", DATASET_FORMAT): "dataset directory", ("config.json", RUN_FORMAT): "run directory",
                   ("meta.json", STATES_FORMAT): "states directory"}
#: The stage a grid table's metadata records (a value of the format, written since the first grid
#: tables: the flag that made them, not a setting the library names).
GRID_STAGE = "eval --grid"
STAGE_KINDS = {"lexicon": "lexicon table", "eval": "per-token table", GRID_STAGE: "grid table",
               "compare": "comparison table"}


#: Entries that are not regular files or directories, by their stat type. groc writes an output
#: beside its destination and renames it into place, which would replace a device node with a
#: regular file; opening one to look at it (a FIFO) can block forever.
SPECIAL_KINDS = ((stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISFIFO, "FIFO"),
                 (stat.S_ISSOCK, "socket"))


def special_kind(path: Path) -> str | None:
    """The kind of a special file at `path` (followed through symbolic links), or None for a regular
    file, a directory or nothing. Decided by stat alone: nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((kind for test, kind in SPECIAL_KINDS if test(mode)), None)


def output_kind(path: Path) -> str:
    """What an existing path is, in the words the `force` check uses: a special file by its type, a
    groc output by its marker file or Parquet stage, a part of a groc output directory, or a plain
    file or directory."""
    path = Path(path)
    if special := special_kind(path):
        return special
    is_dir = path.is_dir()
    if is_dir and (kind := _directory_kind(path)):
        return kind
    parquet = not is_dir and _is_parquet(path)
    if parquet:
        try:
            stage = read_metadata(path).get("stage")
        except Exception:  # a damaged or foreign Parquet file is still a Parquet file
            stage = None
        if stage in STAGE_KINDS:
            return STAGE_KINDS[stage]
    for parent in Path(os.path.abspath(path)).parents:
        if kind := _directory_kind(parent):
            return f"part of the {kind} {parent}"
    return "directory" if is_dir else "Parquet file" if parquet else "file"


def _directory_kind(path: Path) -> str | None:
    for (marker, form), kind in DIRECTORY_KINDS.items():
        try:
            with open(path / marker, "rb") as handle:
                if parse_json(handle.read(1 << 20)).get("format") == form:
                    return kind
        except (OSError, ValueError, AttributeError):
            continue
    return None


def _is_parquet(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"PAR1"
    except OSError:
        return False


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_destination(path: Path, force: bool, flag: str = "-o", kind: str | None = None,
                      inputs: tuple = ()) -> None:
    """Refuse an output that is one of the stage's inputs (or holds one), a special file (device,
    FIFO, socket) with or without `force`, an existing output without `force`, an existing path of
    another kind even with `force`; check the parent."""
    path = Path(path)
    if special := special_kind(path):
        raise GrocError(f"{flag} {path} is a {special}, not a regular file or directory; groc writes (and `force` "
                        f"replaces) only those: choose another {flag}")
    real = os.path.realpath(path)
    for given in inputs:
        if given is None or str(given) == "-":
            continue
        other = os.path.realpath(given)
        if _within(real, other) or _within(other, real):
            raise GrocError(f"{flag} {path} is (or holds) the input {given}; choose another {flag}")
    if path.exists() or path.is_symlink():
        if not force:
            raise GrocError(f"output {path} already exists; choose another {flag} or pass `force` to replace it")
        found = output_kind(path)
        empty_dir = found == "directory" and not any(path.iterdir())
        if kind is not None and found != kind and not (empty_dir and kind.endswith("directory")):
            raise GrocError(f"{flag} {path} is a {found}, not a {kind}; `force` replaces only a {kind}: "
                            f"choose another {flag}")
    parent = path.parent if str(path.parent) else Path(".")
    existing = parent
    while not existing.exists() and existing != existing.parent:  # missing parents are made when writing
        existing = existing.parent
    if not existing.is_dir():
        raise GrocError(f"cannot write {path}: {existing} is not a directory; choose another {flag}")
    if not os.access(existing, os.W_OK):
        raise GrocError(f"cannot write to {existing}: permission denied; choose another {flag}")
