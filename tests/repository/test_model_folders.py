"""A model folder is input from a stranger: every door that reads one refuses a damaged, mistyped,
oversized or hostile folder with one clear error naming the folder, the file and the field at
fault, and none of them runs code, unpickles, allocates without bound or loads a wrong model.

The doors: VaswaniConfig / VaswaniForConditionalGeneration.from_pretrained, AutoModelForSeq2SeqLM
(with trust_remote_code: the folder's own copy of the model code), load_translator, load_tokenizer,
check_shipped_code / validate_repository (push_to_hub.py --dry_run), and the scripts translate.py
and evaluate_model.py. Each class of bad folder below is a table of the spellings of it seen or
expected (an interrupted save_pretrained leaves several of them); each test runs a table through
the doors that read that part of the folder.
"""

import io
import json
import shutil
import struct
import sys
import tempfile

import pytest
import torch
import transformers.modeling_utils
from safetensors.torch import load_file, save_file
from transformers import AutoModelForSeq2SeqLM, BertConfig, GenerationConfig

from checks import DELETE, SCRIPTS, assert_error_line, assert_names, copy_folder, edit_json, run_script
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.cli import run_main
from modeling_vaswani.evaluation.translation import load_translator, translate
from modeling_vaswani.hub.repository import check_shipped_code, validate_repository
from modeling_vaswani.model.configuration_vaswani import ALLOW_LARGE_MODELS_ENV
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.checkpoint_averaging import average_checkpoints

REPO = SCRIPTS.parent

MODEL_DOORS = {
    "from_pretrained": VaswaniForConditionalGeneration.from_pretrained,
    "AutoModel-remote-code": lambda path: AutoModelForSeq2SeqLM.from_pretrained(path, trust_remote_code=True),
    "load_translator": lambda path: load_translator(str(path), device="cpu"),
}


def hostile_pickle(marker) -> bytes:
    """A pickle (protocol 0, written out by hand) that creates `marker` when unpickled: the stand-in
    for arbitrary code."""
    return f"cbuiltins\nopen\n(V{marker}\nVw\ntR.".encode()


@pytest.fixture
def no_unpickling(monkeypatch):
    """Every unpickler fails loudly, and is recorded, for the duration of a test."""
    calls = []

    def refused(*args, **kwargs):
        calls.append(args[:1])
        raise AssertionError("an unpickler was called")

    for target in ("torch.load", "pickle.load", "pickle.loads", "pickle.Unpickler"):
        monkeypatch.setattr(target, refused)
    return calls


def test_a_good_folder_loads_through_every_door_without_unpickling(saved_model_dir, tmp_path, no_unpickling):
    """Control for every table below."""
    for load in MODEL_DOORS.values():
        load(saved_model_dir)
    load_tokenizer(saved_model_dir)
    average_checkpoints([saved_model_dir, shutil.copytree(saved_model_dir, tmp_path / "copy")], tmp_path / "averaged")
    model, tokenizer = load_translator(str(saved_model_dir), device="cpu")
    assert model.generate(**tokenizer(["A dog."], return_tensors="pt"), num_beams=1, max_new_tokens=2).shape[0] == 1
    check_shipped_code(saved_model_dir)
    assert no_unpickling == []


def test_the_full_message_of_a_damaged_weights_file(saved_model_dir, tmp_path):
    """The one test that pins wording: what a user reads for a weights file cut short."""
    folder = copy_folder(saved_model_dir, tmp_path)
    (folder / "model.safetensors").write_bytes(b"")
    with pytest.raises(ValueError, match=r"model\.safetensors.* is truncated or corrupted") as error:
        VaswaniForConditionalGeneration.from_pretrained(folder)
    assert "\n" not in str(error.value)


# --- config.json and the weights: missing, cut, damaged or of another model --------------------

def _header_end(data: bytes) -> int:
    # safetensors layout: 8-byte little-endian header length, the JSON header, then the tensor data.
    return 8 + struct.unpack("<Q", data[:8])[0]


def _cut(name, where):
    """Keep the first bytes of a file: a fraction of it, a count (negative: all but), or up to the
    middle or the end of a safetensors header."""
    def damage(folder):
        data = (folder / name).read_bytes()
        if where in ("header-middle", "header-end"):
            size = _header_end(data) // (2 if where == "header-middle" else 1)
        else:
            size = int(len(data) * where) if isinstance(where, float) else where if where >= 0 else len(data) + where
        (folder / name).write_bytes(data[:size])
    return damage


