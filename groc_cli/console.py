"""Everything but results goes to stderr: logs, warnings, progress bars (GUIDE practice 4)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from typing import Any, Callable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column

from .errors import GrocError, StderrClosed, StdoutClosed, named

class _StderrConsole(Console):
    def on_broken_pipe(self) -> None:
        # rich's own points *stdout* at /dev/null and exits with status 1, which the command line
        # took for stdout's reader gone: status 0, with the stage's output removed.
        self.quiet = True
        stderr_closed()


err = _StderrConsole(stderr=True, highlight=False, soft_wrap=True)


def is_main_process() -> bool:
    """False on every torchrun rank but 0: only rank 0 speaks and writes."""
    return os.environ.get("RANK", "0") == "0"


#: How a log line writes the settings it names in backticks (as errors do): plain names for the
#: library's users (``errors.named``); a command sets its flags while it runs (cli.py).
setting_names: Callable[[str], str] = named


#: Whether the reader of stderr has gone away (StderrClosed); the command line's exit status says so.
stderr_gone = False


def log(message: str) -> None:
    if is_main_process():
        try:
            err.print(setting_names(message) if isinstance(message, str) else message, markup=False)
        except BrokenPipeError:
            stderr_closed()


def stderr_closed() -> None:
    """The reader of stderr went away: point it at /dev/null (what the stage says while it stops
    goes nowhere, rather than failing again) and stop the stage (StderrClosed)."""
    global stderr_gone
    stderr_gone = True
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stderr.fileno())
    os.close(devnull)
    raise StderrClosed()


def emit_json(obj: Any) -> None:
    """The stage's result: one JSON object on stdout."""
    if not is_main_process() or sys.stdout is None:  # stdout closed (`>&-`): the summary goes nowhere, as print's
        return
    write_stdout(strict_json(obj, sort_keys=True) + "\n", flush=True)


def strict_json(obj: Any, **dumps: Any) -> str:
    """``obj`` as strict JSON, which has no NaN or infinity (Python's ``Infinity`` breaks ``jq`` and
    every other parser): each such number is written null, and an object at the top gains
    ``"nonfinite": {"where.it.was": "inf" | "-inf" | "nan"}``, the reason it is null."""
    where: dict[str, str] = {}

    def clean(value: Any, path: str) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            where[path] = str(value)
            return None
        if isinstance(value, dict):
            return {k: clean(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(value)]
        return value

    cleaned = clean(obj, "")
    if where and isinstance(cleaned, dict):
        cleaned["nonfinite"] = where
    return json.dumps(cleaned, allow_nan=False, **dumps)


def utf8(stream) -> bool:
    """Whether a text stream encodes UTF-8."""
    return (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "") == "utf8"


def write_stdout(text: str, flush: bool = False) -> None:
    """Write part of a stage's result to stdout; a reader that has gone away (`| head`) ends the stage
    normally (StdoutClosed), not with typer's exit status 1 for an OSError. A stage whose result is
    its stdout, started with stdout closed (`>&-`: Python's sys.stdout is None), stops in one line
    at its first write."""
    if sys.stdout is None:
        raise GrocError("stdout is closed (`>&-`), so the result has nowhere to go; redirect it (`> FILE`), or give "
                        "-o FILE where the command takes one")
    if not utf8(sys.stdout) and hasattr(sys.stdout, "reconfigure"):
        # Results are UTF-8 (tokens, JSON: the format of every file groc reads and writes) whatever the
        # locale: in an ASCII or Latin-1 one `tokenize` stopped at the first word outside it. Help and
        # tables drawn by rich keep the locale's encoding (ASCII boxes there).
        sys.stdout.reconfigure(encoding="utf-8")
    try:
        sys.stdout.write(text)
        if flush:
            sys.stdout.flush()
    except BrokenPipeError:
        raise StdoutClosed() from None


@contextlib.contextmanager
def progress(description: str, total: int | None, unit: str = "") -> Iterator:
    """A rich progress bar on stderr; yields advance(n). Quiet when stderr is not a terminal. The
    settings ``description`` names in backticks are written as log lines write them."""
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(table_column=Column(no_wrap=True))]
    if unit:  # the count and its unit never wrap; the bar gives way in a narrow terminal
        columns.append(TextColumn(unit, table_column=Column(no_wrap=True)))
    columns += [TimeElapsedColumn(), TimeRemainingColumn()]
    with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as bar:
        task = bar.add_task(setting_names(description), total=total)
        yield lambda n=1: bar.advance(task, n)
