"""Atomic, self-describing outputs.

Every stage writes to a temporary name beside its destination and renames it into place
when complete (as KenLM does with its "incomplete" marker), so an interrupted or failed
stage never leaves a file or directory that a later stage would accept. Parquet files
carry their provenance as JSON in the schema metadata (as Hugging Face `datasets` does).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .version import __version__
from .console import log, strict_json
from .errors import DamagedInput, GrocError
from .json_input import parse_json  # noqa: F401 (every reader's one JSON parser)
from .formats import DATASET_FORMAT, RUN_FORMAT, STATES_FORMAT

METADATA_KEY = b"groc"


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


def make_parents(path: Path) -> Path:
    """The directory that will hold `path`, created with its missing parents (as mkdir -p)."""
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    return parent


class OutputBusy(GrocError):
    """Another process holds an output's lock."""


def _lock_path(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    return path.with_name(f".{path.name}.lock")


def lock_holder(path: Path) -> int | None:
    """The pid of the live process that holds `path`'s output lock, or None: the pid output_lock
    writes into its lock file, asked of the kernel (a lock file left by a killed process names a
    dead one). Only reads: taking the lock to test it would make a writer starting at that moment
    refuse its own output."""
    try:
        pid = int(_lock_path(path).read_text().strip() or "0")
    except (OSError, ValueError):
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid  # alive, another user's
    return pid


#: flock's errors on a file system that has no locks: Lustre mounted `noflock` (ENOSYS), NFS
#: without its lock daemon (ENOLCK), some FUSE and network file systems (EOPNOTSUPP).
NO_LOCKS = frozenset({errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP})
_WARNED_NO_LOCKS: set[str] = set()


def _take_lock(lock: Path, path: Path, flag: str) -> int | None:
    """The descriptor of `lock`, held exclusively; None where its file system has no locks."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~_umask())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise OutputBusy(f"{flag} {path} is being written by another groc process{f' (pid {owner})' if owner else ''}; "
                             f"wait for it to finish or choose another {flag}") from None
        except OSError as exc:
            os.close(fd)
            if exc.errno not in NO_LOCKS:
                raise
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)
            return None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


@contextlib.contextmanager
def output_lock(path: Path, flag: str = "-o") -> Iterator[None]:
    """Hold an exclusive lock on `path` (a `.NAME.lock` file beside it) for the block, or refuse at
    once if another process holds it: one writer per output (GUIDE 13). The lock file is removed on
    release; a process that took the lock checks that its file is still the one at that name, so a
    waiter that opened a file just unlinked cannot share the lock. On a file system without locks
    (Lustre mounted `noflock`, NFS without lockd) the block runs unlocked, with a warning once per
    directory: refusing would leave groc unusable there, as HDF5's file locking does."""
    lock = _lock_path(path)
    try:
        make_parents(lock)
        fd = _take_lock(lock, path, flag)
    except OSError as exc:  # a folder check_destination passed that takes no new file (root-squashed NFS, /proc)
        raise GrocError(f"cannot write {flag} {path}: {exc.strerror or exc} in {lock.parent}; "
                        f"choose another {flag}") from None
    if fd is None:
        if str(lock.parent) not in _WARNED_NO_LOCKS:
            _WARNED_NO_LOCKS.add(str(lock.parent))
            log(f"warning: the file system of {lock.parent} has no file locks; groc writes {path} without one, "
                "so it cannot refuse a second process writing the same output there")
        yield
        return
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


@contextlib.contextmanager
def claim_output(path: Path, force: bool, flag: str = "-o", kind: str | None = None,
                 inputs: tuple = ()) -> Iterator[None]:
    """check_destination, then hold the output's lock for the block and check again under it (a
    writer that finished meanwhile made the output exist)."""
    check_destination(path, force, flag, kind, inputs)
    with output_lock(path, flag):
        check_destination(path, force, flag, kind, inputs)
        yield


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def replace_path(tmp: Path, final: Path) -> None:
    """Move `tmp` to `final`, replacing what is there (the old entry is removed only after the swap)."""
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
def _signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive in the block take effect after it (in the main thread; the
    handlers run in the main thread anyway), so a run of renames is not cut in the middle."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    kept = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        kept[signum] = signal.getsignal(signum)
        if kept[signum] not in (signal.SIG_IGN, None):
            signal.signal(signum, lambda number, frame: caught.append(number))
    try:
        yield
    finally:
        for signum, handler in kept.items():
            if handler is not None:
                signal.signal(signum, handler)
        for signum in dict.fromkeys(caught):
            signal.raise_signal(signum)


@contextlib.contextmanager
def atomic_group(where: Path) -> Iterator[Callable[..., Path]]:
    """Several outputs built aside together and swapped in together: the block gets `aside(final,
    directory=False)`, a new temporary file or directory beside each `final`. Only when the block
    has written every one of them are they renamed into place, one after another with signals
    deferred (renames need no space, so a full disk cannot stop them half-way); if the block fails,
    every temporary entry is removed and every `final` is as it was. A full disk becomes one line
    naming `where`."""
    made: list[tuple[Path, Path]] = []

    def aside(final: Path, directory: bool = False) -> Path:
        final = Path(final)
        parent = make_parents(final)
        reclaim_incomplete(final)
        # The writer's pid in the name: what a killed writer (SIGKILL, OOM) left is found and reclaimed.
        prefix = f".{final.name}.incomplete-{os.getpid()}-"
        if directory:
            tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        else:
            fd, name = tempfile.mkstemp(prefix=prefix, dir=parent)
            os.close(fd)
            tmp = Path(name)
        made.append((tmp, final))
        return tmp

    try:
        yield aside
    except BaseException as exc:
        written = sum(_size(tmp) for tmp, _ in made)
        for tmp, _ in made:
            _remove(tmp)
        if disk_full(exc, Path(where).parent if str(Path(where).parent) else Path(".")):
            raise DiskFull(where, written, quota=quota_exceeded(exc)) from None
        raise
    with _signals_deferred():
        for tmp, final in made:
            replace_path(tmp, final)


@contextlib.contextmanager
def _aside(final: Path, directory: bool) -> Iterator[Path]:
    """A new temporary file or directory beside `final`, swapped into place only if the block
    succeeds and removed otherwise; a full disk becomes one line naming `final`."""
    with atomic_group(final) as aside:
        yield aside(final, directory)


def reclaim_incomplete(final: Path) -> list[Path]:
    """Remove what writers of ``final`` that no longer run left beside it (``.NAME.incomplete-PID-*``,
    ``.NAME.old-PID``): a writer killed by SIGKILL or the OOM killer cleans nothing up, and a
    dump's arrays are full size from the start. A live pid's entries are left alone. Returns
    the paths removed."""
    final = Path(final)
    prefixes = (f".{final.name}.incomplete-", f".{final.name}.old-")
    removed = []
    for name in sorted(os.listdir(final.parent)):
        prefix = next((p for p in prefixes if name.startswith(p)), None)
        pid = name[len(prefix):].split("-", 1)[0] if prefix else ""
        if pid.isdigit() and not _pid_alive(int(pid)):
            _remove(final.parent / name)
            removed.append(final.parent / name)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def atomic_dir(final: Path):
    """Yield a temporary directory beside `final`; move it into place only if the block succeeds."""
    return _aside(final, directory=True)


def atomic_path(final: Path):
    """Yield a temporary *path* beside `final` (for writers that open files themselves); rename it
    into place only if the block succeeds."""
    return _aside(final, directory=False)


@contextlib.contextmanager
def atomic_file(final: Path, mode: str = "wb") -> Iterator[Any]:
    """Yield an open temporary file beside `final`; rename it into place only if the block succeeds."""
    with _aside(final, directory=False) as tmp, open(tmp, mode) as handle:
        yield handle


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def disk_full(exc: BaseException, where: Path) -> bool:
    """Whether `exc` came from a full disk. Libraries word it differently: OSError's ENOSPC,
    pyarrow's "No space left", safetensors' "StorageFull", torch.save's bare "file write
    failed"; the last is only believed when the filesystem has (almost) no space left."""
    if isinstance(exc, DiskFull) or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return True
    if not isinstance(exc, Exception):
        return False
    text = str(exc)
    if "No space left" in text or "StorageFull" in text or "os error 28" in text or quota_exceeded(exc):
        return True
    try:
        return "write" in text and shutil.disk_usage(where).free < (1 << 20)
    except OSError:
        return False


def quota_exceeded(exc: BaseException) -> bool:
    """Whether `exc` is the user's disk quota running out (EDQUOT: a cluster's home or project file
    system), not the device: there the device has room, and freeing space means freeing quota.
    Worded as pyarrow ("Disk quota exceeded") and safetensors ("os error 122") report it."""
    if getattr(exc, "errno", None) == errno.EDQUOT:
        return True
    text = str(exc) if isinstance(exc, Exception) else ""
    return "Disk quota exceeded" in text or "os error 122" in text


class DiskFull(GrocError):
    """No space left while writing an output; nothing of it was kept. ``needed``: the bytes the output
    needs when known beforehand (``exact``, require_space), else the bytes written before the disk
    filled (0 when it filled before the first)."""

    exit_code = 1

    def __init__(self, path: Path, needed: int, free: int | None = None, quota: bool = False, exact: bool = False):
        self.path = Path(path)
        if exact:
            size = f"it needs {needed:,} bytes"
        elif needed > 0:
            size = f"it needs more than the {needed:,} bytes written before it stopped"
        else:
            size = "it stopped before its first bytes were written"
        if quota:
            super().__init__(f"disk quota exceeded writing {path}: {size}; nothing was written there (free some of "
                             "your quota, which `quota -s` or Lustre's `lfs quota -h .` shows, or choose another path)")
            return
        if free is None:
            try:
                free = shutil.disk_usage(self.path.parent if str(self.path.parent) else ".").free
            except OSError:
                free = 0
        super().__init__(f"no space left on the device of {path}: {size}, and {free:,} are free; nothing was written "
                         "there (free some space or choose another path)")


def require_space(path: Path, needed: int) -> None:
    """Refuse before work when `needed` bytes will not fit beside `path`."""
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    free = shutil.disk_usage(parent).free
    if needed > free:
        raise DiskFull(path, needed, free, exact=True)


def provenance(stage: str, **fields: Any) -> dict:
    return {"tool": "groc", "version": __version__, "stage": stage, **fields}


def _with_provenance(schema: pa.Schema, meta: dict) -> pa.Schema:
    return schema.with_metadata({**(schema.metadata or {}), METADATA_KEY: strict_json(meta, sort_keys=True).encode()})


def write_parquet(table: pa.Table, path: Path, meta: dict, row_group_size: int | None = None) -> None:
    """Write `table` to `path` with `meta` as JSON in the schema metadata (not atomic: use inside atomic_*)."""
    table = table.replace_schema_metadata(_with_provenance(table.schema, meta).metadata)
    pq.write_table(table, path, row_group_size=row_group_size, compression="zstd")


def parquet_writer(path: Path, schema: pa.Schema, meta: dict) -> pq.ParquetWriter:
    """A writer for a table too large to hold, one row group at a time; with the same row groups
    it writes the same bytes as write_parquet (not atomic: use inside atomic_*)."""
    return pq.ParquetWriter(path, _with_provenance(schema, meta), compression="zstd")


def read_metadata(path: Path) -> dict:
    """The provenance a groc Parquet file records ({} for none); a ValueError when it is not JSON
    groc could have written (``parse_json``)."""
    schema = pq.read_schema(path)
    raw = (schema.metadata or {}).get(METADATA_KEY)
    return parse_json(raw) if raw else {}


def open_parquet(path: Path, columns: dict[str, Callable[[pa.DataType], bool]], rebuild: str) -> pq.ParquetFile:
    """A Parquet file that an earlier stage wrote, opened by its footer only, with each of `columns`
    present and of a type its test accepts. A missing, truncated or foreign file (valid Parquet
    with another schema) is one DamagedInput naming it and `rebuild`, the command that writes it."""
    path = Path(path)
    if not path.is_file():
        raise DamagedInput(path, "is missing", rebuild)
    try:
        handle = pq.ParquetFile(path)
        schema = handle.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        raise DamagedInput(path, f"is not a readable Parquet file ({first_line(exc)})", rebuild) from None
    for name, accepts in columns.items():
        if name not in schema.names or not accepts(schema.field(name).type):
            have = ", ".join(f"{f.name} {f.type}" for f in list(schema)[:6]) + (", ..." if len(schema) > 6 else "")
            raise DamagedInput(path, f"is not the file groc wrote here: no column {name!r} of the right type "
                               f"(it has: {have})", rebuild)
    return handle


def read_parquet(path: Path, columns: dict[str, Callable[[pa.DataType], bool]], rebuild: str) -> pa.Table:
    """`columns` of the Parquet file at `path`, checked as `open_parquet` does; damage inside the
    data pages, which the footer does not show, is the same one-line DamagedInput."""
    handle = open_parquet(path, columns, rebuild)
    try:
        return handle.read(columns=list(columns))
    except (pa.ArrowException, OSError) as exc:
        raise DamagedInput(path, f"is damaged ({first_line(exc)})", rebuild) from None


def parquet_checksum(schema: pa.Schema) -> str | None:
    """The dataset checksum a groc Parquet file records in its provenance, if any."""
    raw = (schema.metadata or {}).get(METADATA_KEY)
    try:
        return parse_json(raw).get("checksum") if raw else None
    except (ValueError, AttributeError):
        return None


def first_line(exc: BaseException) -> str:
    """An exception's message in one line, for a one-line error that quotes it."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def write_json(obj: Any, path: Path) -> None:
    with atomic_file(path, "w") as handle:
        handle.write(strict_json(obj, indent=2, sort_keys=True) + "\n")


def read_json(path: Path, what: str, rebuild: str = "recreate it") -> dict:
    """The JSON object in `path`; `rebuild` names the command that writes it again."""
    try:
        data = parse_json(Path(path).read_bytes())
    except FileNotFoundError:
        raise DamagedInput(path, f"({what}) is missing", rebuild) from None
    except ValueError as exc:
        raise DamagedInput(path, f"({what}) is not JSON groc wrote ({first_line(exc)})", rebuild) from None
    if not isinstance(data, dict):
        raise DamagedInput(path, f"({what}) holds a JSON {type(data).__name__}, not an object", rebuild)
    return data


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


#: A file up to WHOLE_BYTES is hashed whole; a larger one (a dump's multi-GB hidden states) in
#: SAMPLE_BLOCKS blocks of SAMPLE_BLOCK bytes spread evenly over it, first and last included, so
#: checking it on every read costs a fixed 16 MiB, not a pass over the file.
WHOLE_BYTES = 256 << 20
SAMPLE_BLOCKS = 256
SAMPLE_BLOCK = 64 << 10


def integrity_record(path: Path) -> dict:
    """Size and SHA-256 of ``path`` (whole, or of a fixed sample of blocks: ``sampled_blocks`` > 0)."""
    size = Path(path).stat().st_size
    blocks = 0 if size <= WHOLE_BYTES else SAMPLE_BLOCKS
    return {"bytes": size, "sha256": _sampled_sha256(path, size, blocks, SAMPLE_BLOCK), "sampled_blocks": blocks,
            "block_bytes": SAMPLE_BLOCK}


def integrity_problem(path: Path, record: Any) -> str | None:
    """What is wrong with ``path`` against its ``integrity_record`` (None: it matches); the record's
    own sampling is used, so a record written with other constants is still checked as written."""
    try:
        size, digest = int(record["bytes"]), str(record["sha256"])
        blocks, block = int(record["sampled_blocks"]), int(record["block_bytes"])
    except (KeyError, TypeError, ValueError):
        return "has an integrity record in meta.json that is not one groc writes"
    actual = Path(path).stat().st_size
    if actual != size:
        return f"holds {actual:,} bytes, but meta.json records {size:,}"
    if blocks < 0 or block < 1 or _sampled_sha256(path, size, blocks, block) != digest:
        how = f"in {blocks} sampled blocks" if blocks else "as a whole"
        return f"does not match the SHA-256 meta.json records ({how}): it changed after it was written"
    return None


def _sampled_sha256(path: Path, size: int, blocks: int, block: int) -> str:
    if blocks == 0:
        return sha256_file(path)
    digest = hashlib.sha256()
    last = max(size - block, 0)
    with open(path, "rb") as handle:
        for k in range(blocks):
            handle.seek(last * k // max(blocks - 1, 1))
            digest.update(handle.read(block))
    return digest.hexdigest()


def id_dtype(n: int) -> np.dtype:
    """Smallest unsigned integer type that holds ids 0..n-1 (kNN-LM's int16 ids overflowed: urvashik/knnlm#6)."""
    if n <= np.iinfo(np.uint16).max + 1:
        return np.dtype(np.uint16)
    if n <= np.iinfo(np.uint32).max + 1:
        return np.dtype(np.uint32)
    raise GrocError(f"vocabulary of {n} types is too large")
