"""scripts/collect_results.py's training block: a fine-tuned model's card counts the training it started from."""

import json
import math
from pathlib import Path

import pytest

from checks import assert_names

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture()
def collect_results(load_module):
    return load_module(REPO / "scripts" / "collect_results.py")


def _run_folder(path: Path) -> Path:
    path.mkdir()
    (path / "run_info.json").write_text(json.dumps({
        "parameters": "2,875,392",
        "segments": [{"command": "python scripts/train.py --model_name_or_path hub_card",
                      "hardware": "CPU: B, 1 thread", "minutes": 53.0}]}), encoding="utf-8")
    (path / "trainer_state.json").write_text(json.dumps({
        "global_step": 200, "epoch": 0.8,
        "log_history": [{"step": 100, "epoch": 0.4, "loss": 2.5}, {"step": 200, "eval_loss": 3.0}]}), encoding="utf-8")
    return path


EARLIER = {
    "segments": [{"command": "python scripts/train.py --preset small", "hardware": "CPU: A, 2 threads", "minutes": 97.0}],
    "steps": 9000, "epochs": 37.5,
    "log_history": [{"step": 50, "epoch": 0.2, "loss": 8.7}, {"step": 9000, "epoch": 37.5, "eval_loss": 3.08}],
}


def test_started_from_puts_the_earlier_training_first_and_adds_it_up(collect_results, tmp_path):
    alone = collect_results.training_summary(_run_folder(tmp_path / "run"), "fine-tuned")
    assert (alone["steps"], alone["epochs"], alone["minutes"]) == (200, 0.8, 53)
    assert [entry["step"] for entry in alone["log_history"]] == [100, 200]
    training = collect_results.training_summary(tmp_path / "run", "fine-tuned", EARLIER)
    assert [s["minutes"] for s in training["segments"]] == [97.0, 53.0]
    assert training["minutes"] == 150
    assert training["command"].splitlines() == ["python scripts/train.py --preset small",
                                                "python scripts/train.py --model_name_or_path hub_card"]
    assert training["hardware"] == "CPU: A, 2 threads for 97 minutes; then CPU: B, 1 thread for 53 minutes"
    assert (training["steps"], training["epochs"]) == (9200, 38.3)
    # One curve: the earlier run's, then this run's from where it ended.
    assert [entry["step"] for entry in training["log_history"]] == [50, 9000, 9100, 9200]
    assert training["log_history"][2]["epoch"] == pytest.approx(37.9)
    assert "epoch" not in training["log_history"][3]


def test_started_from_a_folder_without_results_says_what_to_pass(collect_results, tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        collect_results.earlier_training(tmp_path)
    assert_names(error, "results.json")
    # A training block without its steps would only fail later, inside the sums.
    for results in ({"evaluations": []}, {"training": {**EARLIER, "steps": None}}):
        (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")
        with pytest.raises(ValueError, match="no training segments, steps"):
            collect_results.earlier_training(tmp_path)
    (tmp_path / "results.json").write_text(json.dumps({"training": EARLIER}), encoding="utf-8")
    assert collect_results.earlier_training(tmp_path) == EARLIER


def test_the_shipped_card_folder_is_a_valid_starting_point(collect_results):
    training = collect_results.earlier_training(REPO / "hub_card")
    assert training["segments"] and training["steps"] > 0 and training["log_history"]


def test_loss_entry_names_each_loss_of_a_split(collect_results, translation_model, tokenizer, capsys):
    entry = collect_results.loss_entry(translation_model, tokenizer, "validation", ["A dog runs."], ["Ein Hund rennt."],
                                       "final weights, no averaging", False, batch_size=8)
    assert {key: entry[key] for key in ("split", "split_name", "averaged")} == {
        "split": "validation", "split_name": "val", "averaged": False}
    assert entry["reference_tokens"] == len(tokenizer(text_target="Ein Hund rennt.")["input_ids"])
    assert entry["kl_loss"] < entry["loss"] and entry["ppl"] == pytest.approx(math.exp(entry["nll_loss"]))
    assert "validation-final: loss H(q, p)" in capsys.readouterr().out
