"""How a trained model was made: the record `scripts/train.py` keeps in `<output_dir>/run_info.json`.

Not from the paper; the paper reports its training time (§5.2: 12 hours for the base models on
8 P100 GPUs), and a model card should too. A run is often made of several invocations: one that
was stopped or killed, then `--resume_from_checkpoint`. Each invocation adds a *segment* with its
command, machine and wall-clock minutes, so the card can give every command and the total time:

    {"parameters": "2,875,392", "torch": "...", "transformers": "...",
     "segments": [{"command": "python scripts/train.py ...", "hardware": "CPU: ..., 2 threads, bf16: amx",
                   "minutes": 115.2}, ...]}

A segment's minutes are rewritten at every checkpoint save and at the end of training, so a
killed invocation still counts the time up to its last checkpoint. Older records without
"segments" (one top-level "command" and "hardware") are read as a single segment.

The same clock can end training and time its checkpoints: `TimeBudget` stops it (with a
checkpoint and an evaluation) so that the whole run fits in a set number of minutes, measured
exactly as the record's, and `SaveEveryMinutes` writes a checkpoint every so many minutes (§6.1).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path

from transformers import TrainerCallback

RUN_INFO_NAME = "run_info.json"


def _write(path: Path, info: dict) -> None:
    # Write then rename: a run killed mid-write keeps the previous, complete record.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_run_info(run_dir: str | os.PathLike) -> dict:
    """The record of `run_dir`, always with a "segments" list (older records are converted)."""
    path = Path(run_dir) / RUN_INFO_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; is {run_dir} a folder written by scripts/train.py?")
    info = json.loads(path.read_text(encoding="utf-8"))
    if "segments" not in info:
        info["segments"] = [{"command": info.pop("command", ""), "hardware": info.pop("hardware", ""),
                             "minutes": None}]
    return info


def start_segment(output_dir: str | os.PathLike, segment: dict, about_model: dict, resuming: bool) -> None:
    """Record a new invocation. A resumed run appends to the record; a fresh one starts it anew."""
    path = Path(output_dir) / RUN_INFO_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    info = read_run_info(output_dir) if resuming and path.is_file() else {"segments": []}
    info.update(about_model)
    info["segments"].append({**segment, "minutes": 0.0})
    _write(path, info)


def set_segment_minutes(output_dir: str | os.PathLike, minutes: float) -> None:
    """Set the wall-clock minutes of the latest segment."""
    info = read_run_info(output_dir)
    info["segments"][-1]["minutes"] = round(minutes, 3)
    _write(Path(output_dir) / RUN_INFO_NAME, info)


def summarize(info: dict) -> dict:
    """One command block, one hardware line and the total minutes, for a model card.

    Minutes are summed over the segments that know theirs; None if none does.
    """
    segments = info["segments"]
    known = [s["minutes"] for s in segments if s.get("minutes") is not None]
    hardware = [s["hardware"] for s in segments]
    if len(set(hardware)) > 1:
        hardware = [f"{s['hardware']} for {s['minutes']:.0f} minutes" if s.get("minutes") is not None
                    else s["hardware"] for s in segments]
    summary = {key: value for key, value in info.items() if key != "segments"}
    summary.update(
        command="\n".join(s["command"] for s in segments),
        hardware="; then ".join(dict.fromkeys(hardware)),
        minutes=round(sum(known)) if known else None,
        segments=segments,
    )
    return summary


# --- the run folder ------------------------------------------------------------------------------

LOCK_NAME = ".train.lock"
# What a finished or stopped run leaves in its output folder, besides the model files that the
# next run's save overwrites anyway.
_RUN_FOLDERS = ("averaged", "runs")
_RUN_FILES = (RUN_INFO_NAME, "trainer_state.json", "all_results.json", "train_results.json", "eval_results.json",
              "model.safetensors", "training_args.bin")
_CHECKPOINT_GLOB = "checkpoint-*"


def earlier_run(output_dir: str | os.PathLike) -> tuple[list[str], Path | None]:
    """(what an earlier run left in `output_dir`, its latest complete checkpoint or None)."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return [], None
    checkpoints = sorted((p for p in output_dir.glob(_CHECKPOINT_GLOB) if p.is_dir() and p.name[11:].isdigit()),
                         key=lambda p: int(p.name[11:]))
    found = [f"{len(checkpoints)} checkpoint{'s' * (len(checkpoints) > 1)}"] if checkpoints else []
    found += [f"{name}/" for name in _RUN_FOLDERS if (output_dir / name).is_dir()]
    found += [name for name in _RUN_FILES if (output_dir / name).is_file()]
    if len(found) > 4:
        found = found[:3] + [f"{len(found) - 3} more"]
    complete = [p for p in checkpoints if (p / "trainer_state.json").is_file()]
    return found, (complete[-1] if complete else None)


