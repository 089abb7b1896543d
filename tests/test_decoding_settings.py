"""One check of the decoding settings (model/generation.py), whichever door (DOORS) they come through."""

import pytest
import torch
from transformers import GenerationConfig

from checks import assert_names, edit_json, run_script
from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.evaluation.ctranslate2_engine import GENERATE_SETTINGS
from modeling_vaswani.model.generation import MAX_DECODING_POSITIONS, check_decoding

SOURCE = torch.tensor([[5, 6, 7, 2]])


def _load(folder):
    return VaswaniForConditionalGeneration.from_pretrained(folder)


def _given_config(folder, setting, value):
    model = _load(folder)
    model.generate(SOURCE, generation_config=GenerationConfig(**{**model.generation_config.to_dict(), setting: value}))


def _model_config(folder, setting, value):
    model = _load(folder)
    setattr(model.generation_config, setting, value)
    model.generate(SOURCE)


def _file(folder, setting, value, name="generation_config.json"):
    if name == "config.json":  # without generation_config.json transformers reads decoding settings there
        (folder / "generation_config.json").unlink()
    edit_json(folder / name, **{setting: value})
    _load(folder)


def _script(folder, setting, value, monkeypatch, capsys):
    code, err = run_script(monkeypatch, capsys, "translate.py", "--model", folder, f"--{setting}", value, "Hello")
    assert code == 2
    raise ValueError(err)


_script.settings = {"num_beams", "max_new_tokens"}  # the decoding flags it has


def _ctranslate2(folder, setting, value, in_file=False):
    pytest.importorskip("ctranslate2")
    from modeling_vaswani.conversion.ctranslate2 import convert_ctranslate2
    from modeling_vaswani.evaluation.ctranslate2_engine import CTranslate2Engine

    converted = convert_ctranslate2(folder, folder.parent / "ct2")
    if in_file:
        edit_json(converted / "generation_config.json", **{setting: value})
    engine = CTranslate2Engine(converted, device="cpu", threads=1)
    engine.generate(SOURCE, **({} if in_file else {setting: value}))


_ctranslate2.settings = set(GENERATE_SETTINGS)  # what the engine's generate() takes


DOORS = {
    "generate() argument": lambda folder, setting, value: _load(folder).generate(SOURCE, **{setting: value}),
    "generation config given to generate()": _given_config,
    "the model's generation config": _model_config,
    "generation_config.json": _file,
    "config.json without generation_config.json": lambda folder, setting, value: _file(folder, setting, value,
                                                                                      "config.json"),
    "translate.py flag": _script,
    "ctranslate2 generate() argument": _ctranslate2,
    "ctranslate2 generation_config.json": lambda folder, setting, value: _ctranslate2(folder, setting, value, True),
}

# case: (setting, value); the error names the setting
BAD_SETTINGS = {
    "NaN length penalty": ("length_penalty", float("nan")), "infinite length penalty": ("length_penalty", float("inf")),
    "a billion beams": ("num_beams", 10**9), "no beams": ("num_beams", 0),
    "a billion new tokens": ("max_new_tokens", 10**9), "NaN temperature": ("temperature", float("nan")),
    "top_p above 1": ("top_p", 1.5),
}


# Every door with every bad setting it can be given (a script has only some decoding flags).
PAIRS = [(door, case) for door, run in DOORS.items() for case, (setting, _) in BAD_SETTINGS.items()
         if setting in getattr(run, "settings", {setting})]


@pytest.mark.parametrize("door, case", PAIRS)
def test_every_door_refuses_a_bad_decoding_setting_naming_it(folder, door, case, monkeypatch, capsys):
    setting, value = BAD_SETTINGS[case]
    with pytest.raises(ValueError) as error:
        DOORS[door](folder, setting, value, *([monkeypatch, capsys] if door.endswith("flag") else []))
    message = str(error.value)
    assert setting in message or (setting == "max_new_tokens" and "length" in message), message


def test_the_bound_counts_beams_batch_and_length_and_the_papers_settings_pass(saved_model_dir):
    assert _load(saved_model_dir).generate(SOURCE, num_beams=4, length_penalty=0.6).shape[0] == 1
    settings = {"num_beams": 4, "max_new_tokens": 50}
    batch = MAX_DECODING_POSITIONS // (4 * (50 + 10))
    check_decoding(settings, "here", batch_size=batch, input_length=10)
    with pytest.raises(ValueError) as error:
        check_decoding(settings, "here", batch_size=batch + 1, input_length=10)
    assert_names(error, "here", "num_beams 4", f"batch {batch + 1}", "length 60")
