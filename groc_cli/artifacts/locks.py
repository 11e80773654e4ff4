"""One writer per output (GUIDE 13): a stage holds an exclusive lock on its output, a
``.NAME.lock`` file beside it, for its whole life, and a second writer is refused at once."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from pathlib import Path
from typing import Iterator

from ..console import log
from ..errors import GrocError
from .atomic import make_parents, pid_alive, umask
from .destinations import check_destination


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
    return pid if pid_alive(pid) else None


#: flock's errors on a file system that has no locks: Lustre mounted `noflock` (ENOSYS), NFS
#: without its lock daemon (ENOLCK), some FUSE and network file systems (EOPNOTSUPP).
NO_LOCKS = frozenset({errno.ENOSYS, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP})
_WARNED_NO_LOCKS: set[str] = set()


def _take_lock(lock: Path, path: Path, flag: str) -> int | None:
    """The descriptor of `lock`, held exclusively; None where its file system has no locks."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~umask())
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
