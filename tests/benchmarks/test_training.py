"""benchmarks/training.py: the analytic FLOPs of a step, and the step before and after run side by side."""

import json

import pytest
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import training
from modeling_vaswani import VaswaniForConditionalGeneration


def test_analytic_training_flops_match_pytorchs_flop_counter(make_config, padded_batch):
    """Figure 5 and the step before/after count FLOPs so; checked against torch's count of every matmul."""
    config = make_config("tiny", vocab_size=60, num_decoder_layers=3, attn_implementation="eager")  # countable bmm
    model = VaswaniForConditionalGeneration(config)
    padded_batch["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(padded_batch["labels"])
    with FlopCounterMode(display=False) as counter:
        model(**padded_batch).loss.backward()
    assert training.training_flops(config, padded_batch) == counter.get_total_flops()


@pytest.mark.slow
def test_training_before_and_after_runs_both_steps_alternately(tmp_path, run_command, recorded_runs, repo_root):
    """python -m benchmarks.training, this checkout as both trees: both steps run and are recorded."""
    run_command("-m", "benchmarks.training", "--quick", "--baseline-tree", repo_root, "--precisions", "fp32",
                "--threads", "1", "--output-dir", tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results) == set(next(r for r in recorded_runs if "baseline" in r))  # a recorded step run's keys
    entry = results["steps"]["tiny/fp32"]
    assert entry["before"]["fused_adam"] and entry["after"]["fused_adam"]  # the same package on both sides
    assert len(entry["before"]["seconds_per_step"]) == len(entry["after"]["seconds_per_step"]) == 1
    assert entry["after_over_before_cpu"] > 0  # the processes' CPU time, too


def test_profile_gives_each_op_s_share_of_the_step_largest_first(tmp_path):
    """python -m benchmarks.training --profile: the step under torch.profiler instead of the timed comparison,
    written to --output-dir like a timed run."""
    results = training.main(["--quick", "--profile", "--precisions", "fp32", "--threads", "1", "--output-dir",
                             str(tmp_path)])
    shares = results["profiles"]["tiny/fp32"]["largest_shares"]
    assert len(shares) == 6 and list(shares.values()) == sorted(shares.values(), reverse=True)
    assert 0 < sum(shares.values()) <= 1 and results["steps"] == {}  # nothing timed before and after
    assert json.loads((tmp_path / "results.json").read_text())["profiles"] == results["profiles"]
    assert all(op in (tmp_path / "tables.md").read_text() for op in shares)
