"""The CPU this process runs on: what /proc/cpuinfo says of it and which kernels torch dispatches to.

One reading serves the environment record (``environment.py``: model and vector extensions) and
the choice of matrix-product library (``models/kernels.py``: vendor and torch's capability), so
the two cannot disagree about the machine. Free of the rest of the package; torch is imported
only by ``torch_capability``.
"""

from __future__ import annotations

import functools
import platform
from typing import NamedTuple


class CpuInfo(NamedTuple):
    model: str  # "AMD EPYC 9B45"; platform's processor name where /proc/cpuinfo is missing
    vendor: str  # "AuthenticAMD", "GenuineIntel"; "" where unknown
    flags: frozenset[str]  # every flag of the first processor ("avx2", "avx512f", ...)


@functools.lru_cache(maxsize=1)
def cpuinfo() -> CpuInfo:
    """The first processor's model, vendor and flags from /proc/cpuinfo (read once); platform's
    processor name, no vendor and no flags where there is no such file (macOS, Windows)."""
    model = vendor = ""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "Model", "cpu model") and not model:
                    model = value.strip()
                elif key == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = set(value.split())
                if model and flags and vendor:
                    break
    except OSError:
        pass
    return CpuInfo(model or platform.processor() or platform.machine(), vendor, frozenset(flags))


def torch_capability() -> str | None:
    """The CPU kernels torch dispatches to here ("AVX512", "AVX2", "DEFAULT"), None where torch cannot say."""
    import torch

    return getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", lambda: None)()


#: /proc/cpuinfo flags of bfloat16 arithmetic in hardware: Intel's AMX and AVX512_BF16 (also AMD's Zen 4),
#: and Arm's BF16 extension.
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16", "bf16"})


def has_bf16() -> bool | None:
    """Whether this CPU computes in bfloat16 in hardware (without it torch emulates bfloat16 products, slower
    than float32 ones); None where its flags are unknown (no /proc/cpuinfo: macOS, Windows)."""
    flags = cpuinfo().flags
    return bool(BF16_FLAGS & flags) if flags else None


@functools.lru_cache(maxsize=1)
def bf16_lstm() -> bool:
    """Whether torch's CPU LSTM runs under bfloat16 autocast here: oneDNN's bfloat16 LSTM needs AVX-512 kernels
    (with AVX2 alone it fails to build its primitive), so elsewhere the LSTM runs in float32 under autocast
    (the `amp` setting)."""
    return str(torch_capability() or "").startswith("AVX512")
