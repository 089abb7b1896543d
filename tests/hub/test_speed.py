"""The model card's speed section comes from a benchmark's results, number for number."""

import pytest

from checks import assert_names
from modeling_vaswani.hub.model_card import speed_from_benchmark, speed_section


@pytest.fixture()
def benchmark():
    row = {"seconds": [9.0], "median_seconds": 9.0, "sentences_per_second": 111.11, "tokens_per_second": 1499.6,
           "bleu": 36.5}
    return {
        "command": "python -m benchmarks.run --only translation",
        "machine": {"cpu_model_name": "Some CPU", "cpu_cores": 2, "cpu_bf16": "amx", "torch": "2.13.0+cpu"},
        "figure_8_test_set_translation": {
            "model": "hub_card", "sentences": 1000, "batch_size": 32, "num_beams": 4,
            "threads": {"1": {"CTranslate2 float32": row}, "2": {"ours fp32": {**row, "sentences_per_second": 42.04}}},
        },
    }


def test_the_summary_keeps_every_system_at_every_thread_count(benchmark):
    speed = speed_from_benchmark(benchmark, "results.json")
    assert [(r["system"], r["threads"], r["sentences_per_second"]) for r in speed["rows"]] == [
        ("CTranslate2 float32", 1, 111.11), ("ours fp32", 2, 42.04)]
    assert speed["cpu"] == "Some CPU" and speed["cpu_bf16"] == "amx" and speed["num_beams"] == 4


def test_the_section_renders_the_rows_and_the_machine(benchmark):
    text = speed_section(speed_from_benchmark(benchmark, "results.json"))
    assert "| CTranslate2 float32 | 1 | 111.1 | 1500 | 36.50 |" in text
    assert "| ours fp32 | 2 | 42.0 | 1500 | 36.50 |" in text
    assert "Some CPU (2 cores, bf16 support: amx" in text and "python -m benchmarks.run --only translation" in text


def test_no_benchmark_no_section_and_a_wrong_file_is_named():
    assert speed_section(None) == ""
    with pytest.raises(ValueError) as error:
        speed_from_benchmark({"figure_1_training": {}}, "other.json")
    assert_names(error, "other.json")
