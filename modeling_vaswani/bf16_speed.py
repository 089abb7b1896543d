"""What the two bf16 warnings share (not from the paper): training's (training/precision.py) and
translating's (evaluation/fast_path.py) — one line saying that bf16 will be slower than float32 on
this CPU.

A CPU multiplies bf16 matrices fast only with AMX tiles (Intel Sapphire Rapids and later) or
AVX512-BF16 (also recent AMD EPYC), `machine.bf16_support()`; without either the products are
emulated and run slower than float32. A run asked for bf16 on such a CPU says so instead of being
silently slower.
"""

from __future__ import annotations

from .machine import bf16_support, cpu_model


def slow_bf16_warning(asked: str = "--bf16", consequence: str = "it runs as asked", support: str | None = None,
                      cpu: str | None = None) -> str | None:
    """One line saying that bf16 (`asked`) will be slower than float32 on this CPU, or None when the CPU
    has AMX or AVX512-BF16 (`support`: machine.bf16_support()'s answer, read from the CPU when None)."""
    support = bf16_support() if support is None else support
    if support != "none":
        return None
    return (f"{asked} on a CPU ({cpu or cpu_model()}) with neither AMX nor AVX512-BF16: bf16 matrix products are "
            f"emulated, so this is slower than float32 would be ({consequence})")
