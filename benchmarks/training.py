"""The training step (forward + backward + Adam, §5.3), timed in alternation: ours against Marian on
Multi30k batches (figures 1, 1b, 5, 7), and this checkout against a git commit (`--baseline`).

    python -m benchmarks.training --baseline f52a05e --output-dir benchmarks/recorded/<date>-training-step
    python -m benchmarks.training --quick --baseline-tree .          # tiny sizes: proves the code runs
    python -m benchmarks.training --profile --shapes shipped --steps 10 --warmup 3   # where a step's time goes

Before and after each run in a worker process (the baseline from `git archive`) on the same static batch
of random ids, one worker per package and precision; the parent asks each for a pass of steps in turn,
A B A B ... Each step runs as its package's train.py runs it on a CPU: layers compiled where that is its default
(a C++ compiler found), the compilation in the untimed steps; --eager compiles neither.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration

from .harness import (MARIAN, OURS, TrainingStep, alternate, build_pair, clock, corpus_config, machine_record,
                      parameter_counts, ratio, real_tokens, summary, timed, write_results)

ROOT = Path(__file__).resolve().parent.parent
SHAPES = {  # the before/after shapes; V = 8,000 for all, as the shipped model's vocabulary
    "shipped": dict(d_model=128, d_ff=512, num_heads=4, num_layers=6, dropout=0.15),  # the seventh edition's
    "shipped4": dict(d_model=128, d_ff=512, num_heads=4, num_layers=4, dropout=0.15),  # "shipped" until the sixth
    "small": dict(d_model=256, d_ff=1024, num_heads=4, num_layers=3, dropout=0.1),
    "base": dict(d_model=512, d_ff=2048, num_heads=8, num_layers=6, dropout=0.1),
    "tiny": dict(d_model=32, d_ff=64, num_heads=4, num_layers=2, dropout=0.0),
}


def training_flops(config, batch: dict) -> float:
    """Analytic FLOPs of one step on the padded batch, forward × 3 for forward + backward: every Linear,
    Q·Kᵀ and weights·V as full squares, the output projection; not the element-wise ops, the loss or Adam."""
    d, f, h = config.d_model, config.d_ff, config.num_heads
    qk, v = h * config.d_k, h * config.d_v
    (batch_size, s), t = batch["input_ids"].shape, batch["labels"].shape[1]
    enc, dec = batch_size * s, batch_size * t  # token positions on each side

    def mm(rows, inner, cols):
        return 2.0 * rows * inner * cols

    def projections(queries, keys):  # W^Q, W^K, W^V, W^O (§3.2.2)
        return mm(queries, d, qk) + mm(keys, d, qk) + mm(keys, d, v) + mm(queries, v, d)

    def attention(q_len, k_len):  # Eq. (1), per head
        return batch_size * h * (mm(q_len, config.d_k, k_len) + mm(q_len, k_len, config.d_v))

    def ffn(n):  # Eq. (2)
        return mm(n, d, f) + mm(n, f, d)

    encoder_layer = projections(enc, enc) + attention(s, s) + ffn(enc)
    decoder_layer = projections(dec, dec) + attention(t, t) + projections(dec, enc) + attention(t, s) + ffn(dec)
    forward = (config.num_layers * encoder_layer + config.num_decoder_layers * decoder_layer
               + mm(dec, d, config.vocab_size))
    return 3.0 * forward


def matmul_rate(size: int, reps: int, device: torch.device, dtype: torch.dtype) -> float:
    """Best-of-`reps` FLOP/s of a product of two size × size matrices: torch.mm's, or on a CPU oneDNN's where that
    is faster (the trainer's float32 products take the faster: cpu_products.py)."""
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    products = [lambda: torch.mm(a, b)]
    if device.type == "cpu" and torch.backends.mkldnn.is_available():
        from modeling_vaswani.training.cpu_products import onednn_linear  # here: a worker may run an older package

        products.append(lambda: onednn_linear(a, b, None))
    rates = []
    for product in products:
        product()  # warm-up
        rates.append(2.0 * size**3 / min(timed(product, device) for _ in range(reps)))
    return max(rates)


def training_step_speed(settings, corpus, batches, warm, device, dtype, log) -> tuple[dict, dict]:
    """Figure 1: real source+target tokens/s per preset; also each preset's parameter counts."""
    tokens, results, counts = sum(real_tokens(b) for b in batches), {}, {}
    for preset in settings.presets:
        config = corpus_config(corpus, preset)
        models = build_pair(config, device)
        counts[preset] = parameter_counts(models)
        log(f"[1] {preset}: trainable parameters ours {counts[preset][OURS]['trainable']:,}, "
            f"Marian {counts[preset][MARIAN]['trainable']:,}")
        trainers = {name: TrainingStep(name, m, dtype, device) for name, m in models.items()}
        seconds = alternate({n: (lambda t=t: [t.step(b) for b in batches]) for n, t in trainers.items()},
                            settings.train_reps, device,
                            warmup={n: (lambda t=t: t.step(warm)) for n, t in trainers.items()})
        flops = sum(training_flops(config, b) for b in batches)
        entry = {name: summary(seconds[name], tokens, "tokens_per_second") for name in trainers}
        for e in entry.values():
            e["model_flops_per_second"] = flops / e["median_seconds"]
            e["seconds_per_step"] = e["median_seconds"] / len(batches)
        entry.update(ratio_ours_over_marian=ratio(entry, "tokens_per_second"), batches=len(batches),
                     real_tokens_per_pass=tokens,
                     padded_tokens_per_pass=sum(b["input_ids"].numel() + b["labels"].numel() for b in batches),
                     sentences_per_pass=sum(b["input_ids"].shape[0] for b in batches), flops_per_pass=flops)
        results[preset] = entry
        log(f"[1] {preset}: ours {entry[OURS]['tokens_per_second']:.0f} tok/s, Marian "
            f"{entry[MARIAN]['tokens_per_second']:.0f} tok/s, ratio {entry['ratio_ours_over_marian']:.3f}")
        del models, trainers
    return results, counts


def precision_ratios(fp32_speed: dict, bf16_speed: dict) -> dict:
    """Figure 1b: the bf16 (CPU autocast) step, with its speed over figure 1's fp32 step."""
    return {preset: {**entry, **{name: {**entry[name], "bf16_over_fp32": entry[name]["tokens_per_second"]
                                        / fp32_speed[preset][name]["tokens_per_second"]} for name in (OURS, MARIAN)}}
            for preset, entry in bf16_speed.items()}


def hardware_efficiency(settings, step_speed: dict, device, dtype, log) -> dict:
    """Figure 5: the step's model FLOP/s (from figure 1) over this machine's matmul rate."""
    mm_dtype = dtype if dtype is not None else torch.float32
    rate = matmul_rate(settings.matmul_size, settings.matmul_reps, device, mm_dtype)
    results = {"matmul_flops_per_second": rate, "matmul_size": settings.matmul_size, "matmul_dtype": str(mm_dtype)}
    for preset, entry in step_speed.items():
        results[preset] = {name: {"model_flops_per_second": entry[name]["model_flops_per_second"],
                                  "fraction_of_matmul_rate": entry[name]["model_flops_per_second"] / rate}
                           for name in (OURS, MARIAN)}
        log(f"[5] {preset}: ours {results[preset][OURS]['fraction_of_matmul_rate']:.1%} of "
            f"{rate / 1e9:.1f} GFLOP/s, Marian {results[preset][MARIAN]['fraction_of_matmul_rate']:.1%}")
    return results


# --- before and after: one worker process per package ----------------------------------------------


def shape_config(shape: str, vocab: int, **special):
    return VaswaniConfig(**SHAPES[shape], num_decoder_layers=SHAPES[shape]["num_layers"], vocab_size=vocab, **special)


def step_and_batch(shape: str, precision: str, batch: int, length: int, vocab: int,
                   compiled: bool = False) -> tuple[TrainingStep, dict]:
    """The package's training step (whichever package is on PYTHONPATH) and a static batch of random ids; compiled:
    its layers compiled, as train.py does."""
    try:  # the new step; a package without it takes the model's forward with labels
        from modeling_vaswani.training.chunked_loss import training_loss
    except ImportError:
        training_loss = lambda model, inputs: model(**inputs).loss  # noqa: E731
    config = shape_config(shape, vocab, label_smoothing=0.1, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                          decoder_start_token_id=1)
    torch.manual_seed(0)
    model = VaswaniForConditionalGeneration(config)
    with suppress(ImportError):  # the later speed-ups, as the trainer sets them up, where the package has them
        try:  # dropout masks from random integers, Q, K and V in one product
            from modeling_vaswani.training.fast_modules import use_fast_modules
        except ImportError:  # a package from before them: its dropout alone
            from modeling_vaswani.training.fast_dropout import use_integer_mask_dropout as use_fast_modules
        use_fast_modules(model)
        from modeling_vaswani.training.allocator import keep_freed_memory
        keep_freed_memory()  # malloc keeps freed memory
    if compiled:
        from modeling_vaswani.training.trainer import compile_layers
        compile_layers(model)
    trainer = TrainingStep(OURS, model, torch.bfloat16 if precision == "bf16" else None, torch.device("cpu"),
                           loss=training_loss)
    inputs = {"input_ids": torch.randint(3, vocab, (batch, length)), "labels": torch.randint(3, vocab, (batch, length)),
              "attention_mask": torch.ones(batch, length, dtype=torch.long)}
    return trainer, inputs


def compiles_by_default() -> bool:
    """Whether the package's train.py compiles its layers on this CPU (one from before that default has no
    cpp_compiler: it trained eagerly)."""
    try:
        from modeling_vaswani.machine import cpp_compiler
    except ImportError:
        return False
    return cpp_compiler() is not None


def worker(shape: str, precision: str, batch: int, length: int, vocab: int, compiled: int) -> None:
    """Answer each line on stdin (a number of steps) with that pass's wall-clock and CPU seconds."""
    compiled = bool(compiled) and compiles_by_default()
    trainer, inputs = step_and_batch(shape, precision, batch, length, vocab, compiled)
    print(json.dumps({"ready": True, "fused_adam": bool(trainer.optimizer.param_groups[0].get("fused")),
                      "compiled": compiled}), flush=True)
    for line in sys.stdin:
        began, cpu = time.perf_counter(), time.process_time()
        for _ in range(int(line)):
            trainer.step(inputs)
        print(json.dumps({"seconds": time.perf_counter() - began, "cpu_seconds": time.process_time() - cpu}), flush=True)


def start_worker(tree: Path, shape: str, precision: str, args) -> tuple[subprocess.Popen, dict]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys([str(tree), str(ROOT)])),
           "OMP_NUM_THREADS": str(args.threads)}
    process = subprocess.Popen([sys.executable, "-m", "benchmarks.training", "--worker", shape, precision,
                                *map(str, (args.batch, args.length, args.vocab, int(not args.eager)))],
                               stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env=env, cwd=tree)
    return process, answer(process)


