"""The model card renders from a results JSON, its metadata and speed section number for number."""

import copy

import pytest
import yaml
from huggingface_hub import ModelCard

from checks import assert_names
from modeling_vaswani.hub.model_card import check_results, render_model_card, speed_from_benchmark
from modeling_vaswani.model.label_smoothing import target_entropy

SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"


def _evaluation(split, averaged, beams, bleu):
    return {
        "split": split, "split_name": {"test": "test_2016_flickr", "validation": "val"}[split],
        "sentences": 1000, "weights": "averaged" if averaged else "final", "averaged": averaged,
        "num_beams": beams,
        "scores": {"bleu": bleu, "signature": SIGNATURE, "chrf": bleu + 20.5,
                   "bleu_lowercase_tokenized": bleu + 3.25, "bleu_paper_tokenized": bleu + 1.5},
    }


@pytest.fixture()
def results():
    return {
        "source_lang": "en", "target_lang": "de", "example_source": "Two dogs are playing in the snow.",
        "decoding": "beam 4",
        "evaluations": [_evaluation("test", True, 4, 37.11), _evaluation("validation", True, 4, 38.42),
                        _evaluation("test", False, 1, 33.33)],
        "training": {"command": "python scripts/train.py --preset small", "hardware": "CPU", "minutes": 99,
                     "steps": 1234, "epochs": 9.8, "parameters": "2,900,000", "procedure": "Noam, ε_ls 0.1.",
                     "log_history": [{"step": 50, "epoch": 0.4, "loss": 5.4321},
                                     {"step": 100, "epoch": 0.8, "eval_loss": 4.5, "eval_bleu": 12.345},
                                     {"step": 100, "train_runtime": 60.0}]},
    }


@pytest.fixture()
def model_dir(tmp_path, make_config):
    make_config(preset="tiny", vocab_size=100).save_pretrained(tmp_path)
    return tmp_path


def test_metadata_carries_the_numbers_and_example_of_the_results_through_the_hub_round_trip(model_dir, results):
    card = render_model_card(model_dir, results, "someone/vaswani-test")
    card.save(model_dir / "README.md")
    loaded = ModelCard.load(model_dir / "README.md", ignore_metadata_errors=False)
    assert ModelCard(str(loaded)).data.to_dict() == card.data.to_dict()
    metadata = loaded.data.to_dict()
    assert (metadata["pipeline_tag"], metadata["language"]) == ("translation", ["en", "de"])
    assert loaded.data.widget == [{"text": results["example_source"], "example_title": "English → German"}]
    assert len(loaded.data.eval_results) == 6  # model-index parsed alongside: 3 metrics × 2 shipped evaluations
    entries = {(r["dataset"]["split"], m["name"]): m for r in metadata["model-index"][0]["results"] for m in r["metrics"]}
    bleu = entries[("test", "BLEU (cased, detokenized sacreBLEU)")]
    assert (bleu["value"], bleu["config"]) == (37.11, SIGNATURE)
    assert entries[("validation", "BLEU (cased, detokenized sacreBLEU)")]["value"] == 38.42
    assert entries[("test", "chrF")]["value"] == pytest.approx(57.61)
    assert entries[("test", "BLEU (lowercased, tokenized)")]["value"] == pytest.approx(40.36)
    # Only the shipped configuration (averaged, beam 4) goes into model-index.
    assert all(m["value"] != 33.33 for m in entries.values())


def test_body_has_the_tables_config_and_citation(model_dir, results):
    text = str(render_model_card(model_dir, results, "someone/vaswani-test"))
    front, body = text.split("---", 2)[1:]
    yaml.safe_load(front)
    assert "| test_2016_flickr | 1000 | 37.11 | 40.36 | 38.61 | 57.61 |" in body
    assert "| test_2016_flickr | final | greedy | 33.33 | 53.83 |" in body  # the ablation table
    assert "python scripts/train.py --preset small" in body
    assert "| d_model | 32 | 512 |" in body
    floor = target_entropy(0.1, 100)  # the tiny preset's ε_ls, this config's V
    assert f"| 100 | 0.8 | 5.432 | 4.500 | {4.5 - floor:.3f} | 12.35 |" in body  # the curve, H(q, p) − H(q) beside
    assert f"{floor:.3f} nats" in body
    assert "val ppl" not in body and "| NLL |" not in body  # none logged, none measured
    assert "## Speed" not in body  # no benchmark in these results
    assert "Attention Is All You Need" in body and "non-commercial" in body
    assert 'pipeline("translation", model="someone/vaswani-test", trust_remote_code=True)' in body
    assert "| this model | Multi30k | BLEU | 37.11 |" in body
    assert "| this model | Multi30k | lc-tok BLEU | 40.36 |" in body
    assert "| Multi30k | lc-tok BLEU | 41.02 |" in body  # Wu et al.'s metric is lowercased tokenized
    assert "target tokens" not in body  # the record does not have them


