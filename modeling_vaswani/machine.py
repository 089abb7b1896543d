"""What machine a number was measured on (not from the paper), and whether it computes bf16 fast: only with
AMX tiles (Intel Sapphire Rapids and later) or AVX512-BF16 (also recent AMD EPYC); elsewhere the products are
emulated, slower than float32, and a run asked for bf16 says so (`slow_bf16_warning`)."""

from __future__ import annotations

import os
import platform
import sysconfig
import time
from pathlib import Path

_CPUINFO = Path("/proc/cpuinfo")


def _cpuinfo_field(name: str) -> str | None:
    for line in _CPUINFO.read_text(errors="replace").splitlines() if _CPUINFO.is_file() else ():
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
    flags = cpu_flags()
    return "amx" if "amx_bf16" in flags else "avx512_bf16" if "avx512_bf16" in flags else "none"


def slow_bf16_warning(asked: str = "--bf16", consequence: str = "it runs as asked",
                      support: str | None = None) -> str | None:
    """One line saying that bf16 (`asked`) will be slower than float32 on this CPU, or None when it is not
    (`support`: bf16_support()'s answer, read from the CPU when None)."""
    if (bf16_support() if support is None else support) != "none":
        return None
    return (f"{asked} on a CPU ({cpu_model()}) with neither AMX nor AVX512-BF16: bf16 matrix products are "
            f"emulated, so this is slower than float32 would be ({consequence})")


def fastest(runs: dict, rounds: int, clock=time.perf_counter) -> dict:
    """{name: best seconds of `rounds`}: each of `runs` once untimed, then timed in turns (A B, B A, ...)."""
    for run in runs.values():
        run()
    seconds = {name: [] for name in runs}
    order = list(runs)
    for _ in range(rounds):
        for name in order:
            began = clock()
            runs[name]()
            seconds[name].append(clock() - began)
        order.reverse()
    return {name: min(times) for name, times in seconds.items()}


def cpp_compiler() -> str | None:
    """The C++ compiler torch.compile's CPU backend (inductor) would build its kernels with, or None where it
    finds none or Python's headers are missing (each kernel is built as a Python extension)."""
    from torch._inductor.cpp_builder import get_cpp_compiler

    if not Path(sysconfig.get_path("include"), "Python.h").is_file():
        return None
    try:
        return get_cpp_compiler()
    except Exception:  # inductor's own error when it finds none
        return None


def describe_machine() -> dict:
    """The facts recorded beside every measured number (CPU, cores, threads, bf16, GPU, versions)."""
    import torch
    import transformers

    info = {"cpu": cpu_model(), "cpu_cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "cpu_bf16": bf16_support(), "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def hardware_line(info: dict) -> str:
    """One line for a run record or a model card, of describe_machine(): the GPU if any, else the CPU and threads."""
    if "gpu" in info:
        return info["gpu"]
    threads = info["torch_threads"]
    return f"CPU: {info['cpu']}, {threads} thread{'s' * (threads != 1)}, bf16: {info['cpu_bf16']}"
