"""The machine and software an output was made on, recorded in every run's config.json, every
evaluation's JSON and the quickstart's summary (issue 31).

Two machines with the same package versions printed the quickstart's table with different last
digits (tied + unbounded 351.3 against 351.4): one CPU had AVX-512, the other AVX2 only, so torch
and FAISS ran different floating-point kernels. The CPU's vector extensions, the kernels torch
dispatches to (``torch_cpu_capability``) and the thread count are what explain such a difference,
so they are recorded beside the versions.

    from groc_cli.environment import environment
    environment(device="cpu", lexicon=Path("lexicon.parquet"))

Reading it costs a few milliseconds: nothing is imported that the caller has not imported already
except torch, and FAISS's version is read from its installed distribution, not by importing it.
"""

from __future__ import annotations

import functools
import os
import platform
import re
from importlib import metadata
from pathlib import Path

from .cpu import cpuinfo, torch_capability
from .version import __version__

#: The CPU flags (as /proc/cpuinfo names them) that select floating-point kernels in torch and FAISS.
VECTOR_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "asimd", "sve")
#: The fields every record holds (None where they do not apply: no GPU used, no lexicon read).
FIELDS = ("groc", "python", "torch", "faiss", "numpy", "pyarrow", "platform", "cpu", "cpu_flags",
          "torch_cpu_capability", "cpu_matmul", "cpu_count", "threads", "device", "gpu", "wordnet")


def _version(*distributions: str) -> str | None:
    """The installed version of the first of ``distributions`` present, with its name when it is not
    the first (faiss-gpu-cu12 1.x), else None."""
    for i, name in enumerate(distributions):
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        return found if i == 0 else f"{found} ({name})"
    return None


def _gpu(device: str) -> dict | None:
    """The GPU of ``device`` (cuda, cuda:N) with torch's CUDA version and the driver's, else None."""
    if not device.startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    index = torch.device(device).index
    index = torch.cuda.current_device() if index is None else index
    return {"name": torch.cuda.get_device_name(index), "cuda": torch.version.cuda, "driver": _driver()}


@functools.lru_cache(maxsize=1)
def _driver() -> str | None:
    """The NVIDIA kernel driver's version, from /proc (no nvidia-smi needed); None elsewhere."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError:
        return None
    found = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", first)
    return found.group(1) if found else (first.strip() or None)


def wordnet_version(lexicon: Path | str | None) -> str | None:
    """The WordNet version a lexicon table was built from (its Parquet metadata), or None."""
    if lexicon is None:
        return None
    from .artifacts.io import read_metadata

    try:
        return read_metadata(Path(lexicon)).get("wordnet_version")
    except (OSError, ValueError):
        return None


def cpu_flags() -> list[str]:
    """This CPU's VECTOR_FLAGS, in their order (no torch: benchmarks that only time child processes read it too)."""
    flags = cpuinfo().flags
    return [f for f in VECTOR_FLAGS if f in flags]


def environment(device: str = "cpu", lexicon: Path | str | None = None, threads: int | None = None) -> dict:
    """The record (FIELDS, in that order): versions, CPU model and vector extensions, the kernels torch
    uses, the library of the output layer's matrix products on CPU (``models/kernels.py``; None on a
    GPU), cores and threads, the device and its GPU (where one is used), WordNet's version (from
    ``lexicon``, where one is read). ``threads``: the thread count, when not torch's current one."""
    import torch

    from .models.kernels import choice

    info = cpuinfo()
    capability = torch_capability()
    return {
        "groc": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "faiss": _version("faiss-cpu", "faiss-gpu-cu12", "faiss-gpu", "faiss"),
        "numpy": _version("numpy"),
        "pyarrow": _version("pyarrow"),
        "platform": platform.platform(),
        "cpu": info.model,
        "cpu_flags": cpu_flags(),
        "torch_cpu_capability": capability,
        "cpu_matmul": None if str(device).startswith("cuda") else choice(),
        "cpu_count": os.cpu_count(),
        "threads": torch.get_num_threads() if threads is None else threads,
        "device": str(device),
        "gpu": _gpu(str(device)),
        "wordnet": wordnet_version(lexicon),
    }


def describe(record: dict) -> str:
    """One line for a table's footer: 'AMD EPYC 7B13 (AVX2), torch AVX2 kernels, 2 threads; Python
    3.11.2, torch 2.13.0, FAISS 1.15.1, numpy 2.4.6, pyarrow 21.0.0'."""
    have = set(record.get("cpu_flags") or [])
    flags = [name for flag, name in (("avx2", "AVX2"), ("avx512f", "AVX-512"), ("amx_tile", "AMX"), ("sve", "SVE"))
             if flag in have]
    gpu = record.get("gpu")
    where = f"{gpu['name']} (driver {gpu.get('driver')}, CUDA {gpu.get('cuda')}); " if gpu else ""
    kernels = f", torch {record['torch_cpu_capability']} kernels" if record.get("torch_cpu_capability") else ""
    kernels += ", oneDNN matmul" if record.get("cpu_matmul") == "onednn" else ""
    return (f"{where}{record.get('cpu')} ({', '.join(flags) or 'no AVX2'}){kernels}, {record.get('threads')} "
            f"thread{'s' if record.get('threads') != 1 else ''}; Python {record.get('python')}, torch {record.get('torch')}, "
            f"FAISS {record.get('faiss')}, numpy {record.get('numpy')}, pyarrow {record.get('pyarrow')}"
            + (f", WordNet {record['wordnet']}" if record.get("wordnet") else ""))
