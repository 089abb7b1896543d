"""What the two CPU-thread rules share (not from the paper): training's (training/threads.py) and
translating's (evaluation/cpu_threads.py) — the size below which a model runs fastest on one thread
(their modules give the measurements), the cores this process may run on, and the user's own choice
(--threads, then OMP_NUM_THREADS), which wins over either rule.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Below this many parameters a process trains and translates fastest on one thread (see the tables of
# training/threads.py and evaluation/cpu_threads.py).
SMALL_MODEL_PARAMETERS = 20_000_000


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), or all of the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def explicit_threads(requested: int | None, env: Mapping[str, str]) -> tuple[int, str] | None:
    """(threads, why) when the user chose: --threads first, then OMP_NUM_THREADS; None leaves it to a rule."""
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise ValueError(f"--threads must be a positive integer, got {requested!r}.")
        return requested, "--threads"
    omp = env.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp), "OMP_NUM_THREADS"
    return None