def _drop(*names):
    def damage(folder):
        for name in names:
            (folder / name).unlink()
    return damage


def _write(name, data):
    def damage(folder):
        (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return damage


def _config(**changes):
    return lambda folder: edit_json(folder / "config.json", **changes)


def _bert(folder):
    (folder / "config.json").unlink()
    BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=32).save_pretrained(folder)


def _tensors(change):
    def damage(folder):
        tensors = change(load_file(folder / "model.safetensors"))
        save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return damage


def _retyped(dtype):
    return _tensors(lambda tensors: {name: (t * 100).to(dtype) for name, t in tensors.items()})


def _with_extra(name, shape=(16,)):
    return _tensors(lambda tensors: {**tensors, name: torch.zeros(shape)})


FF_BIAS = "model.decoder.layers.0.feed_forward.linear_1.bias"


def _without_ff_bias(tensors):
    return {name: t for name, t in tensors.items() if name != FF_BIAS}


def _first_as_int8(tensors):
    first = sorted(tensors)[0]
    return {**tensors, first: tensors[first].to(torch.int8)}


# name: (damage, the class our own loader raises, what its message names[, the doors that refuse it,
# when not all]). {folder}, {weights} and {config} stand for the paths.
DAMAGED = {
    # config.json: missing (save_pretrained killed while copying the code), cut, of another type
    "no-config.json": (_drop("config.json"), FileNotFoundError, ["config.json", "{folder}"]),
    "config.json-cut": (_cut("config.json", 0.5), ValueError, ["{config}", "JSON"]),
    "config.json-of-bert": (_bert, ValueError, ["model_type 'bert'", "'vaswani'", "{folder}"], ["from_pretrained"]),
    # the classes themselves know the model type; only a loader that must find it refuses
    "config.json-without-model_type": (_config(model_type=DELETE), ValueError, ["has no model_type", "{folder}"],
                                       ["load_translator"]),
    # model.safetensors: not there yet, cut while written, not safetensors at all
    "no-weights": (_drop("model.safetensors"), FileNotFoundError, ["model.safetensors", "{folder}"]),
    "no-weights-nor-generation_config": (_drop("generation_config.json", "model.safetensors"), FileNotFoundError,
                                         ["model.safetensors", "{folder}"]),
    "weights-0-bytes": (_cut("model.safetensors", 0), ValueError, ["{weights}", "truncated or corrupted"]),
    "weights-in-length-field": (_cut("model.safetensors", 5), ValueError, ["{weights}", "truncated or corrupted"]),
    "weights-in-header": (_cut("model.safetensors", "header-middle"), ValueError, ["{weights}", "corrupted"]),
    "weights-header-only": (_cut("model.safetensors", "header-end"), ValueError, ["{weights}", "corrupted"]),
    "weights-half": (_cut("model.safetensors", 0.5), ValueError, ["{weights}", "corrupted"]),
    "weights-last-byte-missing": (_cut("model.safetensors", -1), ValueError, ["{weights}", "corrupted"]),
    "weights-random-bytes": (_write("model.safetensors", bytes(range(256)) * 64), ValueError,
                             ["{weights}", "corrupted"]),
    "weights-zeros": (_write("model.safetensors", b"\x00" * 100), ValueError, ["{weights}", "corrupted"]),
    # weights that would load wrong: another dtype, tensors the config lacks or needs
    "weights-int8": (_retyped(torch.int8), ValueError, ["as I8", "floating point"]),
    "weights-uint8": (_retyped(torch.uint8), ValueError, ["as U8"]),
    "weights-int32": (_retyped(torch.int32), ValueError, ["as I32"]),
    "weights-float8": (_retyped(torch.float8_e4m3fn), ValueError, ["as F8_E4M3"]),
    "weights-bool": (_retyped(torch.bool), ValueError, ["as BOOL"]),
    "weights-one-tensor-int8": (_tensors(_first_as_int8), ValueError, ["as I8"]),
    "weights-extra-encoder-tensor": (_with_extra("model.encoder.layers.1.self_attn.q_proj.bias"), ValueError,
                                     ["1 tensors", "does not have"]),
    "weights-extra-decoder-layer": (_with_extra("model.decoder.layers.5.feed_forward.linear_1.bias"), ValueError,
                                    ["'model.decoder.layers.5.feed_forward.linear_1.bias'"]),
    "weights-stray-tensor": (_with_extra("model.something_else.weight"), ValueError, ["does not have"]),
    "weights-logits-bias-the-config-lacks": (_with_extra("final_logits_bias", (1, 250)), ValueError,
                                             ["'final_logits_bias'"]),
    "weights-lack-a-tensor": (_tensors(_without_ff_bias), ValueError, ["lack 1", f"first: '{FF_BIAS}'"]),
    "config.json-d_ff-unlike-the-weights": (_config(d_ff=48), ValueError, [f"'{FF_BIAS}'", "(32,)", "(48,)"]),
}


