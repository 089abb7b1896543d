"""The clocks of a training recipe run, wired from its flags (not from the paper): the run record's
minutes always, a checkpoint every --save_every_minutes, and --max_train_minutes as a budget for
the whole run, its closing evaluations and saves included (training/run_clocks.py).

The clocks count from the moment scripts/train.py started, so loading the data, tokenizing and
the closing work all count.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field

from ..run_clocks import RunClock, SaveEveryMinutes, TimeBudget

logger = logging.getLogger("train")  # the script's own log: its lines read "train: ..."


@dataclass
class RunClocks:
    """The callbacks a run trains with: `record` (always), `budget` (with --max_train_minutes)."""

    record: RunClock
    budget: TimeBudget | None = None
    callbacks: list = field(default_factory=list)


def run_clocks(options, output_dir, evaluating: bool, start: float) -> RunClocks:
    """The clocks asked for by --save_every_minutes and --max_train_minutes, counting from `start`."""
    clocks = RunClocks(RunClock(output_dir, start=start))
    clocks.callbacks.append(clocks.record)
    if options.save_every_minutes:
        clocks.callbacks.append(SaveEveryMinutes(options.save_every_minutes))
    if options.max_train_minutes:
        clocks.budget = TimeBudget(options.max_train_minutes, start=start,
                                   evaluations_after=evaluating * (1 + bool(options.average_last)),
                                   saves_after=1 + options.average_last)
        clocks.callbacks.append(clocks.budget)
    return clocks


def estimate_evaluation_seconds(trainer) -> float:
    """Seconds one evaluation of the validation split takes, timed on its first batch.

    The model is untrained, so every translation runs to the length limit: an overestimate that
    the first real evaluation replaces.
    """
    dataset = trainer.eval_dataset
    size = min(len(dataset), trainer.args.per_device_eval_batch_size * trainer.args.world_size)
    began = time.monotonic()
    trainer.predict(dataset.select(range(size)), metric_key_prefix="timing")
    return (time.monotonic() - began) * math.ceil(len(dataset) / size)



def time_one_evaluation(clocks: RunClocks, trainer, options) -> None:
    """Give the budget its first estimate of an evaluation's duration (nothing without a budget)."""
    if clocks.budget is None:
        return
    clocks.budget.evaluation_seconds = estimate_evaluation_seconds(trainer)
    logger.info("--max_train_minutes %g: the whole run, evaluation included (one evaluation ≈ %.0f s, "
                "estimated from one batch)", options.max_train_minutes, clocks.budget.evaluation_seconds)


def report_budget_stop(clocks: RunClocks, options) -> None:
    """Say where the budget stopped training, if it did."""
    if clocks.budget is not None and clocks.budget.stopped_at is not None:
        logger.info("--max_train_minutes %g: stopped at step %d after %.1f minutes, leaving time for the closing work",
                    options.max_train_minutes, *clocks.budget.stopped_at)
