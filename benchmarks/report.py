"""The Markdown tables of a benchmark run and the RESULTS.md block; they read only the results dict,
so a recorded results.json gives its tables again without measuring anything."""

from __future__ import annotations

from pathlib import Path

from modeling_vaswani.model.generation import NUM_BEAMS

from .harness import MARIAN, OURS

# results.json keys, one per measurement; the figure numbers are the labels the tables use.
RESULT_KEYS = {
    "training_step_speed": "figure_1_training_step",
    "beam_search_speed": "figure_2_beam_search",
    "cached_vs_recomputing_decoding": "figure_3_cached_vs_recomputing_decoding",
    "data_pipeline_throughput": "figure_4_data_pipeline",
    "hardware_efficiency": "figure_5_hardware_efficiency",
    "peak_memory": "figure_6_peak_memory",
    "compiled_training_step": "figure_7_torch_compile",
    "fused_qkv_projection": "appendix_fused_qkv_projection",
    "profiles": "profiles",
    "training_step_speed_bf16": "figure_1b_training_step_bf16",
    "hardware_efficiency_bf16": "figure_5b_hardware_efficiency_bf16",
    "test_set_translation": "figure_8_test_set_translation",
    "beam_search_comparison": "figure_8b_beam_searches",
    "compile_payoff": "figure_8c_compile_payoff",
}


def presets_of(entry: dict) -> list:
    """The per-preset entries of a result (the others are its settings)."""
    return [p for p in entry if isinstance(entry[p], dict)]


class Markdown:
    """Lines of Markdown, with one call per table."""

    def __init__(self):
        self.lines = []

    def table(self, title, header, rows):
        self.lines.extend([f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)])
        self.lines.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
        self.lines.append("")

    def text(self):
        return "\n".join(self.lines)


def _speed_tables(md: Markdown, results: dict) -> None:
    """Targets, parameters, and figures 1 to 3."""
    if results.get("targets"):
        md.table("Targets (recorded, not asserted)", ["target", "measured", "met"],
                 [[t["target"], t["measured"], "n/a" if t["met"] is None
                   else "yes" if t["met"] else f"**no** ({t['shortfall'] or 'see text'})"]
                  for t in results["targets"]])
    params = results.get("parameters")
    if params:
        md.table("Parameters", ["preset", "ours trainable", "Marian trainable", "difference",
                                "Marian frozen position tables + buffers"],
                 [[p, f"{c[OURS]['trainable']:,}", f"{c[MARIAN]['trainable']:,}",
                   f"{c['trainable_difference_percent']:+.3f}%",
                   f"{c[MARIAN]['all_parameters'] - c[MARIAN]['trainable']:,} + {c[MARIAN]['buffers']:,}"]
                  for p, c in params.items()])
    f1 = results.get(RESULT_KEYS["training_step_speed"])
    if f1:
        md.table("Figure 1 — training step (forward + backward + Adam), real source+target tokens/s",
                 ["preset", "batches × sentences", "ours tok/s", "Marian tok/s", "ours s/step", "Marian s/step",
                  "ours / Marian"],
                 [[p, f"{e['batches']} × {e['sentences_per_pass'] / e['batches']:.0f}",
                   f"{e[OURS]['tokens_per_second']:,.0f}", f"{e[MARIAN]['tokens_per_second']:,.0f}",
                   f"{e[OURS]['seconds_per_step']:.3f}", f"{e[MARIAN]['seconds_per_step']:.3f}",
                   f"**{e['ratio_ours_over_marian']:.3f}**"] for p, e in f1.items()])
    f2 = results.get(RESULT_KEYS["beam_search_speed"])
    if f2:
        md.table(f"Figure 2 — beam {NUM_BEAMS}, {f2['sentences']} sentences, "
                 f"forced length {f2['forced_output_length']}",
                 ["preset", "ours sent/s", "Marian sent/s", "ours tok/s", "Marian tok/s", "ours / Marian"],
                 [[p, f"{f2[p][OURS]['sentences_per_second']:.2f}", f"{f2[p][MARIAN]['sentences_per_second']:.2f}",
                   f"{f2[p][OURS]['tokens_per_second']:.1f}", f"{f2[p][MARIAN]['tokens_per_second']:.1f}",
                   f"**{f2[p]['ratio_ours_over_marian']:.3f}**"] for p in presets_of(f2)])
    f3 = results.get(RESULT_KEYS["cached_vs_recomputing_decoding"])
    if f3:
        md.table(f"Figure 3 — greedy decoding, ms per generated token ({f3['preset']}, batch {f3['batch_size']})",
                 ["output length", "ours cached generate", "ours recomputing greedy_decode",
                  "Marian cached generate", "recomputing / cached"],
                 [[k, f"{e['ours_cached_generate']['ms_per_generated_token']:.2f}",
                   f"{e['ours_recomputing_greedy_decode']['ms_per_generated_token']:.2f}",
                   f"{e['marian_cached_generate']['ms_per_generated_token']:.2f}",
                   f"{e['recomputing_over_cached']:.1f}×"] for k, e in f3["lengths"].items()])
        md.table("Figure 3 — fits", ["decoder", "ms/token at L→0", "ms/token added per unit length",
                                     "total time ∝ L^k, k ="],
                 [[n, f"{f['ms_per_token_intercept']:.3f}", f"{f['ms_per_token_per_unit_length']:.4f}",
                   f"{f['total_time_exponent']:.2f}"] for n, f in f3["fits"].items()])


