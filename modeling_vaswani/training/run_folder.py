"""The run folder of scripts/train.py (not from the paper): what an earlier run left in it, and a
lock that keeps two runs out of one folder at the same time.

A run refused on its flags leaves no trace; a run asked to replace an earlier one deletes exactly
what a run writes (its checkpoints, averaged/, logs and results), and other files stay.

Standard library only, so scripts/train.py claims its folder before torch is imported.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
from pathlib import Path

from .run_record import RUN_INFO_NAME

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


def is_main_launch() -> bool:
    """Whether this process is the only one, or the first of a torchrun/accelerate launch."""
    return os.environ.get("RANK", "0") == "0"


def claim_output_dir(options):
    """Lock --output_dir for this run and make sure no earlier run is in it (unless said so)."""
    lock = RunLock(options.output_dir, flag="--output_dir")
    lock.acquire()
    try:
        found, latest = earlier_run(options.output_dir)
        if found and not options.resume_from_checkpoint:
            if not options.overwrite_output_dir:
                going_on = (f", or --resume_from_checkpoint {latest} to go on with it" if latest else "")
                raise ValueError(f"--output_dir {options.output_dir} holds an earlier run ({', '.join(found)}); "
                                 f"add --overwrite_output_dir to replace it{going_on}.")
            clear_earlier_run(options.output_dir)
    except BaseException:
        lock.release()
        raise
    return lock

