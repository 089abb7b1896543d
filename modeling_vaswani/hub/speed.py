"""The model card's speed section, from a recorded benchmark's results.json (benchmarks/run.py)."""

from __future__ import annotations

BENCHMARK_KEY = "figure_8_test_set_translation"


def speed_from_benchmark(benchmark: dict, source: str) -> dict:
    """The speed summary of a benchmark results dictionary; `source` names the file it came from."""
    if BENCHMARK_KEY not in benchmark:
        raise ValueError(f"{source}: no test-set translation results ({BENCHMARK_KEY!r}); run "
                         "python -m benchmarks.run --only translation and pass its results.json.")
    measured = benchmark[BENCHMARK_KEY]
    rows = [{"system": system, "threads": int(threads), "sentences_per_second": row["sentences_per_second"],
             "tokens_per_second": row["tokens_per_second"], "bleu": row.get("bleu")}
            for threads, systems in measured["threads"].items() for system, row in systems.items()]
    machine = benchmark.get("machine", {})
    return {
        "source": source,
        "command": benchmark.get("command", ""),
        "cpu": machine.get("cpu_model_name", "?"),
        "cpu_cores": machine.get("cpu_cores", "?"),
        "cpu_bf16": machine.get("cpu_bf16", "?"),
        "torch": machine.get("torch", "?"),
        "model": measured.get("model", "?"),
        "sentences": measured.get("sentences"),
        "batch_size": measured.get("batch_size"),
        "num_beams": measured.get("num_beams"),
        "rows": rows,
    }


def speed_section(speed: dict | None) -> str:
    """Markdown for the card: one paragraph on how it was measured and a table, or "" without a benchmark."""
    if not speed:
        return ""
    lines = [
        "## Speed",
        "",
        f"Translation of all {speed['sentences']} test_2016_flickr sentences (batches of {speed['batch_size']}, "
        f"beam {speed['num_beams']}), measured by the package's benchmark on this CPU: {speed['cpu']} "
        f"({speed['cpu_cores']} cores, bf16 support: {speed['cpu_bf16']}; torch {speed['torch']}) with the "
        f"weights of `{speed['model']}` when it ran: `{speed['command']}` (`{speed['source']}`). "
        "\"ours\" is this model in PyTorch; Marian and CTranslate2 run the same weights after an exact conversion.",
        "",
        "| system | threads | sentences/s | tokens/s | BLEU of the weights measured |",
        "|---|---|---|---|---|",
    ]
    for row in speed["rows"]:
        bleu = "" if row.get("bleu") is None else f"{row['bleu']:.2f}"
        lines.append(f"| {row['system']} | {row['threads']} | {row['sentences_per_second']:.1f} | "
                     f"{row['tokens_per_second']:.0f} | {bleu} |")
    return "\n".join(lines) + "\n"