def _case_doors():
    for case, (_, _, _, *only) in DAMAGED.items():
        yield from ((case, door) for door in (only[0] if only else MODEL_DOORS))


@pytest.mark.parametrize("case,door", list(_case_doors()))
def test_a_damaged_folder_never_loads(saved_model_dir, tmp_path, case, door):
    folder = copy_folder(saved_model_dir, tmp_path)
    damage, error_class, names, *only = DAMAGED[case]
    damage(folder)
    # Our own loader raises the named class; through transformers' Auto classes and
    # load_translator the message still names the folder or file.
    with pytest.raises(error_class if door == "from_pretrained" or only else (OSError, ValueError)) as error:
        MODEL_DOORS[door](folder)
    assert_names(error, folder)
    assert "custom code" not in str(error.value)  # what AutoModel used to say of a folder without model_type
    if door == "from_pretrained" or only:
        assert_names(error, *[n.format(folder=folder, weights=folder / "model.safetensors",
                                       config=folder / "config.json") for n in names])


@pytest.mark.parametrize("case", ["no-config.json", "config.json-of-bert"])
def test_vaswani_config_refuses_what_the_model_refuses(saved_model_dir, tmp_path, case):
    # Hugging Face would build the default config, or one from the fields that share a name.
    folder = copy_folder(saved_model_dir, tmp_path)
    damage, error_class, names, *_ = DAMAGED[case]
    damage(folder)
    with pytest.raises(error_class) as error:
        VaswaniConfig.from_pretrained(folder)
    assert_names(error, *[n.format(folder=folder) for n in names])


def test_mismatched_sizes_load_when_asked_for(saved_model_dir, tmp_path):
    # Asked for explicitly, the mismatched tensors are re-initialised as in transformers.
    folder = copy_folder(saved_model_dir, tmp_path)
    edit_json(folder / "config.json", d_ff=48)
    assert VaswaniForConditionalGeneration.from_pretrained(folder, ignore_mismatched_sizes=True).config.d_ff == 48


def test_weights_of_a_deeper_model_under_a_shallower_config(saved_model_dir, make_model, tmp_path):
    """Three layers saved, config.json edited back to two: transformers drops the third with a log line."""
    vocab_size = json.loads((saved_model_dir / "config.json").read_text())["vocab_size"]
    make_model(vocab_size=vocab_size, num_layers=3).save_pretrained(tmp_path / "deeper")
    edit_json(tmp_path / "deeper" / "config.json", num_layers=2, num_decoder_layers=2)
    with pytest.raises(ValueError, match=r"\(first: 'model\.(de|en)coder\.layers\.2\."):
        VaswaniForConditionalGeneration.from_pretrained(tmp_path / "deeper")


def test_a_save_interrupted_over_an_earlier_model_never_loads_the_old_weights(saved_model_dir, tmp_path, monkeypatch):
    """Saving over a folder: killed before the new weights are whole, the folder must not load the
    earlier weights under the new config.json (here the new config differs only in dropout, so the
    shapes would fit)."""
    folder = copy_folder(saved_model_dir, tmp_path)
    newer = VaswaniForConditionalGeneration.from_pretrained(folder)
    newer.config.dropout = 0.3

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", killed)
    with pytest.raises(KeyboardInterrupt):
        newer.save_pretrained(folder)
    assert json.loads((folder / "config.json").read_text())["dropout"] == 0.3  # the new config is there
    with pytest.raises(FileNotFoundError) as error:
        VaswaniForConditionalGeneration.from_pretrained(folder)
    assert_names(error, "model.safetensors", folder)


