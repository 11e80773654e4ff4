"""Moses tokenization (sacremoses, English), line by line, optionally in parallel.

The GroC paper (appendix C.2) tokenized its cross-domain data with the Europarl/Moses
tokenizer and lowercased it; sacremoses is the Python port of those rules.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
from collections import deque
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator

from ..errors import GrocError

_TOKENIZER = None
CHUNK_LINES = 500


@dataclass(frozen=True)
class TokenizeOptions:
    lower: bool = False
    escape: bool = False  # Moses escapes & < > ' " [ ] as XML entities; off keeps the text readable
    aggressive_dash_splits: bool = False


def _tokenizer():
    global _TOKENIZER
    if _TOKENIZER is None:
        from sacremoses import MosesTokenizer

        _TOKENIZER = MosesTokenizer(lang="en")
    return _TOKENIZER


def tokenize_line(line: str, options: TokenizeOptions) -> str:
    line = line.strip()
    if not line:
        return ""
    out = _tokenizer().tokenize(
        line, escape=options.escape, return_str=True, aggressive_dash_splits=options.aggressive_dash_splits
    )
    return out.lower() if options.lower else out


def _tokenize_chunk(args: tuple[list[str], TokenizeOptions]) -> list[str]:
    lines, options = args
    return [tokenize_line(line, options) for line in lines]


def decode_lines(stream: BinaryIO, errors: str = "strict", name: str = "input") -> Iterator[str]:
    """Decode a binary stream line by line as UTF-8, naming the line of the first invalid byte."""
    for number, raw in enumerate(stream, start=1):
        if b"\x00" in raw:
            raise GrocError(f"{name} line {number}: NUL byte, this looks like a binary file, not text")
        try:
            text = raw.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise GrocError(
                f"{name} line {number}: invalid UTF-8 at byte {exc.start} of the line; "
                "fix the file or pass --errors replace"
            ) from None
        yield text.rstrip("\r\n")


def _chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _worker_start() -> None:
    # Ctrl-C reaches the whole process group. The parent alone reports it, and its shutdown lets
    # each worker finish the chunk it holds; a worker that raised KeyboardInterrupt would print a
    # traceback of its own. SIGTERM keeps its default action, which ends a worker silently (the
    # parent's handler, inherited through fork, would raise there too).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def tokenize_lines(lines: Iterable[str], options: TokenizeOptions, jobs: int = 1) -> Iterator[str]:
    """Tokenize lines in order; with jobs > 1, chunks go to worker processes and come back in order.

    At most 2 * jobs chunks are in flight, so memory stays bounded when the reader of the
    output is slower than the workers (Pool.imap queued every finished chunk). The workers run
    under concurrent.futures, which notices a worker that died (say, of a SIGTERM sent to the
    process group) where multiprocessing.Pool waits for it forever."""
    if jobs <= 1:
        for line in lines:
            yield tokenize_line(line, options)
        return
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    executor = ProcessPoolExecutor(jobs, mp_context=ctx, initializer=_worker_start)
    try:
        pending: deque = deque()
        for chunk in _chunks(lines, CHUNK_LINES):
            pending.append(executor.submit(_tokenize_chunk, (chunk, options)))
            if len(pending) >= 2 * jobs:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
