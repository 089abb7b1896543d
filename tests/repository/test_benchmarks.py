"""benchmarks/: the harness against MarianMTModel end to end (--quick), its reports, and the fast-path
properties it relies on (fused SDPA, masks once, cross-attention K/V once, no copies, one compiled graph)."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from benchmarks import harness, report, run, training, translation as t
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.model import encoder as encoder_module
from modeling_vaswani.model import stacks as decoder_masks_module  # the decoder's masks are built there
from modeling_vaswani.model.attention import MultiHeadAttention
from modeling_vaswani.model.attention_kernels import fused_attention

ROOT = Path(__file__).resolve().parents[2]
OURS, MARIAN = "modeling_vaswani", "marian"
RECORDED = [ROOT / "benchmarks", *sorted((ROOT / "benchmarks" / "recorded").iterdir())]  # each with a results.json


def tiny_config(**overrides):
    return VaswaniConfig.from_preset("tiny", vocab_size=60, **overrides)


def padded_batch(batch=3, src=7, tgt=5, vocab=60):
    torch.manual_seed(0)
    input_ids, labels = torch.randint(4, vocab, (batch, src)), torch.randint(4, vocab, (batch, tgt))
    attention_mask = torch.ones_like(input_ids)
    input_ids[0, 4:], attention_mask[0, 4:], labels[1, 3:] = 0, 0, -100  # one padded sentence, one short target
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def run_module(*args, command=(sys.executable,), cwd=ROOT, env=None):
    env = env or {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([*command, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_quick_run_writes_every_figure(tmp_path):
    run_module("-m", "benchmarks.run", "--quick", "--output-dir", str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    recorded = [json.loads((folder / "results.json").read_text()) for folder in RECORDED]
    assert set().union(*(r for r in recorded if "baseline" not in r)) <= set(results)  # every key ever recorded
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
def test_training_before_and_after_runs_both_steps_alternately(tmp_path):
    """python -m benchmarks.training, this checkout as both trees: both steps run and are recorded."""
    run_module("-m", "benchmarks.training", "--quick", "--baseline-tree", str(ROOT), "--precisions", "fp32",
               "--threads", "1", "--output-dir", str(tmp_path))
    results = json.loads((tmp_path / "results.json").read_text())
    recorded = (json.loads((folder / "results.json").read_text()) for folder in RECORDED)
    assert set(results) == set(next(r for r in recorded if "baseline" in r))  # a recorded step run's keys
    entry = results["steps"]["tiny/fp32"]
    assert entry["before"]["fused_adam"] and entry["after"]["fused_adam"]  # the same package on both sides
    assert len(entry["before"]["seconds_per_step"]) == len(entry["after"]["seconds_per_step"]) == 1
    assert entry["after_over_before_cpu"] > 0  # the processes' CPU time, too


@pytest.mark.slow
def test_gpu_script_without_cuda_says_so_and_exits_0(tmp_path):
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable}
    done = run_module(ROOT / "benchmarks" / "gpu.sh", "--output-dir", tmp_path / "gpu", command=["bash"], cwd=tmp_path,
                      env=env)
    assert "skipped" in done.stdout and "no CUDA device" in done.stdout
    assert not (tmp_path / "gpu").exists()  # nothing ran


def test_flags_choose_figures_threads_and_presets():
    assert run.chosen_figures("1", "translation") == {8} and run.chosen_figures("1,2", None) == {1, 2}
    assert run.chosen_figures("", "training,memory") == {1, 4, 5, 6, 7} and run.thread_counts("1, 2") == (1, 2)
    settings = run.settings_for(run.parse_args(["--quick", "--threads", "2"]), torch.device("cpu"))
    assert settings.translate_threads == (2,) and settings.train_dtypes == ("float32", "bfloat16")
    assert settings.bf16_presets is None and not settings.run_compile  # figure 1b times every preset
    settings = run.settings_for(run.parse_args(["--presets", "small,base", "--bf16-presets", "small", "--no-compile"]),
                                torch.device("cpu"))
    assert settings.presets == ("small", "base") and settings.bf16_presets == ("small",) and not settings.run_compile


@pytest.mark.parametrize("call,value", [
    (lambda: run.chosen_figures("", "speed"), "--only"),
    (lambda: run.thread_counts("0"), "--threads"),
    (lambda: run.main(["--figures", "1,9"]), "--figures"),
    (lambda: run.settings_for(run.parse_args(["--bf16-presets", "big"]), torch.device("cpu")), "small,base"),
    (lambda: report.fill_results_md(Path("no-such.md"), "cpu"), "generated:cpu:begin"),
])
def test_bad_flag_values_are_clear_errors(call, value):
    with pytest.raises(ValueError) as err:
        call()
    assert value in str(err.value)


@pytest.mark.parametrize("folder", RECORDED, ids=lambda folder: folder.name)
def test_recorded_runs_render_to_their_tables(folder):
    """Each recorded run (all figures, or some, or the step before and after) gives back its targets and tables."""
    recorded = json.loads((folder / "results.json").read_text())
    if "baseline" in recorded:
        assert report.step_tables(recorded) == (folder / "tables.md").read_text()
        return
    assert report.check_targets(recorded) == recorded["targets"]
    assert report.markdown_tables(recorded) == (folder / "tables.md").read_text()


@pytest.mark.parametrize("support,where,met", [("amx", "AMX", (False, True)),
                                               ("none", "on a CPU with AMX", (None, None))])
def test_bf16_targets_apply_only_on_a_cpu_with_amx(support, where, met):
    """With AMX the bf16 base step must double the fp32 step and the small one not lose; elsewhere both are n/a."""
    bf16 = {p: {"ratio_ours_over_marian": 1.2, OURS: {"bf16_over_fp32": r}} for p, r in (("small", 0.9), ("base", 2.5))}
    rows = report.check_targets({"machine": {"cpu_bf16": support}, "figure_1b_training_step_bf16": bf16})
    assert {row["target"]: row["met"] for row in rows if "the fp32 step" in row["target"]} == {
        f"bf16 small step ≥ 1× the fp32 step ({where})": met[0], f"bf16 base step ≥ 2× the fp32 step ({where})": met[1]}


def test_marian_twin_does_the_same_computation():
    config = tiny_config(num_decoder_layers=3, attention_bias=True)  # as the benchmark's configs
    twin = harness.marian_twin_config(config)
    assert (twin.d_model, twin.encoder_ffn_dim, twin.encoder_attention_heads) == (32, 64, 4)
    assert (twin.encoder_layers, twin.decoder_layers) == (2, 3)
    assert twin.activation_function == "relu" and twin.scale_embedding and twin.tie_word_embeddings
    counts = harness.parameter_counts(harness.build_pair(config, torch.device("cpu")))
    assert counts[OURS]["trainable"] == counts[MARIAN]["trainable"] and counts["trainable_difference_percent"] == 0.0


def test_analytic_training_flops_match_pytorchs_flop_counter():
    """Figures 5 and the step before/after count FLOPs so; checked against torch's count of every matmul."""
    config = tiny_config(num_decoder_layers=3, attn_implementation="eager")  # eager: attention as countable bmm
    model = VaswaniForConditionalGeneration(config)
    batch = padded_batch()
    batch["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(batch["labels"])
    with FlopCounterMode(display=False) as counter:
        model(**batch).loss.backward()
    assert training.training_flops(config, batch) == counter.get_total_flops()


# --- the fast path ---------------------------------------------------------------------------------


def test_training_uses_the_fused_kernel_and_builds_each_mask_once(monkeypatch):
    def counting(module, name):
        spy = mock.MagicMock(wraps=getattr(module, name))
        monkeypatch.setattr(module, name, spy)
        return spy

    model = VaswaniForConditionalGeneration(tiny_config(num_decoder_layers=3)).train()
    sdpa = counting(torch.nn.functional, "scaled_dot_product_attention")
    eager = counting(sys.modules["modeling_vaswani.model.attention"], "scaled_dot_product_attention")
    masks = [counting(encoder_module, "padding_mask"), counting(decoder_masks_module, "padding_mask"),
             counting(decoder_masks_module, "decoder_self_attention_mask")]
    model(**padded_batch()).loss.backward()
    assert sdpa.call_count == 2 + 2 * 3 and not eager.called  # every attention through SDPA
    assert sum(1 for call in sdpa.call_args_list if call.kwargs.get("is_causal")) == 3  # the kernel's causal mode
    assert [m.call_count for m in masks] == [1, 1, 0]  # shared by all layers


def test_cross_attention_projects_the_encoder_output_once_per_generate():
    model, calls = VaswaniForConditionalGeneration(tiny_config()).eval(), []
    for layer in model.model.decoder.layers:
        for projection in (layer.cross_attn.k_proj, layer.cross_attn.v_proj):
            projection.register_forward_hook(lambda *_: calls.append(1))
    batch = padded_batch()
    out = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], num_beams=4,
                         min_new_tokens=6, max_new_tokens=6)
    assert out.shape[1] == 7  # six steps were decoded ...
    assert len(calls) == 2 * len(model.model.decoder.layers)  # ... yet K and V of the encoder were made once


