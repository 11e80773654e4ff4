"""A full disk, or a full quota, while writing an output: told apart from other errors, and said in
one line that names the output and the free bytes."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from ..errors import GrocError


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
