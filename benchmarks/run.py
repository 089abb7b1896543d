"""Side-by-side speed of `modeling_vaswani` and transformers' `MarianMTModel`: the command line.

    python -m benchmarks.run --results-md benchmarks/RESULTS.md   # the full run, recorded in RESULTS.md
    python -m benchmarks.run --quick                              # tiny sizes; checks that everything runs
    python -m benchmarks.run --only translation --threads 1       # figure 8 alone, at 1 thread
    benchmarks/gpu.sh                                             # figures 1, 2, 5 on a CUDA GPU in bf16

Run from the repository root; results.json, tables.md, figures.png and profile_*.txt go to --output-dir.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

from modeling_vaswani.cli import ArgumentParser, positive_int, run_main
from modeling_vaswani.model.configuration_vaswani import PRESETS

from . import decoding, memory, profiling, report, speedups, training, translation
from .harness import FULL, MARIAN, OURS, QUICK, clock, machine_record, prepare_corpus, training_batches, write_results

HERE = Path(__file__).resolve().parent
FIGURES = range(1, 9)  # --figures numbers, as the tables and RESULTS.md name them
PARTS = {"training": {1, 4, 5, 7}, "decoding": {2, 3, 8}, "translation": {8}, "memory": {6}, "compile": {7}}  # --only
SKIPPED = {"skipped": "quick mode or --no-compile"}


def comma_separated(convert=str, allowed=None):
    """An argparse type: "a, b" -> (a, b), each converted and, given `allowed`, among those."""
    def parse(text: str) -> tuple:
        try:
            values = tuple(convert(part.strip()) for part in text.split(",") if part.strip())
        except (ValueError, argparse.ArgumentTypeError):
            values = ()
        if not values or (allowed is not None and not set(values) <= set(allowed)):
            among = f" from {', '.join(map(str, allowed))}" if allowed is not None else ""
            raise argparse.ArgumentTypeError(f"expected comma-separated values{among}, got {text!r}")
        return values
    return parse


def parse_args(argv=None):
    parser = ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="Tiny sizes: proves the code runs, measures nothing.")
    add("--figures", type=comma_separated(int, FIGURES), default=tuple(FIGURES),
        help="Comma-separated figure numbers to run.")
    add("--only", type=comma_separated(str, PARTS), help=f"Comma-separated parts instead of --figures: "
        f"{', '.join(PARTS)}.")
    add("--threads", type=comma_separated(positive_int), help="Comma-separated thread counts of figure 8 "
        "(default 1,2; --quick: 1).")
    add("--presets", type=comma_separated(str, PRESETS), help="Comma-separated presets for figures 1, 2, 5 "
        "(default small,base).")
    add("--bf16-presets", type=comma_separated(str, PRESETS), help="Comma-separated presets whose training step "
        "is also timed in bf16 (figures 1b, 5b; default: all of --presets). Without AMX or AVX512-BF16 the CPU "
        "emulates bf16, and a bf16 base step takes many times the fp32 one.")
    add("--device", default="cpu", help="cpu or cuda.")
    add("--max-tokens", type=positive_int, help="Token budget per batch and side for figures 1, 4-7 (default 4096; "
        "§5.1 used 25000).")
    add("--dtype", default="float32", choices=("float32", "bfloat16"),
        help="bfloat16 runs training and generation under autocast.")
    add("--output-dir", help="Where results.json, tables.md, figures.png go (default benchmarks/; a temporary "
        "folder with --quick).")
    add("--results-md", help="Also write the tables into this Markdown file, between its "
        "'<!-- generated:cpu:begin/end -->' (or gpu) markers, e.g. benchmarks/RESULTS.md.")
    add("--no-compile", action="store_true", help="Skip figure 7 (torch.compile).")
    add("--compile", action="store_true", help="Run figure 7 even with --quick (compiling takes minutes).")
    add("--no-profile", action="store_true", help="Skip the torch.profiler tables.")
    args = parser.parse_args(argv)
    presets = args.presets or FULL.presets
    if args.bf16_presets and not set(args.bf16_presets) <= set(presets):
        parser.error(f"argument --bf16-presets: expected presets among --presets {','.join(presets)}, "
                     f"got {','.join(args.bf16_presets)!r}")
    return args


def settings_for(args, device: torch.device):
    settings = dataclasses.replace(QUICK if args.quick else FULL)
    settings.max_tokens = args.max_tokens or settings.max_tokens
    if device.type == "cuda":  # a GPU needs bigger matrices to reach its peak matmul rate
        settings.matmul_size, settings.matmul_reps = 8192, 10
    settings.presets = args.presets or settings.presets
    settings.bf16_presets = args.bf16_presets or settings.bf16_presets
    settings.translate_threads = args.threads or settings.translate_threads
    if device.type != "cpu" or args.dtype != "float32":  # bf16 beside fp32 is the CPU run's second precision
        settings.train_dtypes = (args.dtype,)
    settings.run_compile = (settings.run_compile or args.compile) and not args.no_compile
    return settings


def measure(figures: set, settings, corpus, device, dtype, out_dir: Path, profile: bool, log) -> dict:
    results, cpu = {}, device.type == "cpu"
    bf16 = "bfloat16" in settings.train_dtypes and dtype is None
    # Figure 5 reads figure 1's FLOP rates; 6, 7 and the profiles reuse its batches.
    batches, warm = training_batches(settings, corpus, device) if {1, 5, 6, 7} & figures else (None, None)
    if {1, 5} & figures:
        step_speed, counts = training.training_step_speed(settings, corpus, batches, warm, device, dtype, log)
        if bf16:
            bf16_speed, _ = training.training_step_speed(dataclasses.replace(
                settings, presets=settings.bf16_presets or settings.presets), corpus, batches, warm, device,
                torch.bfloat16, log)
        if 1 in figures:
            results.update({"parameters": counts, "figure_1_training_step": step_speed})
            if bf16:
                results["figure_1b_training_step_bf16"] = training.precision_ratios(step_speed, bf16_speed)
    if 2 in figures:
        results["figure_2_beam_search"] = decoding.beam_search_speed(settings, corpus, device, dtype, log)
    if 3 in figures:
        results["figure_3_cached_vs_recomputing_decoding"] = decoding.cached_vs_recomputing_decoding(
            settings, corpus, device, dtype, log)
    if 4 in figures:
        results["figure_4_data_pipeline"] = speedups.data_pipeline_throughput(settings, corpus, device, dtype, log)
    if 5 in figures:
        results["figure_5_hardware_efficiency"] = training.hardware_efficiency(settings, step_speed, device, dtype, log)
        if bf16:
            results["figure_5b_hardware_efficiency_bf16"] = training.hardware_efficiency(
                settings, bf16_speed, device, torch.bfloat16, log)
    if 6 in figures:
        with tempfile.TemporaryDirectory(prefix="vaswani-bench-mem-") as workdir:
            results["figure_6_peak_memory"] = memory.peak_memory(settings, corpus, batches, device, Path(workdir), log)
    if 7 in figures:
        results["figure_7_torch_compile"] = speedups.compiled_training_step(
            settings, corpus, batches, device, dtype, log) if settings.run_compile else SKIPPED
    if 5 in figures:
        results["appendix_fused_qkv_projection"] = speedups.fused_qkv_projection(settings, corpus, device, log)
    if 8 in figures:
        results["figure_8_test_set_translation"] = (translation.test_set_translation(settings, log) if cpu
                                                    else {"skipped": "measured on the CPU only"})
        if cpu:
            results["figure_8b_beam_searches"] = translation.search_speed(settings, corpus, device, log)
            results["figure_8c_compile_payoff"] = (translation.compile_payoff(settings, log)
                                                   if settings.run_compile else SKIPPED)
    if profile and batches is not None:
        results["profiles"] = profiling.profiles(settings, corpus, batches, device, dtype, out_dir, log)
    return results


def plot(results: dict, path: Path) -> None:
    """figures.png: figure 3 (decoding time against length), figure 1 (training step) and, where measured,
    figure 8 (every system's translation speed against its BLEU)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    f1, f3, f8 = (results.get(k) for k in ("figure_1_training_step", "figure_3_cached_vs_recomputing_decoding",
                                           "figure_8_test_set_translation"))
    f8 = f8 if f8 and "threads" in f8 else None
    fig, axes = plt.subplots(1, 3 if f8 else 2, figsize=(18 if f8 else 12, 4.8))
    if f3:
        ax, lengths = axes[0], np.array([int(k) for k in f3["lengths"]])
        grid = np.linspace(lengths.min(), lengths.max(), 100)
        for name, color, marker, label in (("ours_cached_generate", "C0", "o", "ours, cached generate"),
                                           ("marian_cached_generate", "C1", "s", "Marian, cached generate"),
                                           ("ours_recomputing_greedy_decode", "C3", "^",
                                            "ours, recomputing greedy_decode")):
            fit = f3["fits"][name]
            ax.plot(lengths, [f3["lengths"][str(k)][name]["ms_per_generated_token"] for k in lengths], marker,
                    color=color, label=f"{label} (total ∝ L^{fit['total_time_exponent']:.2f})")
            ax.plot(grid, fit["ms_per_token_intercept"] + fit["ms_per_token_per_unit_length"] * grid, "-",
                    color=color, alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(lengths, [str(k) for k in lengths])
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set(xlabel="forced output length L (tokens)", ylabel="ms per generated token (log)")
        ax.set_title(f"Figure 3: greedy decoding, {f3['preset']}, batch {f3['batch_size']}\n"
                     "markers measured, lines: least-squares a + b·L", fontsize=10)
        ax.legend(fontsize=8)
    if f1:
        ax, presets = axes[1], list(f1)
        x, speeds = np.arange(len(presets)), {s: [f1[p][s]["tokens_per_second"] for p in presets] for s in (OURS, MARIAN)}
        ax.bar(x - 0.2, speeds[OURS], 0.4, label="modeling_vaswani", color="C0")
        ax.bar(x + 0.2, speeds[MARIAN], 0.4, label="MarianMTModel", color="C1")
        for i, p in enumerate(presets):
            ax.annotate(f"{f1[p]['ratio_ours_over_marian']:.2f}×", (x[i], max(speeds[OURS][i], speeds[MARIAN][i])),
                        ha="center", va="bottom")
        ax.set_xticks(x, presets)
        ax.set_ylabel("real source+target tokens / s")
        ax.set_title("Figure 1: training step (forward + backward + Adam)\nsame Multi30k token-budget batches, "
                     "ours / Marian above the bars", fontsize=10)
        ax.legend(fontsize=8)
    if f8:
        ax, markers = axes[2], "os^D"  # one marker shape per thread count
        for t, (threads, entry) in enumerate(f8["threads"].items()):
            for i, (name, e) in enumerate(entry.items()):
                ax.plot(e["sentences_per_second"], e["bleu"], markers[t % 4], color=f"C{i}",
                        label=name if t == 0 else None, markersize=7, alpha=0.85)
            ax.plot([], [], markers[t % 4], color="grey", label=f"{threads} thread(s)")
        ax.set_xscale("log")
        ax.set(xlabel="sentences / s (log)", ylabel="cased BLEU")
        ax.set_title(f"Figure 8: translating test_2016_flickr ({f8['sentences']} sentences, beam {f8['num_beams']})\n"
                     "speed against BLEU, same weights in every system", fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> dict:
    args = parse_args(argv)
    figures = set().union(*(PARTS[part] for part in args.only)) if args.only else set(args.figures)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was given but PyTorch sees no CUDA device; use --device cpu.")
    dtype, section = torch.bfloat16 if args.dtype == "bfloat16" else None, "gpu" if device.type == "cuda" else "cpu"
    if args.results_md:  # fail now, not after the whole run
        report.fill_results_md(Path(args.results_md), section)
    settings = settings_for(args, device)
    out_dir = Path(args.output_dir) if args.output_dir else (
        Path(tempfile.mkdtemp(prefix="vaswani-bench-")) if args.quick else HERE)
    out_dir.mkdir(parents=True, exist_ok=True)
    log, began = clock()
    words = sys.argv[1:] if argv is None else list(argv)
    results = {"command": " ".join([Path(sys.executable).name, "-m", "benchmarks.run", *words]), "quick": args.quick,
               "machine": machine_record(device), "dtype": args.dtype, "settings": dataclasses.asdict(settings)}
    log(f"machine: {results['machine']}")
    corpus = prepare_corpus(settings)
    log(f"corpus: {len(corpus.train_src)} training pairs, vocabulary {len(corpus.tokenizer)}")
    results.update(measure(figures, settings, corpus, device, dtype, out_dir, not args.no_profile, log))
    results["targets"] = report.check_targets(results)
    tables = write_results(out_dir, results, report.markdown_tables, began)
    if {1, 3, 8} & figures:
        plot(results, out_dir / "figures.png")
    if args.results_md:
        report.fill_results_md(Path(args.results_md), section, tables)
    print(tables)
    log(f"wrote {out_dir / 'results.json'}")
    return results


if __name__ == "__main__":
    run_main(main)
