"""How many CPU threads translating uses (not from the paper).

PyTorch starts one thread per core for its matrix products. Decoding is a long chain of small
products, one token at a time: too short to split well, and on a machine where other programs
keep cores busy the threads mostly wait for each other (one of them descheduled stalls the rest
at every product). Measured on a 2-core AMD EPYC whose other users kept the load average at 3.7
to 5.0, translating Multi30k validation sentences on the CPU (two runs each):

    model                 parameters   decoding, sentences     1 thread       2 threads
    shipped (hub_card/)       2.9 M    beam 4, 200             7.4–8.7 s     46.3–51.3 s
    shipped (hub_card/)       2.9 M    greedy, 200             2.4–3.6 s     19.5–42.0 s
    base preset (untrained)  48.2 M    beam 4, 32 (20 tokens)  8.1–9.9 s     20.8–24.7 s

Hence the rule of `default_threads`: one thread for a model under 20 million parameters (as for
training, training/threads.py); above that, the idle cores: the cores this process may run on
less the one-minute load average, at least one (on the busy machine above: 1, the faster count for
the base model too). OMP_NUM_THREADS, when set, wins over the rule, and
an explicit count (the scripts' --threads) over both. A GPU does not change the count: the CPU
threads then only feed it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# One threshold and one count of cores for training and translating (see the tables of both modules).
from ..thread_choice import SMALL_MODEL_PARAMETERS, available_cores, explicit_threads


def idle_cores(cores: int | None = None, load: float | None = None) -> int:
    """`cores` (default: `available_cores()`) less the one-minute load average, between 1 and `cores`."""
    cores = cores if cores is not None else available_cores()
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # no load average on this system
            return cores
    return max(1, min(cores, cores - round(load)))


def default_threads(num_parameters: int, cores: int | None = None, load: float | None = None) -> tuple[int, str]:
    """The rule: (threads, why) for translating with a model of `num_parameters`."""
    limit = SMALL_MODEL_PARAMETERS // 1_000_000
    if num_parameters < SMALL_MODEL_PARAMETERS:
        return 1, f"the model has under {limit}M parameters"
    cores = cores if cores is not None else available_cores()
    threads = idle_cores(cores, load)
    return threads, f"idle cores of {cores}: the model has {limit}M parameters or more"


def choose_threads(num_parameters: int, requested: int | None = None, env: Mapping[str, str] | None = None,
                   cores: int | None = None, load: float | None = None) -> tuple[int, str]:
    """(threads, why): `requested` if given, else OMP_NUM_THREADS if set, else `default_threads`."""
    chosen = explicit_threads(requested, os.environ if env is None else env)
    return chosen if chosen is not None else default_threads(num_parameters, cores, load)


def use_threads(model, requested: int | None = None) -> tuple[int, str]:
    """Choose the thread count for translating with `model` and set it for PyTorch in this process;
    (threads, why). An object without `parameters()` (another engine standing in for the model)
    counts as a small model."""
    import torch

    parameters = model.parameters() if callable(getattr(model, "parameters", None)) else ()
    threads, why = choose_threads(sum(parameter.numel() for parameter in parameters), requested)
    torch.set_num_threads(threads)
    return threads, why