def test_a_folder_with_only_pickled_weights_is_refused_unopened(saved_model_dir, tmp_path, no_unpickling):
    folder = copy_folder(saved_model_dir, tmp_path)
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(hostile_pickle(tmp_path / "payload-ran"))
    for load in (VaswaniForConditionalGeneration.from_pretrained, MODEL_DOORS["load_translator"]):
        with pytest.raises(ValueError) as error:
            load(folder)
        assert_names(error, "only pickled weights", folder)
    with pytest.raises(ValueError) as error:
        VaswaniForConditionalGeneration.from_pretrained(folder, use_safetensors=False)
    assert_names(error, "use_safetensors=False")
    assert no_unpickling == [] and not (tmp_path / "payload-ran").exists()


# --- config.json values of the wrong type, or sizes that would allocate without bound -------------

WRONG_TYPES = [
    ("layer_norm_eps", None), ("layer_norm_eps", "1e-6"), ("layer_norm_eps", -1.0),
    ("dropout", "0.1"), ("dropout", True), ("dropout", None), ("attention_dropout", [0.1]),
    ("label_smoothing", "0.1"),
    ("num_layers", "2"), ("num_layers", 2.0), ("num_decoder_layers", "1"), ("d_model", "16"),
    ("d_ff", 32.5), ("num_heads", True), ("vocab_size", None), ("max_position_embeddings", "1024"),
    ("d_k", "8"), ("d_v", 0),
    ("pad_token_id", "0"), ("eos_token_id", 2.0), ("bos_token_id", True), ("decoder_start_token_id", -1),
    ("share_embeddings", "yes"), ("scale_embedding", None), ("norm_first", "no"), ("use_cache", "false"),
    ("init_std", "x"), ("init_std", -0.02),
    ("positional_encoding", ["sinusoidal"]), ("positional_encoding", None), ("activation_function", 1),
    ("is_encoder_decoder", False),
]


@pytest.mark.parametrize("field,value", WRONG_TYPES, ids=[f"{f}={v!r}" for f, v in WRONG_TYPES])
def test_config_json_value_of_the_wrong_type(saved_model_dir, tmp_path, field, value):
    folder = copy_folder(saved_model_dir, tmp_path)
    changes = {field: value, **({"tie_word_embeddings": value} if field == "share_embeddings" else {})}
    edit_json(folder / "config.json", **changes)
    for load in (VaswaniForConditionalGeneration.from_pretrained, VaswaniConfig.from_pretrained):
        with pytest.raises(ValueError, match=rf"\b{field}\b") as error:
            load(folder)
        assert_names(error, folder)
        assert "\n" not in str(error.value)


HUGE_CONFIGS = {
    "num_layers": {"num_layers": 100_000},
    "num_decoder_layers": {"num_decoder_layers": 5_000},
    "max_position_embeddings": {"max_position_embeddings": 10**9},
    "d_model": {"d_model": 10**7, "d_k": DELETE, "d_v": DELETE},
    "d_ff": {"d_ff": 10**9},
    "vocab_size": {"vocab_size": 10**10},
    "num_heads": {"num_heads": 100_000, "d_k": 10_000, "d_v": 10_000},
}


def _huge_folder(saved_model_dir, tmp_path, case):
    folder = copy_folder(saved_model_dir, tmp_path)
    edit_json(folder / "config.json", **HUGE_CONFIGS[case])
    return folder


@pytest.mark.parametrize("door", ["config", "model", "AutoModel", "load_translator"])
@pytest.mark.parametrize("case", list(HUGE_CONFIGS))
def test_sizes_beyond_the_bounds_are_refused_before_allocating(saved_model_dir, tmp_path, monkeypatch, case, door):
    monkeypatch.delenv(ALLOW_LARGE_MODELS_ENV, raising=False)
    folder = _huge_folder(saved_model_dir, tmp_path, case)
    load = {"config": VaswaniConfig.from_pretrained, "model": VaswaniForConditionalGeneration.from_pretrained,
            "AutoModel": AutoModelForSeq2SeqLM.from_pretrained, "load_translator": MODEL_DOORS["load_translator"]}
    with pytest.raises(ValueError) as error:
        load[door](folder)
    assert_names(error, f"{case}={HUGE_CONFIGS[case][case]}", f"{ALLOW_LARGE_MODELS_ENV}=1")  # how to mean it
    if door != "AutoModel":  # transformers' AutoConfig builds the config without the path
        assert_names(error, folder)
    if door == "load_translator":
        assert_names(error, "(config.json)")


