"""Moses tokenization (sacremoses, English), line by line, optionally in parallel.

The GroC paper (appendix C.2) tokenized its cross-domain data with the Europarl/Moses
tokenizer and lowercased it; sacremoses is the Python port of those rules.
"""

from __future__ import annotations

import codecs
import contextlib
import multiprocessing as mp
import queue
import signal
import threading
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Iterator

from ..cores import bounded_threads
from ..errors import GrocError, SettingError
from ..settings import check_fields, setting

_TOKENIZER = None
CHUNK_LINES = 500
IN_FLIGHT = 2  # chunks per worker process: the next one is there when it finishes one


@dataclass(frozen=True)
class TokenizeOptions:
    lower: bool = False
    escape: bool = False  # Moses escapes & < > ' " [ ] as XML entities; off keeps the text readable
    aggressive_dash_splits: bool = False


@dataclass(frozen=True)
class TokenizeSettings:
    """``groc tokenize``'s settings; the command-line options are generated from these fields."""

    lower: bool = setting(False, "Lowercase the tokens (the paper lowercased its cross-domain data).", negation=False)
    escape: bool = setting(False, "Escape & < > ' \" [ ] as XML entities, as Moses does by default.")
    jobs: int = setting(1, "Worker processes; line order is kept.", short="-j", low=1)

    def __post_init__(self) -> None:
        check_fields(self)

    def options(self) -> TokenizeOptions:
        return TokenizeOptions(lower=self.lower, escape=self.escape)


@dataclass
class TextInput:
    """How a stage reads its text lines (``groc score``'s lines, ``groc generate``'s prompts): as
    tokenized words split on whitespace, or as raw text Moses-tokenized first. Declared once here;
    each stage's settings take these fields (``settings.same_as``), ``check_text_input`` and
    ``text_lines``."""

    tokenize: bool = setting(False, "Moses-tokenize each line first (raw text); by default lines are already tokenized "
                             "(split on whitespace).", negation=False)
    lower: bool = setting(False, "With `tokenize`: lowercase, as 'groc tokenize --lower'.", negation=False)


def check_text_input(settings, as_is: str) -> None:
    """``lower`` without ``tokenize`` refused (``settings``: a stage's, with ``TextInput``'s fields);
    ``as_is`` says what the stage does with tokenized text instead."""
    if settings.lower and not settings.tokenize:
        raise SettingError(f"`lower` applies with `tokenize` only ({as_is})")


