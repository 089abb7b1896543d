"""The clocks of a training run (not from the paper), Trainer callbacks counting from the moment
scripts/train.py started: `RunClock` keeps the run record's minutes, `TimeBudget` fits the whole run in
--max_train_minutes, `SaveEveryMinutes` checkpoints every --save_every_minutes (§6.1). Under data
parallelism process 0 decides when to stop or save, for all.
"""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import dataclass, field

from transformers import TrainerCallback

from .run_folder import read_run_info, set_segment_minutes

logger = logging.getLogger("train")  # the script's own log: its lines read "train: ..."


class TrainingClock(TrainerCallback):
    """Wall-clock minutes since `start` (a time.monotonic() reading), or else since training began."""

    def __init__(self, start: float | None = None):
        self.start = start

    def on_train_begin(self, args, state, control, **kwargs):
        if self.start is None:
            self.start = time.monotonic()

    def minutes(self) -> float | None:
        return None if self.start is None else (time.monotonic() - self.start) / 60


def agree_across_processes(decision: bool, device=None) -> bool:
    """Process 0's `decision` on every process: each one's own clock could stop it a step apart from the
    others, which would then wait forever in the next all-reduce."""
    import torch
    from accelerate.utils import broadcast  # one process: the tensor as it is

    return bool(broadcast(torch.tensor([int(decision)], device=device or "cpu"), from_process=0).item())


class RunClock(TrainingClock):
    """Keeps the latest segment's minutes (and steps) in run_info.json up to date (main process only)."""

    def __init__(self, output_dir: str | os.PathLike, start: float | None = None):
        super().__init__(start)
        self.output_dir = output_dir
        self.earlier_minutes = 0.0  # the segments before this one, for a resumed run
        self.first_step = self.last_step = None  # this segment's steps

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        try:
            earlier = read_run_info(self.output_dir)["segments"][:-1]
        except FileNotFoundError:  # a Trainer used without scripts/train.py's record
            earlier = []
        self.earlier_minutes = sum(s.get("minutes") or 0.0 for s in earlier)
        self.first_step = self.last_step = getattr(state, "global_step", None)

    def on_log(self, args, state, control, **kwargs):
        # The whole run's wall-clock minutes beside each logged loss and score: time to quality.
        if state.log_history and self.minutes() is not None:
            state.log_history[-1]["run_minutes"] = round(self.earlier_minutes + self.minutes(), 2)

    def record(self, is_main_process: bool = True) -> None:
        """Write the minutes so far (also called once the script's last work is done)."""
        minutes = self.minutes()
        if is_main_process and minutes is not None:
            steps = None if self.first_step is None else self.last_step - self.first_step
            set_segment_minutes(self.output_dir, minutes, steps)

    def on_save(self, args, state, control, **kwargs):
        self.last_step = getattr(state, "global_step", self.last_step)
        self.record(state.is_world_process_zero)

    on_train_end = on_save


# Bytes a checkpoint writes per parameter (float32 weights, Adam's two moments) and a cautious disk speed:
# a save's duration until one has been timed.
CHECKPOINT_BYTES_PER_PARAMETER = 12
DISK_BYTES_PER_SECOND = 100e6
CLOSING_MARGIN = 1.25  # the closing work may take this much longer than timed so far


class TimeBudget(TrainingClock):
    """Ends training (with a checkpoint, an evaluation when on, a logged loss) once the next step and the
    closing work would not fit in `minutes`: a checkpoint, `evaluations_after` evaluations and `saves_after`
    saves. Steps, evaluations and saves are timed as training goes; until then `evaluation_seconds` and the
    model's size at DISK_BYTES_PER_SECOND stand in. Eq. (3) does not depend on the total steps, so an early
    stop leaves the model a longer run would have had at that step."""

    def __init__(self, minutes: float, start: float | None = None, evaluations_after: int = 0,
                 saves_after: int = 0, evaluation_seconds: float | None = None):
        super().__init__(start)
        self.budget, self.evaluations_after, self.saves_after = minutes, evaluations_after, saves_after
        self.evaluation_seconds, self.save_seconds, self.step_seconds = evaluation_seconds, None, 0.0
        self._step_start = None
        self._mark = None  # when the work now being timed (an evaluation, a save) began
        self.stopped_at = None  # (step, minutes) once the budget ended training

    def closing_seconds(self) -> float:
        """The work after the last step: a checkpoint, then the closing work."""
        return CLOSING_MARGIN * ((1 + self.saves_after) * (self.save_seconds or 0.0)
                                 + self.evaluations_after * (self.evaluation_seconds or 0.0))

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        if self.save_seconds is None and model is not None:
            parameters = sum(p.numel() for p in model.parameters())
            self.save_seconds = parameters * CHECKPOINT_BYTES_PER_PARAMETER / DISK_BYTES_PER_SECOND

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        now = self._mark = time.monotonic()
        if self.start is None:
            return control
        if self._step_start is not None:
            self.step_seconds = now - self._step_start
        # What this step still does (an evaluation, a checkpoint already due), the next step, and
        # then the closing work must fit in what is left of the budget.
        next_step = (self.step_seconds + (self.evaluation_seconds or 0.0) * control.should_evaluate
                     + (self.save_seconds or 0.0) * control.should_save)
        elapsed = now - self.start
        if agree_across_processes(elapsed + next_step + self.closing_seconds() >= 60 * self.budget,
                                  getattr(args, "device", None)):
            control.should_training_stop = control.should_save = control.should_log = True
            control.should_evaluate = args.eval_strategy != "no"
            self.stopped_at = (getattr(state, "global_step", None), elapsed / 60)
        return control

    def on_epoch_end(self, args, state, control, **kwargs):
        self._mark = time.monotonic()

    def on_evaluate(self, args, state, control, **kwargs):
        now = time.monotonic()
        if self._mark is not None:
            self.evaluation_seconds = max(self.evaluation_seconds or 0.0, now - self._mark)
        self._mark = now

    def on_save(self, args, state, control, **kwargs):
        now = time.monotonic()
        if self._mark is not None:
            self.save_seconds = now - self._mark
        self._mark = now

    def time_one_evaluation(self, trainer) -> None:
        """The first estimate of an evaluation, from the validation split's first batch (an untrained model
        translates to the length limit: an overestimate the first real evaluation replaces)."""
        dataset = trainer.eval_dataset
        size = min(len(dataset), trainer.args.per_device_eval_batch_size * trainer.args.world_size)
        began = time.monotonic()
        trainer.predict(dataset.select(range(size)), metric_key_prefix="timing")
        self.evaluation_seconds = (time.monotonic() - began) * math.ceil(len(dataset) / size)
        logger.info("--max_train_minutes %g: the whole run, evaluation included (one evaluation ≈ %.0f s, "
                    "estimated from one batch)", self.budget, self.evaluation_seconds)


class SaveEveryMinutes(TrainerCallback):
    """A checkpoint every `minutes` and at the last step (§6.1: "written at 10-minute intervals")."""

    def __init__(self, minutes: float):
        self.interval, self.last_save = minutes, None

    def on_train_begin(self, args, state, control, **kwargs):
        self.last_save = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if self.last_save is None:
            return control
        due = time.monotonic() - self.last_save >= 60 * self.interval or state.global_step >= state.max_steps
        if agree_across_processes(due, getattr(args, "device", None)):
            control.should_save = True
        return control

    def on_save(self, args, state, control, **kwargs):
        self.last_save = time.monotonic()


@dataclass
class RunClocks:
    record: RunClock
    budget: TimeBudget | None = None  # with --max_train_minutes
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
