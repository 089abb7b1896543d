"""Figure 6: peak resident memory of training and of translating, each in a child of a forkserver that has only
imported the benchmark's code (no import peak or earlier work counts); the workload comes as safetensors and JSON."""

from __future__ import annotations

import json
import multiprocessing
import resource
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import GenerationConfig

from modeling_vaswani import VaswaniConfig
from modeling_vaswani.model.generation import NUM_BEAMS
from modeling_vaswani.model.strict_json import read_json

from .harness import (MARIAN, OURS, TrainingStep, build_model, corpus_config, forced_generation_config,
                      forced_length, source_batches, synchronize)


def peak_memory(settings, corpus, batches, device, workdir: Path, log) -> dict:
    """Peak RSS of a few training steps on `batches` and of translating the test set, per system."""
    sentences = settings.memory_sentences
    length = forced_length(settings, corpus, sentences)
    presets = {"train": settings.memory_train_preset, "translate": settings.memory_translate_preset}
    translate = source_batches(corpus, sentences, settings.memory_batch_size, torch.device("cpu"))
    write_inputs(workdir, {
        "configs": {task: corpus_config(corpus, preset).to_dict() for task, preset in presets.items()},
        "generation_config": forced_generation_config(corpus.tokenizer, length, num_beams=NUM_BEAMS).to_dict(),
    }, train=batches[: settings.memory_train_steps],
        translate=[{"input_ids": ids, "attention_mask": mask} for ids, mask in translate])
    results = {"train_preset": presets["train"], "translate_preset": presets["translate"],
               "train_steps": settings.memory_train_steps, "translate_sentences": sum(len(i) for i, _ in translate),
               "translate_batch_size": settings.memory_batch_size, "forced_output_length": length}
    server = multiprocessing.get_context("forkserver")
    server.set_forkserver_preload(["benchmarks.run"])  # what the benchmark process itself imports
    for task in presets:
        results[task] = {}
        for system in (OURS, MARIAN):  # one child per measurement, alternating systems
            report = workdir / f"{task}_{system}.json"
            child = server.Process(target=measure, args=(report, workdir, system, task, device.type))
            child.start()
            child.join()
            if child.exitcode != 0 or not report.exists():
                raise RuntimeError(f"The memory measurement ({system}, {task}) failed with exit code "
                                   f"{child.exitcode}; its traceback is above.")
            results[task][system] = read_json(report)
        ours, theirs = results[task][OURS]["peak_rss_mib"], results[task][MARIAN]["peak_rss_mib"]
        results[task]["ratio_ours_over_marian"] = ours / theirs
        log(f"[6] {task}: peak RSS ours {ours:.0f} MiB, Marian {theirs:.0f} MiB "
            f"(both started at {results[task][OURS]['rss_at_start_mib']:.0f} MiB)")
    return results


def write_inputs(folder: Path, settings: dict, **batch_lists: list) -> None:
    """`settings` as inputs.json; each list of tensor dicts into inputs.safetensors as "<list>.<index>.<name>"."""
    # Copies: safetensors refuses tensors that share storage (a batch listed twice, a view).
    tensors = {f"{which}.{i}.{name}": tensor.detach().cpu().contiguous().clone()
               for which, batches in batch_lists.items() for i, batch in enumerate(batches)
               for name, tensor in batch.items()}
    save_file(tensors, str(folder / "inputs.safetensors"))
    counts = {which: len(batches) for which, batches in batch_lists.items()}
    (folder / "inputs.json").write_text(json.dumps({**settings, "batches": counts}))


def read_inputs(folder: Path) -> tuple[dict, dict]:  # write_inputs' (settings, {list name: [tensor dict, ...]})
    settings = read_json(folder / "inputs.json")
    batches = {which: [{} for _ in range(count)] for which, count in settings.pop("batches").items()}
    for key, tensor in load_file(str(folder / "inputs.safetensors")).items():
        which, index, name = key.split(".")
        batches[which][int(index)][name] = tensor
    return settings, batches


def mib(kib: float) -> float:
    return kib / 1024.0


def measure(report: Path, folder: Path, system: str, task: str, device_name: str) -> None:
    """In a fresh child (Linux starts its ru_maxrss afresh): one model, one workload; resident MiB and times into
    `report`."""
    status = Path("/proc/self/status").read_text().splitlines()
    at_start = next((mib(int(line.split()[1])) for line in status if line.startswith("VmRSS:")), float("nan"))
    device = torch.device(device_name)
    settings, batches = read_inputs(folder)
    model = build_model(system, VaswaniConfig.from_dict(settings["configs"][task], attn_implementation="sdpa"), device)
    setup = mib(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    start = time.perf_counter()
    if task == "train":
        trainer = TrainingStep(system, model, None, device)
        for batch in batches["train"]:
            trainer.step({k: v.to(device) for k, v in batch.items()})
    else:
        model.eval()
        generation_config = GenerationConfig(**settings["generation_config"])
        for batch in batches["translate"]:
            model.generate(input_ids=batch["input_ids"].to(device), attention_mask=batch["attention_mask"].to(device),
                           generation_config=generation_config)
    synchronize(device)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    report.write_text(json.dumps({"rss_at_start_mib": at_start, "rss_after_setup_mib": setup,
                                  "peak_rss_mib": mib(usage.ru_maxrss), "workload_seconds": time.perf_counter() - start,
                                  "cpu_seconds": usage.ru_utime}))
