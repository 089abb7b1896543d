"""How many CPU threads a process uses for its matrix products (not from the paper): one rule for training and
translating. A small model's products are too short to split well (busy 2-core EPYC, 1 thread vs 2: a tiny-preset
Adam step 0.97 s vs 3.42 s, translating Multi30k validation with the shipped model 7.4–8.7 s vs 46.3–51.3 s; base,
48M: 6.4 s vs 3.9 s), hence one thread under 20M parameters. Above, training shares the cores this process may use
among the machine's training processes (LOCAL_WORLD_SIZE); translating takes the idle cores (cores less the
one-minute load). OMP_NUM_THREADS wins over the rule, --threads over both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Below this many parameters a process trains and translates fastest on one thread.
SMALL_MODEL_PARAMETERS = 20_000_000


def available_cores() -> int:
    try:  # the cores this process may run on
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def idle_cores(cores: int, load: float | None = None) -> int:
    """`cores` less the one-minute load average, between 1 and `cores`."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average on this system
            return cores
    return max(1, min(cores, cores - round(load)))


def choose_threads(num_parameters: int, requested: int | None = None, env: Mapping[str, str] | None = None, *,
                   training: bool = False, cores: int | None = None, load: float | None = None) -> tuple[int, str]:
    """(threads, why) to train or translate a model of `num_parameters`: `requested`, else OMP_NUM_THREADS,
    else the rule above."""
    env = os.environ if env is None else env
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or requested < 1:
            raise ValueError(f"--threads must be a positive integer, got {requested!r}.")
        return requested, "--threads"
    omp = env.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        return int(omp), "OMP_NUM_THREADS"
    limit = SMALL_MODEL_PARAMETERS // 1_000_000
    if num_parameters < SMALL_MODEL_PARAMETERS:
        return 1, f"the model has under {limit}M parameters"
    cores = cores if cores is not None else available_cores()
    if not training:
        return idle_cores(cores, load), f"idle cores of {cores}: the model has {limit}M parameters or more"
    processes = max(1, int(env.get("LOCAL_WORLD_SIZE", "1") or 1))
    among = f" among {processes} processes" if processes > 1 else ""
    return max(1, cores // processes), f"{cores} cores shared{among}: the model has {limit}M parameters or more"


def use_threads(model=None, requested: int | None = None, *, training: bool = False) -> tuple[int, str]:
    """Set PyTorch's thread count for `model` (without parameters(): small); (threads, why)."""
    import torch

    parameters = model.parameters() if callable(getattr(model, "parameters", None)) else ()
    threads, why = choose_threads(sum(parameter.numel() for parameter in parameters), requested, training=training)
    torch.set_num_threads(threads)
    return threads, why