def clear_earlier_run(output_dir: str | os.PathLike) -> None:
    """Delete what an earlier run left in `output_dir` (see `earlier_run`); other files stay."""
    output_dir = Path(output_dir)
    for folder in [*output_dir.glob(_CHECKPOINT_GLOB), *(output_dir / name for name in _RUN_FOLDERS)]:
        if folder.is_dir():
            shutil.rmtree(folder)
    for name in _RUN_FILES:
        (output_dir / name).unlink(missing_ok=True)


class FolderInUseError(OSError):
    """The output folder is held by another run (an OSError: the user's to resolve, not a bug)."""


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


class RunLock:
    """`<output_dir>/.train.lock` for as long as a run uses the folder, so that two runs never share one.

    The file holds the process id and host. A lock whose process is gone (a run that was killed)
    is taken over. On release, a folder this lock created and nothing else filled is removed
    again, so a run refused on its flags leaves no trace.
    """

    def __init__(self, output_dir: str | os.PathLike, flag: str = "output_dir"):
        self.output_dir = Path(output_dir)
        self.path = self.output_dir / LOCK_NAME
        self.flag = flag
        self.created_folder = False
        self.held = False

    def _holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def acquire(self) -> "RunLock":
        self.created_folder = not self.output_dir.exists()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        for _ in range(2):
            try:
                descriptor = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                holder = self._holder()
                same_host = holder is not None and holder.get("host") == me["host"]
                if holder is None or not same_host or _process_alive(int(holder.get("pid", 0))):
                    self._forget_folder()
                    who = (f"process {holder['pid']} on {holder['host']}, since {holder.get('since')}"
                           if holder else "unknown process")
                    raise FolderInUseError(f"{self.flag} {self.output_dir} is in use by another training run ({who}); "
                                        f"choose another {self.flag}, or delete {self.path} if no run is using it.")
                self.path.unlink(missing_ok=True)  # its process is gone
                continue
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                json.dump(me, handle)
            self.held = True
            return self
        raise FolderInUseError(f"{self.flag} {self.output_dir}: could not take {self.path}.")

    def _forget_folder(self) -> None:
        if self.created_folder:
            try:
                self.output_dir.rmdir()  # only if empty
            except OSError:
                pass

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
        self._forget_folder()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


# --- the clock -------------------------------------------------------------------------------------

class TrainingClock(TrainerCallback):
    """Wall-clock minutes of this invocation: the one clock of RunClock, TimeBudget and SaveEveryMinutes.

    It counts from `start` (a `time.monotonic()` reading; scripts/train.py takes it when it starts,
    so that loading data, evaluating and saving count too) or, without one, from the moment
    training begins.
    """

    def __init__(self, start: float | None = None):
        self.start = start

    def on_train_begin(self, args, state, control, **kwargs):
        if self.start is None:
            self.start = time.monotonic()

    def minutes(self) -> float | None:
        """Minutes since the start; None before there is one."""
        return None if self.start is None else (time.monotonic() - self.start) / 60


def agree_across_processes(decision: bool, device=None) -> bool:
    """The main process's `decision`, on every data-parallel process.

    A decision taken from each process's own clock (stop now, save now) can differ by a step
    between processes; the one that stops would leave the others waiting forever for its share of
    the next gradient all-reduce. Each process calls this at the same step; all get process 0's answer.
    """
    import torch

    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return decision
    if torch.distributed.get_world_size() == 1:
        return decision
    flag = torch.tensor([int(decision)], device=device if device is not None else "cpu")
    torch.distributed.broadcast(flag, src=0)
    return bool(flag.item())


class RunClock(TrainingClock):
    """Keeps the latest segment's minutes in run_info.json up to date (main process only)."""

    def __init__(self, output_dir: str | os.PathLike, start: float | None = None):
        super().__init__(start)
        self.output_dir = output_dir

    def record(self, is_main_process: bool = True) -> None:
        """Write the minutes so far (also called once the script's last work is done)."""
        minutes = self.minutes()
        if is_main_process and minutes is not None:
            set_segment_minutes(self.output_dir, minutes)

    def on_save(self, args, state, control, **kwargs):
        self.record(state.is_world_process_zero)

    def on_train_end(self, args, state, control, **kwargs):
        self.record(state.is_world_process_zero)