def _resource_tables(md: Markdown, results: dict) -> None:
    """Figures 4 to 6."""
    f4 = results.get(RESULT_KEYS["data_pipeline_throughput"])
    if f4:
        md.table(f"Figure 4 — data pipeline ({f4['preset']} model, budget {f4['max_tokens']} tokens/side, "
                 f"fixed batch size {f4['fixed_batch_size']})",
                 ["batching", "batches/epoch", "measured", "mean real tokens/batch", "padding efficiency",
                  "real tokens/s", "epoch seconds"],
                 [[n, e["batches_per_epoch"],
                   f"{e['batches_measured']}" + ("" if e["whole_epoch_measured"] else " (time cap)"),
                   f"{e['mean_real_tokens_per_batch']:.0f}", f"{e['padding_efficiency']:.3f}",
                   f"{e['real_tokens_per_second']:,.0f}",
                   f"{e['epoch_seconds']:.0f}" + (" (extrapolated)" if e["epoch_seconds_is_extrapolated"] else "")]
                  for n, e in ((k, f4[k]) for k in ("token_budget", "fixed_size_random"))])
        md.lines.append(f"Token budget / fixed size: **{f4['ratio_token_budget_over_fixed']:.2f}×** real tokens/s.\n")
    f5 = results.get(RESULT_KEYS["hardware_efficiency"])
    if f5:
        md.table(f"Figure 5 — model FLOP/s of the training step vs torch.mm "
                 f"({f5['matmul_size']}², {f5['matmul_dtype']}: "
                 f"{f5['matmul_flops_per_second'] / 1e9:.1f} GFLOP/s)",
                 ["preset", "ours GFLOP/s", "ours fraction", "Marian GFLOP/s", "Marian fraction"],
                 [[p, f"{f5[p][OURS]['model_flops_per_second'] / 1e9:.1f}",
                   f"{f5[p][OURS]['fraction_of_matmul_rate']:.1%}",
                   f"{f5[p][MARIAN]['model_flops_per_second'] / 1e9:.1f}",
                   f"{f5[p][MARIAN]['fraction_of_matmul_rate']:.1%}"] for p in presets_of(f5)])
    f6 = results.get(RESULT_KEYS["peak_memory"])
    if f6:
        md.table(f"Figure 6 — peak resident memory, MiB (train: {f6['train_preset']}, {f6['train_steps']} steps; "
                 f"translate: {f6['translate_preset']}, {f6['translate_sentences']} sentences, beam {NUM_BEAMS}, "
                 f"batch {f6['translate_batch_size']}, forced length {f6['forced_output_length']})",
                 ["workload", "child start", "ours after model build", "ours peak", "Marian after model build",
                  "Marian peak", "ours / Marian peak"],
                 [[t, f"{f6[t][OURS]['rss_at_start_mib']:.0f}", f"{f6[t][OURS]['rss_after_setup_mib']:.0f}",
                   f"{f6[t][OURS]['peak_rss_mib']:.0f}", f"{f6[t][MARIAN]['rss_after_setup_mib']:.0f}",
                   f"{f6[t][MARIAN]['peak_rss_mib']:.0f}", f"{f6[t]['ratio_ours_over_marian']:.3f}"]
                  for t in ("train", "translate")])


