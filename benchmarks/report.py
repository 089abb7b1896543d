"""What a run reports, read off its results dict alone, so a recorded results.json gives it again: the targets
(recorded, not asserted), the Markdown tables, the RESULTS.md block."""

from __future__ import annotations

from pathlib import Path

from modeling_vaswani.model.generation import NUM_BEAMS

from .harness import MARIAN, OURS
from .translation import CT2_FP32, MARIAN_BF16, MARIAN_FP32, OURS_BF16, OURS_FP32, OURS_INT8, OURS_PAPER, OURS_STATIC

PYTORCH_PATHS = (OURS_FP32, OURS_PAPER, OURS_BF16, OURS_INT8, OURS_STATIC)  # figure 8's rows of our model in PyTorch


def presets_of(entry: dict) -> list:  # the per-preset entries of a result (the others are its settings)
    return [p for p in entry if isinstance(entry[p], dict)]


def both(entry: dict, key: str, spec: str) -> list:  # ours', then Marian's `key`, formatted
    return [format(entry[system][key], spec) for system in (OURS, MARIAN)]


def table_lines(header, rows) -> list:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(c) for c in row) + " |" for row in rows)]


def check_targets(results: dict) -> list:
    """[{target, measured, met, shortfall}] for the measurements that ran; those n/a on this machine last."""
    rows, not_applicable, machine = [], [], results.get("machine", {})
    get = lambda key: results.get(key) or {}  # noqa: E731

    def add(target, measured, goal, text=None):
        rows.append({"target": target, "measured": text or f"{measured:.3f}×", "met": measured >= goal,
                     "shortfall": None if measured >= goal else f"{(goal - measured) / goal:.1%} below"})

    for preset, entry in get("figure_1_training_step").items():
        add(f"training step ≥ 1.1× Marian ({preset})", entry["ratio_ours_over_marian"], 1.1)
    beam = get("figure_2_beam_search")
    for preset in presets_of(beam):
        add(f"beam-{NUM_BEAMS} generation ≥ 1.0× Marian ({preset})", beam[preset]["ratio_ours_over_marian"], 1.0)
    if pipeline := get("figure_4_data_pipeline"):
        r = pipeline["ratio_token_budget_over_fixed"]
        add("token-budget real tokens/s ≥ 1.3× fixed-size batches", r, 1.3, f"{r:.2f}×")
    if efficiency := get("figure_5_hardware_efficiency"):
        preset = "base" if "base" in efficiency else presets_of(efficiency)[-1]
        fraction = efficiency[preset][OURS]["fraction_of_matmul_rate"]
        add(f"model FLOP/s ≥ 70% of the measured matmul rate ({preset})", fraction, 0.70, f"{fraction:.1%}")
    if decoding := get("figure_3_cached_vs_recomputing_decoding"):
        cached, recomputing = (decoding["fits"][n]["total_time_exponent"]
                               for n in ("ours_cached_generate", "ours_recomputing_greedy_decode"))
        rows.append({"target": "cached generation linear (total ∝ L^k, k ≈ 1), recomputing quadratic (k ≈ 2)",
                     "measured": f"cached k = {cached:.2f}, recomputing k = {recomputing:.2f}",
                     "met": cached < 1.3 and recomputing > 1.5, "shortfall": None})
    for preset, entry in get("figure_1b_training_step_bf16").items():
        add(f"bf16 training step ≥ 1.1× Marian ({preset})", entry["ratio_ours_over_marian"], 1.1)
        ratio, goal = entry[OURS]["bf16_over_fp32"], {"base": 2.0}.get(preset, 1.0)  # AMX: base gains, small not lose
        if machine.get("cpu_bf16") == "amx":
            add(f"bf16 {preset} step ≥ {goal:g}× the fp32 step (AMX)", ratio, goal, f"{ratio:.2f}×")
        else:
            not_applicable.append({"target": f"bf16 {preset} step ≥ {goal:g}× the fp32 step (on a CPU with AMX)",
                                   "met": None, "shortfall": None,
                                   "measured": f"{ratio:.2f}× (CPU bf16 support: {machine.get('cpu_bf16')})"})
    translation = get("figure_8_test_set_translation")
    for threads, entry in (translation.get("threads") or {}).items():
        for ours, theirs in ((OURS_FP32, MARIAN_FP32), (OURS_BF16, MARIAN_BF16)):
            if ours in entry and theirs in entry:
                r = entry[ours]["sentences_per_second"] / entry[theirs]["sentences_per_second"]
                add(f"test set: {ours} ≥ 1.2× {theirs} ({threads} thread(s))", r, 1.2, f"{r:.2f}×")
        base = entry[OURS_FP32]
        close = [n for n in PYTORCH_PATHS if n in entry and abs(entry[n]["bleu"] - base["bleu"]) <= 0.3]
        fastest = max(close, key=lambda n: entry[n]["sentences_per_second"])
        speed = entry[fastest]["speed_over_ours_fp32"]
        add(f"test set: fastest PyTorch path, BLEU within 0.3, ≥ 3× ours fp32 ({threads} thread(s))", speed, 3.0,
            f"{speed:.2f}× ({fastest})")
        if CT2_FP32 in entry:
            same, total = entry[CT2_FP32]["identical_outputs_to_ours_fp32"], translation["sentences"]
            add(f"test set: CTranslate2 float32 outputs identical to ours fp32 ({threads} thread(s))", same / total,
                1.0, f"{same} of {total}")
        if OURS_PAPER in entry:
            r = entry[OURS_PAPER]["sentences_per_second"] / base["sentences_per_second"]
            add(f"test set: paper's beam search ≥ 1.0× transformers' ({threads} thread(s))", r, 1.0, f"{r:.2f}×")
    if search := get("figure_8b_beam_searches"):
        r = search["ratio_paper_over_transformers"]
        add(f"paper's beam search ≥ 1.0× transformers' ({search['preset']}, forced length)", r, 1.0, f"{r:.2f}×")
    return rows + not_applicable


