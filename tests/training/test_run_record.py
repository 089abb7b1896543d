"""run_record: the record of how a run was made, kept across resumed invocations."""

import json

import pytest

from modeling_vaswani.training.run_record import (
    RUN_INFO_NAME,
    read_run_info,
    set_segment_minutes,
    start_segment,
    summarize,
)

ABOUT = {"parameters": "1,234", "torch": "2.x", "transformers": "5.x"}
CPU = {"command": "python scripts/train.py --seed 1", "hardware": "CPU: X, 1 thread"}
RESUMED = {"command": "python scripts/train.py --seed 1 --resume_from_checkpoint c", "hardware": "CPU: X, 2 threads"}


def test_a_resumed_run_appends_a_segment_and_a_fresh_run_starts_over(tmp_path):
    start_segment(tmp_path, CPU, ABOUT, resuming=False)
    set_segment_minutes(tmp_path, 100.04)
    start_segment(tmp_path, RESUMED, ABOUT, resuming=True)
    set_segment_minutes(tmp_path, 12.26)
    info = read_run_info(tmp_path)
    assert [s["command"] for s in info["segments"]] == [CPU["command"], RESUMED["command"]]
    assert [s["minutes"] for s in info["segments"]] == [100.04, 12.26]
    assert info["parameters"] == "1,234"
    assert not list(tmp_path.glob("*.tmp"))  # written through a temporary file, then renamed

    start_segment(tmp_path, CPU, ABOUT, resuming=False)
    assert read_run_info(tmp_path)["segments"] == [{**CPU, "minutes": 0.0}]


def test_summary_adds_up_the_minutes_and_lists_every_command(tmp_path):
    start_segment(tmp_path, CPU, ABOUT, resuming=False)
    set_segment_minutes(tmp_path, 115)
    start_segment(tmp_path, RESUMED, ABOUT, resuming=True)
    set_segment_minutes(tmp_path, 12)
    summary = summarize(read_run_info(tmp_path))
    assert summary["minutes"] == 127
    assert summary["command"] == f"{CPU['command']}\n{RESUMED['command']}"
    assert summary["hardware"] == "CPU: X, 1 thread for 115 minutes; then CPU: X, 2 threads for 12 minutes"
    assert summary["parameters"] == "1,234" and len(summary["segments"]) == 2


def test_one_machine_is_named_once(tmp_path):
    start_segment(tmp_path, CPU, ABOUT, resuming=False)
    start_segment(tmp_path, {**CPU, "command": "again"}, ABOUT, resuming=True)
    assert summarize(read_run_info(tmp_path))["hardware"] == CPU["hardware"]


def test_an_older_record_reads_as_one_segment_without_minutes(tmp_path):
    (tmp_path / RUN_INFO_NAME).write_text(json.dumps({**CPU, **ABOUT}))
    info = read_run_info(tmp_path)
    assert info["segments"] == [{**CPU, "minutes": None}]
    assert summarize(info)["minutes"] is None


def test_a_missing_record_says_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match="run_info.json: not found"):
        read_run_info(tmp_path)