def _explanation_tables(md: Markdown, results: dict) -> None:
    """Profiles, the fused-Q/K/V appendix and figure 7."""
    profiles = results.get(RESULT_KEYS["profiles"]) or {}
    for key, what in (("training_breakdown", "one training step (figure 1's first batch)"),
                      ("generation_breakdown", "one beam-search batch (figure 2's first batch)")):
        breakdown = profiles.get(key)
        if breakdown:
            md.table(f"Where the CPU time goes: {what}, {profiles['preset']} (torch.profiler, share of the "
                     "profiled time)", ["category", "ours", "Marian"],
                     [[c, f"{breakdown[OURS][c]:.1%}", f"{breakdown[MARIAN][c]:.1%}"] for c in breakdown[OURS]])
    qkv = results.get(RESULT_KEYS["fused_qkv_projection"])
    if qkv:
        md.table("Appendix — Q/K/V projections: three Linears vs one matmul on concatenated weights (median s)",
                 ["shape", "separate", "fused", "fused / separate"],
                 [[k, f"{e['separate']:.4f}", f"{e['fused']:.4f}", f"{e['fused_over_separate_time']:.3f}"]
                  for k, e in qkv.items()])
    f7 = results.get(RESULT_KEYS["compiled_training_step"])
    if f7 and "skipped" not in f7:
        md.table(f"Figure 7 — torch.compile of the training step ({f7['preset']})",
                 ["mode", "tokens/s", "first pass incl. compilation (s)"],
                 [["eager", f"{f7['eager']['tokens_per_second']:,.0f}", ""],
                  ["compiled", f"{f7['compiled']['tokens_per_second']:,.0f}",
                   f"{f7['first_pass_seconds_including_compilation']:.1f}"]])
        md.lines.append(f"Compiled / eager: **{f7['ratio_compiled_over_eager']:.3f}×**.\n")


def _fast_path_tables(md: Markdown, results: dict) -> None:
    """Figures 1b and 5b (bf16 training), 8, 8b and 8c (translating the test set)."""
    f1b = results.get(RESULT_KEYS["training_step_speed_bf16"])
    if f1b:
        md.table("Figure 1b — training step in bf16 (CPU autocast), real source+target tokens/s",
                 ["preset", "ours tok/s", "Marian tok/s", "ours bf16 / fp32", "Marian bf16 / fp32", "ours / Marian"],
                 [[p, f"{e[OURS]['tokens_per_second']:,.0f}", f"{e[MARIAN]['tokens_per_second']:,.0f}",
                   f"{e[OURS]['bf16_over_fp32']:.2f}×", f"{e[MARIAN]['bf16_over_fp32']:.2f}×",
                   f"**{e['ratio_ours_over_marian']:.3f}**"] for p, e in f1b.items()])
    f5 = results.get(RESULT_KEYS["hardware_efficiency"])
    f5b = results.get(RESULT_KEYS["hardware_efficiency_bf16"])
    if f5 and f5b:
        md.table("Figure 5b — model FLOP/s of the training step as a share of each precision's torch.mm rate",
                 ["preset", "precision", "matmul GFLOP/s", "ours GFLOP/s", "ours share", "Marian share"],
                 [[p, f["matmul_dtype"].replace("torch.", ""), f"{f['matmul_flops_per_second'] / 1e9:.1f}",
                   f"{f[p][OURS]['model_flops_per_second'] / 1e9:.1f}", f"{f[p][OURS]['fraction_of_matmul_rate']:.1%}",
                   f"{f[p][MARIAN]['fraction_of_matmul_rate']:.1%}"]
                  for p in presets_of(f5) for f in (f5, f5b) if p in f])  # --bf16-presets may leave some out
    f8 = results.get(RESULT_KEYS["test_set_translation"])
    if f8 and "skipped" not in f8:
        for threads, entry in f8["threads"].items():
            md.table(f"Figure 8 — test_2016_flickr, {f8['sentences']} sentences, {f8['model']}, "
                     f"beam {f8['num_beams']}, batch {f8['batch_size']}, {threads} thread(s) (median of {f8['reps']})",
                     ["system", "sentences/s", "tokens/s", "cased BLEU", "outputs identical to ours fp32",
                      "speed / ours fp32"],
                     [[n, f"{e['sentences_per_second']:.1f}", f"{e['tokens_per_second']:,.0f}", f"{e['bleu']:.2f}",
                       f"{e['identical_outputs_to_ours_fp32']} / {f8['sentences']}",
                       f"**{e['speed_over_ours_fp32']:.2f}×**"] for n, e in entry.items()])
    f8b = results.get(RESULT_KEYS["beam_search_comparison"])
    if f8b:
        names = [n for n in f8b if isinstance(f8b[n], dict)]
        md.table(f"Figure 8b — the two beam searches, {f8b['preset']} preset, random weights, {f8b['sentences']} "
                 f"sentences forced to {f8b['forced_output_length']} tokens, batch {f8b['batch_size']}",
                 ["search", "sentences/s", "tokens/s"],
                 [[n, f"{f8b[n]['sentences_per_second']:.2f}", f"{f8b[n]['tokens_per_second']:.1f}"] for n in names])
        md.lines.append(f"Paper's / transformers': **{f8b['ratio_paper_over_transformers']:.3f}×**.\n")
    f8c = results.get(RESULT_KEYS["compile_payoff"])
    if f8c and "skipped" not in f8c:
        md.table(f"Figure 8c — greedy decoding, eager vs static cache + torch.compile, batch {f8c['batch_size']} (s)",
                 ["batch", "source length", "eager", "compiled, first call", "compiled, again"],
                 [[i, r["source_length"], f"{r['eager_seconds']:.2f}", f"{r['compiled_seconds']:.2f}",
                   f"{r['compiled_again_seconds']:.2f}"] for i, r in enumerate(f8c["batches"])])
        md.lines.append(f"Compiling cost {f8c['compile_seconds']:.0f} s; it saves "
                        f"{f8c['saved_seconds_per_batch']:.3f} s per batch, "
                        f"{f8c['saved_seconds_on_the_test_set']:.1f} s over the test set's {f8c['test_set_batches']} batches: "
                        + ("it pays off.\n" if f8c["pays_off_on_the_test_set"] else "**it does not pay off**.\n"))


