"""Measurements of training: the step's speed, the data pipeline, FLOP rate, torch.compile, fused Q/K/V.

Each function measures one thing and returns a JSON-ready dict; `log` receives one line per result.
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F
from torch.utils.data import BatchSampler, DataLoader, RandomSampler
from transformers import DataCollatorForSeq2Seq

from modeling_vaswani import VaswaniConfig
from modeling_vaswani.model.generation import NUM_BEAMS
from modeling_vaswani.training.batching import TokenBudgetBatchSampler, padding_efficiency

from .harness import (MARIAN, OURS, TrainingStep, alternate, build_model, build_pair, collate, corpus_config,
                      parameter_counts, ratio, real_tokens, summary, synchronize, timed)


def training_flops(config: VaswaniConfig, batch: dict) -> float:
    """Analytic FLOPs of one training step on the padded batch (forward × 3 for forward + backward).

    Counted: every Linear of the layers (Q, K, V, O projections and the two FFN matrices), the
    attention products Q·Kᵀ and weights·V (full squares, also under the causal mask), and the
    output projection to the vocabulary. Not counted: softmax, LayerNorm, dropout, embeddings,
    the loss and Adam, which are element-wise (memory-bound, not FLOP-bound).
    """
    d, f, vocab, h = config.d_model, config.d_ff, config.vocab_size, config.num_heads
    qk, v = h * config.d_k, h * config.d_v
    batch_size, s = batch["input_ids"].shape
    t = batch["labels"].shape[1]
    enc, dec = batch_size * s, batch_size * t  # token positions on each side

    def mm(rows, inner, cols):
        return 2.0 * rows * inner * cols

    def projections(queries, keys):  # W^Q, W^K, W^V, W^O (§3.2.2)
        return mm(queries, d, qk) + mm(keys, d, qk) + mm(keys, d, v) + mm(queries, v, d)

    def attention(q_len, k_len):  # Q·Kᵀ and weights·V, per head (Eq. 1)
        return batch_size * h * (mm(q_len, config.d_k, k_len) + mm(q_len, k_len, config.d_v))

    def ffn(n):  # Eq. (2)
        return mm(n, d, f) + mm(n, f, d)

    encoder_layer = projections(enc, enc) + attention(s, s) + ffn(enc)
    decoder_layer = projections(dec, dec) + attention(t, t) + projections(dec, enc) + attention(t, s) + ffn(dec)
    forward = config.num_layers * encoder_layer + config.num_decoder_layers * decoder_layer + mm(dec, d, vocab)
    return 3.0 * forward


def training_step_speed(settings, corpus, batches, warm, device, dtype, log) -> tuple[dict, dict]:
    """Figure 1: forward + backward + Adam in real source+target tokens/s, per preset.

    Returns (the results, the parameter counts of each preset's two models).
    """
    tokens = sum(real_tokens(b) for b in batches)
    padded = sum(b["input_ids"].numel() + b["labels"].numel() for b in batches)
    results, counts = {}, {}
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
        for name in trainers:
            entry[name]["model_flops_per_second"] = flops / entry[name]["median_seconds"]
            entry[name]["seconds_per_step"] = entry[name]["median_seconds"] / len(batches)
        entry["ratio_ours_over_marian"] = ratio(entry, "tokens_per_second")
        entry["batches"] = len(batches)
        entry["real_tokens_per_pass"] = tokens
        entry["padded_tokens_per_pass"] = padded
        entry["sentences_per_pass"] = sum(b["input_ids"].shape[0] for b in batches)
        entry["flops_per_pass"] = flops
        results[preset] = entry
        log(f"[1] {preset}: ours {entry[OURS]['tokens_per_second']:.0f} tok/s, Marian "
            f"{entry[MARIAN]['tokens_per_second']:.0f} tok/s, ratio {entry['ratio_ours_over_marian']:.3f}")
        del models, trainers
    return results, counts


def precision_ratios(fp32_speed: dict, bf16_speed: dict) -> dict:
    """Figure 1b: the bf16 (CPU autocast) training step, with its speed over the fp32 step of figure 1."""
    results = {}
    for preset, entry in bf16_speed.items():
        results[preset] = dict(entry)
        for name in (OURS, MARIAN):
            results[preset][name] = {**entry[name], "bf16_over_fp32": entry[name]["tokens_per_second"]
                                     / fp32_speed[preset][name]["tokens_per_second"]}
    return results


def data_pipeline_throughput(settings, corpus, device, dtype, log) -> dict:
    """Figure 4: token-budget batches against fixed-size random batches, through the real collator and model."""
    tok = corpus.tokenizer
    preset = settings.presets[0]
    model = build_model(OURS, corpus_config(corpus, preset), device)
    rows = [{"input_ids": s, "attention_mask": [1] * len(s), "labels": t}
            for s, t in zip(corpus.train_src, corpus.train_tgt)]
    collator = DataCollatorForSeq2Seq(tok, model=model)
    src_len = [len(s) for s in corpus.train_src]
    tgt_len = [len(t) for t in corpus.train_tgt]
    budget_sampler = TokenBudgetBatchSampler(src_len, tgt_len, settings.max_tokens, shuffle=True, seed=0)
    # The Trainer's default: a RandomSampler and a fixed batch size. Equal sentences per batch on
    # average means equal real tokens per batch on average.
    batch_size = max(1, round(len(rows) / len(budget_sampler)))
    generator = torch.Generator().manual_seed(0)
    fixed_sampler = list(BatchSampler(RandomSampler(range(len(rows)), generator=generator), batch_size, False))
    loaders = {
        "token_budget": DataLoader(rows, batch_sampler=budget_sampler, collate_fn=collator),
        "fixed_size_random": DataLoader(rows, batch_sampler=fixed_sampler, collate_fn=collator),
    }
    epoch_batches = {"token_budget": list(budget_sampler), "fixed_size_random": fixed_sampler}
    trainer = TrainingStep(OURS, model, dtype, device)
    trainer.step(collate(corpus, epoch_batches["token_budget"][0], device))  # warm-up

    iterators = {k: iter(v) for k, v in loaders.items()}
    spent = {k: 0.0 for k in loaders}
    done_batches = {k: 0 for k in loaders}
    done_tokens = {k: 0 for k in loaders}
    cap = settings.epoch_seconds
    active = set(loaders)
    while active:
        # Interleave: the scheme with less time so far goes next, so drift hits both alike.
        name = min(active, key=lambda k: spent[k])
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
    for name in loaders:
        batches = epoch_batches[name]
        epoch_tokens = sum(src_len[i] + tgt_len[i] for b in batches for i in b)
        rate = done_tokens[name] / spent[name]
        whole = done_batches[name] == len(batches)
        results[name] = {
            "batches_per_epoch": len(batches),
            "batches_measured": done_batches[name],
            "whole_epoch_measured": whole,
            "mean_real_tokens_per_batch": epoch_tokens / len(batches),
            "padding_efficiency": padding_efficiency(batches, src_len, tgt_len),
            "real_tokens_per_second": rate,
            "measured_seconds": spent[name],
            "epoch_seconds": spent[name] if whole else epoch_tokens / rate,
            "epoch_seconds_is_extrapolated": not whole,
        }
    results["ratio_token_budget_over_fixed"] = (results["token_budget"]["real_tokens_per_second"]
                                                / results["fixed_size_random"]["real_tokens_per_second"])
    log(f"[4] token budget {results['token_budget']['real_tokens_per_second']:.0f} real tok/s "
        f"(padding eff. {results['token_budget']['padding_efficiency']:.3f}), fixed size {batch_size}: "
        f"{results['fixed_size_random']['real_tokens_per_second']:.0f} real tok/s "
        f"(padding eff. {results['fixed_size_random']['padding_efficiency']:.3f})")
    return results


def matmul_rate(size: int, reps: int, device: torch.device, dtype: torch.dtype) -> float:
    """Best-of-`reps` FLOP/s of torch.mm on two size × size matrices."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    torch.mm(a, b)  # warm-up
    best = min(timed(lambda: torch.mm(a, b), device) for _ in range(reps))
    return 2.0 * size**3 / best


def hardware_efficiency(settings, step_speed: dict, device, dtype, log) -> dict:
    """Figure 5: the training step's model FLOP/s (from `training_step_speed`) over this machine's matmul rate."""
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


def compiled_training_step(settings, corpus, batches, device, dtype, log) -> dict:
    """Figure 7: `torch.compile` of our training step against eager, on the timed training batches."""
    config = corpus_config(corpus, settings.compile_preset)
    tokens = sum(real_tokens(b) for b in batches)
    eager_model = build_model(OURS, config, device)
    compiled_base = build_model(OURS, config, device)
    trainers = {
        "eager": TrainingStep(OURS, eager_model, dtype, device),
        "compiled": TrainingStep(OURS, compiled_base, dtype, device, step_model=torch.compile(compiled_base)),
    }
    # Compilation happens on the first call for each new shape: time it once, then measure.
    compile_seconds = timed(lambda: [trainers["compiled"].step(b) for b in batches], device)
    seconds = alternate({n: (lambda t=t: [t.step(b) for b in batches]) for n, t in trainers.items()},
                        settings.train_reps, device, warmup={"eager": lambda: trainers["eager"].step(batches[0])})
    results = {n: summary(seconds[n], tokens, "tokens_per_second") for n in trainers}
    results["preset"] = settings.compile_preset
    results["first_pass_seconds_including_compilation"] = compile_seconds
    results["ratio_compiled_over_eager"] = (results["compiled"]["tokens_per_second"]
                                            / results["eager"]["tokens_per_second"])
    log(f"[7] compiled/eager {results['ratio_compiled_over_eager']:.3f} (first pass with compilation "
        f"{compile_seconds:.1f} s)")
    return results


def fused_qkv_projection(settings, corpus, device, log) -> dict:
    """Appendix: three separate Q/K/V projections (the model as written) against one matmul on concatenated weights.

    The saved parameters stay three Linears, so a fused path would have to concatenate the weights
    on every call; this measures whether one bigger matmul wins that back. Rows: one token-budget
    batch side (training, forward + backward) and one beam-search step of a beam-search batch
    (generation, forward only).
    """
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
