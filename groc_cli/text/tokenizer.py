"""Moses tokenization (sacremoses, English), line by line, optionally in parallel.

The GroC paper (appendix C.2) tokenized its cross-domain data with the Europarl/Moses
tokenizer and lowercased it; sacremoses is the Python port of those rules.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
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


def _worker_signals() -> None:
    # Ctrl-C and a SIGTERM to the process group reach the workers too: the parent alone decides
    # what they mean (it kills the workers and says "interrupted" once). Forked workers would
    # otherwise inherit its handlers and print tracebacks, or die under a pool that then waits
    # for them forever.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def tokenize_lines(lines: Iterable[str], options: TokenizeOptions, jobs: int = 1) -> Iterator[str]:
    """Tokenize lines in order; with jobs > 1, chunks go to worker processes and come back in order."""
    if jobs <= 1:
        for line in lines:
            yield tokenize_line(line, options)
        return
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    with ctx.Pool(jobs, initializer=_worker_signals) as pool:
        work = ((chunk, options) for chunk in _chunks(lines, CHUNK_LINES))
        try:
            for chunk in pool.imap(_tokenize_chunk, work):
                yield from chunk
        except BaseException:
            for worker in pool._pool:  # they ignore SIGTERM, Pool.terminate's signal
                worker.kill()
            raise