def markdown_tables(results: dict) -> str:
    machine, lines = results["machine"], []

    def table(title, header, rows):
        lines.extend([f"### {title}", "", *table_lines(header, rows), ""])

    lines += [f"Command: `{results['command']}` (dtype {results['dtype']}, {results['total_seconds'] / 60:.1f} minutes)",
              "", f"Machine: {machine['cpu_model_name']}, {machine['cpu_cores']} cores ({machine['torch_threads']} "
              "torch threads)" + (f", CPU bf16: {machine['cpu_bf16']}" if "cpu_bf16" in machine else "")
              + (f", GPU {machine['gpu']}" if "gpu" in machine else "")
              + f"; Python {machine['python']}, torch {machine['torch']}, transformers {machine['transformers']}.", ""]
    if results.get("targets"):
        table("Targets (recorded, not asserted)", ["target", "measured", "met"],
              [[t["target"], t["measured"], "n/a" if t["met"] is None
                else "yes" if t["met"] else f"**no** ({t['shortfall'] or 'see text'})"] for t in results["targets"]])
    if params := results.get("parameters"):
        table("Parameters", ["preset", "ours trainable", "Marian trainable", "difference",
                             "Marian frozen position tables + buffers"],
              [[p, *both(c, "trainable", ","), f"{c['trainable_difference_percent']:+.3f}%",
                f"{c[MARIAN]['all_parameters'] - c[MARIAN]['trainable']:,} + {c[MARIAN]['buffers']:,}"]
               for p, c in params.items()])
    if f1 := results.get("figure_1_training_step"):
        table("Figure 1 — training step (forward + backward + Adam), real source+target tokens/s",
              ["preset", "batches × sentences", "ours tok/s", "Marian tok/s", "ours s/step", "Marian s/step",
               "ours / Marian"],
              [[p, f"{e['batches']} × {e['sentences_per_pass'] / e['batches']:.0f}", *both(e, "tokens_per_second", ",.0f"),
                *both(e, "seconds_per_step", ".3f"), f"**{e['ratio_ours_over_marian']:.3f}**"] for p, e in f1.items()])
    if f2 := results.get("figure_2_beam_search"):
        table(f"Figure 2 — beam {NUM_BEAMS}, {f2['sentences']} sentences, forced length {f2['forced_output_length']}",
              ["preset", "ours sent/s", "Marian sent/s", "ours tok/s", "Marian tok/s", "ours / Marian"],
              [[p, *both(f2[p], "sentences_per_second", ".2f"), *both(f2[p], "tokens_per_second", ".1f"),
                f"**{f2[p]['ratio_ours_over_marian']:.3f}**"] for p in presets_of(f2)])
    if f3 := results.get("figure_3_cached_vs_recomputing_decoding"):
        names = ("ours_cached_generate", "ours_recomputing_greedy_decode", "marian_cached_generate")
        table(f"Figure 3 — greedy decoding, ms per generated token ({f3['preset']}, batch {f3['batch_size']})",
              ["output length", "ours cached generate", "ours recomputing greedy_decode", "Marian cached generate",
               "recomputing / cached"],
              [[k, *(f"{e[n]['ms_per_generated_token']:.2f}" for n in names), f"{e['recomputing_over_cached']:.1f}×"]
               for k, e in f3["lengths"].items()])
        table("Figure 3 — fits", ["decoder", "ms/token at L→0", "ms/token added per unit length",
                                  "total time ∝ L^k, k ="],
              [[n, f"{f['ms_per_token_intercept']:.3f}", f"{f['ms_per_token_per_unit_length']:.4f}",
                f"{f['total_time_exponent']:.2f}"] for n, f in f3["fits"].items()])
    if f4 := results.get("figure_4_data_pipeline"):
        table(f"Figure 4 — data pipeline ({f4['preset']} model, budget {f4['max_tokens']} tokens/side, "
              f"fixed batch size {f4['fixed_batch_size']})",
              ["batching", "batches/epoch", "measured", "mean real tokens/batch", "padding efficiency",
               "real tokens/s", "epoch seconds"],
              [[n, e["batches_per_epoch"], f"{e['batches_measured']}" + " (time cap)" * (not e["whole_epoch_measured"]),
                f"{e['mean_real_tokens_per_batch']:.0f}", f"{e['padding_efficiency']:.3f}",
                f"{e['real_tokens_per_second']:,.0f}",
                f"{e['epoch_seconds']:.0f}" + " (extrapolated)" * e["epoch_seconds_is_extrapolated"]]
               for n, e in ((k, f4[k]) for k in ("token_budget", "fixed_size_random"))])
        lines.append(f"Token budget / fixed size: **{f4['ratio_token_budget_over_fixed']:.2f}×** real tokens/s.\n")
    if f5 := results.get("figure_5_hardware_efficiency"):
        table(f"Figure 5 — model FLOP/s of the training step vs torch.mm ({f5['matmul_size']}², {f5['matmul_dtype']}: "
              f"{f5['matmul_flops_per_second'] / 1e9:.1f} GFLOP/s)",
              ["preset", "ours GFLOP/s", "ours fraction", "Marian GFLOP/s", "Marian fraction"],
              [[p, *(x for s in (OURS, MARIAN) for x in (f"{f5[p][s]['model_flops_per_second'] / 1e9:.1f}",
                                                          f"{f5[p][s]['fraction_of_matmul_rate']:.1%}"))]
               for p in presets_of(f5)])
    if f6 := results.get("figure_6_peak_memory"):
        table(f"Figure 6 — peak resident memory, MiB (train: {f6['train_preset']}, {f6['train_steps']} steps; "
              f"translate: {f6['translate_preset']}, {f6['translate_sentences']} sentences, beam {NUM_BEAMS}, "
              f"batch {f6['translate_batch_size']}, forced length {f6['forced_output_length']})",
              ["workload", "child start", "ours after model build", "ours peak", "Marian after model build",
               "Marian peak", "ours / Marian peak"],
              [[t, f"{f6[t][OURS]['rss_at_start_mib']:.0f}",
                *(f"{f6[t][s][k]:.0f}" for s in (OURS, MARIAN) for k in ("rss_after_setup_mib", "peak_rss_mib")),
                f"{f6[t]['ratio_ours_over_marian']:.3f}"] for t in ("train", "translate")])
    profiles = results.get("profiles") or {}
    for key, what in (("training_breakdown", "one training step (figure 1's first batch)"),
                      ("generation_breakdown", "one beam-search batch (figure 2's first batch)")):
        if breakdown := profiles.get(key):
            table(f"Where the CPU time goes: {what}, {profiles['preset']} (torch.profiler, share of the profiled time)",
                  ["category", "ours", "Marian"],
                  [[c, *both(breakdown, c, ".1%")] for c in breakdown[OURS]])
    if qkv := results.get("appendix_fused_qkv_projection"):
        table("Appendix — Q/K/V projections: three Linears vs one matmul on concatenated weights (median s)",
              ["shape", "separate", "fused", "fused / separate"],
              [[k, f"{e['separate']:.4f}", f"{e['fused']:.4f}", f"{e['fused_over_separate_time']:.3f}"]
               for k, e in qkv.items()])
    if (f7 := results.get("figure_7_torch_compile")) and "skipped" not in f7:
        table(f"Figure 7 — torch.compile of the training step ({f7['preset']})",
              ["mode", "tokens/s", "first pass incl. compilation (s)"],
              [[m, f"{f7[m]['tokens_per_second']:,.0f}", t] for m, t in
               (("eager", ""), ("compiled", f"{f7['first_pass_seconds_including_compilation']:.1f}"))])
        lines.append(f"Compiled / eager: **{f7['ratio_compiled_over_eager']:.3f}×**.\n")
    if f1b := results.get("figure_1b_training_step_bf16"):
        table("Figure 1b — training step in bf16 (CPU autocast), real source+target tokens/s",
              ["preset", "ours tok/s", "Marian tok/s", "ours bf16 / fp32", "Marian bf16 / fp32", "ours / Marian"],
              [[p, *both(e, "tokens_per_second", ",.0f"), *(f"{r}×" for r in both(e, "bf16_over_fp32", ".2f")),
                f"**{e['ratio_ours_over_marian']:.3f}**"] for p, e in f1b.items()])
    if f5 and (f5b := results.get("figure_5b_hardware_efficiency_bf16")):
        table("Figure 5b — model FLOP/s of the training step as a share of each precision's torch.mm rate",
              ["preset", "precision", "matmul GFLOP/s", "ours GFLOP/s", "ours share", "Marian share"],
              [[p, f["matmul_dtype"].replace("torch.", ""), f"{f['matmul_flops_per_second'] / 1e9:.1f}",
                f"{f[p][OURS]['model_flops_per_second'] / 1e9:.1f}", *both(f[p], "fraction_of_matmul_rate", ".1%")]
               for p in presets_of(f5) for f in (f5, f5b) if p in f])  # --bf16-presets may leave some out
    if (f8 := results.get("figure_8_test_set_translation")) and "skipped" not in f8:
        for threads, entry in f8["threads"].items():
            table(f"Figure 8 — test_2016_flickr, {f8['sentences']} sentences, {f8['model']}, beam {f8['num_beams']}, "
                  f"batch {f8['batch_size']}, {threads} thread(s) (median of {f8['reps']})",
                  ["system", "sentences/s", "tokens/s", "cased BLEU", "outputs identical to ours fp32",
                   "speed / ours fp32"],
                  [[n, f"{e['sentences_per_second']:.1f}", f"{e['tokens_per_second']:,.0f}", f"{e['bleu']:.2f}",
                    f"{e['identical_outputs_to_ours_fp32']} / {f8['sentences']}", f"**{e['speed_over_ours_fp32']:.2f}×**"]
                   for n, e in entry.items()])
    if f8b := results.get("figure_8b_beam_searches"):
        table(f"Figure 8b — the two beam searches, {f8b['preset']} preset, random weights, {f8b['sentences']} "
              f"sentences forced to {f8b['forced_output_length']} tokens, batch {f8b['batch_size']}",
              ["search", "sentences/s", "tokens/s"],
              [[n, f"{f8b[n]['sentences_per_second']:.2f}", f"{f8b[n]['tokens_per_second']:.1f}"] for n in presets_of(f8b)])
        lines.append(f"Paper's / transformers': **{f8b['ratio_paper_over_transformers']:.3f}×**.\n")
    if (f8c := results.get("figure_8c_compile_payoff")) and "skipped" not in f8c:
        table(f"Figure 8c — greedy decoding, eager vs static cache + torch.compile, batch {f8c['batch_size']} (s)",
              ["batch", "source length", "eager", "compiled, first call", "compiled, again"],
              [[i, r["source_length"], *(f"{r[k + '_seconds']:.2f}" for k in ("eager", "compiled", "compiled_again"))]
               for i, r in enumerate(f8c["batches"])])
        lines.append(f"Compiling cost {f8c['compile_seconds']:.0f} s; it saves {f8c['saved_seconds_per_batch']:.3f} s "
                     f"per batch, {f8c['saved_seconds_on_the_test_set']:.1f} s over the test set's "
                     f"{f8c['test_set_batches']} batches: "
                     + ("it pays off.\n" if f8c["pays_off_on_the_test_set"] else "**it does not pay off**.\n"))
    return "\n".join(lines)


