"""Opening user-given input files with checks that name the problem."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import os
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from ..errors import GrocError
from .tokenizer import TokenizeOptions, TokenizeSettings, decode_lines, tokenize_lines


#: Compressed text, read as it is (WMT's News Crawl comes gzipped), known by its first bytes:
#: none of them can begin a UTF-8 text file (bzip2's "BZh" is followed by its block magic).
COMPRESSIONS = (
    ("gzip", lambda head: head.startswith(b"\x1f\x8b"), gzip.open),
    ("bzip2", lambda head: head[:3] == b"BZh" and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90"), bz2.open),
    ("xz", lambda head: head.startswith(b"\xfd7zXZ\x00"), lzma.open),
)


def compression_of(head: bytes) -> tuple[str, Callable] | None:
    """(name, opener) of the compression that a stream's first bytes show, or None for plain text."""
    return next(((name, opener) for name, test, opener in COMPRESSIONS if test(head)), None)


def check_input_file(path: Path, flag: str) -> Path:
    path = Path(path)
    if not path.exists():
        raise GrocError(f"{flag} {path}: no such file")
    if path.is_dir():
        raise GrocError(f"{flag} {path} is a directory, expected a text file")
    if not path.is_file():  # a pipe by name (`<(zcat news.gz)`, a FIFO): looking at it would consume it
        return path
    if path.stat().st_size == 0:
        raise GrocError(f"{flag} {path} is empty")
    with open(path, "rb") as handle:
        head = handle.read(8192)
    if b"\x00" in head and compression_of(head) is None:
        raise GrocError(f"{flag} {path} looks binary (NUL bytes), expected UTF-8 text (or gzip, bzip2, xz)")
    return path


