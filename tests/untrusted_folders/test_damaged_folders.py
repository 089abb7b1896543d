"""A damaged, mistyped, oversized or unparsable model folder: every door refuses it in one error naming it."""

import json
import os
import struct

import pytest
import torch
import transformers.modeling_utils
from safetensors.torch import load_file, save_file
from transformers import BertConfig, GenerationConfig

from checks import DELETE, assert_error_line, assert_names, edit_json, run_script
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.conversion.ctranslate2 import CONVERSION_RECORD, convert_ctranslate2
from modeling_vaswani.conversion.marian import MarianConversionError
from modeling_vaswani.model import strict_json
from modeling_vaswani.model.configuration_vaswani import ALLOW_LARGE_MODELS_ENV
from modeling_vaswani.model.strict_json import JSONFileError, read_json
from modeling_vaswani.training.run_folder import RUN_INFO_NAME

W = "model.safetensors"


# --- config.json and the weights: missing, cut, damaged or of another model --------------------

def _cut(name, size):
    """Keep the first size(length, end of the safetensors header) bytes (8-byte length, then the header)."""
    def damage(folder):
        data = (folder / name).read_bytes()
        (folder / name).write_bytes(data[:size(len(data), 8 + struct.unpack("<Q", data[:8])[0])])
    return damage


def _drop(*names):
    return lambda folder: [(folder / name).unlink() for name in names]


def _config(**changes):
    return lambda folder: edit_json(folder / "config.json", **changes)


def _bert(folder):
    (folder / "config.json").unlink()
    BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=32).save_pretrained(folder)


def _tensors(change):
    return lambda folder: save_file(change(load_file(folder / W)), str(folder / W), metadata={"format": "pt"})


def _retyped(dtype, first_only=False):
    return _tensors(lambda ts: {n: (t * 100).to(dtype) if not first_only or n == min(ts) else t for n, t in ts.items()})


def _extra(name, shape=(16,)):
    return _tensors(lambda tensors: {**tensors, name: torch.zeros(shape)})


def _generation(**changes):
    return lambda folder: edit_json(folder / "generation_config.json", **changes)


FF_BIAS = "model.decoder.layers.0.feed_forward.linear_1.bias"
# Values of the wrong type, JSON's kinds for each kind of field (size, rate, positive, token id, flag, choice):
# the strict dataclass checks every field alike. (Each field's values: tests/model/test_configuration.py.)
WRONG_TYPES = [
    ("d_ff", 32.5), ("num_decoder_layers", "1"), ("vocab_size", None), ("dropout", True), ("dropout", None),
    ("attention_dropout", [0.1]), ("layer_norm_eps", "1e-6"), ("init_std", -0.02), ("eos_token_id", 2.0),
    ("bos_token_id", True), ("share_embeddings", "yes"), ("scale_embedding", None), ("positional_encoding", None),
    ("activation_function", 1), ("is_encoder_decoder", False), ("dropout", {"__float__": "NaN"})]  # transformers' tag
BAD_GENERATION = [("max_output_length_offset", "50"), ("max_output_length_offset", -5),
                  ("max_output_length_offset", 1.5), ("num_beams", "4"), ("num_beams", 0), ("num_beams", 2.5),
                  ("length_penalty", "x"), ("max_new_tokens", "5"), ("early_stopping", "yes"), ("eos_token_id", "2"),
                  ("do_sample", "false")]
