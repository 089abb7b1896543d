"""python -m benchmarks.run: every figure at --quick sizes, end to end, and its flags; benchmarks/gpu.sh."""

import importlib.util
import json
import os
import sys

import pytest
import torch

from benchmarks import run, translation as t
from benchmarks.harness import MARIAN, OURS


@pytest.mark.slow
def test_quick_run_writes_every_figure(tmp_path, run_command, recorded_runs):
    run_command("-m", "benchmarks.run", "--quick", "--output-dir", tmp_path)
    results = json.loads((tmp_path / "results.json").read_text())
    assert set().union(*(r for r in recorded_runs if "baseline" not in r)) <= set(results)  # every key recorded
    assert results["machine"]["torch"] == torch.__version__ and results["machine"]["cpu_bf16"] in (
        "amx", "avx512_bf16", "none")
    fig1 = results["figure_1_training_step"]["tiny"]
    assert 0 < fig1["ratio_ours_over_marian"] == pytest.approx(
        fig1[OURS]["tokens_per_second"] / fig1[MARIAN]["tokens_per_second"])
    assert results["figure_2_beam_search"]["tiny"]["ratio_ours_over_marian"] > 0
    fig3 = results["figure_3_cached_vs_recomputing_decoding"]
    assert sorted(int(k) for k in fig3["lengths"]) == [4, 8, 16] and set(fig3["fits"]) == set(
        ("ours_cached_generate", "ours_recomputing_greedy_decode", "marian_cached_generate"))
    fig4 = results["figure_4_data_pipeline"]  # length-sorted batches pad less than random ones
    assert fig4["token_budget"]["padding_efficiency"] > fig4["fixed_size_random"]["padding_efficiency"]
    assert 0 < results["figure_5_hardware_efficiency"]["tiny"][OURS]["fraction_of_matmul_rate"]
    for rss in (results["figure_6_peak_memory"][task][system] for task in ("train", "translate")
                for system in (OURS, MARIAN)):
        assert rss["peak_rss_mib"] >= rss["rss_after_setup_mib"] >= rss["rss_at_start_mib"] > 0
    assert "skipped" in results["figure_7_torch_compile"] and "skipped" in results["figure_8c_compile_payoff"]
    bf16 = results["figure_1b_training_step_bf16"]["tiny"][OURS]
    assert bf16["bf16_over_fp32"] == pytest.approx(bf16["tokens_per_second"] / fig1[OURS]["tokens_per_second"])
    assert results["figure_5b_hardware_efficiency_bf16"]["matmul_dtype"] == "torch.bfloat16"
    # Every system installed here ran on the same sentences; the exact ones give ours fp32's translations.
    ct2 = [t.CT2_FP32, t.CT2_INT8] if importlib.util.find_spec("ctranslate2") else []
    f8, exact = results["figure_8_test_set_translation"], [t.OURS_FP32, t.OURS_STATIC, t.MARIAN_FP32, *ct2[:1]]
    systems = [t.OURS_FP32, t.OURS_PAPER, t.OURS_BF16, t.OURS_INT8, t.OURS_STATIC, t.MARIAN_FP32, t.MARIAN_BF16, *ct2]
    assert f8["systems"] == list(f8["threads"]["1"]) == systems and f8["model"] == "hub_card"
    for name, entry in f8["threads"]["1"].items():
        assert entry["sentences_per_second"] > 0 and entry["generated_tokens"] > 0 and 0 <= entry["bleu"] <= 100
        assert name not in exact or entry["identical_outputs_to_ours_fp32"] == f8["sentences"]
    tables = (tmp_path / "tables.md").read_text()
    assert "Figure 1" in tables and "Figure 6" in tables and "Figure 8 —" in tables
    assert (tmp_path / "figures.png").read_bytes()[:4] == b"\x89PNG"
    profiles = results["profiles"]
    assert all((tmp_path / profiles["files"][f"{OURS}_{what}"]).stat().st_size for what in ("train_step", "beam_search"))
    for key in ("training_breakdown", "generation_breakdown"):
        assert sum(profiles[key][MARIAN].values()) == pytest.approx(1.0)
    assert "Adam step" in profiles["training_breakdown"][OURS]


@pytest.mark.slow
def test_gpu_script_without_cuda_says_so_and_exits_0(tmp_path, run_command, repo_root):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable}
    done = run_command(repo_root / "benchmarks" / "gpu.sh", "--output-dir", tmp_path / "gpu", command=["bash"],
                       cwd=tmp_path, env=env)
    assert "skipped" in done.stdout and "no CUDA device" in done.stdout
    assert not (tmp_path / "gpu").exists()  # nothing ran


def test_flags_choose_figures_threads_and_presets():
    args = run.parse_args(["--quick", "--threads", "2", "--only", "training,memory", "--figures", "1"])
    assert args.only == ("training", "memory") and run.parse_args(["--figures", "1, 2"]).figures == (1, 2)
    settings = run.settings_for(args, torch.device("cpu"))
    assert settings.translate_threads == (2,) and settings.train_dtypes == ("float32", "bfloat16")
    assert settings.bf16_presets is None and not settings.run_compile  # figure 1b times every preset
    settings = run.settings_for(run.parse_args(["--presets", "small,base", "--bf16-presets", "small", "--no-compile",
                                                "--max-tokens", "512"]), torch.device("cpu"))
    assert settings.presets == ("small", "base") and settings.bf16_presets == ("small",) and not settings.run_compile
    assert settings.max_tokens == 512


@pytest.mark.parametrize("flag,value", [("--only", "speed"), ("--threads", "0"), ("--figures", "1,9"),
                                        ("--presets", "huge"), ("--bf16-presets", "tiny"), ("--max-tokens", "0")])
def test_bad_flag_values_end_with_one_error_line(capsys, flag, value):
    with pytest.raises(SystemExit) as stop:
        run.parse_args([flag, value])
    error = capsys.readouterr().err
    assert stop.value.code == 2 and error.startswith("error:") and flag in error and value in error