def answer(process: subprocess.Popen, steps: int | None = None) -> dict:
    """The worker's next line: after asking for `steps` steps, {"seconds", "cpu_seconds"} of them."""
    if steps is not None:
        process.stdin.write(f"{steps}\n")
        process.stdin.flush()
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"worker {process.args} ended with code {process.wait()}")
    return json.loads(line)


def compare(trees: dict, shape: str, precisions: list[str], args, log) -> dict:
    """Both steps at one shape in every precision, all alternating (so bf16 over float32 is a side-by-side ratio
    too); for each precision tokens/s and after/before."""
    workers = {(name, precision): start_worker(tree, shape, precision, args)
               for precision in precisions for name, tree in trees.items()}
    passes = {key: [] for key in workers}
    try:
        for process, _ in workers.values():
            answer(process, args.warmup)
        for _ in range(args.reps):
            for key, (process, _) in workers.items():
                passes[key].append(answer(process, args.steps))
    finally:
        for process, _ in workers.values():
            process.stdin.close()
            process.wait()
    tokens, entries = 2 * args.batch * args.length, {}  # source + target, all real
    for (name, precision), done in passes.items():
        values = [p["seconds"] / args.steps for p in done]
        entries.setdefault(precision, {})[name] = {
            "seconds_per_step": values, "median_seconds_per_step": statistics.median(values),
            "tokens_per_second": tokens / statistics.median(values), "best_tokens_per_second": tokens / min(values),
            **{fact: workers[name, precision][1][fact] for fact in ("fused_adam", "compiled")},
            # CPU time counts only this process's work: on a shared machine the fairer comparison
            "median_cpu_seconds_per_step": statistics.median([p["cpu_seconds"] / args.steps for p in done])}
    for precision, entry in entries.items():
        before, after = entry["before"], entry["after"]
        entry.update(after_over_before=after["tokens_per_second"] / before["tokens_per_second"],
                     after_over_before_best=after["best_tokens_per_second"] / before["best_tokens_per_second"],
                     after_over_before_cpu=before["median_cpu_seconds_per_step"] / after["median_cpu_seconds_per_step"])
        log(f"{shape} {precision}: before {before['tokens_per_second']:.0f} tok/s, after "
            f"{after['tokens_per_second']:.0f} tok/s, ×{entry['after_over_before']:.2f} (best passes "
            f"×{entry['after_over_before_best']:.2f}; CPU time a step ×{entry['after_over_before_cpu']:.2f})")
    return entries


