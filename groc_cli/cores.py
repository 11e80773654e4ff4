"""How many cores a process may use, and the bound every thread or process count is held to.
Free of torch, so that `tokenize -j N` uses it without importing torch."""

from __future__ import annotations

import math
import os
from pathlib import Path

from .console import log

#: The cgroup file system as a container sees it: its own cgroup at the root.
CGROUP = Path("/sys/fs/cgroup")


def cgroup_cpu_limit(root: Path | None = None) -> int | None:
    """The CPUs' worth of time that this container's CPU quota allows, rounded up: Docker's
    `--cpus`, a Kubernetes CPU limit (cgroup v2's cpu.max, v1's cpu.cfs_quota_us over its
    period, read at the cgroup root as the container sees it, as joblib's loky does). None where
    no quota is set or none can be read. A quota leaves every core in the affinity mask, so
    threads sized to the mask are throttled: 8 CPUs of quota on a 64-core node ran 64 threads."""
    root = CGROUP if root is None else root
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):  # cgroup v1, or no cgroup file system
        try:
            quota = (root / "cpu" / "cpu.cfs_quota_us").read_text().strip()
            period = (root / "cpu" / "cpu.cfs_period_us").read_text().strip()
        except OSError:
            return None
    try:
        quota_us, period_us = int(quota), int(period)
    except ValueError:  # "max": no quota
        return None
    if quota_us <= 0 or period_us <= 0:  # v1's -1: no quota
        return None
    return max(1, math.ceil(quota_us / period_us))


def cgroup_cpu_seconds(root: Path | None = None) -> float | None:
    """CPU seconds that this container's processes have used (cgroup v2's cpu.stat usage_usec,
    v1's cpuacct.usage in nanoseconds), or None where neither can be read."""
    root = CGROUP if root is None else root
    try:
        for line in (root / "cpu.stat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "usage_usec":
                return int(value) / 1e6
    except (OSError, ValueError):
        pass
    for folder in ("cpuacct", "cpu,cpuacct"):
        try:
            return int((root / folder / "cpuacct.usage").read_text()) / 1e9
        except (OSError, ValueError):
            continue
    return None


def cpu_count() -> int:
    """The cores this process may use: its affinity mask (taskset, Slurm's cpusets), bounded by
    a container's CPU quota (cgroup_cpu_limit)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    limit = cgroup_cpu_limit()
    return min(cpus, limit) if limit else cpus


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


def omp_threads_problem(value: str | None) -> str | None:
    """What is wrong with an OMP_NUM_THREADS value, as GNU OpenMP (torch's and FAISS's) reads it when
    loaded: a count >= 1, or a comma-separated list of them for nested levels; None where it is
    fine or not set. libgomp says only "Invalid value for environment variable OMP_NUM_THREADS" and
    carries on with its own default."""
    if value is None or not value.strip():
        return None
    parts = [p.strip() for p in value.split(",")]
    if all(p.isdigit() and int(p) >= 1 for p in parts):
        return None
    return (f"OMP_NUM_THREADS={value!r} is not a thread count: set it to a whole number >= 1 (e.g. "
            "OMP_NUM_THREADS=1), or unset it")
