"""The training step before and after its speed-ups, side by side in one run (not from the paper).

    python -m benchmarks.training_ab --baseline f52a05e --output-dir benchmarks/recorded/<date>-training-step
    python -m benchmarks.training_ab --quick --baseline-tree .          # tiny sizes: proves the code runs

"Before" is the package at a git commit (`git archive`, in a temporary folder): the model's forward
with labels (logits, then §5.4's loss), backward, and its Adam. "After" is this checkout's step as the
Trainer takes it: chunked_loss.training_loss, backward, create_adam (fused). Each runs in a process of
its own on the same static batch (`--batch` sentences of `--length` tokens per side, random ids), both
kept alive; the parent has them time a pass of steps in turn, A B A B ..., so a shared machine's
changing load hits both alike. Shapes: the shipped model (d_model 128, d_ff 512, 4 + 4 layers, h 4,
V 8,000) and the small and base presets, in float32 and under bf16 autocast. Reported: tokens/s
(median and best pass), after/before, model FLOP/s as a share of this machine's measured GEMM rate
in the same precision, the CPU and its flags, and `uptime` before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHAPES = {  # VaswaniConfig sizes; V = 8,000 for all, as the shipped model's vocabulary
    "shipped": dict(d_model=128, d_ff=512, num_heads=4, num_layers=4, dropout=0.15),
    "small": dict(d_model=256, d_ff=1024, num_heads=4, num_layers=3, dropout=0.1),
    "base": dict(d_model=512, d_ff=2048, num_heads=8, num_layers=6, dropout=0.1),
    "tiny": dict(d_model=32, d_ff=64, num_heads=4, num_layers=2, dropout=0.0),
}
VOCAB = 8000


# --- the worker: one package, one shape, one precision; times passes when told -----------------


def worker(shape: str, precision: str, batch: int, length: int, threads: int, vocab: int) -> None:
    """Build the model and batch, then answer each "STEPS" line on stdin with one pass's seconds."""
    import torch

    from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
    from modeling_vaswani.training.optimization import create_adam

    try:  # the new step; a package without it takes the model's forward with labels
        from modeling_vaswani.training.chunked_loss import training_loss
    except ImportError:
        def training_loss(model, inputs):
            return model(**inputs).loss
    torch.set_num_threads(threads)
    config = VaswaniConfig(**SHAPES[shape], num_decoder_layers=SHAPES[shape]["num_layers"], vocab_size=vocab,
                           label_smoothing=0.1, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                           decoder_start_token_id=1)
    torch.manual_seed(0)
    model = VaswaniForConditionalGeneration(config).train()
    optimizer = create_adam([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    inputs = {"input_ids": torch.randint(3, vocab, (batch, length)),
              "attention_mask": torch.ones(batch, length, dtype=torch.long),
              "labels": torch.randint(3, vocab, (batch, length))}

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext():
            loss = training_loss(model, inputs)
        loss.backward()
        optimizer.step()

    print(json.dumps({"ready": True, "fused_adam": bool(optimizer.param_groups[0].get("fused"))}), flush=True)
    for line in sys.stdin:
        began = time.perf_counter()
        for _ in range(int(line)):
            step()
        print(json.dumps({"seconds": time.perf_counter() - began}), flush=True)


class Worker:
    """A worker process, started once, asked for passes."""

    def __init__(self, tree: Path, shape: str, precision: str, args):
        env = {**os.environ, "PYTHONPATH": str(tree), "OMP_NUM_THREADS": str(args.threads)}
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", shape, precision, "--batch",
                   str(args.batch), "--length", str(args.length), "--threads", str(args.threads),
                   "--vocab", str(args.vocab)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env=env, cwd=tree)
        self.facts = self._answer()

    def _answer(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.process.args} ended with code {self.process.wait()}")
        return json.loads(line)

    def time(self, steps: int) -> float:
        self.process.stdin.write(f"{steps}\n")
        self.process.stdin.flush()
        return self._answer()["seconds"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


# --- the parent ------------------------------------------------------------------------------------


def gemm_rate(precision: str, threads: int, size: int = 2048, reps: int = 5) -> float:
    """Best-of-`reps` FLOP/s of a size × size matrix product, in float32 or bf16."""
    import torch

    torch.set_num_threads(threads)
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    torch.mm(a, b)
    best = min(_timed(lambda: torch.mm(a, b)) for _ in range(reps))
    return 2.0 * size**3 / best


def _timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def step_flops(shape: str, batch: int, length: int, vocab: int) -> float:
    """Analytic FLOPs of one step (benchmarks.training.training_flops) on the static batch."""
    import torch

    from modeling_vaswani import VaswaniConfig

    from .training import training_flops

    sizes = SHAPES[shape]
    config = VaswaniConfig(**sizes, num_decoder_layers=sizes["num_layers"], vocab_size=vocab)
    shaped = {"input_ids": torch.zeros(batch, length), "labels": torch.zeros(batch, length)}
    return training_flops(config, shaped)


def compare(trees: dict, shape: str, precision: str, args, log) -> dict:
    """Both steps at one shape and precision, alternating; tokens/s per step and after/before."""
    workers = {name: Worker(tree, shape, precision, args) for name, tree in trees.items()}
    try:
        for w in workers.values():
            w.time(args.warmup)
        seconds = {name: [] for name in workers}
        for _ in range(args.reps):
            for name, w in workers.items():
                seconds[name].append(w.time(args.steps) / args.steps)
    finally:
        for w in workers.values():
            w.close()
    tokens = 2 * args.batch * args.length  # source + target, all real
    entry = {}
    for name, values in seconds.items():
        entry[name] = {"seconds_per_step": values, "median_seconds_per_step": statistics.median(values),
                       "tokens_per_second": tokens / statistics.median(values), "best_tokens_per_second":
                       tokens / min(values), "fused_adam": workers[name].facts["fused_adam"]}
    entry["after_over_before"] = entry["after"]["tokens_per_second"] / entry["before"]["tokens_per_second"]
    entry["after_over_before_best"] = (entry["after"]["best_tokens_per_second"]
                                       / entry["before"]["best_tokens_per_second"])
    log(f"{shape} {precision}: before {entry['before']['tokens_per_second']:.0f} tok/s, after "
        f"{entry['after']['tokens_per_second']:.0f} tok/s, ×{entry['after_over_before']:.2f} "
        f"(best passes ×{entry['after_over_before_best']:.2f})")
    return entry


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def baseline_tree(args, workdir: Path) -> Path:
    if args.baseline_tree:
        return Path(args.baseline_tree).resolve()
    archive = subprocess.run(["git", "archive", args.baseline, "modeling_vaswani"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(workdir)], input=archive, check=True)
    return workdir


def tables(results: dict) -> str:
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


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.training_ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="f52a05e", help="The commit whose step is 'before'.")
    parser.add_argument("--baseline-tree", help="A folder holding the 'before' package instead of --baseline.")
    parser.add_argument("--shapes", default="shipped,small,base")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=VOCAB)
    parser.add_argument("--steps", type=int, default=3, help="Steps per timed pass.")
    parser.add_argument("--reps", type=int, default=5, help="Timed passes of each step, alternating.")
    parser.add_argument("--warmup", type=int, default=2, help="Untimed steps first.")
    parser.add_argument("--quick", action="store_true", help="Tiny sizes: proves the code runs, measures nothing.")
    parser.add_argument("--output-dir", help="Where results.json and tables.md go (default: print only).")
    args = parser.parse_args(argv)
    if args.quick:
        args.shapes, args.batch, args.length, args.vocab, args.steps, args.reps, args.warmup = "tiny", 4, 5, 60, 1, 1, 1
    from modeling_vaswani.machine import cpu_flags, describe_machine

    began = time.perf_counter()

    def log(message):
        print(f"{time.perf_counter() - began:7.1f}s {message}", flush=True)

    machine = describe_machine()
    results = {"command": " ".join(["python -m benchmarks.training_ab", *(sys.argv[1:] if argv is None else argv)]),
               "baseline": args.baseline_tree or args.baseline,
               "machine": {"cpu_model_name": machine.pop("cpu"), **machine,
                           "cpu_flags": sorted(f for f in cpu_flags() if f.startswith(("avx", "amx", "fma")))},
               "threads": args.threads, "batch": args.batch, "length": args.length, "vocab": args.vocab,
               "uptime_before": uptime(), "gemm_flops_per_second": {}, "steps": {}}
    log(f"{results['machine']['cpu_model_name']}; {results['uptime_before']}")
    with tempfile.TemporaryDirectory(prefix="vaswani-before-") as workdir:
        trees = {"before": baseline_tree(args, Path(workdir)), "after": ROOT}
        for precision in args.precisions.split(","):
            rate = gemm_rate(precision, args.threads, size=256 if args.quick else 2048)
            results["gemm_flops_per_second"][precision] = rate
            for shape in args.shapes.split(","):
                entry = compare(trees, shape, precision, args, log)
                flops = step_flops(shape, args.batch, args.length, args.vocab)
                for name in ("before", "after"):
                    entry[name]["gemm_share"] = flops / entry[name]["median_seconds_per_step"] / rate
                results["steps"][f"{shape}/{precision}"] = entry
    results["uptime_after"] = uptime()
    results["total_seconds"] = time.perf_counter() - began
    text = tables(results)
    print(text)
    if args.output_dir:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(results, indent=2))
        (out / "tables.md").write_text(text)
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker_args = argparse.ArgumentParser()
        worker_args.add_argument("shape")
        worker_args.add_argument("precision")
        for flag in ("--batch", "--length", "--threads", "--vocab"):
            worker_args.add_argument(flag, type=int)
        a = worker_args.parse_args(sys.argv[2:])
        worker(a.shape, a.precision, a.batch, a.length, a.threads, a.vocab)
    else:
        main()