def profile_step(shape: str, precision: str, args, log, top: int = 6) -> dict:
    """This checkout's step under torch.profiler (after --warmup steps, --steps steps): each op's share of the
    self CPU time, the largest first."""
    trainer, inputs = step_and_batch(shape, precision, args.batch, args.length, args.vocab)
    for _ in range(args.warmup):
        trainer.step(inputs)
    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        for _ in range(args.steps):
            trainer.step(inputs)
    events = profiler.key_averages()
    total = sum(event.self_cpu_time_total for event in events)
    shares = {e.key: e.self_cpu_time_total / total for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]}
    log(f"profile {shape} {precision}: {total / args.steps / 1e3:.1f} ms self CPU time a step; "
        + ", ".join(f"{name} {share:.0%}" for name, share in shares.items()))
    return {"self_cpu_ms_per_step": total / args.steps / 1e3, "largest_shares": shares}


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.training", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--baseline", default="f52a05e", help="The commit whose step is 'before'.")
    add("--baseline-tree", help="A folder holding the 'before' package instead of --baseline.")
    add("--shapes", default="shipped,small,base")
    add("--precisions", default="fp32,bf16")
    for flag, default, text in (("--threads", 2, None), ("--batch", 128, None), ("--length", 16, None),
                                ("--vocab", 8000, None), ("--steps", 3, "Steps per timed pass."),
                                ("--reps", 5, "Timed passes of each step, alternating."),
                                ("--warmup", 2, "Untimed steps first.")):
        add(flag, type=int, default=default, help=text)
    add("--quick", action="store_true", help="Tiny sizes: proves the code runs, measures nothing.")
    add("--eager", action="store_true", help="No layer compiled (by default each package's step runs as its "
                                             "train.py does on a CPU: compiled where it compiles by default).")
    add("--profile", action="store_true", help="Instead: this checkout's step under torch.profiler, ops' shares "
                                               "(eager: a compiled graph's kernels would show as one entry).")
    add("--output-dir", help="Where results.json and tables.md go (default: print only).")
    args = parser.parse_args(argv)
    if args.quick:
        args.shapes, args.batch, args.length, args.vocab, args.steps, args.reps, args.warmup = "tiny", 4, 5, 60, 1, 1, 1
    from modeling_vaswani.machine import cpu_flags  # here, not above: a worker may run an older package

    from .report import profile_table, step_tables  # (it imports much of the newer package)

    log, began = clock()
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))
    results = {"command": " ".join(["python -m benchmarks.training", *(sys.argv[1:] if argv is None else argv)]),
               "baseline": args.baseline_tree or args.baseline, "machine": {**machine_record(), "cpu_flags": flags},
               "threads": args.threads, "batch": args.batch, "length": args.length, "vocab": args.vocab,
               "uptime_before": uptime(), "gemm_flops_per_second": {}, "steps": {}}
    log(f"{results['machine']['cpu_model_name']}; {results['uptime_before']}")
    torch.set_num_threads(args.threads)
    out_dir = Path(args.output_dir) if args.output_dir else None
    if args.profile:
        results["profiles"] = {f"{shape}/{precision}": profile_step(shape, precision, args, log)
                               for precision in args.precisions.split(",") for shape in args.shapes.split(",")}
        write_results(out_dir, results, profile_table, began)
        return results
    with tempfile.TemporaryDirectory(prefix="vaswani-before-") as workdir:
        if not args.baseline_tree:  # the package as it was at --baseline
            archive = subprocess.run(["git", "archive", args.baseline, "modeling_vaswani"], cwd=ROOT, check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", workdir], input=archive, check=True)
        trees = {"before": Path(args.baseline_tree or workdir).resolve(), "after": ROOT}
        precisions, zeros = args.precisions.split(","), torch.zeros(args.batch, args.length)
        for precision in precisions:
            dtype = torch.bfloat16 if precision == "bf16" else torch.float32
            results["gemm_flops_per_second"][precision] = matmul_rate(256 if args.quick else 2048, 5,
                                                                      torch.device("cpu"), dtype)
        for shape in args.shapes.split(","):
            flops = training_flops(shape_config(shape, args.vocab), {"input_ids": zeros, "labels": zeros})
            for precision, entry in compare(trees, shape, precisions, args, log).items():
                for name in ("before", "after"):
                    entry[name]["gemm_share"] = (flops / entry[name]["median_seconds_per_step"]
                                                 / results["gemm_flops_per_second"][precision])
                results["steps"][f"{shape}/{precision}"] = entry
    results["uptime_after"] = uptime()
    print(write_results(out_dir, results, step_tables, began))
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:  # start_worker's call: --worker SHAPE PRECISION BATCH LENGTH VOCAB COMPILED
        worker(sys.argv[2], sys.argv[3], *map(int, sys.argv[4:]))
    else:
        main()