@pytest.mark.parametrize("share, tie, words", [(True, True, "source embedding = target embedding = pre-softmax"),
                                              (False, True, "the source embedding a matrix of its own"),
                                              (False, False, "three matrices")])
def test_the_card_says_which_matrices_are_one(tmp_path, make_config, results, share, tie, words):
    make_config(preset="tiny", vocab_size=100, share_embeddings=share, tie_word_embeddings=tie).save_pretrained(tmp_path)
    assert words in str(render_model_card(tmp_path, results, "someone/vaswani-test"))


def test_measured_losses_a_logged_perplexity_and_recorded_tokens_are_shown_and_published_scores_only_for_en_de(
        model_dir, results):
    results["training"]["log_history"][1].update(eval_nll_loss=3.0, eval_ppl=20.0855)
    results["losses"] = [{"split": "validation", "split_name": "val", "weights": "averaged", "averaged": True,
                          "reference_tokens": 12825, "loss": 3.1, "kl_loss": 2.3, "nll_loss": 1.8, "ppl": 6.0496}]
    results["target_lang"], results["training"]["target_tokens"] = "fr", 63_954_000
    body = str(render_model_card(model_dir, results, "someone/vaswani-test")).split("---", 2)[2]
    assert "| val | averaged | 12,825 | 3.100 | 2.300 | 1.800 | 6.05 |" in body
    assert f"| 100 | 0.8 | 5.432 | 4.500 | {4.5 - target_entropy(0.1, 100):.3f} | 20.09 | 12.35 |" in body
    assert "## How it compares" not in body and "about 64.0M\n  padded target tokens" in body


def test_results_without_the_shipped_configuration_are_refused(results):
    broken = copy.deepcopy(results)
    broken["evaluations"] = [e for e in broken["evaluations"] if not e["averaged"]]
    with pytest.raises(ValueError, match="averaged, beam 4"):
        check_results(broken)
    del broken["training"]
    with pytest.raises(ValueError, match="training"):
        check_results(broken)


BENCHMARK_ROW = {"seconds": [9.0], "median_seconds": 9.0, "sentences_per_second": 111.11, "tokens_per_second": 1499.6,
                 "bleu": 36.5}
BENCHMARK = {
    "command": "python -m benchmarks.run --only translation",
    "machine": {"cpu_model_name": "Some CPU", "cpu_cores": 2, "cpu_bf16": "amx", "torch": "2.13.0+cpu"},
    "figure_8_test_set_translation": {
        "model": "hub_card", "sentences": 1000, "batch_size": 32, "num_beams": 4,
        "threads": {"1": {"CTranslate2 float32": BENCHMARK_ROW},
                    "2": {"ours fp32": {**BENCHMARK_ROW, "sentences_per_second": 42.04}}}},
}


def test_the_speed_section_keeps_every_system_at_every_thread_count(model_dir, results):
    speed = speed_from_benchmark(BENCHMARK, "results.json")
    assert [(r["system"], r["threads"], r["sentences_per_second"]) for r in speed["rows"]] == [
        ("CTranslate2 float32", 1, 111.11), ("ours fp32", 2, 42.04)]
    text = str(render_model_card(model_dir, {**results, "speed": speed}, "someone/vaswani-test"))
    assert "| CTranslate2 float32 | 1 | 111.1 | 1500 | 36.50 |" in text and "| ours fp32 | 2 | 42.0 | 1500 | 36.50 |" in text
    assert "Some CPU (2 cores, bf16 support: amx" in text and "python -m benchmarks.run --only translation" in text
    with pytest.raises(ValueError) as error:
        speed_from_benchmark({"figure_1_training": {}}, "other.json")
    assert_names(error, "other.json")
