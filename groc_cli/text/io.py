"""Opening user-given input files with checks that name the problem."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import BinaryIO

from ..errors import GrocError


def check_input_file(path: Path, flag: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise GrocError(f"{flag} {path}: no such file")
    if path.is_dir():
        raise GrocError(f"{flag} {path} is a directory, expected a text file")
    if path.stat().st_size == 0:
        raise GrocError(f"{flag} {path} is empty")
    with open(path, "rb") as handle:
        head = handle.read(8192)
    if b"\x00" in head:
        raise GrocError(f"{flag} {path} looks binary (NUL bytes), expected UTF-8 text")
    return path


def open_input(path: str | None, flag: str = "INPUT") -> BinaryIO:
    if path in (None, "-"):
        return sys.stdin.buffer
    return open(check_input_file(Path(path), flag), "rb")
