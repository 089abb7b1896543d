"""Checkpoint averaging of §6.1."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from checks import assert_names
from modeling_vaswani.training import checkpoint_averaging
from modeling_vaswani.training.checkpoint_averaging import (
    CheckpointMismatchError,
    average_checkpoints,
    average_state_dicts,
    complete_checkpoints,
    find_checkpoints,
)

REPO = Path(__file__).resolve().parents[2]
CONFIG = {"model_type": "vaswani", "d_model": 4, "vocab_size": 10, "num_layers": 1}


def test_elementwise_mean_of_three_state_dicts():
    dicts = [
        {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([[0.0]])},
        {"w": torch.tensor([4.0, 5.0]), "b": torch.tensor([[3.0]])},
        {"w": torch.tensor([7.0, -1.0]), "b": torch.tensor([[6.0]])},
    ]
    averaged = average_state_dicts(dicts)
    assert torch.equal(averaged["w"], torch.tensor([4.0, 2.0]))
    assert torch.equal(averaged["b"], torch.tensor([[3.0]]))


def test_dtype_is_kept_and_integer_buffers_are_not_averaged():
    dicts = [
        {"h": torch.tensor([1.0, 2.0], dtype=torch.bfloat16), "n": torch.tensor([1])},
        {"h": torch.tensor([2.0, 4.0], dtype=torch.bfloat16), "n": torch.tensor([4])},
    ]
    averaged = average_state_dicts(dicts)
    assert averaged["h"].dtype == torch.bfloat16
    assert torch.equal(averaged["h"], torch.tensor([1.5, 3.0], dtype=torch.bfloat16))
    assert torch.equal(averaged["n"], torch.tensor([4]))


def test_mismatched_shapes_name_the_tensor_and_checkpoint():
    dicts = [{"encoder.w": torch.zeros(2)}, {"encoder.w": torch.zeros(2)}, {"encoder.w": torch.zeros(3)}]
    with pytest.raises(ValueError, match=r"checkpoint 2.*'encoder\.w'.*shape"):
        average_state_dicts(dicts)


def test_mismatched_keys_name_the_tensor():
    with pytest.raises(ValueError) as error:
        average_state_dicts([{"a": torch.zeros(1), "b": torch.zeros(1)}, {"a": torch.zeros(1)}])
    assert_names(error, "checkpoint 1", "'b'")
    with pytest.raises(ValueError) as error:
        average_state_dicts([{"a": torch.zeros(1)}, {"a": torch.zeros(1), "c": torch.zeros(1)}])
    assert_names(error, "checkpoint 1", "'c'")


def test_empty_list_is_rejected():
    with pytest.raises(ValueError, match="at least one"):
        average_state_dicts([])


def _make_checkpoint(folder: Path, value: float, config=CONFIG, extra_files=True) -> Path:
    folder.mkdir(parents=True)
    save_file({"w": torch.full((2, 2), value), "b": torch.tensor([value])}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(config))
    if extra_files:
        (folder / "generation_config.json").write_text("{}")
        (folder / "tokenizer.json").write_text("{}")
        (folder / "modeling_vaswani.py").write_text("# code\n")
        for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "training_args.bin"):
            (folder / name).write_bytes(b"state")
    return folder


def test_find_checkpoints_sorts_numerically(tmp_path):
    for step in (9, 10, 100, 8):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-final").mkdir()
    (tmp_path / "runs").mkdir()
    assert [p.name for p in find_checkpoints(tmp_path, 3)] == ["checkpoint-9", "checkpoint-10", "checkpoint-100"]
    with pytest.raises(ValueError, match="only 4"):
        find_checkpoints(tmp_path, 5)
    with pytest.raises(FileNotFoundError):
        find_checkpoints(tmp_path / "missing", 1)


def test_complete_checkpoints_names_the_incomplete_ones(tmp_path):
    for step in (20, 3):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-30").mkdir()
    complete, incomplete = complete_checkpoints(tmp_path)
    assert [p.name for p in complete] == ["checkpoint-3", "checkpoint-20"] and incomplete == ["checkpoint-30"]


def test_average_checkpoints_writes_mean_and_model_files(tmp_path):
    dirs = [_make_checkpoint(tmp_path / f"checkpoint-{i}", v) for i, v in ((1, 1.0), (2, 2.0), (3, 6.0))]
    out = tmp_path / "averaged"
    weights = average_checkpoints(dirs, out)
    assert weights == out / "model.safetensors"
    tensors = load_file(weights)
    assert torch.equal(tensors["w"], torch.full((2, 2), 3.0))
    assert torch.equal(tensors["b"], torch.tensor([3.0]))
    files = {p.name for p in out.iterdir()}
    assert {"config.json", "generation_config.json", "tokenizer.json", "modeling_vaswani.py"} <= files
    assert not files & {"optimizer.pt", "scheduler.pt", "rng_state.pth", "trainer_state.json", "training_args.bin"}
    assert json.loads((out / "config.json").read_text()) == CONFIG


def test_average_checkpoints_refuses_different_configs(tmp_path):
    a = _make_checkpoint(tmp_path / "a", 1.0)
    b = _make_checkpoint(tmp_path / "b", 1.0, config=CONFIG | {"d_model": 8})
    with pytest.raises(ValueError, match="d_model"):
        average_checkpoints([a, b], tmp_path / "out")


@pytest.mark.parametrize("difference,name", [({"d_ff": 48}, "d_ff"),
                                             ({"positional_encoding": "learned"}, "positional_encoding")])
def test_averaging_saved_models_that_differ(saved_model_dir, make_model, tmp_path, difference, name):
    """The differing config field is named. Nothing is written."""
    vocab_size = json.loads((saved_model_dir / "config.json").read_text())["vocab_size"]
    make_model(vocab_size=vocab_size, **difference).save_pretrained(tmp_path / "other")
    with pytest.raises(CheckpointMismatchError) as error:
        average_checkpoints([saved_model_dir, tmp_path / "other"], tmp_path / "averaged")
    assert_names(error, name)
    assert not (tmp_path / "averaged" / "model.safetensors").exists()


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


@pytest.mark.parametrize("difference", [{"dropout": 0.3}, {"pre_norm": True}, None],
                         ids=["dropout", "pre_norm", "none"])
def test_average_checkpoints_refuses_any_config_difference(tmp_path, difference):
    """Not only the sizes: any field that describes the model, and a config.json only some have."""
    a = _make_checkpoint(tmp_path / "a", 1.0)
    b = _make_checkpoint(tmp_path / "b", 1.0, config=CONFIG | (difference or {}))
    if difference is None:
        (b / "config.json").unlink()
    with pytest.raises(CheckpointMismatchError, match=next(iter(difference)) if difference else "no config.json"):
        average_checkpoints([a, b], tmp_path / "out")
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


def test_average_checkpoints_missing_or_sharded_weights(tmp_path):
    a = _make_checkpoint(tmp_path / "a", 1.0)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="empty"):
        average_checkpoints([a, empty], tmp_path / "out")
    sharded = tmp_path / "sharded"
    sharded.mkdir()
    (sharded / "model.safetensors.index.json").write_text("{}")
    with pytest.raises(ValueError, match="sharded"):
        average_checkpoints([a, sharded], tmp_path / "out")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="broken"):
        average_checkpoints([a, broken], tmp_path / "out")


def _run_cli(*args):
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, str(REPO / "scripts" / "average_checkpoints.py"), *args],
        capture_output=True, text=True, env=env, timeout=120,
    )


@pytest.mark.slow
def test_cli_averages_the_last_checkpoints(tmp_path):
    for step, value in ((5, 100.0), (10, 1.0), (20, 3.0)):
        _make_checkpoint(tmp_path / "run" / f"checkpoint-{step}", value)
    result = _run_cli("--run_dir", str(tmp_path / "run"), "--last", "2", "--output_dir", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "checkpoint-10" in result.stdout and "checkpoint-20" in result.stdout
    assert torch.equal(load_file(tmp_path / "out" / "model.safetensors")["b"], torch.tensor([2.0]))


@pytest.mark.slow
def test_cli_after_a_short_run_averages_what_there_is_or_says_what_to_do(tmp_path):
    run = tmp_path / "run"
    for step, value in ((10, 1.0), (20, 3.0)):
        _make_checkpoint(run / f"checkpoint-{step}", value)
    # The paper's 5 by default: with 2 written, both are averaged, with a note, into run/averaged.
    result = _run_cli("--run_dir", str(run))
    assert result.returncode == 0, result.stderr
    assert "holds 2 complete checkpoints, fewer than the paper's 5; averaging all 2" in result.stderr
    assert torch.equal(load_file(run / "averaged" / "model.safetensors")["b"], torch.tensor([2.0]))
    assert result.stdout.strip().splitlines()[-1] == \
        f"next: python scripts/evaluate_model.py --model {run / 'averaged'} --split test"
    # Asked for 5, it says how many there are and the command that averages them.
    result = _run_cli("--run_dir", str(run), "--last", "5", "--output_dir", str(tmp_path / "out"))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: --last 5: {run} holds 2 complete checkpoints (checkpoint-10, checkpoint-20)")
    assert "pass --last 2" in line
    # With one, there is nothing to average: evaluate the final model instead.
    single = tmp_path / "single"
    _make_checkpoint(single / "checkpoint-5", 1.0)
    result = _run_cli("--run_dir", str(single))
    (line,) = result.stderr.strip().splitlines()
    assert "nothing to average" in line and f"evaluate_model.py --model {single}" in line