ALL = ("from_pretrained", "AutoModel-remote-code", "load_translator")
# name: (damage, the class from_pretrained raises, what its message names, the doors that refuse it)
DAMAGED = {
    "no-config.json": (_drop("config.json"), FileNotFoundError, ["config.json"], (*ALL, "config")),
    # Hugging Face would build a default config, or one of the fields that share a name
    "config.json-of-bert": (_bert, ValueError, ["model_type 'bert'", "'vaswani'"], ["from_pretrained", "config"]),
    # a converter given a model of the other side
    "convert_marian-of-ours": (lambda f: None, MarianConversionError, ["'vaswani' model", "not a Marian"],
                               ["convert_marian"]),
    "export_marian-of-bert": (_bert, MarianConversionError, ["'bert' model", "not one of ours"], ["export_marian"]),
    # the classes know their model type; only a loader that must find it refuses
    "config.json-without-model_type": (_config(model_type=DELETE), ValueError, ["has no model_type"],
                                       ["load_translator"]),
    "no-weights": (_drop(W), FileNotFoundError, [W], ALL),
    "no-weights-nor-generation_config": (_drop("generation_config.json", W), FileNotFoundError, [W], ALL),
    # safetensors finds the damage; one file cut at each part of its layout, and one of garbage
    **{f"weights-{name}": (_cut(W, cut), ValueError, ["{f}/" + W, "is truncated or corrupted"], ALL) for name, cut in {
        "0-bytes": lambda n, h: 0, "in-header": lambda n, h: h // 2, "header-only": lambda n, h: h,
        "last-byte-missing": lambda n, h: n - 1}.items()},
    "weights-zeros": (lambda f: (f / W).write_bytes(bytes(100)), ValueError, ["{f}/" + W, "corrupted"], ALL),
    # weights that would load wrong: another dtype, tensors the config lacks or needs
    "weights-int8": (_retyped(torch.int8), ValueError, ["as I8", "floating point"], ALL),
    **{f"weights-{d}": (_retyped(getattr(torch, d)), ValueError, [f"as {s}"], ALL)
       for d, s in [("uint8", "U8"), ("int32", "I32"), ("float8_e4m3fn", "F8_E4M3"), ("bool", "BOOL")]},
    "weights-one-tensor-int8": (_retyped(torch.int8, first_only=True), ValueError, ["as I8"], ALL),
    "weights-extra-encoder-tensor": (_extra("model.encoder.layers.1.self_attn.q_proj.bias"), ValueError,
                                     ["1 tensors", "does not have"], ALL),
    "weights-extra-decoder-layer": (_extra(FF_BIAS.replace(".0.", ".5.")), ValueError,
                                    [repr(FF_BIAS.replace(".0.", ".5."))], ALL),
    "weights-stray-tensor": (_extra("model.something_else.weight"), ValueError, ["does not have"], ALL),
    "weights-logits-bias": (_extra("final_logits_bias", (1, 250)), ValueError, ["'final_logits_bias'"], ALL),
    "weights-lack-a-tensor": (_tensors(lambda ts: {n: t for n, t in ts.items() if n != FF_BIAS}), ValueError,
                              ["lack 1", f"first: '{FF_BIAS}'"], ALL),
    "config.json-d_ff-unlike-the-weights": (_config(d_ff=48), ValueError, [repr(FF_BIAS), "(32,)", "(48,)"], ALL),
    **{f"config.json-{f}={v!r}": (_config(**{f: v}, **{"tie_word_embeddings": v} if f == "share_embeddings" else {}),
                                  ValueError, [f], ["from_pretrained", "config"]) for f, v in WRONG_TYPES},
    **{f"generation_config.json-{f}={v!r}": (_generation(**{f: v}), ValueError, ["{f}/generation_config.json", f],
                                             ["from_pretrained"]) for f, v in BAD_GENERATION},
}


@pytest.mark.parametrize("case,door", [(case, door) for case, row in DAMAGED.items() for door in row[3]])
def test_a_damaged_folder_never_loads(folder, doors, refused, case, door):
    damage, error_class, names, refusing = DAMAGED[case]
    damage(folder)
    if door in ("from_pretrained", "config") or len(refusing) == 1:  # ours: one line naming what is wrong
        error = refused(error_class, door, folder, *[n.format(f=folder) for n in names])
    else:  # through the Auto classes: the folder, at least
        with pytest.raises((OSError, ValueError)) as error:
            doors[door](folder)
        assert_names(error, folder)
    assert "custom code" not in str(error.value)  # what AutoModel used to say of a folder without model_type


def test_a_caller_may_override_what_does_not_fit(folder):
    """Asked for, mismatched tensors are re-initialised; a generation config given in code skips the file."""
    edit_json(folder / "config.json", d_ff=48)
    assert VaswaniForConditionalGeneration.from_pretrained(folder, ignore_mismatched_sizes=True).config.d_ff == 48
    _generation(num_beams="4")(folder)
    model = VaswaniForConditionalGeneration.from_pretrained(folder, generation_config=GenerationConfig(num_beams=2),
                                                            ignore_mismatched_sizes=True)
    assert model.generation_config.num_beams == 2


