"""How many cores a process may use, and the bound every thread or process count is held to.
Free of torch, so that `tokenize -j N` uses it without importing torch."""

from __future__ import annotations

import os

from .console import log


def cpu_count() -> int:
    """The cores this process may run on (its affinity mask, as taskset and containers set it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def bounded_threads(n: int, setting: str = "`threads`", cpus: int | None = None) -> int:
    """``n`` threads, at most the cores this process may use, with one warning line naming ``setting``
    when it asked for more. Threads beyond the cores only wait on each other (5000 threads ran a
    stage 50x slower without a word) and OpenMP runs out of resources far above them (100000
    threads: a false "vocab.parquet is damaged", then a segfault)."""
    cpus = cpu_count() if cpus is None else cpus
    if n <= cpus:
        return n
    log(f"warning: {setting} {n} is more than the {cpus} core{'s' if cpus != 1 else ''} this process may use; "
        f"using {cpus} (more threads than cores only wait on each other)")
    return cpus
