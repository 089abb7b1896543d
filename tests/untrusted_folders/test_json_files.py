"""Files of a model folder that do not parse: JSON through strict_json's `read_json`, at every door that reads
one, and tokenizer.json."""

import pytest

from checks import assert_names, edit_json
from modeling_vaswani.conversion.ctranslate2 import CONVERSION_RECORD, convert_ctranslate2
from modeling_vaswani.model import strict_json
from modeling_vaswani.model.strict_json import JSONFileError, read_json
from modeling_vaswani.training.run_folder import RUN_INFO_NAME

# (the file, relative to the folder; the door that reads it)
JSON_FILES = [("config.json", "config"), ("config.json", "from_pretrained"),
              ("generation_config.json", "from_pretrained"), ("model.safetensors.index.json", "without weights"),
              ("tokenizer_config.json", "load_tokenizer"), ("config.json", "averaging"), ("config.json", "resuming"),
              (RUN_INFO_NAME, "read_run_info"), ("results.json", "load_results"), ("results.json", "--started_from"),
              (CONVERSION_RECORD, "read_conversion_record"), ("trainer_state.json", "training_facts"),
              ("trainer_state.json", "Trainer resuming"), ("rows/row.json", "table3 read_results"),
              ("ct2/config.json", "CTranslate2")]

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


@pytest.mark.parametrize("case", list(BAD_FILES))
@pytest.mark.parametrize("file,door", JSON_FILES)
def test_every_door_refuses_a_bad_json_file_naming_it(folder, refused, monkeypatch, file, door, case):
    if file.startswith("ct2/"):
        pytest.importorskip("ctranslate2")
        convert_ctranslate2(folder, folder.parent / "ct2")  # an output may not lie inside the model it reads
        (folder / "ct2").symlink_to(folder.parent / "ct2")
    content, named = BAD_FILES[case]
    path = folder / file
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if case == "too large":
        monkeypatch.setattr(strict_json, "MAX_BYTES", 50_000)  # the other files of the folder stay below it
    refused(JSONFileError, door, folder, path, named)


def test_a_list_is_read_where_a_list_is_expected(tmp_path):
    path = tmp_path / "vocabulary.json"
    path.write_text('["<s>", "</s>", 1.5]')
    assert read_json(path, list) == ["<s>", "</s>", 1.5]
    path.write_text("{}")
    with pytest.raises(JSONFileError) as error:
        read_json(path, list)
    assert_names(error, path, "JSON array, not object")


def test_transformers_float_tags_are_not_decoded_into_nan(folder, refused):
    edit_json(folder / "config.json", dropout={"__float__": "NaN"})
    refused(ValueError, "config", folder, "dropout")


# tokenizer.json: read by the tokenizers library, not as strict JSON
BAD_TOKENIZER_FILES = {"not-json": b"{", "truncated": "half", "empty": b"", "a-list": b"[]", "empty-object": b"{}",
                       "model-not-an-object": b'{"model": 3}', "binary": bytes(range(256)) * 4}


@pytest.mark.parametrize("door", ["load_tokenizer", "load_translator"])
@pytest.mark.parametrize("case", list(BAD_TOKENIZER_FILES))
def test_tokenizer_file_that_does_not_parse(folder, refused, case, door):
    path = folder / "tokenizer.json"
    data = BAD_TOKENIZER_FILES[case]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if data == "half" else data)
    refused(ValueError, door, folder, path, "is not", "valid")
