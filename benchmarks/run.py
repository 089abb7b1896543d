"""Side-by-side speed of `modeling_vaswani` and transformers' `MarianMTModel`: the command line.

    python -m benchmarks.run --results-md benchmarks/RESULTS.md   # the full run, recorded in RESULTS.md
    python -m benchmarks.run --quick                              # tiny sizes; checks that everything runs
    python -m benchmarks.run --only translation --threads 1       # figure 8 alone, at 1 thread
    benchmarks/gpu.sh                                             # figures 1, 2, 5 on a CUDA GPU in bf16

Run from the repository root; the figures are listed in benchmarks/__init__.py. Results go to --output-dir
(default benchmarks/): results.json, tables.md, figures.png and profile_*.txt.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from modeling_vaswani.cli import run_main

from . import decoding, memory, plots, profiling, report, speedups, targets, training, translation
from .harness import FULL, QUICK, machine_record, prepare_corpus, training_batches
from .report import RESULT_KEYS

HERE = Path(__file__).resolve().parent
# --figures numbers, as the tables and RESULTS.md name them.
FIGURES = {1: "training_step_speed", 2: "beam_search_speed", 3: "cached_vs_recomputing_decoding",
           4: "data_pipeline_throughput", 5: "hardware_efficiency", 6: "peak_memory", 7: "compiled_training_step",
           8: "test_set_translation"}
# --only names, each a group of figures.
PARTS = {"training": {1, 4, 5, 7}, "decoding": {2, 3, 8}, "translation": {8}, "memory": {6}, "compile": {7}}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Tiny sizes: proves the code runs, measures nothing.")
    parser.add_argument("--figures", default="1,2,3,4,5,6,7,8", help="Comma-separated figure numbers to run.")
    parser.add_argument("--only", help=f"Comma-separated parts instead of --figures: {', '.join(PARTS)}.")
    parser.add_argument("--threads", help="Comma-separated thread counts of figure 8 (default 1,2; --quick: 1).")
    parser.add_argument("--presets", default=None,
                        help="Comma-separated presets for figures 1, 2, 5 (default small,base).")
    parser.add_argument("--bf16-presets", default=None,
                        help="Comma-separated presets whose training step is also timed in bf16 (figures 1b, 5b; "
                             "default: all of --presets). Without AMX or AVX512-BF16 the CPU emulates bf16, and a "
                             "bf16 base step takes many times the fp32 one.")
    parser.add_argument("--device", default="cpu", help="cpu or cuda.")
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="Token budget per batch and side for figures 1, 4-7 (default 4096; §5.1 used 25000).")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                        help="bfloat16 runs training and generation under autocast.")
    parser.add_argument("--output-dir", default=None,
                        help="Where results.json, tables.md, figures.png go "
                             "(default benchmarks/; a temporary folder with --quick).")
    parser.add_argument("--results-md", default=None,
                        help="Also write the tables into this Markdown file, between its "
                             "'<!-- generated:cpu:begin/end -->' (or gpu) markers, e.g. benchmarks/RESULTS.md.")
    parser.add_argument("--no-compile", action="store_true", help="Skip figure 7 (torch.compile).")
    parser.add_argument("--compile", action="store_true",
                        help="Run figure 7 even with --quick (compiling takes minutes).")
    parser.add_argument("--no-profile", action="store_true", help="Skip the torch.profiler tables.")
    return parser.parse_args(argv)


def comma_separated(text: str) -> tuple:  # "small, base" -> ("small", "base")
    return tuple(p.strip() for p in text.split(",") if p.strip())


def chosen_figures(text: str, only: str | None = None) -> set:
    if only is not None:
        parts = comma_separated(only)
        unknown = [p for p in parts if p not in PARTS]
        if unknown or not parts:
            raise ValueError(f"--only takes comma-separated parts from {', '.join(PARTS)}, got {only!r}.")
        return set().union(*(PARTS[p] for p in parts))
    last = max(FIGURES)
    try:
        figures = {int(x) for x in text.split(",") if x.strip()}
    except ValueError:
        raise ValueError(f"--figures must be comma-separated numbers from 1 to {last}, got {text!r}.") from None
    if not figures <= set(FIGURES):
        raise ValueError(f"--figures must name figures 1 to {last}, got {text!r}.")
    return figures


def thread_counts(text: str) -> tuple:
    try:
        counts = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise ValueError(f"--threads must be comma-separated positive numbers, e.g. 1,2; got {text!r}.")
    return counts


def settings_for(args, device: torch.device):
    settings = dataclasses.replace(QUICK if args.quick else FULL)
    if args.max_tokens is not None:
        if args.max_tokens < 1:
            raise ValueError(f"--max-tokens must be a positive number of tokens, got {args.max_tokens}.")
        settings.max_tokens = args.max_tokens
    if device.type == "cuda":  # a GPU needs bigger matrices to reach its peak matmul rate
        settings.matmul_size, settings.matmul_reps = 8192, 10
    if args.presets:
        settings.presets = comma_separated(args.presets)
    if args.bf16_presets:
        settings.bf16_presets = comma_separated(args.bf16_presets)
        if not set(settings.bf16_presets) <= set(settings.presets):
            raise ValueError(f"--bf16-presets must be among the presets {','.join(settings.presets)}, "
                             f"got {args.bf16_presets!r}.")
    if args.threads:
        settings.translate_threads = thread_counts(args.threads)
    if device.type != "cpu" or args.dtype != "float32":  # bf16 beside fp32 is the CPU run's second precision
        settings.train_dtypes = (args.dtype,)
    if args.no_compile:
        settings.run_compile = False
    elif args.compile:
        settings.run_compile = True
    return settings


def measure(figures: set, settings, corpus, device, dtype, out_dir: Path, profile: bool, log) -> dict:
    key = RESULT_KEYS.get
    results = {}
    # Figure 5 reads figure 1's FLOP rates; 6, 7 and the profiles reuse its batches.
    batches, warm = training_batches(settings, corpus, device) if {1, 5, 6, 7} & figures else (None, None)
    if {1, 5} & figures:
        step_speed, counts = training.training_step_speed(settings, corpus, batches, warm, device, dtype, log)
        if 1 in figures:
            results["parameters"] = counts
            results[key("training_step_speed")] = step_speed
        if "bfloat16" in settings.train_dtypes and dtype is None:
            bf16_settings = dataclasses.replace(settings, presets=settings.bf16_presets or settings.presets)
            bf16_speed, _ = training.training_step_speed(bf16_settings, corpus, batches, warm, device, torch.bfloat16,
                                                         log)
            if 1 in figures:
                results[key("training_step_speed_bf16")] = training.precision_ratios(step_speed, bf16_speed)
    if 2 in figures:
        results[key("beam_search_speed")] = decoding.beam_search_speed(settings, corpus, device, dtype, log)
    if 3 in figures:
        results[key("cached_vs_recomputing_decoding")] = decoding.cached_vs_recomputing_decoding(
            settings, corpus, device, dtype, log)
    if 4 in figures:
        results[key("data_pipeline_throughput")] = speedups.data_pipeline_throughput(settings, corpus, device,
                                                                                      dtype, log)
    if 5 in figures:
        results[key("hardware_efficiency")] = training.hardware_efficiency(settings, step_speed, device, dtype, log)
        if "bfloat16" in settings.train_dtypes and dtype is None:
            results[key("hardware_efficiency_bf16")] = training.hardware_efficiency(settings, bf16_speed, device,
                                                                                   torch.bfloat16, log)
    if 6 in figures:
        with tempfile.TemporaryDirectory(prefix="vaswani-bench-mem-") as workdir:
            results[key("peak_memory")] = memory.peak_memory(settings, corpus, batches, device, Path(workdir), log)
    if 7 in figures:
        results[key("compiled_training_step")] = (
            speedups.compiled_training_step(settings, corpus, batches, device, dtype, log) if settings.run_compile
            else {"skipped": "quick mode or --no-compile"})
    if 5 in figures:
        results[key("fused_qkv_projection")] = speedups.fused_qkv_projection(settings, corpus, device, log)
    if 8 in figures:
        if device.type != "cpu":
            results[key("test_set_translation")] = {"skipped": "measured on the CPU only"}
        else:
            results[key("test_set_translation")] = translation.test_set_translation(settings, log)
            results[key("beam_search_comparison")] = translation.search_speed(settings, corpus, device, log)
            results[key("compile_payoff")] = (translation.compile_payoff(settings, log) if settings.run_compile
                                              else {"skipped": "quick mode or --no-compile"})
    if profile and batches is not None:
        results[key("profiles")] = profiling.profiles(settings, corpus, batches, device, dtype, out_dir, log)
    return results


def main(argv=None) -> dict:
    args = parse_args(argv)
    figures = chosen_figures(args.figures, args.only)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was given but PyTorch sees no CUDA device; use --device cpu.")
    dtype = torch.bfloat16 if args.dtype == "bfloat16" else None
    section = "gpu" if device.type == "cuda" else "cpu"
    if args.results_md:  # fail now, not after the whole run
        report.check_results_md(Path(args.results_md), section)
    settings = settings_for(args, device)
    out_dir = Path(args.output_dir) if args.output_dir else (
        Path(tempfile.mkdtemp(prefix="vaswani-bench-")) if args.quick else HERE)
    out_dir.mkdir(parents=True, exist_ok=True)

    began = time.perf_counter()

    def log(message):
        print(f"{time.perf_counter() - began:7.1f}s {message}", flush=True)

    words = sys.argv[1:] if argv is None else list(argv)
    results = {
        "command": " ".join([Path(sys.executable).name, "-m", "benchmarks.run", *words]),
        "quick": args.quick,
        "machine": machine_record(device),
        "dtype": args.dtype,
        "settings": dataclasses.asdict(settings),
    }
    log(f"machine: {results['machine']}")
    corpus = prepare_corpus(settings)
    log(f"corpus: {len(corpus.train_src)} training pairs, vocabulary {len(corpus.tokenizer)}")
    results.update(measure(figures, settings, corpus, device, dtype, out_dir, not args.no_profile, log))
    results["targets"] = targets.check_targets(results)
    results["total_seconds"] = time.perf_counter() - began

    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
    tables = report.markdown_tables(results)
    (out_dir / "tables.md").write_text(tables)
    if {1, 3, 8} & figures:
        plots.plot(results, out_dir / "figures.png")
    if args.results_md:
        report.fill_results_md(Path(args.results_md), section, tables)
    print(tables)
    log(f"wrote {out_dir / 'results.json'}")
    return results


if __name__ == "__main__":
    run_main(main)
