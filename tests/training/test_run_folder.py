"""run_folder: the record of a run across invocations, what an earlier run left, the lock on the folder."""

import json
import os
import socket
import subprocess
import sys

import pytest

from modeling_vaswani.training.run_folder import (LOCK_NAME, RUN_INFO_NAME, FolderInUseError, RunLock,
                                                  clear_earlier_run, earlier_run, read_run_info, set_segment_minutes,
                                                  start_segment, summarize)

ABOUT = {"parameters": "1,234", "torch": "2.x", "transformers": "5.x"}
CPU = {"command": "python scripts/train.py --seed 1", "hardware": "CPU: X, 1 thread"}
RESUMED = {"command": "python scripts/train.py --seed 1 --resume_from_checkpoint c", "hardware": "CPU: X, 2 threads"}


@pytest.mark.parametrize("second, hardware, steps", [
    (RESUMED, "CPU: X, 1 thread for 115 minutes; then CPU: X, 2 threads for 12 minutes", None),
    ({**CPU, "command": "again"}, CPU["hardware"], None),  # one machine is named once
    ({**CPU, "command": "again"}, CPU["hardware"], (300, 100))])
def test_a_resumed_run_appends_a_segment_the_summary_adds_up_and_a_fresh_run_starts_over(tmp_path, second, hardware,
                                                                                          steps):
    start_segment(tmp_path, {**CPU, "batching": {"tokens_per_step": {"target": 1000}}}, ABOUT, resuming=False)
    set_segment_minutes(tmp_path, 115, steps=steps and steps[0])
    start_segment(tmp_path, {**second, "batching": {"tokens_per_step": {"target": 2000}}}, ABOUT, resuming=True)
    set_segment_minutes(tmp_path, 12, steps=steps and steps[1])
    summary = summarize(read_run_info(tmp_path))
    assert summary["minutes"] == 127 and summary["command"] == f"{CPU['command']}\n{second['command']}"
    assert summary["hardware"] == hardware and summary["parameters"] == "1,234" and len(summary["segments"]) == 2
    # Each segment's steps times its mean batch, once every segment knows its steps.
    assert summary["target_tokens"] == (steps and steps[0] * 1000 + steps[1] * 2000)
    assert sorted(p.name for p in tmp_path.iterdir()) == [RUN_INFO_NAME]  # no temporary left
    start_segment(tmp_path, CPU, ABOUT, resuming=False)
    assert read_run_info(tmp_path)["segments"] == [{**CPU, "minutes": 0.0}]


def test_an_older_record_reads_as_one_segment_and_a_missing_one_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="run_info.json"):
        read_run_info(tmp_path)
    (tmp_path / RUN_INFO_NAME).write_text(json.dumps({**CPU, **ABOUT}))
    info = read_run_info(tmp_path)
    assert info["segments"] == [{**CPU, "minutes": None}]
    assert summarize(info)["minutes"] is None


def test_an_earlier_run_is_found_and_cleared_but_other_files_stay(tmp_path):
    assert earlier_run(tmp_path / "missing") == ([], None)
    assert earlier_run(tmp_path) == ([], None)
    (tmp_path / "notes.txt").write_text("mine")
    assert earlier_run(tmp_path) == ([], None)  # a folder with other files is no earlier run
    for step in (10, 20):
        (tmp_path / f"checkpoint-{step}").mkdir(parents=True)
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-30").mkdir()  # killed while saving: no trainer_state.json
    (tmp_path / "averaged").mkdir()
    for name in ("model.safetensors", RUN_INFO_NAME, "eval_results.json", "notes.txt"):
        (tmp_path / name).write_text("x")
    found, latest = earlier_run(tmp_path)
    assert found[:2] == ["3 checkpoints", "averaged/"] and len(found) == 4 and latest == tmp_path / "checkpoint-20"
    clear_earlier_run(tmp_path)
    assert earlier_run(tmp_path) == ([], None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_the_lock_keeps_a_second_run_out_and_goes_with_the_first(tmp_path):
    folder = tmp_path / "run"
    with RunLock(folder, flag="--output_dir") as lock:
        holder = json.loads((folder / LOCK_NAME).read_text())
        assert holder["pid"] == os.getpid()
        with pytest.raises(FolderInUseError) as refused:
            RunLock(folder, flag="--output_dir").acquire()
        assert f"--output_dir {folder}" in str(refused.value) and f"process {os.getpid()}" in str(refused.value)
        assert lock.held and folder.is_dir()
        (folder / "model.safetensors").write_text("x")
    assert not (folder / LOCK_NAME).exists() and (folder / "model.safetensors").exists()


def test_a_killed_runs_lock_is_taken_over_and_a_refused_run_leaves_no_folder(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    with RunLock(tmp_path):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    RunLock(tmp_path / "new").acquire().release()
    assert not (tmp_path / "new").exists()
