"""Ctrl-C and SIGTERM as exceptions, raised where Python can take them.

`handler` raises KeyboardInterrupt (`Terminated` for SIGTERM) in the main thread, so that a stage
unwinds and removes what it half wrote. Two places cannot take that exception:

- code compiled from a string (a dataclass's generated ``__init__``, a namedtuple: torch builds
  them while it imports lazily at a run's first step). An interrupt raised through it makes CPython
  end the process by SIGINT at exit, after groc had cleaned up and said "interrupted": status -2
  to the parent, not 130;
- a callback whose exceptions Python ignores (a weakref callback, ``__del__``; importlib's module
  locks have one): it printed "Exception ignored" and the work went on, so Ctrl-C during an import
  was lost and training ran to its end.

In the first the handler does not raise, and in the second the exception was swallowed; either
way the signal is sent to the main thread again a moment later (`_LATER` seconds), until it
lands where it can be raised. The received signals are kept for the exit status (`received`)."""

from __future__ import annotations

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
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, handler)
    if sys.unraisablehook is not _unraisable:
        _hooked = sys.unraisablehook
        sys.unraisablehook = _unraisable
    with _lock:
        _active = True


def uninstall() -> None:
    """No signal is sent again after this: main has its exit status (the handlers stay, and
    record nothing more)."""
    global _active
    with _lock:
        _active = False
    if sys.unraisablehook is _unraisable:
        sys.unraisablehook = _hooked


def received() -> BaseException | None:
    """The last interrupt this run received, or None."""
    return _received[-1] if _received else None


def handler(signum: int, frame) -> None:
    if not _active:
        return
    if signum in _redelivering:
        _redelivering.discard(signum)
        exc = _received[-1] if _received else _exception(signum)
    else:
        exc = _exception(signum)
        _received.append(exc)
    if _in_string_code(frame):
        _deliver_later(signum)
        return
    raise exc


def _exception(signum: int) -> BaseException:
    # SIGTERM unwinds like Ctrl-C, so that half-written outputs are removed and training says
    # where its last checkpoint is, rather than dying where it stands.
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _in_string_code(frame) -> bool:
    """Whether the interrupted code runs under exec or eval of a string (its file is "<string>")
    called from within groc's main (a `python -c` that calls main is outside: main catches first)."""
    while frame is not None and frame.f_code is not _catcher:
        if frame.f_code.co_filename == "<string>":
            return True
        frame = frame.f_back
    return False


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
