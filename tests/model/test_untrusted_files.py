"""Files a model folder may bring from anyone, through every door that reads them: JSON through strict_json's
`read_json`, weights indexes naming only .safetensors shards inside the folder, no pickle ever loaded."""

import json
import os
import runpy
import shutil
from pathlib import Path

import pytest
from benchmarks.table3.runs import read_results, training_facts
from checks import SCRIPTS
from safetensors.torch import load_file, save_file

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.conversion.ctranslate2 import CONVERSION_RECORD, read_conversion_record
from modeling_vaswani.evaluation.translation import load_translator
from modeling_vaswani.hub.model_card import load_results
from modeling_vaswani.model import loading, strict_json
from modeling_vaswani.model.strict_json import JSONFileError, read_json
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.checkpoint_averaging import _check_configs
from modeling_vaswani.training.recipe.run import check_resumed_model
from modeling_vaswani.training.run_folder import RUN_INFO_NAME, read_run_info

INDEX = "model.safetensors.index.json"


def pickle_payload(marker):
    """A pickle (protocol 0) that creates `marker` when unpickled."""
    return f"cbuiltins\nopen\n(V{marker}\nVw\ntR.".encode()


def _earlier_training(folder):
    return runpy.run_path(str(SCRIPTS / "collect_results.py"))["earlier_training"](folder)


def _without_weights(folder):
    (folder / "model.safetensors").unlink()
    return VaswaniForConditionalGeneration.from_pretrained(folder)


def _ctranslate2_engine(folder):
    from modeling_vaswani.evaluation.ctranslate2_engine import load_ctranslate2_translator

    return load_ctranslate2_translator(folder / "ct2", device="cpu", threads=1)


def _trainer(model, folder):
    from transformers import Seq2SeqTrainingArguments

    from modeling_vaswani.training.trainer import VaswaniTrainer

    args = Seq2SeqTrainingArguments(output_dir=str(folder / "run"), report_to="none", use_cpu=True)
    return VaswaniTrainer(model=model, args=args)


# door: (the file it reads, relative to the folder; how the package reads it from the folder)
JSON_DOORS = {
    "config.json": ("config.json", VaswaniConfig.from_pretrained),
    "config.json of a model": ("config.json", VaswaniForConditionalGeneration.from_pretrained),
    "generation_config.json": ("generation_config.json", VaswaniForConditionalGeneration.from_pretrained),
    "weights index": (INDEX, _without_weights),
    "tokenizer_config.json": ("tokenizer_config.json", load_tokenizer),
    "checkpoint config (averaging)": ("config.json", lambda folder: _check_configs([folder])),
    "checkpoint config (resuming)": ("config.json", lambda folder: check_resumed_model(None, folder)),
    "run record": (RUN_INFO_NAME, read_run_info),
    "results": ("results.json", lambda folder: load_results(folder / "results.json")),
    "results (--started_from)": ("results.json", _earlier_training),
    "conversion record": (CONVERSION_RECORD, read_conversion_record),
    "trainer state": ("trainer_state.json", training_facts),
    "trainer state (resuming)": ("trainer_state.json", lambda folder: _trainer(
        VaswaniForConditionalGeneration.from_pretrained(folder), folder).train(str(folder))),
    "table3 row": ("rows/row.json", read_results),
    "CTranslate2 config.json": ("ct2/config.json", _ctranslate2_engine),
}

# case: (file content, what the one-line error names besides the file)
BAD_FILES = {
    "not JSON": ("{bad", "not valid JSON"),
    "not UTF-8": (b'{"a": "\xff"}', "not valid JSON"),
    "NaN": ('{"a": NaN}', "a is nan"),
    "Infinity": ('{"a": {"b": [1, -Infinity]}}', "a.b[1] is -inf"),
    "too large for a float": ('{"a": 1e999}', "a is inf"),
    "nested too deep": ('{"a": ' + "[" * 40 + "]" * 40 + "}", "levels deep"),
    "nested beyond recursion": ("[" * 100_000, "levels deep"),
    "an array": ("[1, 2]", "JSON object, not array"),
    "too large": ('{"a": 1' + " " * 100_000 + "}", "100008 bytes"),  # a bound of 50,000 bytes (below)
}


@pytest.fixture
def model_folder(saved_model_dir, tmp_path, request):
    folder = Path(shutil.copytree(saved_model_dir, tmp_path / "model"))
    door = getattr(getattr(request.node, "callspec", None), "params", {}).get("door")
    if door in JSON_DOORS and JSON_DOORS[door][0].startswith("ct2/"):
        pytest.importorskip("ctranslate2")
        from modeling_vaswani.conversion.ctranslate2 import convert_ctranslate2

        convert_ctranslate2(folder, folder.parent / "ct2")  # an output may not lie inside the model it reads
        (folder / "ct2").symlink_to(folder.parent / "ct2")
    return folder


