"""The output folder of scripts/train.py (not from the paper): the run's record, what an earlier run left
in it, and a lock that keeps two runs out of it at once.

`<output_dir>/run_info.json` says how a model was made, for its card (§5.2 reports training time): one
*segment* per invocation (a first run, then each --resume_from_checkpoint) with its command, hardware line
and minutes; trainer_state.json has no command, machine or minutes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from pathlib import Path

import psutil  # accelerate's dependency: whether the process holding a lock still lives

from ..model.strict_json import read_json
from ..outputs import claim, write_file

RUN_INFO_NAME = "run_info.json"
LOCK_NAME = ".train.lock"
# What a finished or stopped run leaves in its output folder, besides the model files the next run's save
# overwrites anyway.
_RUN_FOLDERS = ("averaged", "runs")
_RUN_FILES = (RUN_INFO_NAME, "trainer_state.json", "all_results.json", "train_results.json", "eval_results.json",
              "model.safetensors", "training_args.bin")


def _write(output_dir, info: dict) -> None:
    with write_file(Path(output_dir) / RUN_INFO_NAME, encoding="utf-8") as handle:  # a killed run keeps the last
        handle.write(json.dumps(info, indent=2, ensure_ascii=False) + "\n")


def read_run_info(run_dir: str | os.PathLike) -> dict:
    """The record of `run_dir`, always with a "segments" list (older records are converted)."""
    path = Path(run_dir) / RUN_INFO_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not found; is {run_dir} a folder written by scripts/train.py?")
    info = read_json(path)
    if "segments" not in info:
        info["segments"] = [{"command": info.pop("command", ""), "hardware": info.pop("hardware", ""),
                             "minutes": None}]
    return info


def start_segment(output_dir: str | os.PathLike, segment: dict, about_model: dict, resuming: bool) -> None:
    """Record a new invocation: a resumed run appends to the record, a fresh one starts it anew."""
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    resumed = resuming and (Path(output_dir) / RUN_INFO_NAME).is_file()
    info = {**(read_run_info(output_dir) if resumed else {"segments": []}), **about_model}
    info["segments"].append({**segment, "minutes": 0.0})
    _write(output_dir, info)


def set_segment_minutes(output_dir: str | os.PathLike, minutes: float, steps: int | None = None) -> None:
    info = read_run_info(output_dir)
    info["segments"][-1]["minutes"] = round(minutes, 3)
    if steps is not None:
        info["segments"][-1]["steps"] = steps
    _write(output_dir, info)


def summarize(info: dict) -> dict:
    """One command block, one hardware line and the minutes summed over the segments that know theirs."""
    segments = info["segments"]
    known = [s["minutes"] for s in segments if s.get("minutes") is not None]
    hardware = [s["hardware"] for s in segments]
    if len(set(hardware)) > 1:
        hardware = [f"{s['hardware']} for {s['minutes']:.0f} minutes" if s.get("minutes") is not None
                    else s["hardware"] for s in segments]
    # Padded target tokens: each segment's steps times its mean §5.1 batch (run_info's "batching").
    tokens = [s["steps"] * s["batching"]["tokens_per_step"]["target"] for s in segments
              if "steps" in s and "tokens_per_step" in s.get("batching", {})]
    return {**{key: value for key, value in info.items() if key != "segments"},
            "command": "\n".join(s["command"] for s in segments), "hardware": "; then ".join(dict.fromkeys(hardware)),
            "minutes": round(sum(known)) if known else None,
            "target_tokens": sum(tokens) if tokens and len(tokens) == len(segments) else None, "segments": segments}


def earlier_run(output_dir: str | os.PathLike) -> tuple[list[str], Path | None]:
    """(what an earlier run left in `output_dir`, its latest complete checkpoint or None)."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return [], None
    from .checkpoint_averaging import complete_checkpoints  # here: transformers only once the flags are parsed

    complete, incomplete = complete_checkpoints(output_dir)
    count = len(complete) + len(incomplete)
    found = [f"{count} checkpoint{'s' * (count > 1)}"] if count else []
    found += [f"{name}/" for name in _RUN_FOLDERS if (output_dir / name).is_dir()]
    found += [name for name in _RUN_FILES if (output_dir / name).is_file()]
    return (found[:3] + [f"{len(found) - 3} more"] if len(found) > 4 else found), (complete[-1] if complete else None)


def clear_earlier_run(output_dir: str | os.PathLike) -> None:
    """Delete what an earlier run left in `output_dir` (see `earlier_run`); other files stay."""
    from .checkpoint_averaging import complete_checkpoints

    output_dir = Path(output_dir)
    complete, incomplete = complete_checkpoints(output_dir)
    for folder in [*complete, *(output_dir / name for name in (*incomplete, *_RUN_FOLDERS))]:
        if folder.is_dir():
            shutil.rmtree(folder)
    for name in _RUN_FILES:
        (output_dir / name).unlink(missing_ok=True)


class FolderInUseError(OSError):
    """The output folder is held by another run (an OSError: the user's to resolve, not a bug)."""


class RunLock:
    """`<output_dir>/.train.lock` (pid and host) while a run uses the folder. Ours, not filelock's: a refusal
    names the process and host, a killed run's lock is taken over, and a folder the lock created and nothing
    filled is removed on release (a run refused on its flags leaves no trace)."""

    def __init__(self, output_dir: str | os.PathLike, flag: str = "output_dir"):
        self.output_dir, self.flag = Path(output_dir), flag
        self.path = self.output_dir / LOCK_NAME
        self.created_folder = self.held = False

    def acquire(self) -> "RunLock":
        self.created_folder = not self.output_dir.exists()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        for _ in range(2):
            try:
                descriptor = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                try:
                    holder = read_json(self.path)
                except (OSError, ValueError):
                    holder = None
                if holder is None or holder.get("host") != me["host"] or psutil.pid_exists(int(holder.get("pid", 0))):
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
            with contextlib.suppress(OSError):
                self.output_dir.rmdir()  # only if empty

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
        self._forget_folder()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def is_main_launch() -> bool:
    """Whether this process is the only one, or the first of a torchrun/accelerate launch."""
    return os.environ.get("RANK", "0") == "0"


def claim_output_dir(options) -> RunLock:
    """Lock --output_dir for this run and make sure no earlier run is in it (unless said so). It must not
    be, hold or lie inside what the run reads, which --overwrite_output_dir would delete before it is read."""
    reads = []
    for name in ("model_name_or_path", "train_source", "train_target", "validation_source", "validation_target",
                 "train_file", "validation_file"):
        value = getattr(options, name, None)
        reads += [(f"--{name}", path) for path in (value if isinstance(value, list) else [value])]
    claim("--output_dir", options.output_dir, reads, folder=True)
    lock = RunLock(options.output_dir, flag="--output_dir").acquire()
    try:
        found, latest = earlier_run(options.output_dir)
        if found and not options.resume_from_checkpoint:
            if not options.overwrite_output_dir:
                going_on = f", or --resume_from_checkpoint {latest} to go on with it" if latest else ""
                raise ValueError(f"--output_dir {options.output_dir} holds an earlier run ({', '.join(found)}); "
                                 f"add --overwrite_output_dir to replace it{going_on}.")
            clear_earlier_run(options.output_dir)
    except BaseException:
        lock.release()
        raise
    return lock
