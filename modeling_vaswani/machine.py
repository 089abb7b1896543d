"""What machine a number was measured on (not from the paper): CPU model, cores, threads, bf16 support.

Every recorded figure (a training run's record, a benchmark) names its hardware, and a CPU's
speed in bf16 depends on instructions that only some CPUs have: AMX tiles (Intel Sapphire Rapids
and later) or AVX512-BF16 (also recent AMD EPYC). Without either, bf16 matrix products are
emulated and run slower than float32; `bf16_support` says which case this machine is.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

_CPUINFO = Path("/proc/cpuinfo")


def _cpuinfo_field(name: str) -> str | None:
    if not _CPUINFO.is_file():
        return None
    for line in _CPUINFO.read_text(errors="replace").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def cpu_model() -> str:
    """The CPU's model name, e.g. "AMD EPYC 9R14" (platform.processor() where /proc/cpuinfo is absent)."""
    return _cpuinfo_field("model name") or platform.processor() or "unknown CPU"


def cpu_flags() -> set[str]:
    return set((_cpuinfo_field("flags") or "").split())


def bf16_support() -> str:
    """"amx" (AMX-BF16 tiles), "avx512_bf16", or "none" (bf16 is emulated: slower than float32)."""
    flags = cpu_flags()
    if "amx_bf16" in flags:
        return "amx"
    if "avx512_bf16" in flags:
        return "avx512_bf16"
    return "none"


def describe_machine() -> dict:
    """The facts recorded beside every measured number (CPU, cores, threads, bf16, GPU, versions)."""
    import torch
    import transformers

    info = {
        "cpu": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cpu_bf16": bf16_support(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def hardware_line(info: dict | None = None) -> str:
    """One line for a run record or a model card: the GPU if there is one, else the CPU and threads."""
    info = info or describe_machine()
    if "gpu" in info:
        return info["gpu"]
    threads = info["torch_threads"]
    return f"CPU: {info['cpu']}, {threads} thread{'s' * (threads != 1)}, bf16: {info['cpu_bf16']}"
