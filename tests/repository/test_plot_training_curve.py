"""scripts/plot_training_curve.py --time_to_quality: val BLEU against the run's wall-clock minutes."""

import json
import runpy
from pathlib import Path

import pytest

from modeling_vaswani.training.run_folder import set_segment_minutes, start_segment

PLOT = runpy.run_path(str(Path(__file__).parents[2] / "scripts" / "plot_training_curve.py"), run_name="plot_under_test")


def test_minutes_are_the_logged_ones_else_the_step_at_the_runs_mean_rate(tmp_path):
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


def test_one_label_per_run(tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        PLOT["main"](["--time_to_quality", "a", "b", "--labels", "only one", "--output", str(tmp_path / "t.png")])
    assert exit_info.value.code == 2
