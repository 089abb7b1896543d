"""Figure 6: peak resident memory of training and of translating. Each measurement runs in a child forked
from a fresh server (multiprocessing's forkserver) that has only imported the benchmark's code, so every
child starts from the same state and no import peak or earlier work counts; the workload comes in a file
that the child loads after noting its starting memory."""

from __future__ import annotations

import multiprocessing
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch
from transformers import GenerationConfig

from modeling_vaswani import VaswaniConfig
from modeling_vaswani.model.generation import NUM_BEAMS

from .harness import (MARIAN, OURS, TrainingStep, build_model, corpus_config, forced_generation_config,
                      forced_length, source_batches, synchronize)


def peak_memory(settings, corpus, batches, device, workdir: Path, log) -> dict:
    """Peak RSS of a few training steps on `batches` and of translating the test set, per system."""
    sentences = settings.memory_sentences
    length = forced_length(settings, corpus, sentences)
    presets = {"train": settings.memory_train_preset, "translate": settings.memory_translate_preset}
    translate = source_batches(corpus, sentences, settings.memory_batch_size, torch.device("cpu"))
    inputs = workdir / "inputs.pt"
    torch.save({"configs": {task: corpus_config(corpus, preset).to_dict() for task, preset in presets.items()},
                "generation_config": forced_generation_config(corpus.tokenizer, length, NUM_BEAMS).to_dict(),
                "train": [{k: v.cpu() for k, v in b.items()} for b in batches[: settings.memory_train_steps]],
                "translate": [{"input_ids": ids, "attention_mask": mask} for ids, mask in translate]}, inputs)
    results = {"train_preset": presets["train"], "translate_preset": presets["translate"],
               "train_steps": settings.memory_train_steps, "translate_sentences": sum(len(i) for i, _ in translate),
               "translate_batch_size": settings.memory_batch_size, "forced_output_length": length}
    server = multiprocessing.get_context("forkserver")
    server.set_forkserver_preload(["benchmarks.run"])  # what the benchmark process itself imports
    for task in presets:
        results[task] = {}
        for system in (OURS, MARIAN):  # one child per measurement, alternating systems
            with ProcessPoolExecutor(1, mp_context=server) as child:  # its exception is raised here
                results[task][system] = child.submit(measure, inputs, system, task, device.type).result()
        ours, theirs = results[task][OURS]["peak_rss_mib"], results[task][MARIAN]["peak_rss_mib"]
        results[task]["ratio_ours_over_marian"] = ours / theirs
        log(f"[6] {task}: peak RSS ours {ours:.0f} MiB, Marian {theirs:.0f} MiB "
            f"(both started at {results[task][OURS]['rss_at_start_mib']:.0f} MiB)")
    return results


def mib(kib: float) -> float:
    return kib / 1024.0


def measure(inputs: Path, system: str, task: str, device_name: str) -> dict:
    """In a freshly forked child: build one model, run one workload, return resident memory (MiB) and times.
    Linux starts a forked child's peak (ru_maxrss, KiB) afresh."""
    status = Path("/proc/self/status").read_text().splitlines()
    at_start = next((mib(int(line.split()[1])) for line in status if line.startswith("VmRSS:")), float("nan"))
    device = torch.device(device_name)
    work = torch.load(inputs, weights_only=True)
    model = build_model(system, VaswaniConfig.from_dict(work["configs"][task], attn_implementation="sdpa"), device)
    setup = mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    start = time.perf_counter()
    if task == "train":
        trainer = TrainingStep(system, model, None, device)
        for batch in work["train"]:
            trainer.step({k: v.to(device) for k, v in batch.items()})
    else:
        model.eval()
        generation_config = GenerationConfig(**work["generation_config"])
        for batch in work["translate"]:
            model.generate(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device),
                           generation_config=generation_config)
    synchronize(device)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"rss_at_start_mib": at_start, "rss_after_setup_mib": setup, "peak_rss_mib": mib(usage.ru_maxrss),
            "workload_seconds": time.perf_counter() - start, "cpu_seconds": usage.ru_utime}

