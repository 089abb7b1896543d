"""How many CPU threads a process uses for its matrix products (not from the paper): one rule for
training and translating, `choose_threads`, and `use_threads` to apply it.

PyTorch starts one thread per core. A small model's products are too short to split well, and on a
machine shared with other programs (or other data-parallel processes) the threads mostly wait for
each other: one of them descheduled stalls the rest at every product. Measured on a 2-core AMD
EPYC that others were using too (load average 3.7 to 5.0 while translating):

    training, one Adam step        parameters   tokens per batch          1 thread       2 threads
    tiny preset                        0.3 M      4,096                   0.97 s          3.42 s
    small preset                       7.6 M      4,096                   9.3 s          15.5 s
    base preset                       48.2 M      1,024                   6.4 s           3.9 s

    translating Multi30k validation  parameters   decoding, sentences     1 thread       2 threads
    shipped (hub_card/)                2.9 M      beam 4, 200             7.4–8.7 s     46.3–51.3 s
    shipped (hub_card/)                2.9 M      greedy, 200             2.4–3.6 s     19.5–42.0 s
    base preset (untrained)           48.2 M      beam 4, 32 (20 tokens)  8.1–9.9 s     20.8–24.7 s

Hence the rule: one thread for a model under 20 million parameters. Above that, training takes the
cores this process may run on, shared among the training processes on this machine
(LOCAL_WORLD_SIZE, set by torchrun and accelerate); translating takes the idle cores, those cores
less the one-minute load average, at least one (on the busy machine above: 1, the faster count for
the base model too). OMP_NUM_THREADS, when set, wins over the rule, and an explicit count (the
scripts' --threads) over both. A GPU does not change the count: the CPU threads then only feed it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# Below this many parameters a process trains and translates fastest on one thread (the tables above).
SMALL_MODEL_PARAMETERS = 20_000_000


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), or all of the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def idle_cores(cores: int | None = None, load: float | None = None) -> int:
    """`cores` (default: `available_cores()`) less the one-minute load average, between 1 and `cores`."""
    cores = cores if cores is not None else available_cores()
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average on this system
            return cores
    return max(1, min(cores, cores - round(load)))


def choose_threads(num_parameters: int, requested: int | None = None, env: Mapping[str, str] | None = None, *,
                   training: bool = False, cores: int | None = None, load: float | None = None) -> tuple[int, str]:
    """(threads, why) for training (`training=True`) or translating with a model of `num_parameters`:
    `requested` if given, else OMP_NUM_THREADS if set, else the rule of the module docstring."""
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
    """Choose the thread count for `model` and set it for PyTorch in this process; (threads, why).
    An object without `parameters()` (None, another engine standing in for the model) counts as small."""
    import torch

    parameters = model.parameters() if callable(getattr(model, "parameters", None)) else ()
    threads, why = choose_threads(sum(parameter.numel() for parameter in parameters), requested, training=training)
    torch.set_num_threads(threads)
    return threads, why
