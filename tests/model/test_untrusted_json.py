"""Every JSON file the package reads goes through model/strict_json.py's `read_json`: one test per
kind of bad file, run through every door (a new door is one more line of DOORS)."""

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from benchmarks.table3.runs import read_results, training_facts

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.conversion.ctranslate2 import CONVERSION_RECORD, read_conversion_record
from modeling_vaswani.hub.model_card import load_results
from modeling_vaswani.model import strict_json
from modeling_vaswani.model.strict_json import JSONFileError, read_json
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.checkpoint_averaging import _check_configs
from modeling_vaswani.training.recipe.run import check_resumed_model
from modeling_vaswani.training.run_folder import RUN_INFO_NAME, read_run_info

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _earlier_training(folder):
    spec = importlib.util.spec_from_file_location("collect_results_under_test", SCRIPTS / "collect_results.py")
    collect_results = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collect_results)
    return collect_results.earlier_training(folder)


def edit_json(path, **changes):
    path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))


def _without_weights(folder):
    (folder / "model.safetensors").unlink()
    return VaswaniForConditionalGeneration.from_pretrained(folder)


def _ctranslate2_engine(folder):
    from modeling_vaswani.evaluation.ctranslate2_engine import load_ctranslate2_translator

    return load_ctranslate2_translator(folder / "ct2", device="cpu", threads=1)


def _resume(folder):
    from transformers import Seq2SeqTrainingArguments

    from modeling_vaswani.training.trainer import VaswaniTrainer

    args = Seq2SeqTrainingArguments(output_dir=str(folder / "run"), report_to="none", use_cpu=True)
    VaswaniTrainer(model=VaswaniForConditionalGeneration.from_pretrained(folder), args=args).train(str(folder))


# door: (the file it reads, relative to the folder; how the package reads it from the folder)
DOORS = {
    "config.json": ("config.json", VaswaniConfig.from_pretrained),
    "config.json of a model": ("config.json", VaswaniForConditionalGeneration.from_pretrained),
    "generation_config.json": ("generation_config.json", VaswaniForConditionalGeneration.from_pretrained),
    "weights index": ("model.safetensors.index.json", _without_weights),
    "tokenizer_config.json": ("tokenizer_config.json", load_tokenizer),
    "checkpoint config (averaging)": ("config.json", lambda folder: _check_configs([folder])),
    "checkpoint config (resuming)": ("config.json", lambda folder: check_resumed_model(None, folder)),
    "run record": (RUN_INFO_NAME, read_run_info),
    "results": ("results.json", lambda folder: load_results(folder / "results.json")),
    "results (--started_from)": ("results.json", _earlier_training),
    "conversion record": (CONVERSION_RECORD, read_conversion_record),
    "trainer state": ("trainer_state.json", training_facts),
    "trainer state (resuming)": ("trainer_state.json", _resume),
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
}


@pytest.fixture
def model_folder(saved_model_dir, tmp_path, request):
    folder = Path(shutil.copytree(saved_model_dir, tmp_path / "model"))
    door = getattr(getattr(request.node, "callspec", None), "params", {}).get("door")
    if door and DOORS[door][0].startswith("ct2/"):
        pytest.importorskip("ctranslate2")
        from modeling_vaswani.conversion.ctranslate2 import convert_ctranslate2

        convert_ctranslate2(folder, folder.parent / "ct2")  # an output may not lie inside the model it reads
        (folder / "ct2").symlink_to(folder.parent / "ct2")
    return folder


@pytest.mark.parametrize("case", list(BAD_FILES))
@pytest.mark.parametrize("door", list(DOORS))
def test_every_door_refuses_a_bad_json_file_naming_it(model_folder, door, case):
    name, read = DOORS[door]
    content, named = BAD_FILES[case]
    path = model_folder / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(JSONFileError) as error:
        read(model_folder)
    message = str(error.value)
    assert str(path) in message and named in message and "\n" not in message, message


@pytest.mark.parametrize("door", list(DOORS))
def test_every_door_refuses_a_file_too_large(model_folder, door, monkeypatch):
    name, read = DOORS[door]
    path = model_folder / name
    path.parent.mkdir(exist_ok=True)
    path.write_text('{"a": 1' + " " * 100_000 + "}")  # the other files of the folder stay below the bound
    monkeypatch.setattr(strict_json, "MAX_BYTES", 50_000)
    with pytest.raises(JSONFileError, match="100008 bytes") as error:
        read(model_folder)
    assert str(path) in str(error.value)


def test_a_list_is_read_where_a_list_is_expected(tmp_path):
    path = tmp_path / "vocabulary.json"
    path.write_text('["<s>", "</s>", 1.5]')
    assert read_json(path, list) == ["<s>", "</s>", 1.5]
    with pytest.raises(JSONFileError, match="JSON array, not object"):
        path.write_text("{}")
        read_json(path, list)


def test_transformers_float_tags_are_not_decoded_into_nan(model_folder):
    """transformers' own reader turns {"__float__": "NaN"} into NaN; ours keeps it an object, refused by the field."""
    path = model_folder / "config.json"
    edit_json(path, dropout={"__float__": "NaN"})
    with pytest.raises(ValueError, match="dropout"):
        VaswaniConfig.from_pretrained(model_folder)
