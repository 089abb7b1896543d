"""One rule for the weights a folder names: shards are .safetensors files inside the folder, and
nothing else is unpickled. Run through every door that reads a weights index (a new door is one more
line of DOORS); resuming training, which reads pickled optimizer and RNG state, refuses a payload."""

import json
import os
import shutil
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.evaluation.translation import load_translator
from modeling_vaswani.model import folder_checks

INDEX = "model.safetensors.index.json"


def _hub_cache_copy(folder):
    """The check run on the Hub cache's copy after from_pretrained fetched it (its files are symlinks)."""
    folder_checks.check_model_files(folder, generation_config_given=False, local=False)


def _hub_index_first(folder, monkeypatch):
    """The check of a Hub model's index, fetched before the shards it names."""
    monkeypatch.setattr(folder_checks, "cached_file", lambda name, file, **kwargs: str(folder / file))
    folder_checks.check_hub_index("user/model", {})


DOORS = {
    "from_pretrained": lambda folder, _: VaswaniForConditionalGeneration.from_pretrained(folder),
    "load_translator": lambda folder, _: load_translator(str(folder), device="cpu"),
    "Hub cache copy": lambda folder, _: _hub_cache_copy(folder),
    "Hub index first": _hub_index_first,
}

BAD_SHARDS = {
    "parent": "../model.safetensors",
    "nested parent": "sub/../../model.safetensors",
    "absolute": "/tmp/model.safetensors",
    "pickle": "pytorch_model.bin",
    "pt": "weights.pt",
    "no suffix": "weights",
}


def _sharded(saved_model_dir, tmp_path, shard="weights.safetensors"):
    folder = Path(shutil.copytree(saved_model_dir, tmp_path / "model"))
    weights = folder / "model.safetensors"
    tensors = load_file(str(weights))
    save_file(tensors, str(folder / "weights.safetensors"), metadata={"format": "pt"})
    weights.unlink()
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": {name: shard for name in tensors}}))
    return folder


@pytest.mark.parametrize("shard", list(BAD_SHARDS))
@pytest.mark.parametrize("door", list(DOORS))
def test_an_index_naming_a_shard_outside_the_folder_or_pickled_is_refused(saved_model_dir, tmp_path, monkeypatch,
                                                                          door, shard):
    folder = _sharded(saved_model_dir, tmp_path, BAD_SHARDS[shard])
    marker = tmp_path / "payload-ran"
    # A pickle (protocol 0) that would create `marker` when unpickled, where the index points.
    (folder / "pytorch_model.bin").write_bytes(f"cbuiltins\nopen\n(V{marker}\nVw\ntR.".encode())
    with pytest.raises(ValueError, match="shards must be .safetensors files") as error:
        DOORS[door](folder, monkeypatch)
    assert repr(BAD_SHARDS[shard]) in str(error.value) and str(folder / INDEX) in str(error.value)
    assert not marker.exists()


def test_a_shard_that_is_a_symlink_out_of_a_local_folder_is_refused(saved_model_dir, tmp_path):
    folder = _sharded(saved_model_dir, tmp_path)
    outside = tmp_path / "outside.safetensors"
    (folder / "weights.safetensors").rename(outside)
    os.symlink(outside, folder / "weights.safetensors")
    with pytest.raises(ValueError, match="'weights.safetensors'"):
        VaswaniForConditionalGeneration.from_pretrained(folder)
    _hub_cache_copy(folder)  # the Hub cache's files are symlinks into its blobs folder


@pytest.mark.parametrize("door", ["from_pretrained", "load_translator"])
def test_a_sharded_folder_inside_the_rules_loads(saved_model_dir, tmp_path, door):
    folder = _sharded(saved_model_dir, tmp_path)
    DOORS[door](folder, None)


@pytest.mark.parametrize("weight_map", [[], {"a": 3}, None])
def test_an_index_without_a_map_of_shard_names_is_refused(saved_model_dir, tmp_path, weight_map):
    folder = _sharded(saved_model_dir, tmp_path)
    (folder / INDEX).write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ValueError, match="weight_map"):
        VaswaniForConditionalGeneration.from_pretrained(folder)


def test_resuming_from_a_pickled_payload_refuses_it_without_suggesting_weights_only_false(tmp_path, make_model):
    from transformers import Seq2SeqTrainingArguments

    from modeling_vaswani.training.trainer import VaswaniTrainer

    marker = tmp_path / "payload-ran"
    checkpoint = tmp_path / "checkpoint-1"
    checkpoint.mkdir()
    (checkpoint / "rng_state.pth").write_bytes(f"cbuiltins\nopen\n(V{marker}\nVw\ntR.".encode())
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path / "run"), report_to="none", use_cpu=True)
    trainer = VaswaniTrainer(model=make_model(), args=args)
    with pytest.raises(ValueError, match="pickled objects") as error:
        trainer._load_rng_state(str(checkpoint))
    assert str(checkpoint) in str(error.value) and "weights_only" not in str(error.value)
    assert error.value.__suppress_context__ and not marker.exists()
