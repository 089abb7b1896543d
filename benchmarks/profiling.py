"""torch.profiler tables of a training step and a beam-search batch per system at the largest preset, the "why"
behind the speed ratios; on a CPU, the time broken down by category."""

from __future__ import annotations

from pathlib import Path

from modeling_vaswani.model.generation import NUM_BEAMS

from .harness import (TrainingStep, autocast, build_pair, corpus_config, forced_generation_config, forced_length,
                      source_batches, timed)

# (category, substrings of the op names it takes), the first that matches; the Adam step counts whole.
SHARED = (("matmul (Linear layers, output projection)", ("aten::mm", "aten::addmm", "aten::bmm")),
          ("attention kernel (SDPA)", ("scaled_dot_product", "flash_attention", "efficient_attention")))
LAYER_NORM = ("layer norm", ("layer_norm",))
CATEGORIES = {
    "train_step": (*SHARED, ("dropout masks", ("bernoulli", "dropout")),
                   ("softmax and loss", ("softmax", "gather", "nll_loss")), LAYER_NORM),
    "beam_search": (*SHARED, ("log-softmax over the vocabulary", ("softmax",)),
                    ("beam bookkeeping and cache (topk, sort, gather, index_select, cat)",
                     ("topk", "sort", "gather", "index_select", "aten::cat", "aten::index")), LAYER_NORM),
}
OTHER = "other ops (element-wise, copies, embeddings, ...)"
OUTSIDE = "outside any op (Python, dispatch, profiler overhead)"


def profiles(settings, corpus, batches, device, dtype, out_dir: Path, log) -> dict:
    from torch.profiler import ProfilerActivity, profile

    preset = settings.presets[-1]
    length = forced_length(settings, corpus, settings.beam_sentences)
    (input_ids, mask), *_ = source_batches(corpus, settings.beam_batch_size, settings.beam_batch_size, device)
    generation_config = forced_generation_config(corpus.tokenizer, length, num_beams=NUM_BEAMS)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    results = {"preset": preset, "files": {}, "training_breakdown": {}, "generation_breakdown": {}}
    for name, model in build_pair(corpus_config(corpus, preset), device).items():
        trainer = TrainingStep(name, model, dtype, device)

        def translate():
            model.eval()
            with autocast(device, dtype):
                model.generate(input_ids=input_ids, attention_mask=mask, generation_config=generation_config)

        for what, work in (("train_step", lambda: trainer.step(batches[0])), ("beam_search", translate)):
            work()  # warm-up
            with profile(activities=activities) as prof:
                wall = timed(work, device)
            path = out_dir / f"profile_{name}_{preset}_{what}.txt"
            path.write_text(prof.key_averages().table(sort_by=sort, row_limit=30))
            results["files"][f"{name}_{what}"] = path.name
            if device.type == "cpu":
                key = "training_breakdown" if what == "train_step" else "generation_breakdown"
                results[key][name] = cpu_time_breakdown(prof.events(), CATEGORIES[what], wall)
    log(f"[profile] {', '.join(results['files'].values())}")
    return results


def cpu_time_breakdown(events, categories, wall_seconds: float) -> dict:
    """Fractions of the wall time: the Adam step (inclusive), other ops' self time by category, and the rest."""
    def inside_optimizer(event):
        parent = event.cpu_parent
        while parent is not None and not parent.name.startswith("Optimizer.step"):
            parent = parent.cpu_parent
        return parent is not None

    totals = {**{category: 0.0 for category, _ in categories}, "Adam step": 0.0, OTHER: 0.0}
    for event in (e for e in events if not inside_optimizer(e)):
        if event.name.startswith("Optimizer.step"):
            totals["Adam step"] += event.cpu_time_total
        else:
            category = next((c for c, keys in categories if any(key in event.name for key in keys)), OTHER)
            totals[category] += event.self_cpu_time_total
    if not totals["Adam step"]:
        del totals["Adam step"]
    whole = wall_seconds * 1e6  # the profiler reports microseconds
    totals[OUTSIDE] = max(0.0, whole - sum(totals.values()))
    return {category: value / whole for category, value in totals.items()}