@pytest.mark.parametrize("case", ["max_position_embeddings", "num_decoder_layers", "vocab_size"])
def test_the_bounds_can_be_lifted_on_purpose(saved_model_dir, tmp_path, monkeypatch, case):
    folder = _huge_folder(saved_model_dir, tmp_path, case)
    monkeypatch.setenv(ALLOW_LARGE_MODELS_ENV, "1")
    config = VaswaniConfig.from_pretrained(folder)  # the config only: nothing is allocated here
    assert getattr(config, case) == HUGE_CONFIGS[case][case]


def test_a_config_json_cannot_lift_the_bounds_itself(saved_model_dir, tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOW_LARGE_MODELS_ENV, raising=False)
    folder = _huge_folder(saved_model_dir, tmp_path, "num_layers")
    edit_json(folder / "config.json", **{ALLOW_LARGE_MODELS_ENV: 1, "allow_large_models": True})
    with pytest.raises(ValueError) as error:
        VaswaniConfig.from_pretrained(folder)
    assert_names(error, "num_layers=100000")


def test_the_paper_sizes_are_within_the_bounds(monkeypatch):
    monkeypatch.delenv(ALLOW_LARGE_MODELS_ENV, raising=False)
    for preset in ("base", "big"):
        VaswaniConfig.from_preset(preset, vocab_size=37000)
    VaswaniConfig.from_preset("big", vocab_size=250_000, max_position_embeddings=65_536)


# --- generation_config.json broken or mistyped -----------------------------------------------------

BAD_GENERATION_CONFIGS = {
    "not-json": ("{bad", "JSON"),
    "truncated": ('{"num_beams": 4, "length_pen', "JSON"),
    "empty": ("", "JSON"),
    "not-an-object": ("[4, 0.6]", "JSON object"),
    "offset-string": ({"max_output_length_offset": "50"}, "max_output_length_offset"),
    "offset-negative": ({"max_output_length_offset": -5}, "max_output_length_offset"),
    "offset-float": ({"max_output_length_offset": 1.5}, "max_output_length_offset"),
    "num_beams-string": ({"num_beams": "4"}, "num_beams"),
    "num_beams-zero": ({"num_beams": 0}, "num_beams"),
    "num_beams-float": ({"num_beams": 2.5}, "num_beams"),
    "length_penalty-string": ({"length_penalty": "x"}, "length_penalty"),
    "max_new_tokens-string": ({"max_new_tokens": "5"}, "max_new_tokens"),
    "early_stopping-string": ({"early_stopping": "yes"}, "early_stopping"),
    "eos-string": ({"eos_token_id": "2"}, "eos_token_id"),
    "do_sample-string": ({"do_sample": "false"}, "do_sample"),
}


@pytest.mark.parametrize("case", list(BAD_GENERATION_CONFIGS))
def test_generation_config_json_broken_or_mistyped(saved_model_dir, tmp_path, case):
    folder = copy_folder(saved_model_dir, tmp_path)
    content, name = BAD_GENERATION_CONFIGS[case]
    path = folder / "generation_config.json"
    if isinstance(content, dict):
        edit_json(path, **content)
    else:
        path.write_text(content)
    with pytest.raises(ValueError) as error:
        VaswaniForConditionalGeneration.from_pretrained(folder)
    assert_names(error, path, name)


def test_generation_config_given_in_code_skips_the_file(saved_model_dir, tmp_path):
    folder = copy_folder(saved_model_dir, tmp_path)
    (folder / "generation_config.json").write_text("{bad")
    model = VaswaniForConditionalGeneration.from_pretrained(folder, generation_config=GenerationConfig(num_beams=2))
    assert model.generation_config.num_beams == 2


# --- tokenizer files that do not parse, or a tokenizer that panics ---------------------------------

BAD_TOKENIZER_FILES = {
    "not-json": ("tokenizer.json", b"{"),
    "truncated": ("tokenizer.json", "half"),
    "empty": ("tokenizer.json", b""),
    "a-list": ("tokenizer.json", b"[]"),
    "empty-object": ("tokenizer.json", b"{}"),
    "model-not-an-object": ("tokenizer.json", b'{"model": 3}'),
    "binary": ("tokenizer.json", bytes(range(256)) * 4),
    "config-not-json": ("tokenizer_config.json", b"{bad"),
    "config-latin-1": ("tokenizer_config.json", '{"x": "Grüße"}'.encode("latin-1")),
}