@pytest.mark.parametrize("case", list(BAD_FILES))
@pytest.mark.parametrize("door", list(JSON_DOORS))
def test_every_door_refuses_a_bad_json_file_naming_it(model_folder, door, case, monkeypatch):
    name, read = JSON_DOORS[door]
    content, named = BAD_FILES[case]
    path = model_folder / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if case == "too large":
        monkeypatch.setattr(strict_json, "MAX_BYTES", 50_000)  # the other files of the folder stay below it
    with pytest.raises(JSONFileError) as error:
        read(model_folder)
    assert str(path) in str(error.value) and named in str(error.value) and "\n" not in str(error.value)


def test_a_list_is_read_where_a_list_is_expected(tmp_path):
    path = tmp_path / "vocabulary.json"
    path.write_text('["<s>", "</s>", 1.5]')
    assert read_json(path, list) == ["<s>", "</s>", 1.5]
    path.write_text("{}")
    with pytest.raises(JSONFileError, match="JSON array, not object"):
        read_json(path, list)


def test_transformers_float_tags_are_not_decoded_into_nan(model_folder):
    path = model_folder / "config.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "dropout": {"__float__": "NaN"}}))
    with pytest.raises(ValueError, match="dropout"):
        VaswaniConfig.from_pretrained(model_folder)


def _hub_index_first(folder, monkeypatch):  # checked before the shards it names are fetched
    monkeypatch.setattr(loading, "cached_file", lambda name, file, **kwargs: str(folder / file))
    loading.check_hub_index("user/model", {})


def _hub_cache_copy(folder, _=None):  # after from_pretrained fetched it (its files are symlinks)
    loading.check_model_files(folder, generation_config_given=False, local=False)


INDEX_DOORS = {
    "from_pretrained": lambda folder, _: VaswaniForConditionalGeneration.from_pretrained(folder),
    "load_translator": lambda folder, _: load_translator(str(folder), device="cpu"),
    "Hub cache copy": _hub_cache_copy,
    "Hub index first": _hub_index_first,
}
BAD_SHARDS = ["../model.safetensors", "sub/../../model.safetensors", "/tmp/model.safetensors", "pytorch_model.bin",
              "weights.pt", "weights"]


def _sharded(saved_model_dir, tmp_path, shard="weights.safetensors", weight_map=None):
    folder = Path(shutil.copytree(saved_model_dir, tmp_path / "model"))
    tensors = load_file(str(folder / "model.safetensors"))
    save_file(tensors, str(folder / "weights.safetensors"), metadata={"format": "pt"})
    (folder / "model.safetensors").unlink()
    weight_map = {name: shard for name in tensors} if weight_map is None else weight_map
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return folder


@pytest.mark.parametrize("shard", BAD_SHARDS)
@pytest.mark.parametrize("door", list(INDEX_DOORS))
def test_an_index_naming_a_shard_outside_the_folder_or_pickled_is_refused(saved_model_dir, tmp_path, monkeypatch,
                                                                          door, shard):
    folder = _sharded(saved_model_dir, tmp_path, shard)
    marker = tmp_path / "payload-ran"
    (folder / "pytorch_model.bin").write_bytes(pickle_payload(marker))
    with pytest.raises(ValueError, match="shards must be .safetensors files") as error:
        INDEX_DOORS[door](folder, monkeypatch)
    assert repr(shard) in str(error.value) and str(folder / INDEX) in str(error.value)
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
    INDEX_DOORS[door](_sharded(saved_model_dir, tmp_path), None)


@pytest.mark.parametrize("weight_map", [[], {"a": 3}, None])
def test_an_index_without_a_map_of_shard_names_is_refused(saved_model_dir, tmp_path, weight_map):
    folder = _sharded(saved_model_dir, tmp_path)
    (folder / INDEX).write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(ValueError, match="weight_map"):
        VaswaniForConditionalGeneration.from_pretrained(folder)


def test_resuming_from_a_pickled_payload_refuses_it_without_suggesting_weights_only_false(tmp_path, make_model):
    marker, checkpoint = tmp_path / "payload-ran", tmp_path / "checkpoint-1"
    checkpoint.mkdir()
    (checkpoint / "rng_state.pth").write_bytes(pickle_payload(marker))
    with pytest.raises(ValueError, match="pickled objects") as error:
        _trainer(make_model(), tmp_path)._load_rng_state(str(checkpoint))
    assert str(checkpoint) in str(error.value) and "weights_only" not in str(error.value)
    assert error.value.__suppress_context__ and not marker.exists()