def test_training_forward_is_one_graph_for_torch_compile():
    """--torch_compile gets the whole forward + loss as one graph: no value is read back into Python, even with
    symbolic lengths (batches of several lengths compile once more, then no longer; fixed ones break no sooner)."""
    import torch._dynamo

    model, batch = VaswaniForConditionalGeneration(tiny_config()).train(), padded_batch()
    for name in ("input_ids", "attention_mask", "labels"):
        torch._dynamo.mark_dynamic(batch[name], 1)
    try:
        explanation = torch._dynamo.explain(lambda **kw: model(**kw).loss)(**batch)
    finally:
        torch._dynamo.reset()
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons


@pytest.mark.parametrize("by_layer", [False, True])
def test_a_compiled_training_step_gives_eager_s_loss_and_gradients(by_layer):
    """torch.compile's step (forward, §5.4 loss, backward) computes what eager does, to float32 rounding: the
    whole model compiled, or its layers as train.py --torch_compile does (with the loss of chunked_loss.py)."""
    import copy

    import torch._dynamo

    from modeling_vaswani.training.chunked_loss import training_loss
    from modeling_vaswani.training.trainer import compile_layers

    eager = VaswaniForConditionalGeneration(tiny_config()).train()  # the tiny preset: no dropout
    compiled, batch = copy.deepcopy(eager), padded_batch()
    if by_layer:
        compile_layers(compiled)
    step = training_loss if by_layer else (lambda model, batch: model(**batch).loss)
    try:
        losses = [step(model, batch) for model in (eager, compiled if by_layer else torch.compile(compiled))]
        for loss in losses:
            loss.backward()
    finally:
        torch._dynamo.reset()
        torch._inductor.config.fallback_random = False
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_attention_makes_at_most_one_copy(cross):
    """Splitting heads is a view; only merging them back (Concat) may need one copy."""
    copies = []

    class CopyCounter(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if str(func) in ("aten.clone.default", "aten.copy_.default", "aten._to_copy.default",
                             "aten.contiguous.default"):
                copies.append(str(func))
            return func(*args, **(kwargs or {}))

    attention = MultiHeadAttention(tiny_config(), is_cross_attention=cross, layer_idx=0, is_causal=not cross)
    x, encoded = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    with torch.no_grad(), CopyCounter():
        attention(x, key_value_states=encoded if cross else None, kernel=fused_attention)
    assert len(copies) <= 1, copies
