"""Where a command runs: the device, the process group under torchrun, the allocator.

Kept apart from training and evaluation so that both use it without importing each other.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from .errors import GrocError


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise GrocError("--device cuda: no CUDA device is available here; use --device cpu")
    if name not in ("cpu",) and not name.startswith("cuda"):
        raise GrocError(f"--device {name!r}: expected auto, cpu, cuda or cuda:N")
    return torch.device(name)


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
            "visible: use --nproc_per_node at most that many, or --device cpu for CPU processes (gloo)")
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank()
    if device.type == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    return rank, world, device
