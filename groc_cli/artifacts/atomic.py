"""Outputs built aside and renamed into place: an interrupted or failed stage leaves no file or
directory that a later stage would accept (GUIDE 2), and what a killed writer left aside is
reclaimed by the next one."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterator

from .diskfull import DiskFull, disk_full, quota_exceeded


def umask() -> int:
    """The process's file mode creation mask (read without changing it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_parents(path: Path) -> Path:
    """The directory that will hold `path`, created with its missing parents (as mkdir -p)."""
    parent = Path(path).parent if str(Path(path).parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    return parent


def replace_path(tmp: Path, final: Path) -> None:
    """Move `tmp` to `final`, replacing what is there (the old entry is removed only after the swap). The
    two renames of a swap are one step for SIGINT and SIGTERM (`_signals_deferred`): a signal between them
    left neither the old entry nor the new one at `final`, both aside."""
    # mkstemp/mkdtemp create private (0600/0700) entries; give the result ordinary permissions.
    os.chmod(tmp, (0o777 if tmp.is_dir() else 0o666) & ~umask())
    if final.exists():
        trash = final.with_name(f".{final.name}.old-{os.getpid()}")
        try:
            with _signals_deferred():
                os.replace(final, trash)
                os.replace(tmp, final)
        finally:  # also when the signal held across the swap is raised at its end
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
        if pid.isdigit() and not pid_alive(int(pid)):
            _remove(final.parent / name)
            removed.append(final.parent / name)
    return removed


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` runs (asked of the kernel; another user's counts)."""
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
