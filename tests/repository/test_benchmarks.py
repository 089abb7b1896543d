"""benchmarks/: the side-by-side speed harness against MarianMTModel, and the fast-path properties it relies on.

The harness itself is checked end to end in its --quick mode (tiny sizes, every figure); the
fast-path tests pin down what makes the model quick: the fused SDPA kernel in training, masks
built once per forward pass, encoder keys/values for cross-attention computed once per
`generate` call, no extra copies inside multi-head attention, and a training forward that
`torch.compile` captures as one graph.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import harness, memory, report, run, targets, training, translation
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.model import encoder as encoder_module
from modeling_vaswani.model import stacks as decoder_masks_module  # the decoder's masks are built there
from modeling_vaswani.model.attention import MultiHeadAttention
from modeling_vaswani.model.attention_kernels import fused_attention

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "benchmarks" / "gpu.sh"


def tiny_config(**overrides):
    return VaswaniConfig.from_preset("tiny", vocab_size=60, **overrides)


def padded_batch(batch=3, src=7, tgt=5, vocab=60):
    torch.manual_seed(0)
    input_ids = torch.randint(4, vocab, (batch, src))
    attention_mask = torch.ones_like(input_ids)
    input_ids[0, 4:], attention_mask[0, 4:] = 0, 0  # one padded sentence
    labels = torch.randint(4, vocab, (batch, tgt))
    labels[1, 3:] = -100
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


# --------------------------------------------------------------------------------------------
# The harness
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_quick_run_writes_every_figure(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "benchmarks.run", "--quick", "--output-dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    for key in ("figure_1_training_step", "figure_2_beam_search", "figure_3_cached_vs_recomputing_decoding",
                "figure_4_data_pipeline", "figure_5_hardware_efficiency", "figure_6_peak_memory",
                "figure_7_torch_compile", "figure_1b_training_step_bf16", "figure_5b_hardware_efficiency_bf16",
                "figure_8_test_set_translation", "figure_8b_beam_searches", "figure_8c_compile_payoff",
                "parameters", "machine"):
        assert key in results, key
    assert results["machine"]["torch"] == torch.__version__
    assert results["machine"]["cpu_bf16"] in ("amx", "avx512_bf16", "none")
    tiny = results["parameters"]["tiny"]
    assert tiny["modeling_vaswani"]["trainable"] == tiny["marian"]["trainable"] > 0

    fig1 = results["figure_1_training_step"]["tiny"]
    for system in ("modeling_vaswani", "marian"):
        assert fig1[system]["tokens_per_second"] > 0
    assert fig1["ratio_ours_over_marian"] == pytest.approx(
        fig1["modeling_vaswani"]["tokens_per_second"] / fig1["marian"]["tokens_per_second"])
    assert results["figure_2_beam_search"]["tiny"]["ratio_ours_over_marian"] > 0
    fig3 = results["figure_3_cached_vs_recomputing_decoding"]
    assert sorted(int(k) for k in fig3["lengths"]) == [4, 8, 16]
    assert set(fig3["fits"]) == {"ours_cached_generate", "ours_recomputing_greedy_decode", "marian_cached_generate"}
    fig4 = results["figure_4_data_pipeline"]
    # Length-sorted batches waste less on padding than random ones of the same mean size.
    assert fig4["token_budget"]["padding_efficiency"] > fig4["fixed_size_random"]["padding_efficiency"]
    assert 0 < results["figure_5_hardware_efficiency"]["tiny"]["modeling_vaswani"]["fraction_of_matmul_rate"]
    for task in ("train", "translate"):
        for system in ("modeling_vaswani", "marian"):
            memory = results["figure_6_peak_memory"][task][system]
            assert memory["peak_rss_mib"] >= memory["rss_after_setup_mib"] >= memory["rss_at_start_mib"] > 0
    assert "skipped" in results["figure_7_torch_compile"]  # compilation is too slow for --quick
    assert "skipped" in results["figure_8c_compile_payoff"]
    bf16 = results["figure_1b_training_step_bf16"]["tiny"]
    assert bf16["modeling_vaswani"]["bf16_over_fp32"] == pytest.approx(
        bf16["modeling_vaswani"]["tokens_per_second"] / fig1["modeling_vaswani"]["tokens_per_second"])
    assert results["figure_5b_hardware_efficiency_bf16"]["matmul_dtype"] == "torch.bfloat16"
    check_test_set_translation(results["figure_8_test_set_translation"])

    tables = (tmp_path / "tables.md").read_text()
    assert "Figure 1" in tables and "Figure 6" in tables and "Figure 8 —" in tables
    assert (tmp_path / "figures.png").read_bytes()[:4] == b"\x89PNG"
    profiles = results["profiles"]
    for what in ("train_step", "beam_search"):
        assert (tmp_path / profiles["files"][f"modeling_vaswani_{what}"]).stat().st_size > 0
    for key in ("training_breakdown", "generation_breakdown"):
        assert sum(profiles[key]["marian"].values()) == pytest.approx(1.0)
    assert "Adam step" in profiles["training_breakdown"]["modeling_vaswani"]


def check_test_set_translation(f8):
    """Figure 8 ran every system installed here, on the same sentences, and scored each."""
    systems = [translation.OURS_FP32, translation.OURS_PAPER, translation.OURS_BF16, translation.OURS_INT8,
               translation.OURS_STATIC, translation.MARIAN_FP32, translation.MARIAN_BF16]
    if translation.ctranslate2_installed():
        systems += [translation.CT2_FP32, translation.CT2_INT8]
    assert f8["systems"] == systems and f8["model"] == "hub_card"
    entry = f8["threads"]["1"]
    assert list(entry) == systems
    for name in systems:
        assert entry[name]["sentences_per_second"] > 0 and entry[name]["generated_tokens"] > 0
        assert 0 <= entry[name]["bleu"] <= 100
    # The exact conversions and the static cache give the exact float32 model's translations.
    assert entry[translation.OURS_FP32]["identical_outputs_to_ours_fp32"] == f8["sentences"]
    assert entry[translation.OURS_STATIC]["identical_outputs_to_ours_fp32"] == f8["sentences"]
    assert entry[translation.MARIAN_FP32]["identical_outputs_to_ours_fp32"] == f8["sentences"]
    if translation.ctranslate2_installed():
        assert entry[translation.CT2_FP32]["identical_outputs_to_ours_fp32"] == f8["sentences"]


def test_only_and_threads_choose_the_parts_and_thread_counts():
    assert run.chosen_figures("1", "translation") == {8}
    assert run.chosen_figures("1,2", None) == {1, 2}
    assert run.chosen_figures("", "training,memory") == {1, 4, 5, 6, 7}
    assert run.thread_counts("1, 2") == (1, 2)
    with pytest.raises(ValueError, match="--only"):
        run.chosen_figures("", "speed")
    with pytest.raises(ValueError, match="--threads"):
        run.thread_counts("0")
    settings = run.settings_for(run.parse_args(["--quick", "--threads", "2"]), torch.device("cpu"))
    assert settings.translate_threads == (2,) and settings.train_dtypes == ("float32", "bfloat16")
    assert settings.bf16_presets is None  # figure 1b times every preset


def test_bf16_presets_choose_figure_1b_presets_among_the_presets():
    cpu = torch.device("cpu")
    settings = run.settings_for(run.parse_args(["--presets", "small,base", "--bf16-presets", "small"]), cpu)
    assert settings.presets == ("small", "base") and settings.bf16_presets == ("small",)
    with pytest.raises(ValueError, match="--bf16-presets must be among the presets small,base"):
        run.settings_for(run.parse_args(["--bf16-presets", "big"]), cpu)


@pytest.mark.slow
def test_gpu_script_without_cuda_says_so_and_exits_0(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable}
    out_dir = tmp_path / "gpu"
    done = subprocess.run(["bash", str(GPU), "--output-dir", str(out_dir)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "skipped" in done.stdout and "no CUDA device" in done.stdout
    assert not out_dir.exists()  # nothing ran


def test_unknown_figure_is_a_clear_error():
    with pytest.raises(ValueError, match="--figures"):
        run.main(["--figures", "1,9"])


def test_every_figure_has_its_results_key():
    """The report reads results.json by these keys; the recorded results.json is turned into its tables again."""
    recorded = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    assert set(run.FIGURES.values()) <= set(report.RESULT_KEYS)
    measurements = {k for k in recorded if k.startswith(("figure_", "appendix_"))} | {"profiles"}
    assert measurements <= set(report.RESULT_KEYS.values())
    assert targets.check_targets(recorded) == recorded["targets"]
    assert report.markdown_tables(recorded) == (ROOT / "benchmarks" / "tables.md").read_text()


@pytest.mark.parametrize("folder", sorted(p.name for p in (ROOT / "benchmarks" / "recorded").iterdir()))
def test_recorded_runs_render_to_their_tables(folder):
    """Each recorded partial run (some figures, some presets) gives back its targets and tables.md."""
    recorded_dir = ROOT / "benchmarks" / "recorded" / folder
    recorded = json.loads((recorded_dir / "results.json").read_text())
    if "baseline" in recorded:  # the step before and after
        assert report.step_tables(recorded) == (recorded_dir / "tables.md").read_text()
        return
    assert targets.check_targets(recorded) == recorded["targets"]
    assert report.markdown_tables(recorded) == (recorded_dir / "tables.md").read_text()


@pytest.mark.slow
def test_training_before_and_after_runs_both_steps_alternately(tmp_path):
    """benchmarks/training.py --quick, this checkout as both trees: both steps run and are recorded."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "benchmarks.training", "--quick", "--baseline-tree", str(ROOT),
                           "--precisions", "fp32", "--threads", "1", "--output-dir", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    entry = results["steps"]["tiny/fp32"]
    assert entry["before"]["fused_adam"] and entry["after"]["fused_adam"]  # the same package on both sides
    assert len(entry["before"]["seconds_per_step"]) == len(entry["after"]["seconds_per_step"]) == 1
    assert report.step_tables(results) == (tmp_path / "tables.md").read_text()


