"""How many CPU threads a training process uses (not from the paper).

PyTorch starts one thread per core for its matrix products. A small model's products are too
short to split well, and on a machine shared with other programs, or with other data-parallel
processes, the threads mostly wait for each other. Measured on a 2-core AMD EPYC that others were
using too, one Adam step took:

    preset   parameters   tokens per batch   1 thread   2 threads
    tiny        0.3 M          4,096           0.97 s     3.42 s
    small       7.6 M          4,096           9.3 s     15.5 s
    base       48.2 M          1,024           6.4 s      3.9 s

Hence the rule of `default_threads`: one thread per process for a model under 20 million
parameters; above that, the cores this process may run on, shared among the training processes
on this machine. OMP_NUM_THREADS, when set, wins over the rule, and an explicit count (train.py's
--threads) over both.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# One threshold and one count of cores for training and translating (evaluation/cpu_threads.py).
from ..thread_choice import SMALL_MODEL_PARAMETERS, available_cores, explicit_threads


def default_threads(num_parameters: int, processes: int = 1, cores: int | None = None) -> tuple[int, str]:
    """The rule: (threads, why) for a model of `num_parameters` trained by `processes` processes on this machine."""
    cores = cores if cores is not None else available_cores()
    if num_parameters < SMALL_MODEL_PARAMETERS:
        return 1, f"1 per process: the model has under {SMALL_MODEL_PARAMETERS // 1_000_000}M parameters"
    share = max(1, cores // max(1, processes))
    per = f" among {processes} processes" if processes > 1 else ""
    return share, f"{cores} cores shared{per}: the model has {SMALL_MODEL_PARAMETERS // 1_000_000}M parameters or more"


def choose_threads(num_parameters: int, requested: int | None = None,
                   env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """(threads, why): `requested` if given, else OMP_NUM_THREADS if set, else `default_threads`.

    The number of training processes on this machine is read from LOCAL_WORLD_SIZE (set by torchrun
    and accelerate).
    """
    env = os.environ if env is None else env
    chosen = explicit_threads(requested, env)
    if chosen is not None:
        return chosen
    processes = int(env.get("LOCAL_WORLD_SIZE", "1") or 1)
    return default_threads(num_parameters, processes)


def use_threads(count: int) -> None:
    """Set PyTorch's thread count for this process's matrix products."""
    import torch

    torch.set_num_threads(count)