def step_tables(results: dict) -> str:
    """tables.md of `python -m benchmarks.training` (the step before and after)."""
    steps = results["steps"]
    lines = [f"Training step before ({results['baseline']}) and after, {results['machine']['cpu_model_name']}, "
             f"{results['threads']} threads, static batch {results['batch']} × {results['length']} tokens per side, "
             f"V {results['vocab']}; load: {results['uptime_before']} → {results['uptime_after']}", "",
             *table_lines(["shape", "precision", "before tok/s", "after tok/s", "after/before (median; best passes)",
                           "GEMM share before → after"],
                          [[*key.split("/"), f"{e['before']['tokens_per_second']:.0f}",
                            f"{e['after']['tokens_per_second']:.0f}",
                            f"{e['after_over_before']:.2f}; {e['after_over_before_best']:.2f}",
                            f"{e['before']['gemm_share']:.1%} → {e['after']['gemm_share']:.1%}"]
                           for key, e in steps.items()])]
    for shape in dict.fromkeys(k.split("/")[0] for k in steps):
        if f"{shape}/fp32" in steps and f"{shape}/bf16" in steps:
            fp32, bf16 = steps[f"{shape}/fp32"], steps[f"{shape}/bf16"]
            lines.append(f"\n{shape}: bf16 / fp32 after: "
                         f"{bf16['after']['tokens_per_second'] / fp32['after']['tokens_per_second']:.2f}; "
                         f"before: {bf16['before']['tokens_per_second'] / fp32['before']['tokens_per_second']:.2f}")
    return "\n".join(lines) + "\n"


def profile_table(results: dict) -> str:
    """tables.md of `python -m benchmarks.training --profile`: each op's share of the step's self CPU time."""
    return "\n".join(table_lines(["shape/precision", "op", "share of self CPU time"],
                                  [[run, op, f"{share:.1%}"] for run, p in results["profiles"].items()
                                   for op, share in p["largest_shares"].items()])) + "\n"


def fill_results_md(path: Path, section: str, tables: str | None = None) -> None:
    """Replace what lies between `path`'s `<!-- generated:SECTION:begin -->` and `...:end -->` markers with
    `tables`; with None only check that the markers are there (before a long run, not after)."""
    begin, end = f"<!-- generated:{section}:begin -->", f"<!-- generated:{section}:end -->"
    text = path.read_text() if path.exists() else ""
    if begin not in text or end not in text:
        raise ValueError(f"{path} has no '{begin}' … '{end}' markers to write the {section} tables between.")
    if tables is not None:
        head, rest = text.split(begin, 1)
        path.write_text(f"{head}{begin}\n{tables}\n{end}{rest.split(end, 1)[1]}")