def markdown_tables(results: dict) -> str:
    machine = results["machine"]
    md = Markdown()
    md.lines.extend([
        f"Command: `{results['command']}` (dtype {results['dtype']}, {results['total_seconds'] / 60:.1f} minutes)",
        "",
        f"Machine: {machine['cpu_model_name']}, {machine['cpu_cores']} cores ({machine['torch_threads']} torch threads)"
        + (f", CPU bf16: {machine['cpu_bf16']}" if "cpu_bf16" in machine else "")
        + (f", GPU {machine['gpu']}" if "gpu" in machine else "")
        + f"; Python {machine['python']}, torch {machine['torch']}, transformers {machine['transformers']}.",
        "",
    ])
    _speed_tables(md, results)
    _resource_tables(md, results)
    _explanation_tables(md, results)
    _fast_path_tables(md, results)
    return md.text()


def step_tables(results: dict) -> str:
    """tables.md of `python -m benchmarks.training` (the step before and after)."""
    lines = [f"Training step before ({results['baseline']}) and after, {results['machine']['cpu_model_name']}, "
             f"{results['threads']} threads, static batch {results['batch']} × {results['length']} tokens per side, "
             f"V {results['vocab']}; load: {results['uptime_before']} → {results['uptime_after']}", "",
             "| shape | precision | before tok/s | after tok/s | after/before (median; best passes) "
             "| GEMM share before → after |", "|---|---|---|---|---|---|"]
    for key, entry in results["steps"].items():
        shape, precision = key.split("/")
        lines.append(f"| {shape} | {precision} | {entry['before']['tokens_per_second']:.0f} | "
                     f"{entry['after']['tokens_per_second']:.0f} | {entry['after_over_before']:.2f}; "
                     f"{entry['after_over_before_best']:.2f} | {entry['before']['gemm_share']:.1%} → "
                     f"{entry['after']['gemm_share']:.1%} |")
    for shape in dict.fromkeys(k.split("/")[0] for k in results["steps"]):
        if f"{shape}/fp32" in results["steps"] and f"{shape}/bf16" in results["steps"]:
            fp32, bf16 = results["steps"][f"{shape}/fp32"], results["steps"][f"{shape}/bf16"]
            lines.append(f"\n{shape}: bf16 / fp32 after: "
                         f"{bf16['after']['tokens_per_second'] / fp32['after']['tokens_per_second']:.2f}; "
                         f"before: {bf16['before']['tokens_per_second'] / fp32['before']['tokens_per_second']:.2f}")
    return "\n".join(lines) + "\n"


def markers(section: str) -> tuple[str, str]:
    return f"<!-- generated:{section}:begin -->", f"<!-- generated:{section}:end -->"


def check_results_md(path: Path, section: str) -> None:
    """Raise ValueError unless `path` has the markers of `section` (checked before a long run, not after)."""
    begin, end = markers(section)
    text = path.read_text() if path.exists() else ""
    if begin not in text or end not in text:
        raise ValueError(f"{path} has no '{begin}' … '{end}' markers to write the {section} tables between.")


def fill_results_md(path: Path, section: str, tables: str) -> None:
    """Replace what lies between the `<!-- generated:SECTION:begin -->` and `...:end -->` markers of `path`."""
    check_results_md(path, section)
    begin, end = markers(section)
    head, rest = path.read_text().split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{tables}\n{end}{tail}")