def text_lines(lines: Iterable[str], settings) -> Iterable[str]:
    """``lines`` as a stage with ``TextInput``'s settings reads them: Moses-tokenized (and lowercased
    with ``lower``) with ``tokenize``, else as they are."""
    if not settings.tokenize:
        return lines
    options = TokenizeOptions(lower=settings.lower)
    # tokenize_line returns the line's tokens joined by spaces: a string, not a list to join.
    return (tokenize_line(line, options) for line in lines)


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
    """Decode a binary stream line by line as UTF-8, naming the line of the first invalid byte.

    A byte-order mark at the start of the stream (Windows editors save UTF-8 with one) is dropped,
    as Python's 'utf-8-sig' does: otherwise it would be part of the first word, a type of its own."""
    for number, raw in enumerate(stream, start=1):
        if number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        if b"\x00" in raw:
            raise GrocError(f"{name} line {number}: NUL byte, this looks like a binary file, not text")
        try:
            text = raw.decode("utf-8", errors=errors)
        except UnicodeDecodeError as exc:
            raise GrocError(
                f"{name} line {number}: invalid UTF-8 at byte {exc.start} of the line; "
                "fix the file or pass `errors` replace"
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


def _worker(tasks, results, others, options: TokenizeOptions) -> None:
    """A worker process: chunks of lines from `tasks`, their tokenization to `results`, until None
    or the end of `tasks` (the parent went away)."""
    # Ctrl-C reaches the whole process group: the parent alone reports it, and ends the workers.
    # SIGTERM keeps its default action, which ends a worker silently (the parent's handler,
    # inherited through fork, would raise there too).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for conn in others:  # the parent's pipe ends, inherited through fork: so that its exit is our EOF
        conn.close()
    # A thread takes each chunk off the pipe as it arrives, so that the parent's sends never wait
    # for this process to finish a chunk (which would deadlock once it waits to send a result).
    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def receive() -> None:
        while True:
            try:
                item = tasks.recv()
            except EOFError:
                item = None
            inbox.put(item)
            if item is None:
                return

    threading.Thread(target=receive, daemon=True).start()
    while True:
        lines = inbox.get()
        if lines is None:
            return
        try:
            out = (True, _tokenize_chunk((lines, options)))
        except Exception as exc:  # a bug, not an input error: reported by the parent with its type
            out = (False, f"{type(exc).__name__}: {exc}")
        results.send(out)


def tokenize_lines(lines: Iterable[str], options: TokenizeOptions, jobs: int = 1) -> Iterator[str]:
    """Tokenize lines in order; with jobs > 1, chunks go to worker processes and come back in order.

    Chunk i goes to worker i % jobs, each worker holding at most IN_FLIGHT chunks, so memory
    stays bounded when the reader of the output is slower than the workers. Each worker has its own
    pipes, and the parent keeps no copy of a worker's write end: a worker that dies (a SIGTERM sent
    to the process group, the OOM killer) ends its result pipe, which the parent reads as EOF at
    once. (concurrent.futures' ProcessPoolExecutor shares one result pipe whose writer the parent
    holds: a worker killed in the middle of writing a result left the parent waiting forever for
    the rest, on CPython 3.11, and multiprocessing.Pool waits forever for a dead worker.)"""
    if jobs > 1:
        jobs = bounded_threads(jobs, "-j")
    if jobs <= 1:
        for line in lines:
            yield tokenize_line(line, options)
        return
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    workers: list[tuple] = []  # (process, task writer, result reader)
    finished = False
    try:
        for _ in range(jobs):
            task_reader, task_writer = ctx.Pipe(duplex=False)
            result_reader, result_writer = ctx.Pipe(duplex=False)
            # The parent's ends, which fork copies into the worker: its own and earlier workers'.
            others = [conn for _, tw, rr in workers for conn in (tw, rr)] + [task_writer, result_reader]
            process = ctx.Process(target=_worker, args=(task_reader, result_writer, others, options), daemon=True)
            process.start()
            task_reader.close()
            result_writer.close()
            workers.append((process, task_writer, result_reader))
        pending = 0  # chunks sent whose results are not read yet, the oldest first in round-robin order
        sent = 0
        for chunk in _chunks(lines, CHUNK_LINES):
            if pending == IN_FLIGHT * jobs:
                yield from _result(workers[(sent - pending) % jobs])
                pending -= 1
            _send(workers[sent % jobs], chunk)
            sent += 1
            pending += 1
        while pending:
            yield from _result(workers[(sent - pending) % jobs])
            pending -= 1
        finished = True
    finally:
        for process, task_writer, result_reader in workers:
            if finished:
                with contextlib.suppress(OSError):
                    task_writer.send(None)
            elif process.is_alive():  # interrupted, failed, or the reader stopped early: no more results wanted
                process.terminate()
            task_writer.close()
            result_reader.close()
        for process, _, _ in workers:
            process.join()


def _died(process) -> GrocError:
    process.join()
    return GrocError(f"a tokenizer worker process ended unexpectedly (exit status {process.exitcode}); "
                     "run again, or with -j 1")


def _send(worker: tuple, chunk: list[str]) -> None:
    """Send a chunk to a worker. A dead worker's task pipe has no reader: that broken pipe is the
    worker's death, not stdout's reader going away (which ends a stage normally)."""
    process, task_writer, _ = worker
    try:
        task_writer.send(chunk)
    except (BrokenPipeError, ConnectionResetError):
        raise _died(process) from None


def _result(worker: tuple) -> list[str]:
    process, _, result_reader = worker
    try:
        ok, value = result_reader.recv()
    except (EOFError, OSError):  # OSError: "got end of file during message", killed while sending a result
        raise _died(process) from None
    if not ok:
        raise RuntimeError(f"tokenizer worker: {value}")
    return value
