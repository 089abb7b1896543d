"""Checkpoint averaging of §6.1."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from checks import CHILD_ENV, SCRIPTS, assert_names
from modeling_vaswani.training import checkpoint_averaging
from modeling_vaswani.training.checkpoint_averaging import (CheckpointMismatchError, average_checkpoints,
                                                            average_state_dicts, complete_checkpoints)

CONFIG = {"model_type": "vaswani", "d_model": 4, "vocab_size": 10, "num_layers": 1}
STATE_FILES = {"optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "training_args.bin"}


def test_elementwise_mean_keeps_dtypes_and_the_last_integer_buffer():
    averaged = average_state_dicts([
        {"w": torch.tensor([1.0, 2.0]), "h": torch.tensor([1.0, 2.0], dtype=torch.bfloat16), "n": torch.tensor([1])},
        {"w": torch.tensor([4.0, 5.0]), "h": torch.tensor([2.0, 4.0], dtype=torch.bfloat16), "n": torch.tensor([4])},
        {"w": torch.tensor([7.0, -1.0]), "h": torch.tensor([3.0, 6.0], dtype=torch.bfloat16), "n": torch.tensor([9])},
    ])
    assert torch.equal(averaged["w"], torch.tensor([4.0, 2.0]))
    assert torch.equal(averaged["h"], torch.tensor([2.0, 4.0], dtype=torch.bfloat16))
    assert torch.equal(averaged["n"], torch.tensor([9]))
    with pytest.raises(ValueError, match="at least one"):
        average_state_dicts([])


@pytest.mark.parametrize("dicts, names", [
    ([{"e.w": torch.zeros(2)}, {"e.w": torch.zeros(2)}, {"e.w": torch.zeros(3)}], ["checkpoint 2", "'e.w'", "shape"]),
    ([{"a": torch.zeros(1), "b": torch.zeros(1)}, {"a": torch.zeros(1)}], ["checkpoint 1", "'b'"]),
    ([{"a": torch.zeros(1)}, {"a": torch.zeros(1), "c": torch.zeros(1)}], ["checkpoint 1", "'c'"]),
], ids=["shape", "missing", "extra"])
def test_mismatched_state_dicts_name_the_tensor_and_checkpoint(dicts, names):
    with pytest.raises(CheckpointMismatchError) as error:
        average_state_dicts(dicts)
    assert_names(error, *names)


def _make_checkpoint(folder: Path, value: float, config=CONFIG) -> Path:
    folder.mkdir(parents=True)
    save_file({"w": torch.full((2, 2), value), "b": torch.tensor([value])}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config))
    for name in ("generation_config.json", "tokenizer.json", "modeling_vaswani.py", *STATE_FILES):
        (folder / name).write_text("{}")
    return folder


def test_checkpoints_are_found_by_step_and_incomplete_ones_named(tmp_path):
    for step in (9, 10, 100, 8):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    for name in ("checkpoint-final", "runs", "checkpoint-300"):  # checkpoint-300: no trainer_state.json
        (tmp_path / name).mkdir()
    complete, incomplete = complete_checkpoints(tmp_path)
    assert [p.name for p in complete] == ["checkpoint-8", "checkpoint-9", "checkpoint-10", "checkpoint-100"]
    assert incomplete == ["checkpoint-300"]  # too few asked for: test_faults.py
    with pytest.raises(FileNotFoundError):
        complete_checkpoints(tmp_path / "missing")


def test_average_checkpoints_writes_mean_and_model_files(tmp_path):
    dirs = [_make_checkpoint(tmp_path / f"checkpoint-{i}", v) for i, v in ((1, 1.0), (2, 2.0), (3, 6.0))]
    out = tmp_path / "averaged"
    assert average_checkpoints(dirs, out) == out / "model.safetensors"
    tensors = load_file(out / "model.safetensors")
    assert torch.equal(tensors["w"], torch.full((2, 2), 3.0)) and torch.equal(tensors["b"], torch.tensor([3.0]))
    files = {p.name for p in out.iterdir()}
    assert {"config.json", "generation_config.json", "tokenizer.json", "modeling_vaswani.py"} <= files
    assert not files & STATE_FILES
    assert json.loads((out / "config.json").read_text()) == CONFIG


@pytest.mark.parametrize("difference", [{"d_model": 8}, {"dropout": 0.3}, {"pre_norm": True}, None],
                         ids=["d_model", "dropout", "pre_norm", "no-config"])
def test_average_checkpoints_refuses_any_config_difference(tmp_path, difference):
    a = _make_checkpoint(tmp_path / "a", 1.0)
    b = _make_checkpoint(tmp_path / "b", 1.0, config=CONFIG | (difference or {}))
    if difference is None:
        (b / "config.json").unlink()
    with pytest.raises(CheckpointMismatchError) as error:
        average_checkpoints([a, b], tmp_path / "out")
    assert_names(error, next(iter(difference)) if difference else "no config.json")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spelling", ["same", "other-spelling", "symlink"])
def test_average_checkpoints_refuses_a_checkpoint_given_twice(tmp_path, spelling):
    a = _make_checkpoint(tmp_path / "a", 1.0)
    _make_checkpoint(tmp_path / "b", 3.0)
    twice = {"same": a, "other-spelling": tmp_path / "b" / ".." / "a", "symlink": tmp_path / "link"}[spelling]
    if spelling == "symlink":
        twice.symlink_to(a)
    with pytest.raises(ValueError, match=str(twice)):
        average_checkpoints([a, tmp_path / "b", twice], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_average_checkpoints_replaces_an_earlier_average_only_once_complete(tmp_path, monkeypatch):
    a, b = _make_checkpoint(tmp_path / "a", 1.0), _make_checkpoint(tmp_path / "b", 3.0)
    out = tmp_path / "out"
    average_checkpoints([a, b], out)
    before = {path.name: path.read_bytes() for path in out.iterdir()}
    monkeypatch.setattr(checkpoint_averaging, "save_file", lambda *args, **kwargs: 1 / 0)  # a failure while writing
    with pytest.raises(ZeroDivisionError):
        average_checkpoints([b, a], out)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a", "b", "out"]  # no temporary left


@pytest.mark.parametrize("name, content, error", [
    ("empty", None, FileNotFoundError), ("sharded", "model.safetensors.index.json", ValueError),
    ("pickled", "pytorch_model.bin", ValueError), ("broken", "model.safetensors", ValueError)])
def test_average_checkpoints_missing_sharded_pickled_or_broken_weights(tmp_path, name, content, error):
    folder = tmp_path / name
    folder.mkdir()
    if content:
        (folder / content).write_bytes(b"not a weights file")
    with pytest.raises(error, match=name):
        average_checkpoints([_make_checkpoint(tmp_path / "a", 1.0), folder], tmp_path / "out")


def _run_cli(*args):
    return subprocess.run([sys.executable, str(SCRIPTS / "average_checkpoints.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=CHILD_ENV)


@pytest.mark.slow
def test_cli_averages_the_last_checkpoints_or_says_what_to_do(tmp_path):
    run = tmp_path / "run"
    for step, value in ((5, 100.0), (10, 1.0), (20, 3.0)):
        _make_checkpoint(run / f"checkpoint-{step}", value)
    result = _run_cli("--run_dir", run, "--last", "2", "--output_dir", tmp_path / "out")
    assert result.returncode == 0 and "checkpoint-10" in result.stdout and "checkpoint-20" in result.stdout
    assert torch.equal(load_file(tmp_path / "out" / "model.safetensors")["b"], torch.tensor([2.0]))
    # The paper's 5 by default, with 3 written, and the next step: test_train_script.py.
    result = _run_cli("--run_dir", run, "--last", "5", "--output_dir", tmp_path / "out")
    (line,) = result.stderr.strip().splitlines()
    assert result.returncode != 0 and line.startswith(f"error: --last 5: {run} holds 3 complete checkpoints (")
    assert "pass --last 3" in line
    single = tmp_path / "single"
    _make_checkpoint(single / "checkpoint-5", 1.0)
    (line,) = _run_cli("--run_dir", single).stderr.strip().splitlines()
    assert "nothing to average" in line and f"evaluate_model.py --model {single}" in line
