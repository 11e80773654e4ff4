"""User-facing errors: one line on stderr, non-zero exit, no traceback (unless the command line asks
for one with its debug option).

A message names the settings it is about in backticks ("`cache_weight` mixes a cache into the model:
give `cache` too"). ``str(exc)`` writes them as plain names, for the Python API's users, who set
them by name; only the command layer (``commands/_settings.py``) writes them as the running
command's flags. No library module spells a flag (tests/test_layers.py)."""

import contextlib
import errno
import re
import sys
from typing import Iterator

#: A setting named in a message: one word in backticks.
SETTING_NAME = re.compile(r"`(\w+)`")


def named(text: str) -> str:
    """``text`` with each setting it names in backticks written as the setting's plain name."""
    return SETTING_NAME.sub(r"\1", text)


class GrocError(Exception):
    """An error caused by the user's input or environment, with a message that names the fix."""

    exit_code = 2

    @property
    def text(self) -> str:
        """The message as raised, settings still in backticks (for the command layer, and for a
        message that quotes this one)."""
        return super().__str__()

    def __str__(self) -> str:
        return named(self.text)


def first_line(exc: BaseException) -> str:
    """An exception's message in one line, for a one-line error that quotes it."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class SettingError(GrocError, ValueError):
    """A setting's value out of its bounds or choices, one that the input cannot take (adaptive's
    cutoffs for a smaller vocabulary), or settings that do not go together: the one error type of a
    setting's check, whose message names each setting in backticks (or starts with its name). A
    ValueError too, as Python's convention for a bad argument value is."""


@contextlib.contextmanager
def as_setting_error(prefix: str = "") -> Iterator[None]:
    """Around a setting's check: a ValueError it raises is a SettingError (``prefix`` before its
    message); a SettingError passes as raised."""
    try:
        yield
    except SettingError:
        raise
    except ValueError as exc:
        raise SettingError(prefix + str(exc)) from None


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is so that it cleans up as after Ctrl-C (exit status 143)."""


class OutOfMemory(GrocError):
    """An allocation refused while reading or computing (a memory limit, `ulimit -v`, or the machine's
    memory): never damage, and nothing to rebuild. The command line prints its documented one line."""

    exit_code = 1

    def __init__(self, reading=None):
        self.reading = reading
        super().__init__(self.wording(reading))

    @staticmethod
    def wording(reading=None, batch: str = "batch", chunk: str = "chunk") -> str:
        """The message, naming the batch and chunk settings as given (the command line gives its flags)."""
        return (f"out of memory{f' while reading {reading}' if reading is not None else ''} (the process's memory "
                f"limit, `ulimit -v`, or the machine's); use a smaller {batch}, {chunk} or model, or raise the limit")


class DamagedInput(GrocError):
    """A file that an earlier stage wrote is missing, unreadable, foreign or inconsistent with the
    files beside it. The message names the file and the command that writes it again, because
    repairing it by hand would only move the damage somewhere less visible.

    Raised while handling an allocation that failed (pyarrow's ArrowMemoryError is an ArrowException
    too, torch's allocator error a RuntimeError, both caught where a file is read), it is an
    OutOfMemory instead: a healthy file is never called damaged, nor its re-training advised, because
    a memory limit was met while reading it."""

    def __new__(cls, file=None, *args, **kwargs):
        handled = sys.exc_info()[1]
        if handled is not None and memory_in_chain(handled):
            return OutOfMemory(file)
        return super().__new__(cls)

    def __init__(self, file, problem: str, rebuild: str):
        super().__init__(f"{file} {problem}; {rebuild}")


class StderrClosed(KeyboardInterrupt):
    """The reader of stderr went away (`groc train ... 2>&1 | head`, a pager quit): the stage stops
    as after Ctrl-C, keeping what an interruption keeps (a run's last checkpoint), with exit status
    141, a SIGPIPE's. It went on as if stdout's reader had gone: status 0, the run removed."""


class StdoutClosed(Exception):
    """The reader of stdout went away (`groc tokenize | head`): a normal end, exit status 0. Not an
    OSError, which typer would turn into exit status 1 before groc's own handler saw it."""


def memory_in_chain(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an exception it was raised from or while handling, is ``out_of_memory``."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if out_of_memory(exc):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def out_of_memory(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocation that failed: Python's MemoryError, or torch's RuntimeError
    for it ("DefaultCPUAllocator: can't allocate memory", CUDA's out of memory), which a
    ``ulimit -v`` or an absurd size setting gives in the middle of a library call; a size past
    what any allocator takes, "Storage size calculation overflowed", too), or a memory map that
    the limit refuses: an OSError with ENOMEM (numpy's ``open_memmap`` of a dump's arrays) or
    safetensors' RuntimeError for it ("unable to mmap ...: Cannot allocate memory (12)")."""
    if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM):
        return True
    text = str(exc)
    if isinstance(exc, ImportError) and "failed to map segment" in text:  # a library's mapping refused by RLIMIT_AS
        return True
    # A thread whose stack the limit refuses: pyarrow's reader pool ("Failed to launch worker thread: Resource
    # temporarily unavailable", an ArrowException), Python's own ("can't start new thread").
    if "Failed to launch worker thread" in text or "can't start new thread" in text:
        return True
    # oneDNN's kernels (torch's LSTM on the CPU) say only this when their workspace is refused; it has other
    # causes too, so it counts as memory only under an address-space limit (`ulimit -v`).
    if isinstance(exc, RuntimeError) and "could not create a primitive" in text and address_space_limited():
        return True
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text.lower()
                                              or "bad_alloc" in text or "DefaultCPUAllocator" in text
                                              or "cannot allocate memory" in text.lower()
                                              or "size calculation overflowed" in text)


def address_space_limited() -> bool:
    """Whether the process runs under an address-space limit (RLIMIT_AS, `ulimit -v`)."""
    import resource

    return resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY

