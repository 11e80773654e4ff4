"""Where a command runs: the device, its CPU threads, the process group under torchrun, the allocator.

Kept apart from training and evaluation so that both use it without importing each other.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Callable

import torch
import torch.distributed as dist

from .console import log
from .cores import bounded_threads, cgroup_cpu_limit, cgroup_cpu_seconds, cpu_count  # noqa: F401 (cpu_count is used by callers of runtime)
from .errors import GrocError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise GrocError("`device` cuda: no CUDA device is available here; use `device` cpu")
    if name not in ("cpu",) and not name.startswith("cuda"):
        raise GrocError(f"`device` {name!r}: expected auto, cpu, cuda or cuda:N")
    return torch.device(name)


def _cpu_ticks(cpus: set[int]) -> tuple[int, int]:
    """(busy, total) clock ticks so far of the given CPUs, from /proc/stat's per-CPU lines."""
    busy = total = 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            ticks = [int(x) for x in rest.split()[:8]]  # user nice system idle iowait irq softirq steal
            busy += sum(ticks) - ticks[3] - ticks[4]
            total += sum(ticks)
    return busy, total


def busy_cores(interval: float = 0.2) -> int:
    """Cores of this process's affinity mask that other work keeps busy now, measured over
    `interval` seconds of /proc/stat (this process sleeps meanwhile). An instant measure: the load
    average lags a minute behind, so it still counts a stage that just ended (a pipeline's next
    stage would get one thread on an idle machine) and misses a process started seconds ago.
    Where a container's CPU quota bounds the cores (cgroup_cpu_limit), the host's other tenants
    do not spend that quota: then the other work is the container's own, its cgroup's CPU time
    (cgroup_cpu_seconds) less this process's. 0 where neither can be read."""
    try:
        cpus = set(os.sched_getaffinity(0))
    except AttributeError:
        return 0
    limit = cgroup_cpu_limit()
    if limit and limit < len(cpus):
        return _busy_in_cgroup(interval, limit)
    try:
        before, own_before = _cpu_ticks(cpus), os.times()
        time.sleep(interval)
        after, own_after = _cpu_ticks(cpus), os.times()
    except (OSError, ValueError):
        return 0
    total = after[1] - before[1]
    if total <= 0:
        return 0
    own = (own_after.user + own_after.system - own_before.user - own_before.system) * os.sysconf("SC_CLK_TCK")
    busy = max(0.0, after[0] - before[0] - own) / total * len(cpus)
    return int(busy + 0.5)


def _busy_in_cgroup(interval: float, limit: int) -> int:
    start, own_before, then = cgroup_cpu_seconds(), os.times(), time.monotonic()
    if start is None:
        return 0
    time.sleep(interval)
    end, own_after, elapsed = cgroup_cpu_seconds(), os.times(), time.monotonic() - then
    if end is None or elapsed <= 0:
        return 0
    own = own_after.user + own_after.system - own_before.user - own_before.system
    return min(limit, int(max(0.0, end - start - own) / elapsed + 0.5))


