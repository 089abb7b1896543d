"""Ways a training step could be faster, each against the plain way: token-budget batches (figure 4),
torch.compile (figure 7), one matmul for Q, K and V (appendix)."""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, RandomSampler
from transformers import DataCollatorForSeq2Seq

from modeling_vaswani.model.generation import NUM_BEAMS
from modeling_vaswani.training.batching import TokenBudgetBatchSampler, padding_efficiency
from modeling_vaswani.training.fast_modules import use_fast_modules
from modeling_vaswani.training.trainer import compile_layers

from .harness import (OURS, TrainingStep, alternate, build_model, collate, corpus_config, real_tokens, summary,
                      synchronize, timed)


def data_pipeline_throughput(settings, corpus, device, dtype, log) -> dict:
    """Figure 4: token-budget batches against fixed-size random batches, through the real collator and model."""
    preset = settings.presets[0]
    model = build_model(OURS, corpus_config(corpus, preset), device)
    rows = [{"input_ids": s, "labels": t} for s, t in zip(corpus.train_src, corpus.train_tgt)]  # the collator masks
    src_len, tgt_len = [len(s) for s in corpus.train_src], [len(t) for t in corpus.train_tgt]
    budget = list(TokenBudgetBatchSampler(src_len, tgt_len, settings.max_tokens, shuffle=True, seed=0))
    # The Trainer's default: a RandomSampler and a fixed batch size, as many sentences per batch on average.
    batch_size = max(1, round(len(rows) / len(budget)))
    random = RandomSampler(range(len(rows)), generator=torch.Generator().manual_seed(0))
    epochs = {"token_budget": budget, "fixed_size_random": list(BatchSampler(random, batch_size, False))}
    collator = DataCollatorForSeq2Seq(corpus.tokenizer, model=model)
    iterators = {name: iter(DataLoader(rows, batch_sampler=batches, collate_fn=collator))
                 for name, batches in epochs.items()}
    trainer = TrainingStep(OURS, model, dtype, device)
    trainer.step(collate(corpus, budget[0], device))  # warm-up
    spent, done_batches, done_tokens = ({name: 0 for name in epochs} for _ in range(3))
    cap, active = settings.epoch_seconds, set(epochs)
    while active:
        name = min(active, key=lambda k: spent[k])  # the scheme with less time so far: drift hits both alike
        synchronize(device)
        start = time.perf_counter()
        batch = next(iterators[name], None)
        if batch is None:
            active.discard(name)
            continue
        batch = {k: v.to(device) for k, v in batch.items()}
        trainer.step(batch)
        synchronize(device)
        spent[name] += time.perf_counter() - start
        done_batches[name] += 1
        done_tokens[name] += real_tokens(batch)
        if cap is not None and spent[name] >= cap:
            active.discard(name)
    results = {"preset": preset, "max_tokens": settings.max_tokens, "fixed_batch_size": batch_size,
               "time_cap_seconds_per_scheme": cap}
    for name, batches in epochs.items():
        epoch_tokens = sum(src_len[i] + tgt_len[i] for b in batches for i in b)
        rate, whole = done_tokens[name] / spent[name], done_batches[name] == len(batches)
        results[name] = {
            "batches_per_epoch": len(batches), "batches_measured": done_batches[name], "whole_epoch_measured": whole,
            "mean_real_tokens_per_batch": epoch_tokens / len(batches),
            "padding_efficiency": padding_efficiency(batches, src_len, tgt_len), "real_tokens_per_second": rate,
            "measured_seconds": spent[name], "epoch_seconds": spent[name] if whole else epoch_tokens / rate,
            "epoch_seconds_is_extrapolated": not whole}
    budget_rate, fixed_rate = (results[k]["real_tokens_per_second"] for k in epochs)
    results["ratio_token_budget_over_fixed"] = budget_rate / fixed_rate
    log(f"[4] token budget {budget_rate:.0f} real tok/s (padding eff. "
        f"{results['token_budget']['padding_efficiency']:.3f}), fixed size {batch_size}: {fixed_rate:.0f} real tok/s "
        f"(padding eff. {results['fixed_size_random']['padding_efficiency']:.3f})")
    return results


def compiled_training_step(settings, corpus, batches, device, dtype, log) -> dict:
    """Figure 7: our step with its layers compiled (as train.py --torch_compile) against eager, figure 1's batches;
    both with the trainer's faster modules, as train.py runs them."""
    config = corpus_config(corpus, settings.compile_preset)
    eager, compiled = build_model(OURS, config, device), build_model(OURS, config, device)
    for model in (eager, compiled):
        use_fast_modules(model)
    compile_layers(compiled)
    trainers = {"eager": TrainingStep(OURS, eager, dtype, device), "compiled": TrainingStep(OURS, compiled, dtype, device)}
    # Compilation happens on the first call for each new shape: time it once, then measure.
    compile_seconds = timed(lambda: [trainers["compiled"].step(b) for b in batches], device)
    seconds = alternate({n: (lambda t=t: [t.step(b) for b in batches]) for n, t in trainers.items()},
                        settings.train_reps, device, warmup={"eager": lambda: trainers["eager"].step(batches[0])})
    tokens = sum(real_tokens(b) for b in batches)
    results = {n: summary(seconds[n], tokens, "tokens_per_second") for n in trainers}
    results.update(preset=settings.compile_preset, first_pass_seconds_including_compilation=compile_seconds,
                   ratio_compiled_over_eager=results["compiled"]["tokens_per_second"]
                   / results["eager"]["tokens_per_second"])
    log(f"[7] compiled/eager {results['ratio_compiled_over_eager']:.3f} (first pass with compilation "
        f"{compile_seconds:.1f} s)")
    return results


def fused_qkv_projection(settings, corpus, device, log) -> dict:
    """Appendix: three Q/K/V Linears against one matmul on weights concatenated at every call, for a token-budget
    batch side (forward + backward) and a beam-search step (forward)."""
    results = {}
    for preset in settings.presets:
        d = corpus_config(corpus, preset).d_model
        for what, rows, train in (("training", settings.max_tokens, True),
                                  ("generation_step", settings.beam_batch_size * NUM_BEAMS, False)):
            torch.manual_seed(0)
            x = torch.randn(rows, d, device=device, requires_grad=train)
            weights = [torch.randn(d, d, device=device, requires_grad=train) for _ in range(3)]
            biases = [torch.randn(d, device=device, requires_grad=train) for _ in range(3)]
            calls = 3 if train else 50

            def separate():
                for _ in range(calls):
                    outs = [F.linear(x, w, b) for w, b in zip(weights, biases)]
                    if train:
                        sum(o.sum() for o in outs).backward()

            def fused():
                for _ in range(calls):
                    q, k, v = F.linear(x, torch.cat(weights), torch.cat(biases)).split(d, dim=-1)
                    if train:
                        (q.sum() + k.sum() + v.sum()).backward()

            with torch.set_grad_enabled(train):
                seconds = alternate({"separate": separate, "fused": fused}, settings.train_reps + 2, device,
                                    warmup={"separate": separate, "fused": fused})
            entry = {name: statistics.median(values) for name, values in seconds.items()}
            entry["fused_over_separate_time"] = entry["fused"] / entry["separate"]
            results[f"{preset}_{what}"] = entry
            log(f"[qkv] {preset} {what}: fused/separate time {entry['fused_over_separate_time']:.3f}")
    return results
