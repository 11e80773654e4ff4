"""Atomic, self-describing outputs.

Every stage writes to a temporary name beside its destination and renames it into place
when complete (as KenLM does with its "incomplete" marker), so an interrupted or failed
stage never leaves a file or directory that a later stage would accept. Parquet files
carry their provenance as JSON in the schema metadata (as Hugging Face `datasets` does).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import __version__
from .errors import GrocError

METADATA_KEY = b"groc"


def check_destination(path: Path, force: bool, flag: str = "-o") -> None:
    """Refuse to overwrite an existing output unless --force, and check the parent is writable."""
    if path.exists() and not force:
        raise GrocError(f"output {path} already exists; choose another {flag} or pass --force to replace it")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise GrocError(f"output directory {parent} does not exist; create it first (mkdir -p {parent})")
    if not os.access(parent, os.W_OK):
        raise GrocError(f"cannot write to {parent}: permission denied; choose another {flag}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _replace(tmp: Path, final: Path) -> None:
    # mkstemp/mkdtemp create private (0600/0700) entries; give the result ordinary permissions.
    os.chmod(tmp, (0o777 if tmp.is_dir() else 0o666) & ~_umask())
    if final.exists():
        trash = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.replace(final, trash)
        os.replace(tmp, final)
        if trash.is_dir():
            shutil.rmtree(trash, ignore_errors=True)
        else:
            trash.unlink(missing_ok=True)
    else:
        os.replace(tmp, final)


@contextlib.contextmanager
def atomic_dir(final: Path) -> Iterator[Path]:
    """Yield a temporary directory beside `final`; move it into place only if the block succeeds."""
    final = Path(final)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.incomplete-", dir=final.parent if str(final.parent) else "."))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _replace(tmp, final)


@contextlib.contextmanager
def atomic_file(final: Path, mode: str = "wb") -> Iterator[Any]:
    """Yield an open temporary file beside `final`; rename it into place only if the block succeeds."""
    final = Path(final)
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.incomplete-", dir=final.parent if str(final.parent) else ".")
    tmp = Path(name)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _replace(tmp, final)


def atomic_path(final: Path):
    """Like atomic_file, but yields a temporary *path* (for writers that open files themselves)."""

    @contextlib.contextmanager
    def _ctx() -> Iterator[Path]:
        fd, name = tempfile.mkstemp(prefix=f".{Path(final).name}.incomplete-", dir=Path(final).parent if str(Path(final).parent) else ".")
        os.close(fd)
        tmp = Path(name)
        try:
            yield tmp
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _replace(tmp, Path(final))

    return _ctx()


def provenance(stage: str, **fields: Any) -> dict:
    return {"tool": "groc", "version": __version__, "stage": stage, **fields}


def write_parquet(table: pa.Table, path: Path, meta: dict, row_group_size: int | None = None) -> None:
    """Write `table` to `path` with `meta` as JSON in the schema metadata (not atomic: use inside atomic_*)."""
    existing = table.schema.metadata or {}
    table = table.replace_schema_metadata({**existing, METADATA_KEY: json.dumps(meta, sort_keys=True).encode()})
    pq.write_table(table, path, row_group_size=row_group_size, compression="zstd")


def read_metadata(path: Path) -> dict:
    schema = pq.read_schema(path)
    raw = (schema.metadata or {}).get(METADATA_KEY)
    return json.loads(raw) if raw else {}


def write_json(obj: Any, path: Path) -> None:
    with atomic_file(path, "w") as handle:
        json.dump(obj, handle, indent=2, sort_keys=True)
        handle.write("\n")


def read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise GrocError(f"{what} {path} not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GrocError(f"{what} {path} is not valid JSON ({exc}); recreate it") from None


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def id_dtype(n: int) -> np.dtype:
    """Smallest unsigned integer type that holds ids 0..n-1 (kNN-LM's int16 ids overflowed: urvashik/knnlm#6)."""
    if n <= np.iinfo(np.uint16).max + 1:
        return np.dtype(np.uint16)
    if n <= np.iinfo(np.uint32).max + 1:
        return np.dtype(np.uint32)
    raise GrocError(f"vocabulary of {n} types is too large")
