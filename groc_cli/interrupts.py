"""Ctrl-C and SIGTERM as exceptions, raised where Python can take them.

`handler` raises KeyboardInterrupt (`Terminated` for SIGTERM) in the main thread, so that a stage
unwinds and removes what it half wrote. Three places cannot take that exception:

- code compiled from a string (a dataclass's generated ``__init__``, a namedtuple: torch builds
  them while it imports lazily at a run's first step). An interrupt raised through it makes CPython
  end the process by SIGINT at exit, after groc had cleaned up and said "interrupted": status -2
  to the parent, not 130;
- a callback whose exceptions Python ignores (a weakref callback, ``__del__``; importlib's module
  locks have one): it printed "Exception ignored" and the work went on, so Ctrl-C during an import
  was lost and training ran to its end;
- a module being imported (its code runs under importlib's frames): torch's extensions call back into
  Python while they load (pybind11), and the exception, thrown on through C++ where nothing catches
  it, ended the process by std::terminate (status 134, "pybind11::error_already_set") or surfaced
  as a RecursionError.

In the first and third the handler does not raise, and in the second the exception was swallowed; either
way the signal is sent to the main thread again a moment later (`_LATER` seconds), until it
lands where it can be raised. The received signals are kept for the exit status (`received`)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from .errors import Terminated

_LATER = 0.02
_received: list[BaseException] = []
_redelivering: set[int] = set()
_lock = threading.Lock()
_active = False
_hooked = sys.unraisablehook
_catcher = None  # the code of the function that catches the interrupts (groc's main)
_previous: dict = {}  # the handlers before `install`, for `uninstall`
_deferring = 0  # nesting depth of `deferred` blocks
_held: list[BaseException] = []  # the interrupt a `deferred` block holds until it ends
_torn = False  # an interrupt was raised inside a `deferred` block (a second one), leaving its work part-done


def install() -> None:
    """Take SIGINT and SIGTERM (those not ignored, as in a background job) in the main thread,
    for one run of `groc`'s main, the caller, which catches the exceptions; `uninstall` ends it."""
    global _active, _hooked, _catcher
    if threading.current_thread() is not threading.main_thread():
        return
    _catcher = sys._getframe(1).f_code
    _received.clear()
    _redelivering.clear()
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(signum)
        if previous is not signal.SIG_IGN:
            if previous is not None and previous is not handler:
                _previous[signum] = previous
            signal.signal(signum, handler)
    if sys.unraisablehook is not _unraisable:
        _hooked = sys.unraisablehook
        sys.unraisablehook = _unraisable
    with _lock:
        _active = True


def uninstall() -> None:
    """Main has its exit status: no signal is sent again, and the handlers from before `install`
    are back (unless a signal sent again is still on its way: ours then lets it pass)."""
    global _active
    if threading.current_thread() is not threading.main_thread():
        return
    with _lock:
        _active = False
    if not _redelivering:  # else they stay kept, for the next uninstall
        for signum, previous in _previous.items():
            if signal.getsignal(signum) is handler:
                signal.signal(signum, previous)
        _previous.clear()
    if sys.unraisablehook is _unraisable:
        sys.unraisablehook = _hooked


def received() -> BaseException | None:
    """The last interrupt this run received, or None."""
    return _received[-1] if _received else None


@contextlib.contextmanager
def deferred():
    """A block whose work is done whole or not at all (a training step, with its position): an
    interrupt that arrives within it is held and raised as the block ends; a second one, the user
    insisting, is raised at once, and ``torn`` then says that the block's work is part-done."""
    global _deferring, _torn
    if _deferring == 0:
        _torn = False
    _deferring += 1
    try:
        yield
    except BaseException:
        _deferring -= 1
        if _deferring == 0:
            _held.clear()
        raise
    _deferring -= 1
    if _deferring == 0 and _held:
        exc = _held.pop()
        _held.clear()
        raise exc


def torn() -> bool:
    """Whether the last interrupt was raised inside a `deferred` block rather than at its end."""
    return _torn


def handler(signum: int, frame) -> None:
    global _torn
    if not _active:
        return
    again = signum in _redelivering
    _redelivering.discard(signum)
    if not again or not _received:
        _received.append(_exception(signum))
    where = _where(frame)
    if where == "string":
        _deliver_later(signum)
    elif where == "main":
        if _deferring and not _held:
            _held.append(_received[-1])
            return
        if _deferring:
            _torn = True
        raise _received[-1]


def _exception(signum: int) -> BaseException:
    # SIGTERM unwinds like Ctrl-C, so that half-written outputs are removed and training says
    # where its last checkpoint is, rather than dying where it stands.
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _where(frame) -> str:
    """Where the interrupted code runs: "main", within groc's main, which catches the exception;
    "string", under exec or eval of a string (its file is "<string>") or under an import (importlib's
    frozen frames) within main (a `python -c` that calls main is outside it); "outside": main has
    returned or is returning its exit status, so there is nothing left to unwind."""
    string = False
    while frame is not None:
        if frame.f_code is _catcher:
            return "string" if string else "main"
        name = frame.f_code.co_filename
        string = string or name == "<string>" or name.startswith("<frozen importlib")
        frame = frame.f_back
    return "outside"


def _deliver_later(signum: int) -> None:
    _redelivering.add(signum)

    def again() -> None:
        with _lock:
            if _active:
                signal.pthread_kill(threading.main_thread().ident, signum)

    timer = threading.Timer(_LATER, again)
    timer.daemon = True
    timer.start()


def _unraisable(unraisable) -> None:
    exc = unraisable.exc_value
    if any(exc is ours for ours in _received):
        _deliver_later(signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT)
        return
    _hooked(unraisable)


def after_main() -> None:
    """groc's own process once main has its exit status and everything is written: a signal from here until
    the interpreter has exited (its atexit callbacks, torch's among them, take a moment) ends the process at
    once with "groc: interrupted" (130) or "groc: terminated" (143). Python's own handler, put back, raised
    the interrupt inside an atexit callback ("Exception ignored", a traceback, status 0) or, reaching the
    top, ended the process by the raw signal."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum, code, word in ((signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")):
        if signal.getsignal(signum) is signal.SIG_IGN:
            continue

        def leave(_signum, _frame, code=code, word=word):
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            try:
                os.write(2, f"groc: {word}\n".encode())
            except OSError:
                pass
            os._exit(code)

        signal.signal(signum, leave)


def exit_process(status: int, *, callbacks: bool = True) -> None:
    """End groc's own process with `status` as the interpreter would end it (non-daemon threads joined, the
    atexit callbacks run unless `callbacks` is false, a collection, stdout and stderr flushed), less its
    teardown: from there on the interpreter puts the default signal actions back, so a Ctrl-C during the
    second or so that freeing torch's modules takes ended the process by the raw signal (status -2 to the
    parent, after groc had written everything and said nothing). Returns only if a flush fails, for the
    interpreter's own way out (its message, status 120)."""
    import atexit
    import gc

    if callbacks:
        threading._shutdown()
        atexit._run_exitfuncs()
        gc.collect()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None: started with it closed (`>&-`)
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(status & 0xFF)

