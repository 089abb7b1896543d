"""§6.1 beam search (figure 2), and cached `generate` against the recomputing greedy decoder (3). Random weights
stop anywhere, so every search is forced to the same output length: equal work."""

from __future__ import annotations

import statistics

import numpy as np

from modeling_vaswani.evaluation.greedy_decoding import greedy_decode
from modeling_vaswani.model.generation import NUM_BEAMS

from .harness import (MARIAN, OURS, alternate, autocast, build_pair, corpus_config, forced_generation_config,
                      forced_length, ratio, source_batches, summary)

DECODERS = ("ours_cached_generate", "ours_recomputing_greedy_decode", "marian_cached_generate")


def forced_search_speed(jobs: dict, batches: list, generation_config, length: int, reps: int, device, dtype=None):
    """{name: sentences/s and tokens/s} of each (model, generate kwargs) in `jobs` on `batches`, alternating."""
    def translate(model, kwargs, which):
        def run():
            with autocast(device, dtype):
                for input_ids, mask in which:
                    out = model.generate(input_ids=input_ids, attention_mask=mask, generation_config=generation_config,
                                         **kwargs)
                    assert out.shape[1] == length + 1, out.shape  # start token + forced length
        return run

    seconds = alternate({n: translate(*job, batches) for n, job in jobs.items()}, reps, device,
                        warmup={n: translate(*job, batches[:1]) for n, job in jobs.items()})
    sentences = sum(len(ids) for ids, _ in batches)
    entry = {n: summary(seconds[n], sentences, "sentences_per_second") for n in jobs}
    for e in entry.values():
        e["tokens_per_second"] = sentences * length / e["median_seconds"]
    return entry


def beam_search_speed(settings, corpus, device, dtype, log) -> dict:
    """Figure 2: §6.1 beam search over the first test sentences, sentences/s and tokens/s, per preset."""
    length = forced_length(settings, corpus, settings.beam_sentences)  # realistic work, equal for both
    batches = source_batches(corpus, settings.beam_sentences, settings.beam_batch_size, device)
    generation_config = forced_generation_config(corpus.tokenizer, length, num_beams=NUM_BEAMS)
    results = {"forced_output_length": length, "sentences": sum(len(ids) for ids, _ in batches),
               "batch_size": settings.beam_batch_size}
    for preset in settings.presets:
        models = build_pair(corpus_config(corpus, preset), device)
        entry = forced_search_speed({n: (m.eval(), {}) for n, m in models.items()}, batches, generation_config,
                                    length, settings.beam_reps, device, dtype)
        entry["ratio_ours_over_marian"] = ratio(entry, "sentences_per_second")
        results[preset] = entry
        log(f"[2] {preset}: ours {entry[OURS]['sentences_per_second']:.2f} sent/s, Marian "
            f"{entry[MARIAN]['sentences_per_second']:.2f} sent/s, ratio {entry['ratio_ours_over_marian']:.3f}")
        del models
    return results


def cached_vs_recomputing_decoding(settings, corpus, device, dtype, log) -> dict:
    """Figure 3: time per generated token of cached greedy `generate` and of `greedy_decode`, as the output grows."""
    models = {name: m.eval() for name, m in build_pair(corpus_config(corpus, settings.decode_preset), device).items()}
    (input_ids, mask), = source_batches(corpus, settings.decode_batch_size, settings.decode_batch_size, device)
    results = {"preset": settings.decode_preset, "batch_size": settings.decode_batch_size, "lengths": {}}
    for length in settings.decode_lengths:
        gen = forced_generation_config(corpus.tokenizer, length, num_beams=1)

        def job(decode):
            def run():
                with autocast(device, dtype):
                    assert decode().shape[1] == length + 1
            return run

        jobs = dict(zip(DECODERS, (
            job(lambda: models[OURS].generate(input_ids=input_ids, attention_mask=mask, generation_config=gen)),
            # No token has id -1: it runs its full length.
            job(lambda: greedy_decode(models[OURS], input_ids, mask, max_new_tokens=length, eos_token_id=-1)),
            job(lambda: models[MARIAN].generate(input_ids=input_ids, attention_mask=mask, generation_config=gen)))))
        # The shortest length warms every job up; longer ones reuse the warm state.
        seconds = alternate(jobs, settings.decode_reps, device,
                            warmup=jobs if length == settings.decode_lengths[0] else None)
        entry = {name: {"seconds": values, "median_seconds": statistics.median(values),
                        "ms_per_generated_token": 1000.0 * statistics.median(values) / length}
                 for name, values in seconds.items()}
        cached = entry["ours_cached_generate"]["median_seconds"]
        entry["recomputing_over_cached"] = entry["ours_recomputing_greedy_decode"]["median_seconds"] / cached
        entry["ratio_ours_over_marian_cached"] = entry["marian_cached_generate"]["median_seconds"] / cached
        results["lengths"][str(length)] = entry
        log(f"[3] length {length}: cached {entry['ours_cached_generate']['ms_per_generated_token']:.2f} ms/token, "
            f"recomputing {entry['ours_recomputing_greedy_decode']['ms_per_generated_token']:.2f} ms/token")
    # Least-squares fits of per-token time a + b·L, and the log–log slope k of total time ∝ L^k.
    lengths, fits = np.array([float(k) for k in results["lengths"]]), {}
    for name in DECODERS:
        per_token = np.array([e[name]["ms_per_generated_token"] for e in results["lengths"].values()])
        slope, intercept = np.polyfit(lengths, per_token, 1)
        fits[name] = {"ms_per_token_intercept": float(intercept), "ms_per_token_per_unit_length": float(slope),
                      "total_time_exponent": float(np.polyfit(np.log(lengths), np.log(per_token * lengths), 1)[0])}
    results["fits"] = fits
    return results