class TextInput:
    """A text input's bytes, line by line, read through gzip, bzip2 or xz where its first bytes show
    one. They are looked at when reading starts, not at open: a stage reading stdin takes its
    output's lock before it waits for input. A damaged or truncated compressed file (an interrupted
    download) is one GrocError naming it, not a traceback."""

    def __init__(self, raw: BinaryIO, name: str, close_raw: bool):
        self.raw, self.name, self.close_raw = raw, name, close_raw
        self.stream: BinaryIO | None = None

    def __iter__(self) -> Iterator[bytes]:
        # Loops, not `yield from`: closing a generator closes what it delegates to, and stdin must
        # stay open when a reader stops early (TokenLines drains it).
        found = compression_of(self.raw.peek(16)[:16]) if hasattr(self.raw, "peek") else None
        if found is None:
            for line in self.raw:
                yield line
            return
        kind, opener = found
        self.stream = opener(self.raw, "rb")
        try:
            for line in self.stream:
                yield line
        except (EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
            raise GrocError(f"{self.name}: cannot read it as {kind} ({exc}); the file is damaged or was cut short") from None

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()
        if self.close_raw:
            self.raw.close()


def open_input(path: str | None, flag: str = "INPUT") -> TextInput:
    """A text input: a file, or stdin for '-' or None (left open when closed)."""
    if path in (None, "-"):
        if sys.stdin is None:  # started with stdin closed (`<&-`)
            raise GrocError(f"{flag} reads stdin, which is closed (`<&-`); give a file, or pipe the text in")
        return TextInput(sys.stdin.buffer, "stdin", close_raw=False)
    return TextInput(open(check_input_file(Path(path), flag), "rb"), str(path), close_raw=True)


class TokenLines:
    """An input's lines as lists of whitespace-separated tokens, readable more than once in
    bounded memory (groc prepare counts words on a first reading and writes ids on a second).

    A file read as it is is simply read again, and refused if it changed in between. Stdin and
    pipes given by name (`<(zcat news.gz)`, a FIFO) cannot be read twice, and Moses tokenization is
    too slow to do twice, so then the first reading keeps the tokens in a spool file in
    `spool_dir`. The spool has no name (TemporaryFile), so nothing is left behind, even when the
    process is killed."""

    def __init__(self, path: str, flag: str, *, spool_dir: Path, tokenize: bool = False,
                 options: TokenizeOptions = TokenizeOptions(), jobs: int = 1, errors: str = "strict"):
        self.path, self.name, self.flag = path, "stdin" if path == "-" else path, flag
        self.label = f"{flag} {self.name}"
        self.tokenize, self.options, self.jobs, self.errors = tokenize, options, jobs, errors
        self.spool_dir = spool_dir
        self._spool: BinaryIO | None = None
        self._stat: tuple | None = None
        # stdin, or a pipe by name: read once, held open by close() to drain what a reader that
        # stopped early (met budgets) left in it
        self.piped = path == "-" or not Path(path).is_file()
        self._pipe: TextInput | None = None
        self._pipe_open = False  # the pipe's first reading stopped before its end

    def _identity(self) -> tuple:
        st = os.stat(self.path)
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _check_unchanged(self) -> None:
        if self._identity() != self._stat:
            raise GrocError(f"{self.label} changed while groc was reading it; run the command again once it is complete")

    def __iter__(self) -> Iterator[list[str]]:
        if self._spool is not None:
            yield from self._read_spool()
        elif self._stat is not None:
            self._check_unchanged()
            with contextlib.closing(open_input(self.path, self.flag)) as stream:
                for line in decode_lines(stream, errors=self.errors, name=self.name):
                    yield line.split()
            self._check_unchanged()
        else:
            yield from self._first_reading()

    def _first_reading(self) -> Iterator[list[str]]:
        spool = None
        if self.piped or self.tokenize:
            spool = self._spool = tempfile.TemporaryFile(dir=self.spool_dir, buffering=1 << 20)
        else:
            self._stat = self._identity()
        with contextlib.ExitStack() as stack:
            stream = open_input(self.path, self.flag)
            if self.piped:
                self._pipe = stream  # closed by close(), once drained
            else:
                stack.callback(stream.close)
            lines = decode_lines(stream, errors=self.errors, name=self.name)
            if self.tokenize:
                lines = stack.enter_context(contextlib.closing(tokenize_lines(lines, self.options, jobs=self.jobs)))
            self._pipe_open = self.piped
            for line in lines:
                tokens = line.split()
                if spool is not None:
                    spool.write(" ".join(tokens).encode() + b"\n")
                yield tokens
            self._pipe_open = False

    def _read_spool(self) -> Iterator[list[str]]:
        self._spool.seek(0)
        for raw in self._spool:
            yield raw.decode().split()

    def close(self, drain: bool = True) -> None:
        if self._spool is not None:
            self._spool.close()
        if self._pipe is not None:
            if self._pipe_open and drain:
                # --split met its budgets before the pipe ended: read the rest, so that the command
                # writing into it ends normally instead of by SIGPIPE (status 141, which fails a
                # pipeline under `set -o pipefail`).
                while self._pipe.raw.read(1 << 20):
                    pass
            self._pipe_open = False
            self._pipe.close()  # stdin itself stays open
            self._pipe = None

    def __enter__(self) -> "TokenLines":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(drain=exc_type is None)  # after an error, exit now rather than read all of stdin


def run_tokenize(settings: TokenizeSettings, input: str | None, output: str = "-", force: bool = False,
                 errors: str = "strict", record: bool = False) -> dict | None:
    """``groc tokenize``: Moses-tokenize ``input`` (a file; '-' or None: stdin), one line per input
    line, to ``output`` (a file, written atomically; '-': stdout, as the lines come). Returns,
    with ``record`` and a file, the record: input, output, lines, tokens, settings, seconds."""
    from ..artifacts.atomic import atomic_file
    from ..artifacts.locks import claim_output
    from ..console import write_stdout

    started = time.perf_counter()
    stream = open_input(input, "INPUT")
    name = "stdin" if input in (None, "-") else input
    # Closed on the way out, whatever the way: its worker processes end before groc does.
    lines = tokenize_lines(decode_lines(stream, errors=errors, name=name), settings.options(), jobs=settings.jobs)
    with contextlib.closing(lines):
        if output == "-":
            for line in lines:
                write_stdout(line + "\n")
            write_stdout("", flush=True)
            return None
        target = Path(output)
        count_lines = count_tokens = 0
        with claim_output(target, force, kind="file", inputs=(input,)), atomic_file(target, "w") as handle:
            for line in lines:
                handle.write(line + "\n")
                if record:  # counted only for the record
                    count_lines += 1
                    count_tokens += len(line.split())
    if not record:
        return None
    return {"input": name, "output": str(target), "lines": count_lines, "tokens": count_tokens,
            "lower": settings.lower, "escape": settings.escape, "seconds": round(time.perf_counter() - started, 3)}