def test_a_save_killed_before_the_weights_leaves_a_folder_that_does_not_load(folder, make_model, refused, tmp_path,
                                                                            monkeypatch):
    """Killed before the weights (written last), a save over an earlier model leaves a folder that does not load."""
    original, seen = transformers.modeling_utils.safe_save_file, []

    def recording(tensors, filename, *args, **kwargs):  # the second save is killed as it reaches the weights
        seen.append(sorted(os.listdir(os.path.dirname(filename))))
        if len(seen) > 1:
            raise KeyboardInterrupt
        return original(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", recording)
    make_model().save_pretrained(tmp_path / "m")
    assert {"config.json", "generation_config.json", "configuration_vaswani.py", "modeling_vaswani.py"} <= set(seen[0])
    assert len(seen) == 1 and sorted(os.listdir(tmp_path / "m")) == sorted(seen[0] + [W])
    newer = VaswaniForConditionalGeneration.from_pretrained(folder)
    newer.config.dropout = 0.3
    with pytest.raises(KeyboardInterrupt):
        newer.save_pretrained(folder)
    assert json.loads((folder / "config.json").read_text())["dropout"] == 0.3
    refused(FileNotFoundError, "from_pretrained", folder, W)


# --- sizes that would allocate without bound ---------------------------------------------------

HUGE = {"num_layers": {"num_layers": 100_000}, "num_decoder_layers": {"num_decoder_layers": 5_000},
        "max_position_embeddings": {"max_position_embeddings": 10**9}, "d_ff": {"d_ff": 10**9},
        "d_model": {"d_model": 10**7, "d_k": DELETE, "d_v": DELETE}, "vocab_size": {"vocab_size": 10**10},
        "num_heads": {"num_heads": 100_000, "d_k": 10_000, "d_v": 10_000}}


@pytest.mark.parametrize("door", ["config", "from_pretrained", "AutoModel", "load_translator"])
@pytest.mark.parametrize("case", list(HUGE))
def test_sizes_beyond_the_bounds_are_refused_before_allocating(folder, doors, monkeypatch, case, door):
    monkeypatch.delenv(ALLOW_LARGE_MODELS_ENV, raising=False)
    edit_json(folder / "config.json", **HUGE[case])
    with pytest.raises(ValueError) as error:
        doors[door](folder)
    assert_names(error, f"{case}={HUGE[case][case]}", f"{ALLOW_LARGE_MODELS_ENV}=1")  # and how to mean it
    assert_names(error, *{"AutoModel": [], "load_translator": [folder, "(config.json)"]}.get(door, [folder]))


@pytest.mark.parametrize("case", ["max_position_embeddings", "num_decoder_layers", "vocab_size"])
def test_the_bounds_can_be_lifted_on_purpose_and_only_so(folder, refused, monkeypatch, case):
    monkeypatch.setenv(ALLOW_LARGE_MODELS_ENV, "1")
    edit_json(folder / "config.json", **HUGE[case])
    assert getattr(VaswaniConfig.from_pretrained(folder), case) == HUGE[case][case]  # nothing allocated here
    monkeypatch.delenv(ALLOW_LARGE_MODELS_ENV)
    edit_json(folder / "config.json", **{ALLOW_LARGE_MODELS_ENV: 1, "allow_large_models": True})
    refused(ValueError, "config", folder, f"{case}={HUGE[case][case]}")  # a config.json cannot lift them itself
    # Within the bounds: the paper's sizes, and beyond them in vocabulary and length.
    VaswaniConfig.from_preset("big", vocab_size=250_000, max_position_embeddings=65_536)


# --- a script: one damaged folder gives one error line (the others: the loaders' tests above) ----------

def test_translate_script_reports_a_damaged_model_folder_in_one_line(folder, monkeypatch, capsys):
    DAMAGED["weights-zeros"][0](folder)
    code, err = run_script(monkeypatch, capsys, "translate.py", "--model", folder, "A dog.")
    assert_error_line(code, err, folder, W, "truncated or corrupted")
    assert "custom code" not in err


# --- files that do not parse ------------------------------------------------------------------------

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


# tokenizer.json: read by the tokenizers library, not as strict JSON
BAD_TOKENIZER_FILES = {"not-json": b"{", "truncated": "half", "empty": b"", "a-list": b"[]", "empty-object": b"{}",
                       "model-not-an-object": b'{"model": 3}', "binary": bytes(range(256)) * 4}
UNPARSABLE = [(file, door, case) for file, door in JSON_FILES for case in BAD_FILES] + [
    ("tokenizer.json", door, case) for door in ("load_tokenizer", "load_translator") for case in BAD_TOKENIZER_FILES]


@pytest.mark.parametrize("file,door,case", UNPARSABLE)
def test_every_door_refuses_a_file_that_does_not_parse_naming_it(folder, refused, monkeypatch, file, door, case):
    if file.startswith("ct2/"):
        pytest.importorskip("ctranslate2")
        convert_ctranslate2(folder, folder.parent / "ct2")  # an output may not lie inside the model it reads
        (folder / "ct2").symlink_to(folder.parent / "ct2")
    path = folder / file
    path.parent.mkdir(exist_ok=True)
    content, named = BAD_FILES[case] if file != "tokenizer.json" else (BAD_TOKENIZER_FILES[case], "is not a valid")
    content = path.read_bytes()[: path.stat().st_size // 2] if content == "half" else content
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    if case == "too large":
        monkeypatch.setattr(strict_json, "MAX_BYTES", 50_000)  # the other files of the folder stay below it
    refused(JSONFileError if file != "tokenizer.json" else ValueError, door, folder, path, named)


def test_a_list_is_read_where_a_list_is_expected(tmp_path):
    path = tmp_path / "vocabulary.json"
    path.write_text('["<s>", "</s>", 1.5]')
    assert read_json(path, list) == ["<s>", "</s>", 1.5]
    path.write_text("{}")
    with pytest.raises(JSONFileError) as error:
        read_json(path, list)
    assert_names(error, path, "JSON array, not object")
