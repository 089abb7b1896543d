"""run_folder: what an earlier run left in a folder, and the lock that keeps two runs out of one."""

import json
import os
import socket
import subprocess
import sys

import pytest

from modeling_vaswani.training.run_folder import LOCK_NAME, FolderInUseError, RunLock, clear_earlier_run, earlier_run
from modeling_vaswani.training.run_record import RUN_INFO_NAME


def _earlier_run(folder):
    for step in (10, 20):
        (folder / f"checkpoint-{step}").mkdir(parents=True)
        (folder / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (folder / "checkpoint-30").mkdir()  # killed while saving: no trainer_state.json
    (folder / "averaged").mkdir()
    for name in ("model.safetensors", RUN_INFO_NAME, "eval_results.json", "notes.txt"):
        (folder / name).write_text("x")


def test_an_earlier_run_is_found_and_cleared_but_other_files_stay(tmp_path):
    assert earlier_run(tmp_path / "missing") == ([], None)
    assert earlier_run(tmp_path) == ([], None)
    (tmp_path / "notes.txt").write_text("mine")
    assert earlier_run(tmp_path) == ([], None)  # a folder with other files is no earlier run
    _earlier_run(tmp_path)
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
        with pytest.raises(FolderInUseError, match=rf"--output_dir {folder} is in use by another training run "
                                                   rf"\(process {os.getpid()}"):
            RunLock(folder, flag="--output_dir").acquire()
        assert lock.held and folder.is_dir()
        (folder / "model.safetensors").write_text("x")
    assert not (folder / LOCK_NAME).exists() and (folder / "model.safetensors").exists()


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    with RunLock(tmp_path):
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_a_refused_run_leaves_no_folder_behind(tmp_path):
    lock = RunLock(tmp_path / "new").acquire()
    lock.release()
    assert not (tmp_path / "new").exists()
