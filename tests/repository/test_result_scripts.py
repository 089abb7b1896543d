"""What collect_results.py, plot_training_curve.py and evaluate_model.py compute and record."""

import json
import math
import runpy

import pytest

from checks import SCRIPTS, assert_names
from modeling_vaswani import shipped_model_path
from modeling_vaswani.evaluation.translation import load_translator, translate
from modeling_vaswani.model.generation import TRANSFORMERS_BEAM_SEARCH
from modeling_vaswani.training.run_folder import set_segment_minutes, start_segment

PLOT = runpy.run_path(str(SCRIPTS / "plot_training_curve.py"), run_name="plot_under_test")
EARLIER = {"segments": [{"command": "python scripts/train.py --preset small", "hardware": "CPU: A, 2 threads",
                         "minutes": 97.0}], "steps": 9000, "epochs": 37.5,
           "log_history": [{"step": 50, "epoch": 0.2, "loss": 8.7}, {"step": 9000, "epoch": 37.5, "eval_loss": 3.08}]}


@pytest.fixture()
def collect_results(load_module):
    return load_module(SCRIPTS / "collect_results.py")


def test_started_from_puts_the_earlier_training_first_and_adds_it_up(collect_results, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run_info.json").write_text(json.dumps({"parameters": "2,875,392", "segments": [
        {"command": "python scripts/train.py --model_name_or_path hub_card", "hardware": "CPU: B, 1 thread",
         "minutes": 53.0}]}), encoding="utf-8")
    (run / "trainer_state.json").write_text(json.dumps({"global_step": 200, "epoch": 0.8, "log_history": [
        {"step": 100, "epoch": 0.4, "loss": 2.5}, {"step": 200, "eval_loss": 3.0}]}), encoding="utf-8")
    alone = collect_results.training_summary(run, "fine-tuned")
    assert (alone["steps"], alone["epochs"], alone["minutes"]) == (200, 0.8, 53)
    assert [entry["step"] for entry in alone["log_history"]] == [100, 200]
    training = collect_results.training_summary(run, "fine-tuned", EARLIER)
    # The segments summed and named: training/run_folder.py's summarize, tests/training/test_run_folder.py.
    assert [s["minutes"] for s in training["segments"]] == [97.0, 53.0] and training["minutes"] == 150
    assert (training["steps"], training["epochs"]) == (9200, 38.3)
    # One curve: the earlier run's, then this run's from where it ended.
    assert [entry["step"] for entry in training["log_history"]] == [50, 9000, 9100, 9200]
    assert training["log_history"][2]["epoch"] == pytest.approx(37.9) and "epoch" not in training["log_history"][3]