@pytest.mark.parametrize("support", ["amx", "none"])
def test_bf16_targets_apply_only_on_a_cpu_with_amx(support):
    """With AMX the bf16 base step must double the fp32 step and the small one not lose; elsewhere both are n/a."""
    bf16 = {preset: {"ratio_ours_over_marian": 1.2, report.OURS: {"bf16_over_fp32": ratio}}
            for preset, ratio in (("small", 0.9), ("base", 2.5))}
    rows = targets.check_targets({"machine": {"cpu_bf16": support}, report.RESULT_KEYS["training_step_speed_bf16"]: bf16})
    verdicts = {row["target"]: row["met"] for row in rows if "the fp32 step" in row["target"]}
    if support == "amx":
        assert verdicts == {"bf16 small step ≥ 1× the fp32 step (AMX)": False,
                            "bf16 base step ≥ 2× the fp32 step (AMX)": True}
    else:
        assert verdicts == {"bf16 small step ≥ 1× the fp32 step (on a CPU with AMX)": None,
                            "bf16 base step ≥ 2× the fp32 step (on a CPU with AMX)": None}


def test_memory_inputs_round_trip_without_pickle(tmp_path):
    batches = [{"input_ids": torch.arange(6).view(2, 3), "attention_mask": torch.ones(2, 3, dtype=torch.long)}]
    memory.write_inputs(tmp_path, {"configs": {"train": {"d_model": 8}}}, train=batches, translate=batches * 2)
    settings, read = memory.read_inputs(tmp_path)
    assert settings == {"configs": {"train": {"d_model": 8}}}
    assert len(read["train"]) == 1 and len(read["translate"]) == 2
    assert torch.equal(read["translate"][1]["input_ids"], batches[0]["input_ids"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["inputs.json", "inputs.safetensors"]


def test_marian_twin_does_the_same_computation():
    config = tiny_config(num_decoder_layers=3, attention_bias=True)  # as the benchmark's configs
    twin = harness.marian_twin_config(config)
    assert (twin.d_model, twin.encoder_ffn_dim, twin.encoder_attention_heads) == (32, 64, 4)
    assert (twin.encoder_layers, twin.decoder_layers) == (2, 3)
    assert twin.activation_function == "relu" and twin.scale_embedding and twin.tie_word_embeddings
    counts = harness.parameter_counts(harness.build_pair(config, torch.device("cpu")))
    assert counts["modeling_vaswani"]["trainable"] == counts["marian"]["trainable"]
    assert counts["trainable_difference_percent"] == 0.0


def test_analytic_training_flops_match_pytorchs_flop_counter():
    """Figure 5's count, checked against torch's own count of every matmul in forward + backward."""
    config = tiny_config(num_decoder_layers=3, attn_implementation="eager")  # eager: attention as countable bmm
    model = VaswaniForConditionalGeneration(config)
    batch = padded_batch()
    batch["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(batch["labels"])
    with FlopCounterMode(display=False) as counter:
        model(**batch).loss.backward()
    assert training.training_flops(config, batch) == counter.get_total_flops()


# --------------------------------------------------------------------------------------------
# The fast path
# --------------------------------------------------------------------------------------------


def counting(monkeypatch, module, name):
    """Replace module.name by a wrapper that counts its calls."""
    original = getattr(module, name)
    calls = []

    def wrapper(*args, **kwargs):
        calls.append(kwargs)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def test_training_uses_the_fused_kernel_and_builds_each_mask_once(monkeypatch):
    config = tiny_config(num_decoder_layers=3)
    model = VaswaniForConditionalGeneration(config).train()
    sdpa = counting(monkeypatch, torch.nn.functional, "scaled_dot_product_attention")
    eager = counting(monkeypatch, sys.modules["modeling_vaswani.model.attention"], "scaled_dot_product_attention")
    encoder_masks = counting(monkeypatch, encoder_module, "padding_mask")
    decoder_masks = counting(monkeypatch, decoder_masks_module, "padding_mask")
    causal_masks = counting(monkeypatch, decoder_masks_module, "decoder_self_attention_mask")
    model(**padded_batch()).loss.backward()
    assert len(sdpa) == 2 + 2 * 3 and not eager  # every attention through SDPA
    assert sum(1 for kw in sdpa if kw.get("is_causal")) == 3  # decoder self-attention: the kernel's causal mode
    assert (len(encoder_masks), len(decoder_masks), len(causal_masks)) == (1, 1, 0)  # shared by all layers


def test_cross_attention_projects_the_encoder_output_once_per_generate():
    model = VaswaniForConditionalGeneration(tiny_config()).eval()
    calls = []
    for layer in model.model.decoder.layers:
        for projection in (layer.cross_attn.k_proj, layer.cross_attn.v_proj):
            projection.register_forward_hook(lambda *_: calls.append(1))
    batch = padded_batch()
    out = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], num_beams=4,
                         min_new_tokens=6, max_new_tokens=6)
    assert out.shape[1] == 7  # six steps were decoded ...
    assert len(calls) == 2 * len(model.model.decoder.layers)  # ... yet K and V of the encoder were made once


def test_training_forward_is_one_graph_for_torch_compile():
    """--torch_compile gets the whole forward + loss as one graph: no value is read back into Python."""
    import torch._dynamo

    model = VaswaniForConditionalGeneration(tiny_config()).train()
    batch = padded_batch()
    try:
        explanation = torch._dynamo.explain(lambda **kw: model(**kw).loss)(**batch)
    finally:
        torch._dynamo.reset()
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons


class CopyCounter(TorchDispatchMode):
    COPIES = {"aten.clone.default", "aten.copy_.default", "aten._to_copy.default", "aten.contiguous.default"}

    def __init__(self):
        super().__init__()
        self.copies = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if str(func) in self.COPIES:
            self.copies.append(str(func))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_attention_makes_at_most_one_copy(cross):
    """Splitting heads is a view; only merging them back (Concat) may need one copy."""
    attention = MultiHeadAttention(tiny_config(), is_cross_attention=cross, layer_idx=0, is_causal=not cross)
    x, memory = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    with torch.no_grad(), CopyCounter() as counter:
        attention(x, key_value_states=memory if cross else None, kernel=fused_attention)
    assert len(counter.copies) <= 1, counter.copies
