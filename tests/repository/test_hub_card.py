"""hub_card/, the shipped model as a Hub repository: its files, pinned translations, a BLEU floor, a clean load."""

import json
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from modeling_vaswani.evaluation.scoring import score_model
from modeling_vaswani.evaluation.translation import load_translator, translate
from modeling_vaswani.hub.repository import REQUIRED_FILES, check_shipped_code, validate_repository
from modeling_vaswani.training.data import multi30k_pairs

HUB_CARD = Path(__file__).resolve().parents[2] / "hub_card"
# Greedy translations of the shipped model, recorded when it was built.
PINNED = json.loads((Path(__file__).parent / "data" / "hub_card_pins.json").read_text(encoding="utf-8"))


def _json(name):
    return json.loads((HUB_CARD / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def shipped():
    return load_translator(str(HUB_CARD), device="cpu")


def test_every_file_is_there_small_and_the_code_is_the_package_s():
    assert all((HUB_CARD / name).is_file() for name in REQUIRED_FILES) and not list(HUB_CARD.glob("*.bin"))
    assert (HUB_CARD / "model.safetensors").stat().st_size < 40 * 2**20 and list(HUB_CARD.glob("*.py"))
    assert [p.name for p in (HUB_CARD / "custom_generate").iterdir()] == ["generate.py"]
    check_shipped_code(HUB_CARD)  # each .py byte for byte the package's model code, and nothing else


def test_the_paper_s_architecture_and_decoding(shipped):
    """§3.2.2's projections without biases; §6.1's search (beam 4, α 0.6, the bound, input length + 50)."""
    config, generation = _json("config.json"), _json("generation_config.json")
    assert config["attention_bias"] is False and config["model_type"] == "vaswani"
    assert all(layer.self_attn.q_proj.bias is None for layer in shipped[0].model.encoder.layers)
    assert {"AutoConfig", "AutoModelForSeq2SeqLM"} <= set(config["auto_map"]) and "translation" in config[
        "custom_pipelines"]
    assert [generation[k] for k in ("num_beams", "length_penalty", "max_output_length_offset")] == [4, 0.6, 50]
    assert generation["length_penalty_formula"] == "gnmt" and generation["beam_termination"] == "bound"
    assert "max_length" not in generation and "max_new_tokens" not in generation


def test_card_metadata_carries_the_numbers_and_example_of_results_json():
    card = ModelCard.load(HUB_CARD / "README.md", ignore_metadata_errors=False)
    assert [entry["text"] for entry in card.data.widget] == [_json("results.json")["example_source"]]
    metadata = card.data.to_dict()
    reported = {(r["dataset"]["split"], m["name"]): m["value"]
                for r in metadata["model-index"][0]["results"] for m in r["metrics"]}
    shipped = [e for e in _json("results.json")["evaluations"] if e["averaged"] and e["num_beams"] == 4]
    assert shipped and all(reported[(e["split"], "BLEU (cased, detokenized sacreBLEU)")] == round(
        e["scores"]["bleu"], 2) for e in shipped)


def test_pinned_translations(shipped):
    assert translate(*shipped, [pin["source"] for pin in PINNED], num_beams=1) == [pin["greedy"] for pin in PINNED]


@pytest.mark.slow
def test_bleu_floor_on_the_first_100_val_sentences(shipped):
    _, scores = score_model(*shipped, *multi30k_pairs("validation", max_samples=100), num_beams=1)
    assert scores["bleu"] >= 36.0, scores["bleu"]  # 42.7 when the model was built


@pytest.mark.slow
def test_loads_and_translates_in_a_clean_process_without_the_package():
    outcome = validate_repository(HUB_CARD, "Two dogs are playing in the snow.")
    assert outcome["class"].startswith("transformers_modules.")  # the repository's own code ran
    assert "Hunde" in outcome["pipeline"] and "Schnee" in outcome["pipeline"]
