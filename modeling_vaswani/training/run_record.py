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

The minutes are kept by `run_clocks.RunClock`, whose clock also ends a run on a time budget; the
folder the record lives in, and the lock that keeps two runs out of one folder, are `run_folder`'s.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

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