# Bytes written per parameter by a checkpoint (float32 weights and Adam's two moments) and a
# cautious disk speed: the estimate of a save's duration until one has been timed.
CHECKPOINT_BYTES_PER_PARAMETER = 12
DISK_BYTES_PER_SECOND = 100e6
# The closing work takes this much longer than timed so far before the budget counts it as done.
CLOSING_MARGIN = 1.25


class TimeBudget(TrainingClock):
    """Ends training so that the run, its closing work included, fits in `minutes` of wall-clock time.

    The closing work is what follows the last step: a checkpoint, `evaluations_after` evaluations
    (the final one, and that of the averaged model) and `saves_after` more saves or reads of a
    model's size (the final model folder, checkpoint averaging). Before each step the budget asks
    whether that step and then the closing work still fit; once they do not, training stops at
    this step, with a checkpoint, an evaluation (when evaluation is on) and a logged loss.

    The durations are timed as training goes: a step (from its start to its end), an evaluation and
    a save (each from the step's end, or the work before it, to the Trainer's on_evaluate/on_save).
    Until an evaluation has been timed, `evaluation_seconds` (an estimate) stands in; until a save
    has, the model's size at `DISK_BYTES_PER_SECOND`. Under several processes the main process
    decides, for all (`agree_across_processes`).

    Eq. (3) does not depend on the total number of steps, so stopping early leaves a model
    trained exactly as a longer run would have been up to that point.
    """

    def __init__(self, minutes: float, start: float | None = None, evaluations_after: int = 0,
                 saves_after: int = 0, evaluation_seconds: float | None = None):
        super().__init__(start)
        if not minutes > 0:
            raise ValueError(f"the time budget must be a positive number of minutes, got {minutes}.")
        self.budget = minutes
        self.evaluations_after = evaluations_after
        self.saves_after = saves_after
        self.evaluation_seconds = evaluation_seconds
        self.save_seconds = None
        self.step_seconds = 0.0
        self._step_start = None
        self._mark = None  # when the work now being timed (an evaluation, a save) began
        self.stopped_at = None  # (step, minutes) once the budget ended training

    def closing_seconds(self) -> float:
        """The estimated duration of the work after the last step: a checkpoint, then the closing work."""
        evaluation = self.evaluation_seconds or 0.0
        save = self.save_seconds or 0.0
        return CLOSING_MARGIN * ((1 + self.saves_after) * save + self.evaluations_after * evaluation)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
        if self.save_seconds is None and model is not None:
            parameters = sum(p.numel() for p in model.parameters())
            self.save_seconds = parameters * CHECKPOINT_BYTES_PER_PARAMETER / DISK_BYTES_PER_SECOND

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        now = time.monotonic()
        self._mark = now
        if self.start is None:
            return control
        if self._step_start is not None:
            self.step_seconds = now - self._step_start
        # What this step still does (an evaluation, a checkpoint already due), the next step, and
        # then the closing work must fit in what is left of the budget.
        evaluation = self.evaluation_seconds or 0.0
        next_step = (self.step_seconds + evaluation * control.should_evaluate
                     + (self.save_seconds or 0.0) * control.should_save)
        elapsed = now - self.start
        stop = elapsed + next_step + self.closing_seconds() >= 60 * self.budget
        if agree_across_processes(stop, getattr(args, "device", None)):
            control.should_training_stop = True
            control.should_save = True
            control.should_log = True
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


class SaveEveryMinutes(TrainingClock):
    """A checkpoint whenever `minutes` of wall-clock time have passed since the last one (§6.1).

    The paper's base models "used a single model obtained by averaging the last 5 checkpoints,
    which were written at 10-minute intervals". The last step of training is saved too, so the
    final weights are the last checkpoint. Under several processes the main process decides, for
    all (`agree_across_processes`): a save is a collective step.
    """

    def __init__(self, minutes: float):
        super().__init__()
        if not minutes > 0:
            raise ValueError(f"the checkpoint interval must be a positive number of minutes, got {minutes}.")
        self.interval = minutes
        self.last_save = None

    def on_train_begin(self, args, state, control, **kwargs):
        super().on_train_begin(args, state, control, **kwargs)
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