@pytest.mark.parametrize("door", ["load_tokenizer", "load_translator"])
@pytest.mark.parametrize("case", list(BAD_TOKENIZER_FILES))
def test_tokenizer_file_that_does_not_parse(saved_model_dir, tmp_path, case, door):
    folder = copy_folder(saved_model_dir, tmp_path)
    name, data = BAD_TOKENIZER_FILES[case]
    path = folder / name
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2] if data == "half" else data)
    with pytest.raises(ValueError, match="is not (a )?valid") as error:
        (load_tokenizer if door == "load_tokenizer" else MODEL_DOORS["load_translator"])(folder)
    assert_names(error, path)
    assert "\n" not in str(error.value)


# Nested quantifiers: the regex engine backtracks exponentially on a run of "a" that does not end
# the text, and the tokenizers library panics (pyo3 PanicException, a BaseException) instead of raising.
BACKTRACKING = {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Isolated", "invert": False}
PANIC_LINE = "a" * 40 + "b"


@pytest.fixture
def panicking_folder(saved_model_dir, tmp_path):
    folder = copy_folder(saved_model_dir, tmp_path)
    edit_json(folder / "tokenizer.json", pre_tokenizer=BACKTRACKING)
    return folder


def test_a_tokenizer_panic_becomes_a_value_error(panicking_folder):
    model, tokenizer = load_translator(str(panicking_folder), device="cpu")
    with pytest.raises(ValueError) as error:
        translate(model, tokenizer, ["fine", PANIC_LINE], num_beams=1, max_new_tokens=2)
    assert_names(error, "tokenizer failed", "2 sentences", "retry-limit")
    assert "\n" not in str(error.value)
    # Control: the tokenizer still tokenizes other text; only the text it cannot handle is refused.
    assert tokenizer(["A dog.", "bbb"], return_tensors="pt", padding=True)["input_ids"].shape[0] == 2


def test_run_main_turns_any_tokenizer_panic_into_one_line(capsys):
    """A panic anywhere under a script's main (training tokenizes its data too) ends in one line."""
    PanicException = type("PanicException", (BaseException,), {})  # what pyo3 raises, by name

    def main():
        raise PanicException("Onig: Regex search error: retry-limit-in-match over")

    with pytest.raises(SystemExit) as stop:
        run_main(main)
    assert_error_line(stop.value.code, capsys.readouterr().err, "the tokenizer failed", "Onig", alone=True)


def test_other_base_exceptions_still_propagate():
    class Unexpected(BaseException):
        pass

    def main():
        raise Unexpected

    with pytest.raises(Unexpected):
        run_main(main)


# --- code the folder points at or ships ------------------------------------------------------------

def _auto_map(folder, **entries):
    config = json.loads((folder / "config.json").read_text())
    edit_json(folder / "config.json", auto_map={**config["auto_map"], **entries})


def _foreign_pipeline(folder):
    pipelines = json.loads((folder / "config.json").read_text())["custom_pipelines"]
    pipelines["translation"]["impl"] = "other/repo--pipeline.Evil"
    edit_json(folder / "config.json", custom_pipelines=pipelines)


def _planted(path, text):
    def plant(folder):
        (folder / path).parent.mkdir(exist_ok=True)
        (folder / path).write_text(text)
    return plant


def _changed_module(folder):
    path = folder / "modeling_vaswani.py"
    path.write_text(path.read_text() + "\nimport os  # changed\n")


CODE_TAMPERING = {
    "auto_map-other-repository": (lambda f: _auto_map(f, AutoModelForCausalLM="other/repo--modeling.Evil"),
                                  ["auto_map", "another repository", "other/repo--modeling.Evil"]),
    "auto_map-entry-replaced": (lambda f: _auto_map(f, AutoModelForSeq2SeqLM="other/repo--modeling_vaswani.X"),
                                ["another repository", "other/repo--modeling_vaswani.X"]),
    "auto_map-unshipped-module": (lambda f: _auto_map(f, AutoConfig="evil.EvilConfig"), ["evil.py"]),
    "custom_pipelines-other-repository": (_foreign_pipeline, ["custom_pipelines['translation'].impl"]),
    "tokenizer_config-auto_map": (lambda f: edit_json(f / "tokenizer_config.json",
                                                      auto_map={"AutoTokenizer": ["other/repo--tok.Evil", None]}),
                                  ["tokenizer_config.json", "auto_map"]),
    "planted-module": (_planted("json.py", "raise SystemExit('planted')\n"), ["json.py"]),
    "module-in-a-subfolder": (_planted("extra/helpers.py", "x = 1\n"), ["extra/helpers.py"]),
    "changed-module": (_changed_module, ["modeling_vaswani.py", "differs"]),
    "changed-custom_generate": (_planted("custom_generate/generate.py", "def generate(model, *a, **k):\n    pass\n"),
                                ["custom_generate/generate.py", "differs"]),
}


@pytest.mark.parametrize("tampering", list(CODE_TAMPERING))
def test_code_the_folder_points_at_must_be_the_package_model_code(saved_model_dir, tmp_path, tampering):
    folder = copy_folder(saved_model_dir, tmp_path)
    change, names = CODE_TAMPERING[tampering]
    change(folder)
    with pytest.raises(ValueError) as error:
        check_shipped_code(folder)
    assert_names(error, *names)
    # validate_repository (what push_to_hub.py --dry_run reports on) refuses before any code runs.
    for name in ("README.md", "results.json"):
        (folder / name).write_text("{}")
    with pytest.raises(ValueError, match="code|ships|differs"):
        validate_repository(folder)


def test_our_loader_never_runs_code_shipped_in_a_folder(saved_model_dir, tmp_path):
    """A folder of another model type whose code would run under trust_remote_code is refused."""
    folder = copy_folder(saved_model_dir, tmp_path)
    marker = tmp_path / "foreign-code-ran"
    code = folder / "configuration_vaswani.py"
    code.write_text(f"open({str(marker)!r}, 'w').close()\n" + code.read_text())
    edit_json(folder / "config.json", model_type="not_vaswani")
    with pytest.raises(ValueError) as error:
        load_translator(str(folder), device="cpu")
    assert_names(error, "trust_remote_code")
    assert not marker.exists()


@pytest.mark.slow
def test_hub_check_imports_no_module_planted_where_it_runs(tmp_path, monkeypatch, capsys, load_module):
    """The clean-process check used to run with the system temporary folder as its current folder,
    so a json.py planted there was imported (and run) in place of the standard library's."""
    planted = tmp_path / "shared-tmp"
    planted.mkdir()
    marker = tmp_path / "planted-module-ran"
    for name in ("json", "transformers", "safetensors"):
        (planted / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\n")
    monkeypatch.setenv("TMPDIR", str(planted))
    monkeypatch.setattr(tempfile, "tempdir", str(planted))
    monkeypatch.chdir(planted)  # the current folder of the caller is no safer
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    load_module(SCRIPTS / "push_to_hub.py").main(["--model_dir", str(REPO / "hub_card"), "--repo_id", "user/name",
                                                   "--dry_run"])
    assert "complete and valid" in capsys.readouterr().out
    assert not marker.exists(), f"planted module ran: {marker.read_text()}"


# --- a file where a model folder belongs -----------------------------------------------------------

def _pickle_file(folder, tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(hostile_pickle(tmp_path / "payload-ran"))
    return path


MODEL_FILES = {
    "config.json": lambda folder, tmp_path: folder / "config.json",
    "model.safetensors": lambda folder, tmp_path: folder / "model.safetensors",
    "tokenizer.json": lambda folder, tmp_path: folder / "tokenizer.json",
    "pickle": _pickle_file,
}
FILE_DOORS = {
    "from_pretrained": VaswaniForConditionalGeneration.from_pretrained,
    "load_translator": MODEL_DOORS["load_translator"],
    "load_tokenizer": load_tokenizer,
    # transformers' AutoConfig reads the file first (as JSON, refusing a binary one); ours refuses the rest.
    "AutoModel": AutoModelForSeq2SeqLM.from_pretrained,
}


@pytest.mark.parametrize("door", list(FILE_DOORS))
@pytest.mark.parametrize("file", list(MODEL_FILES))
def test_a_file_given_as_model_is_refused_unread(saved_model_dir, tmp_path, no_unpickling, file, door):
    path = MODEL_FILES[file](saved_model_dir, tmp_path)
    with pytest.raises((OSError, ValueError) if door == "AutoModel" else NotADirectoryError) as error:
        FILE_DOORS[door](str(path))
    assert_names(error, path)
    if door != "AutoModel":
        assert_names(error, "is a file")
    assert no_unpickling == [] and not (tmp_path / "payload-ran").exists()


# --- the scripts: the same folders give one error line ---------------------------------------------

def _folder_with(damage):
    def make(saved_model_dir, tmp_path):
        folder = copy_folder(saved_model_dir, tmp_path)
        damage(folder)
        return folder
    return make


SCRIPT_CASES = {  # name: (the --model given, what the error line names besides it)
    "weights-zeros": (_folder_with(DAMAGED["weights-zeros"][0]),
                      ["{model}", "model.safetensors", "truncated or corrupted"]),
    "config-value-of-the-wrong-type": (_folder_with(_config(layer_norm_eps=None)),
                                       ["{model}", "layer_norm_eps", "None"]),
    "config-without-model_type": (_folder_with(_config(model_type=DELETE)), ["model_type", '"model_type": "vaswani"']),
    "mistyped-offset": (_folder_with(lambda f: edit_json(f / "generation_config.json", max_output_length_offset="50")),
                        ["generation_config.json", "max_output_length_offset"]),
    "malformed-tokenizer": (_folder_with(_write("tokenizer.json", '{"model": ')),
                            ["{model}", "tokenizer.json", "is not a valid tokenizer"]),
    "panicking-tokenizer": (_folder_with(lambda f: edit_json(f / "tokenizer.json", pre_tokenizer=BACKTRACKING)),
                            ["The tokenizer failed", "tokenizer.json"]),
    **{f"file-{name}": (make, ["{model}", "is a file, not a model folder"]) for name, make in MODEL_FILES.items()},
}


@pytest.mark.parametrize("script", ["translate.py", "evaluate_model.py"])
@pytest.mark.parametrize("case", list(SCRIPT_CASES))
def test_scripts_report_a_bad_model_folder_in_one_line(saved_model_dir, tmp_path, monkeypatch, capsys, case, script):
    make, names = SCRIPT_CASES[case]
    model = make(saved_model_dir, tmp_path)
    (tmp_path / "text.txt").write_text(f"A dog.\n{PANIC_LINE}\n")
    args = [PANIC_LINE] if script == "translate.py" else [
        "--source_file", tmp_path / "text.txt", "--reference_file", tmp_path / "text.txt", "--output_dir",
        tmp_path / "out", "--num_beams", "1", "--max_new_tokens", "2"]
    code, err = run_script(monkeypatch, capsys, script, "--model", model, *args)
    assert_error_line(code, err, *[str(name).format(model=model) for name in names])
    assert "custom code" not in err
    assert not (tmp_path / "payload-ran").exists()


@pytest.mark.parametrize("source", ["file", "stdin"])
def test_translate_script_reports_a_tokenizer_panic_in_text_it_reads(panicking_folder, tmp_path, monkeypatch, capsys,
                                                                     source):
    args = ["--model", panicking_folder, "--num_beams", "1", "--max_new_tokens", "2"]
    if source == "file":
        (tmp_path / "in.txt").write_text(f"fine\n{PANIC_LINE}\n")
        args += ["--file", tmp_path / "in.txt", "--output", tmp_path / "out.txt"]
    else:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f"{PANIC_LINE}\n".encode())))
    code, err = run_script(monkeypatch, capsys, "translate.py", *args)
    assert_error_line(code, err, "The tokenizer failed", "tokenizer.json")


def test_push_dry_run_refuses_a_model_whose_config_points_at_another_repository(tmp_path, monkeypatch, capsys):
    """A foreign auto_map entry survives save_pretrained into the written repository, which --dry_run
    used to report as "complete and valid"."""
    model_dir = copy_folder(REPO / "hub_card", tmp_path, "model")
    CODE_TAMPERING["auto_map-other-repository"][0](model_dir)
    code, err = run_script(monkeypatch, capsys, "push_to_hub.py", "--model_dir", model_dir, "--repo_id", "user/name",
                           "--dry_run", "--output_dir", tmp_path / "repo")
    assert_error_line(code, err, "another repository", "other/repo--modeling.Evil")