def default_threads(cpus: int | None = None, busy: int | None = None, env: dict | None = None) -> int:
    """``threads`` auto: OMP_NUM_THREADS if the user set it; otherwise this process's share of the
    cores (cpus // LOCAL_WORLD_SIZE under torchrun) less the cores other work keeps busy, at
    least 1. One thread per process is what a shared machine needs: OpenMP threads that outnumber
    the free cores wait on each other (about 2x slower steps beside one busy process, 3x for two
    runs of 2 threads each on 2 cores; docs/benchmarks.md)."""
    env = os.environ if env is None else env
    given = env.get("OMP_NUM_THREADS", "").strip()
    cpus = cpu_count() if cpus is None else cpus
    if given.isdigit() and int(given) >= 1:
        return bounded_threads(int(given), "OMP_NUM_THREADS", cpus)
    share = max(1, cpus // max(int(env.get("LOCAL_WORLD_SIZE", "1") or 1), 1))
    busy = busy_cores() if busy is None else busy
    return max(1, min(share, cpus - busy))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_AUTO: dict = {}  # this process's threads=auto claim: the directory, the count it wants and holds
REBALANCE_SECONDS = 2.0  # a flock and a directory listing: free at this rate


def _claimed_by_others(claims: Path) -> int:
    """Threads held by the other live groc processes of this user (call under the claims lock);
    the claims of processes that have ended are removed."""
    claimed = 0
    for entry in claims.glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        if _alive(pid):
            claimed += int(entry.read_text() or 0)
        else:
            entry.unlink(missing_ok=True)
    return claimed


def _under_claims_lock(claims: Path, decide: Callable[[int], int]) -> int:
    """Run decide(threads claimed by others) -> count under the lock, and record the count as ours."""
    import fcntl

    with open(claims / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        n = decide(_claimed_by_others(claims))
        (claims / str(os.getpid())).write_text(str(n))
    return n


def claim_auto_threads(claims: Path | None = None) -> int:
    """``threads`` auto for a groc process: default_threads, where the busy cores are at least the
    threads that other live groc processes of this user have claimed (a file per process under
    `claims`, decided one process at a time under a lock). Two runs started at the same instant
    both measure idle cores; the claims make the second take what the first left, and
    rebalance_threads makes the first give back what it took when the second came."""
    import atexit
    import tempfile

    if os.environ.get("OMP_NUM_THREADS", "").strip().isdigit():
        return default_threads()
    claims = claims or Path(tempfile.gettempdir()) / f"groc-threads-{os.getuid()}"
    try:
        claims.mkdir(mode=0o700, exist_ok=True)
        measured = busy_cores()
        wanted = default_threads(busy=measured)
        n = _under_claims_lock(claims, lambda others: default_threads(busy=max(measured, others)))
    except (OSError, ValueError):  # no writable temporary directory: measure only
        return default_threads()
    atexit.register((claims / str(os.getpid())).unlink, missing_ok=True)
    _AUTO.update(claims=claims, wanted=wanted, held=n, cpus=cpu_count(), due=time.monotonic() + REBALANCE_SECONDS)
    return n


def rebalance_threads() -> int | None:
    """Under ``threads`` auto, at most every REBALANCE_SECONDS (call it as often as you like, e.g.
    every training step): hold the count auto wanted at start less the threads other live groc
    runs now claim, at least 1. Returns the new count when it changed, else None."""
    if not _AUTO or time.monotonic() < _AUTO["due"]:
        return None
    _AUTO["due"] = time.monotonic() + REBALANCE_SECONDS
    seen = {}

    def decide(others: int) -> int:
        seen["others"] = others
        return max(1, min(_AUTO["wanted"], _AUTO["cpus"] - others))

    try:
        n = _under_claims_lock(_AUTO["claims"], decide)
    except (OSError, ValueError):
        return None
    if n == _AUTO["held"]:
        return None
    _AUTO["held"] = n
    _apply_threads(n)
    log(f"`threads` auto: {n} CPU thread(s) from now on ({seen['others']} held by other groc runs on {_AUTO['cpus']} cores)")
    return n


@functools.cache
def settle_vector_math() -> None:
    """Make MKL's vector math (torch's CPU tanh and exp among others, in its MKL builds) ready on
    this thread before several threads first use it at once. Without it, the first such call in a
    process at 2 threads sometimes ran one thread's half on a less exact path (torch.tanh off by
    9e-5 where it is exact to 3e-8; 9 of 26 fresh processes on an idle 2-core Xeon), and two runs
    of the same training command gave different models. One call from one thread readies it for
    all; later calls cost nothing. docs/reproduction.md, "Same command, same numbers"."""
    torch.exp(torch.zeros(1))


def _apply_threads(n: int) -> None:
    import sys

    settle_vector_math()
    torch.set_num_threads(n)
    os.environ["OMP_NUM_THREADS"] = str(n)
    # A faiss whose files an uninstall deleted imports without this function; the unbounded
    # cache's checks say so (faiss_build.load_faiss).
    if hasattr(sys.modules.get("faiss"), "omp_set_num_threads"):
        sys.modules["faiss"].omp_set_num_threads(n)


def set_threads(spec: str | int) -> int:
    """Apply ``threads`` (a count or 'auto') to torch, and through OMP_NUM_THREADS to FAISS (which
    reads it when first imported) and to worker processes; returns the count."""
    text = str(spec).strip().lower()
    if text == "auto":
        n = claim_auto_threads()
    elif text.isdigit() and int(text) >= 1:
        n = bounded_threads(int(text))
    else:
        raise GrocError(f"`threads` {spec!r}: expected a whole number of at least 1, or auto")
    _apply_threads(n)
    return n


def tune_allocator() -> None:
    """Keep freed large blocks in the process (glibc's default hands every large block back to
    the OS, so each training step page-faults its activations in again: 3-8x slower CPU steps
    measured in benchmarks/train_throughput.py). Same effect as MALLOC_MMAP_THRESHOLD_ and
    MALLOC_TRIM_THRESHOLD_ in the environment; a no-op where glibc is absent."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-1, 1 << 36)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 1 << 30)  # M_MMAP_THRESHOLD (glibc caps it at 32 MiB on 64-bit)
    except (OSError, AttributeError):
        pass


def init_distributed(device: torch.device) -> tuple[int, int, torch.device]:
    """Under torchrun (WORLD_SIZE > 1): one process per device, gloo on CPU, NCCL on GPUs."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, device
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda" and local >= torch.cuda.device_count():
        raise GrocError(
            f"torchrun started process {local} on this node but only {torch.cuda.device_count()} CUDA device(s) are "
            "visible: use --nproc_per_node at most that many, or `device` cpu for CPU processes (gloo)")
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank()
    if device.type == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    return rank, world, device