def test_started_from_a_folder_without_results_says_what_to_pass(collect_results, tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        collect_results.earlier_training(tmp_path)
    assert_names(error, "results.json")
    # A training block without its steps would only fail later, inside the sums.
    for results in ({"evaluations": []}, {"training": {**EARLIER, "steps": None}}):
        (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")
        with pytest.raises(ValueError) as error:
            collect_results.earlier_training(tmp_path)
        assert_names(error, f"--started_from {tmp_path}")
    (tmp_path / "results.json").write_text(json.dumps({"training": EARLIER}), encoding="utf-8")
    assert collect_results.earlier_training(tmp_path) == EARLIER
    training = collect_results.earlier_training(SCRIPTS.parent / "hub_card")  # the shipped card: a valid start
    assert training["segments"] and training["steps"] > 0 and training["log_history"]


def test_loss_entry_names_each_loss_of_a_split(collect_results, translation_model, tokenizer, capsys):
    entry = collect_results.loss_entry(translation_model, tokenizer, "validation", ["A dog runs."], ["Ein Hund rennt."],
                                       "final weights, no averaging", False, batch_size=8)
    assert (entry["split"], entry["split_name"], entry["averaged"]) == ("validation", "val", False)
    assert entry["reference_tokens"] == len(tokenizer(text_target="Ein Hund rennt.")["input_ids"])
    assert entry["kl_loss"] < entry["loss"] and entry["ppl"] == pytest.approx(math.exp(entry["nll_loss"]))
    assert "validation-final: loss H(q, p)" in capsys.readouterr().out


def test_minutes_are_logged_or_at_the_runs_mean_rate_and_a_run_without_loss_is_told_how_to_log_it(tmp_path):
    run = tmp_path / "run"
    start_segment(run, {"command": "python scripts/train.py", "hardware": "CPU"}, {}, resuming=False)
    set_segment_minutes(run, 30.0)
    history = [{"step": 100, "eval_bleu": 10.0}, {"step": 200, "eval_bleu": 20.0, "run_minutes": 25.0}]
    (run / "trainer_state.json").write_text(json.dumps({"global_step": 300, "log_history": history}))
    assert PLOT["bleu_by_minute"](run) == [(10.0, 10.0), (25.0, 20.0)]
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"training": {"log_history": history[:1], "steps": 400, "minutes": 100}}))
    assert PLOT["bleu_by_minute"](results) == [(25.0, 10.0)]
    PLOT["main"](["--time_to_quality", str(run), str(results), "--output", str(tmp_path / "t.png")])
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(SystemExit) as exit_info:  # one label per run
        PLOT["main"](["--time_to_quality", "a", "b", "--labels", "only one", "--output", str(tmp_path / "t.png")])
    assert exit_info.value.code == 2
    # A curve of a run that logged no loss says how to log it.
    (tmp_path / "no-loss").mkdir()
    (tmp_path / "no-loss" / "trainer_state.json").write_text(json.dumps(
        {"global_step": 27, "logging_steps": 50, "log_history": [{"step": 27, "eval_bleu": 1.0}]}))
    with pytest.raises(ValueError) as refused:
        PLOT["main"](["--run_dir", str(tmp_path / "no-loss"), "--output", str(tmp_path / "curve.png")])
    assert_names(refused, "--logging_steps N, N at most 27")


SOURCES = ["A dog runs.", "Two men are talking in the street.", "A girl."]


def test_evaluation_records_its_search_and_threads_in_files_of_their_own(tmp_path, monkeypatch, capsys, load_module,
                                                                         torch_threads):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.chdir(tmp_path)  # the shipped model is the default, from any directory
    (tmp_path / "test.en").write_text("".join(line + "\n" for line in SOURCES), encoding="utf-8")
    main = load_module(SCRIPTS / "evaluate_model.py").main
    for flags in (["--beam_search", "transformers"], ["--beam_search", "paper"],
                  ["--beam_search", "paper", "--num_beams", "1"], ["--num_beams", "1", "--threads", "2"]):
        main(["--source_file", "test.en", "--reference_file", "test.en", "--max_new_tokens", "6", "--output_dir",
              "out", *flags])
        assert f"({2 if '--threads' in flags else 1} thread" in capsys.readouterr().out
    with pytest.raises(ValueError) as error:
        main(["--source_file", "test.en", "--reference_file", "test.en", "--beam_search", "paper", "--engine",
              "ctranslate2"])
    assert_names(error, "--beam_search", "CTranslate2")
    assert not capsys.readouterr().err  # no bar off a terminal, no loading messages, no warning about unused flags
    scores = {name: json.loads((tmp_path / "out" / f"custom-{name}.scores.json").read_text()) for name in
              ("beam4-transformers-search", "beam4-paper-search", "beam1-paper-search", "beam1")}
    assert [scores[f"beam4-{s}-search"]["beam_search"] for s in ("transformers", "paper")] == ["transformers", "paper"]
    assert "length_penalty" not in scores["beam1-paper-search"] and "length_penalty" not in scores["beam1"]
    threads = [(scores[n]["threads"], scores[n]["threads_chosen_by"]) for n in ("beam1-paper-search", "beam1")]
    assert threads == [(1, "the model has under 20M parameters"), (2, "--threads")]
    assert scores["beam1"]["model"] == shipped_model_path()
    model, tokenizer = load_translator(shipped_model_path())
    expected = translate(model, tokenizer, SOURCES, max_new_tokens=6, **TRANSFORMERS_BEAM_SEARCH)
    assert (tmp_path / "out" / "custom-beam4-transformers-search.hyp.txt").read_text().splitlines() == expected
