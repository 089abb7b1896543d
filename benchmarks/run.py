#!/usr/bin/env python
"""Side-by-side speed of `modeling_vaswani` and transformers' `MarianMTModel`.

Marian is the Hugging Face model closest to the paper's architecture: an encoder–decoder with
post-LN sub-layers (§3.1), sinusoidal positions (§3.5), embeddings scaled by √d_model and shared
three ways (§3.4). Configured to the same widths, depth, vocabulary, ReLU feed-forward (Eq. 2),
dropout and SDPA attention, it performs the same computation, so any difference in time is
implementation overhead. What remains different is negligible work: Marian adds a
`final_logits_bias` to the logits and concatenates its sines and cosines instead of interleaving them.

Figures (all in one process tree; the two systems always run alternately, A B A B ..., so slow
drifts of the machine's speed hit both equally; each figure reports medians and ours/theirs):

1. training step (forward + backward + Adam, §5.3) in real source+target tokens per second, on
   the same Multi30k token-budget batches (§5.1) for both, at the "small" and "base" presets;
2. beam search (beam 4, §6.1) over the first 200 sentences of test_2016_flickr, both forced to
   the same output length (min_new_tokens = max_new_tokens) so they do the same work;
3. cached `generate` (greedy) against the hand-written recomputing `decoding.greedy_decode` at
   forced output lengths 16, 64 and 256: time per generated token as the output grows;
4. data pipeline: real tokens per second through the §5.1 token-budget batches against the
   Trainer's default random fixed-size batches, and the padding efficiency of each;
5. hardware efficiency: analytic model FLOPs of the training step divided by its time, as a
   fraction of this machine's measured fp32 (bf16 on a GPU) matmul rate;
6. peak resident memory of training and of translating the whole test set (beam 4), each in its
   own child process;
7. (optional) `torch.compile` of the training step against eager.
torch.profiler tables of one training step and one beam-search batch per system go next to the
results, with a breakdown of where the time goes.

    python benchmarks/run.py --results-md benchmarks/RESULTS.md   # the full run, recorded in RESULTS.md
    python benchmarks/run.py --quick                              # tiny sizes; checks that everything runs
    benchmarks/gpu.sh                                             # figures 1, 2, 5 on a CUDA GPU in bf16

Results: `results.json` (every number), `tables.md` (the generated tables of RESULTS.md),
`figures.png` (figures 3 and 1) and `profile_*.txt`, in --output-dir (default benchmarks/).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

# The repository root must win over this folder on sys.path (scripts there shadow libraries).
ROOT = Path(__file__).resolve().parent.parent
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(ROOT)

import numpy as np
import torch
import transformers
from torch.utils.data import BatchSampler, DataLoader, RandomSampler
from transformers import DataCollatorForSeq2Seq, GenerationConfig, MarianConfig, MarianMTModel

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.training.batching import TokenBudgetBatchSampler, padding_efficiency, token_budget_batches
from modeling_vaswani.training.data import load_multi30k
from modeling_vaswani.evaluation.greedy_decoding import greedy_decode
from modeling_vaswani.model.label_smoothing import LABEL_SMOOTHING, label_smoothed_cross_entropy
from modeling_vaswani.model.generation import LENGTH_PENALTY, NUM_BEAMS
from modeling_vaswani.model.modeling_vaswani import shift_tokens_right
from modeling_vaswani.training.optimization import create_adam
from modeling_vaswani.training.tokenization import train_bpe_tokenizer

FIGURE_KEYS = {
    1: "figure_1_training_step",
    2: "figure_2_beam_search",
    3: "figure_3_cached_vs_recomputing_decoding",
    4: "figure_4_data_pipeline",
    5: "figure_5_hardware_efficiency",
    6: "figure_6_peak_memory",
    7: "figure_7_torch_compile",
}
OURS, MARIAN = "modeling_vaswani", "marian"
FORKSERVER_PRELOAD = (
    "numpy", "torch", "transformers", "transformers.models.marian.modeling_marian", "transformers.generation",
    "transformers.data.data_collator", "modeling_vaswani", "modeling_vaswani.training.batching", "modeling_vaswani.training.data",
    "modeling_vaswani.evaluation.greedy_decoding", "modeling_vaswani.model.label_smoothing", "modeling_vaswani.training.optimization",
    "modeling_vaswani.training.tokenization",
)


@dataclasses.dataclass
class Settings:
    """Sizes of every figure; `FULL` is the recorded run, `QUICK` only proves that the code runs."""

    presets: tuple = ("small", "base")
    vocab_size: int = 8000  # tokenization.py's default for Multi30k
    train_sentences: int | None = None  # None = all 29,000 pairs
    max_tokens: int = 4096  # §5.1 token budget per side (scripts/train.py's default)
    train_batches: int = 3  # batches per timed pass of figure 1
    train_reps: int = 3
    beam_sentences: int = 200
    beam_batch_size: int = 50
    beam_reps: int = 3
    beam_length: int | None = None  # forced output length; None = mean reference length of the sentences
    decode_preset: str = "small"
    decode_lengths: tuple = (16, 64, 256)
    decode_batch_size: int = 4
    decode_reps: int = 3
    epoch_seconds: float | None = 90.0  # figure 4: time cap per batching scheme; None = whole epoch
    matmul_size: int = 2048
    matmul_reps: int = 5
    memory_train_preset: str = "base"
    memory_translate_preset: str = "small"  # 1,000 sentences of base-preset beam search: minutes per system
    memory_train_steps: int = 2
    memory_sentences: int = 1000
    memory_batch_size: int = 100
    compile_preset: str = "small"
    run_compile: bool = True


FULL = Settings()
QUICK = Settings(
    presets=("tiny",), vocab_size=300, train_sentences=300, max_tokens=256, train_batches=2, train_reps=1,
    beam_sentences=8, beam_batch_size=4, beam_reps=1, beam_length=6,
    decode_preset="tiny", decode_lengths=(4, 8, 16), decode_batch_size=2, decode_reps=1,
    epoch_seconds=0.5, matmul_size=128, matmul_reps=2,
    memory_train_preset="tiny", memory_translate_preset="tiny", memory_train_steps=1, memory_sentences=8,
    memory_batch_size=4, compile_preset="tiny", run_compile=False,
)


# --------------------------------------------------------------------------------------------
# The two systems
# --------------------------------------------------------------------------------------------


def vaswani_config(preset: str, tokenizer_ids: dict, vocab_size: int) -> VaswaniConfig:
    # Dropout 0.1 in every preset, so "tiny" (quick mode) runs the same kind of step as the others.
    return VaswaniConfig.from_preset(preset, vocab_size=vocab_size, dropout=0.1, attention_dropout=0.0,
                                     attn_implementation="sdpa", **tokenizer_ids)


def marian_twin_config(config: VaswaniConfig) -> MarianConfig:
    """A MarianConfig doing the computation of `config`: same sizes, ReLU, post-LN, scaled and tied embeddings."""
    return MarianConfig(
        vocab_size=config.vocab_size,
        decoder_vocab_size=config.vocab_size,
        max_position_embeddings=config.max_position_embeddings,
        d_model=config.d_model,
        encoder_layers=config.num_layers,
        decoder_layers=config.num_decoder_layers,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        encoder_attention_heads=config.num_heads,
        decoder_attention_heads=config.num_heads,
        activation_function="relu",  # Eq. (2)
        dropout=config.dropout,
        attention_dropout=0.0,
        activation_dropout=0.0,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=config.pad_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        decoder_start_token_id=config.decoder_start_token_id,
        forced_eos_token_id=None,
        attn_implementation="sdpa",
    )


def build_pair(config: VaswaniConfig, device: torch.device) -> dict:
    torch.manual_seed(0)
    ours = VaswaniForConditionalGeneration(config).to(device)
    torch.manual_seed(0)
    marian = MarianMTModel(marian_twin_config(config)).to(device)
    return {OURS: ours, MARIAN: marian}


def parameter_counts(models: dict) -> dict:
    """Trainable parameters must agree; Marian also keeps frozen position tables and a logits-bias buffer."""
    counts = {}
    for name, model in models.items():
        counts[name] = {
            "trainable": model.num_parameters(only_trainable=True),
            "all_parameters": model.num_parameters(),
            "buffers": sum(b.numel() for b in model.buffers()),
        }
    ours, theirs = counts[OURS]["trainable"], counts[MARIAN]["trainable"]
    counts["trainable_difference_percent"] = 100.0 * (theirs - ours) / ours
    return counts


def training_loss(name: str, model, batch: dict) -> torch.Tensor:
    """The same §5.4 loss for both: ours computes it inside forward, Marian's logits get the same function."""
    if name == OURS:
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     decoder_input_ids=batch["decoder_input_ids"], labels=batch["labels"]).loss
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   decoder_input_ids=batch["decoder_input_ids"]).logits
    return label_smoothed_cross_entropy(logits, batch["labels"], LABEL_SMOOTHING)  # ε_ls of every preset


def autocast(device: torch.device, dtype: torch.dtype | None):
    """bf16/fp16 mixed precision when `dtype` is given, else plain float32."""
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()


class TrainingStep:
    """One system's training step: zero_grad, forward, loss, backward, Adam (§5.3)."""

    def __init__(self, name: str, model, autocast_dtype: torch.dtype | None, device: torch.device, step_model=None):
        self.name, self.model = name, model
        self.step_model = step_model if step_model is not None else model  # e.g. a torch.compile'd wrapper
        self.optimizer = create_adam([p for p in model.parameters() if p.requires_grad], lr=1e-4)
        self.device, self.autocast_dtype = device, autocast_dtype

    def step(self, batch: dict) -> torch.Tensor:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.device, self.autocast_dtype):
            loss = training_loss(self.name, self.step_model, batch)
        loss.backward()
        self.optimizer.step()
        return loss.detach()


# --------------------------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------------------------


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def alternate(jobs: dict, reps: int, device: torch.device, warmup: dict | None = None) -> dict:
    """Time each job `reps` times in the order A B A B ...; returns {name: [seconds, ...]}.

    `warmup` (same keys) runs once per job first, so one-off costs (allocations, Adam state) stay
    out of the numbers.
    """
    for name, fn in (warmup or {}).items():
        fn()
    seconds = {name: [] for name in jobs}
    for _ in range(reps):
        for name, fn in jobs.items():
            seconds[name].append(timed(fn, device))
    return seconds


def summary(seconds: list, work: float, unit: str) -> dict:
    median = statistics.median(seconds)
    return {"seconds": seconds, "median_seconds": median, unit: work / median}


def ratio(result: dict, unit: str) -> float:
    """ours / theirs for a higher-is-better rate."""
    return result[OURS][unit] / result[MARIAN][unit]


# --------------------------------------------------------------------------------------------
# Data: Multi30k, shared BPE (§5.1), token-budget batches
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Corpus:
    tokenizer: object
    train_src: list
    train_tgt: list
    test_src: list
    test_tgt: list


def prepare_corpus(settings: Settings) -> Corpus:
    data = load_multi30k("en", "de")
    train = data["train"]
    if settings.train_sentences is not None:
        train = train.select(range(settings.train_sentences))
    pairs = train["translation"]
    texts = [p["en"] for p in pairs] + [p["de"] for p in pairs]
    tokenizer = train_bpe_tokenizer(texts, vocab_size=settings.vocab_size)
    test = data["test"]["translation"]

    def encode(rows, lang):
        return tokenizer([r[lang] for r in rows], max_length=256, truncation=True)["input_ids"]

    return Corpus(tokenizer, encode(pairs, "en"), encode(pairs, "de"), encode(test, "en"), encode(test, "de"))


def tokenizer_ids(tokenizer) -> dict:
    return dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.bos_token_id)


def collate(src: list, tgt: list, indices, pad_id: int, start_id: int, device: torch.device) -> dict:
    """Pad one batch: input_ids/attention_mask (B, S), labels (B, T) with -100, decoder_input_ids shifted right."""
    batch_src = [src[i] for i in indices]
    batch_tgt = [tgt[i] for i in indices]
    s_len, t_len = max(map(len, batch_src)), max(map(len, batch_tgt))
    input_ids = torch.full((len(indices), s_len), pad_id, dtype=torch.long)
    labels = torch.full((len(indices), t_len), -100, dtype=torch.long)
    for row, (s, t) in enumerate(zip(batch_src, batch_tgt)):
        input_ids[row, : len(s)] = torch.tensor(s)
        labels[row, : len(t)] = torch.tensor(t)
    batch = {
        "input_ids": input_ids,
        "attention_mask": (input_ids != pad_id).long(),
        "labels": labels,
        "decoder_input_ids": shift_tokens_right(labels, pad_id, start_id),
    }
    return {k: v.to(device) for k, v in batch.items()}


def real_tokens(batch: dict) -> int:
    return int(batch["attention_mask"].sum()) + int((batch["labels"] != -100).sum())


def source_batches(ids: list, batch_size: int, pad_id: int, device: torch.device) -> list:
    """Consecutive sentences, padded: (input_ids, attention_mask) per batch."""
    out = []
    for start in range(0, len(ids), batch_size):
        rows = ids[start : start + batch_size]
        input_ids = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
        for r, s in enumerate(rows):
            input_ids[r, : len(s)] = torch.tensor(s)
        out.append((input_ids.to(device), (input_ids != pad_id).long().to(device)))
    return out


# --------------------------------------------------------------------------------------------
# Figure 1 (and 5): training step throughput
# --------------------------------------------------------------------------------------------


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


def figure_1(settings, corpus, device, dtype, log) -> tuple[dict, dict, dict]:
    """Returns (figure 1 results, parameter counts, {"batches": the timed batches})."""
    tok = corpus.tokenizer
    batches_idx = token_budget_batches([len(x) for x in corpus.train_src], [len(x) for x in corpus.train_tgt],
                                       settings.max_tokens, seed=0, shuffle=True)
    # The first batches of the shuffled list are a random sample of the epoch's batches.
    chosen = batches_idx[: settings.train_batches]
    batches = [collate(corpus.train_src, corpus.train_tgt, b, tok.pad_token_id, tok.bos_token_id, device)
               for b in chosen]
    warm = collate(corpus.train_src, corpus.train_tgt, batches_idx[settings.train_batches],
                   tok.pad_token_id, tok.bos_token_id, device)
    tokens = sum(real_tokens(b) for b in batches)
    padded = sum(b["input_ids"].numel() + b["labels"].numel() for b in batches)
    results, counts, shared = {}, {}, {"batches": batches}  # figures 5-7 and the profiles reuse the batches
    for preset in settings.presets:
        config = vaswani_config(preset, tokenizer_ids(tok), len(tok))
        models = build_pair(config, device)
        counts[preset] = parameter_counts(models)
        log(f"[1] {preset}: trainable parameters ours {counts[preset][OURS]['trainable']:,}, "
            f"Marian {counts[preset][MARIAN]['trainable']:,}")
        trainers = {name: TrainingStep(name, m, dtype, device) for name, m in models.items()}

        def one_pass(trainer):
            return lambda: [trainer.step(b) for b in batches]

        seconds = alternate({n: one_pass(t) for n, t in trainers.items()}, settings.train_reps, device,
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
    return results, counts, shared


# --------------------------------------------------------------------------------------------
# Figure 2: beam search
# --------------------------------------------------------------------------------------------


def forced_generation_config(tokenizer, length: int, num_beams: int) -> GenerationConfig:
    """§6.1 decoding (beam 4, α = 0.6) forced to exactly `length` new tokens, identical for both systems."""
    beam = dict(length_penalty=LENGTH_PENALTY, early_stopping=True) if num_beams > 1 else {}
    return GenerationConfig(num_beams=num_beams, do_sample=False, use_cache=True, min_new_tokens=length,
                            max_new_tokens=length, **beam, **tokenizer_ids(tokenizer))


def forced_length(settings, corpus, sentences: int) -> int:
    """The output length both systems are held to: the mean reference length of the first `sentences`."""
    return settings.beam_length or round(statistics.mean(len(t) for t in corpus.test_tgt[:sentences]))


def figure_2(settings, corpus, device, dtype, log) -> dict:
    tok = corpus.tokenizer
    sources = corpus.test_src[: settings.beam_sentences]
    length = forced_length(settings, corpus, settings.beam_sentences)  # realistic work, equal for both
    batches = source_batches(sources, settings.beam_batch_size, tok.pad_token_id, device)
    generation_config = forced_generation_config(tok, length, num_beams=NUM_BEAMS)
    results = {"forced_output_length": length, "sentences": len(sources), "batch_size": settings.beam_batch_size}
    for preset in settings.presets:
        config = vaswani_config(preset, tokenizer_ids(tok), len(tok))
        models = build_pair(config, device)
        for m in models.values():
            m.eval()

        def translate(model, which=batches):
            def run():
                with autocast(device, dtype):
                    for input_ids, mask in which:
                        out = model.generate(input_ids=input_ids, attention_mask=mask,
                                             generation_config=generation_config)
                        assert out.shape[1] == length + 1, out.shape  # start token + forced length
            return run

        seconds = alternate({n: translate(m) for n, m in models.items()}, settings.beam_reps, device,
                            warmup={n: translate(m, batches[:1]) for n, m in models.items()})
        entry = {n: summary(seconds[n], len(sources), "sentences_per_second") for n in models}
        for n in models:
            entry[n]["tokens_per_second"] = len(sources) * length / entry[n]["median_seconds"]
        entry["ratio_ours_over_marian"] = ratio(entry, "sentences_per_second")
        results[preset] = entry
        log(f"[2] {preset}: ours {entry[OURS]['sentences_per_second']:.2f} sent/s, Marian "
            f"{entry[MARIAN]['sentences_per_second']:.2f} sent/s, ratio {entry['ratio_ours_over_marian']:.3f}")
        del models
    return results


# --------------------------------------------------------------------------------------------
# Figure 3: cached generate vs recomputing greedy decoder
# --------------------------------------------------------------------------------------------


@contextlib.contextmanager
def never_finishing(model):
    """greedy_decode stops once every row has emitted </s>; no token has id -1, so it runs its full length."""
    saved = model.config.eos_token_id
    model.config.eos_token_id = -1
    try:
        yield
    finally:
        model.config.eos_token_id = saved


def figure_3(settings, corpus, device, dtype, log) -> dict:
    tok = corpus.tokenizer
    config = vaswani_config(settings.decode_preset, tokenizer_ids(tok), len(tok))
    models = build_pair(config, device)
    for m in models.values():
        m.eval()
    ours = models[OURS]
    (input_ids, mask), = source_batches(corpus.test_src[: settings.decode_batch_size],
                                        settings.decode_batch_size, tok.pad_token_id, device)
    results = {"preset": settings.decode_preset, "batch_size": settings.decode_batch_size, "lengths": {}}
    for length in settings.decode_lengths:
        gen = forced_generation_config(tok, length, num_beams=1)

        def cached(model):
            def run():
                with autocast(device, dtype):
                    out = model.generate(input_ids=input_ids, attention_mask=mask, generation_config=gen)
                assert out.shape[1] == length + 1
            return run

        def recomputing():
            with never_finishing(ours), autocast(device, dtype):
                out = greedy_decode(ours, input_ids, mask, max_new_tokens=length)
            assert out.shape[1] == length + 1

        jobs = {"ours_cached_generate": cached(ours), "ours_recomputing_greedy_decode": recomputing,
                "marian_cached_generate": cached(models[MARIAN])}
        # The shortest length warms every job up; longer ones reuse the warm state.
        warmup = jobs if length == settings.decode_lengths[0] else None
        seconds = alternate(jobs, settings.decode_reps, device, warmup=warmup)
        entry = {}
        for name, values in seconds.items():
            median = statistics.median(values)
            entry[name] = {"seconds": values, "median_seconds": median,
                           "ms_per_generated_token": 1000.0 * median / length}
        entry["recomputing_over_cached"] = (entry["ours_recomputing_greedy_decode"]["median_seconds"]
                                            / entry["ours_cached_generate"]["median_seconds"])
        entry["ratio_ours_over_marian_cached"] = (entry["marian_cached_generate"]["median_seconds"]
                                                  / entry["ours_cached_generate"]["median_seconds"])
        results["lengths"][str(length)] = entry
        log(f"[3] length {length}: cached {entry['ours_cached_generate']['ms_per_generated_token']:.2f} ms/token, "
            f"recomputing {entry['ours_recomputing_greedy_decode']['ms_per_generated_token']:.2f} ms/token")
    results["fits"] = fit_growth(results["lengths"])
    return results


def fit_growth(per_length: dict) -> dict:
    """Least-squares fits of per-token time a + b·L, and the log–log slope k of total time ∝ L^k."""
    lengths = np.array([float(k) for k in per_length])
    fits = {}
    for name in ("ours_cached_generate", "ours_recomputing_greedy_decode", "marian_cached_generate"):
        per_token = np.array([per_length[k][name]["ms_per_generated_token"] for k in per_length])
        slope, intercept = np.polyfit(lengths, per_token, 1)
        total = per_token * lengths
        exponent = np.polyfit(np.log(lengths), np.log(total), 1)[0]
        fits[name] = {
            "ms_per_token_intercept": float(intercept),
            "ms_per_token_per_unit_length": float(slope),
            "total_time_exponent": float(exponent),
        }
    return fits


# --------------------------------------------------------------------------------------------
# Figure 4: data pipeline
# --------------------------------------------------------------------------------------------


def figure_4(settings, corpus, device, dtype, log) -> dict:
    """Token-budget batches against fixed-size random batches, through the real collator and the small model."""
    tok = corpus.tokenizer
    preset = settings.presets[0]
    config = vaswani_config(preset, tokenizer_ids(tok), len(tok))
    torch.manual_seed(0)
    model = VaswaniForConditionalGeneration(config).to(device)
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
    trainer.step(collate(corpus.train_src, corpus.train_tgt, epoch_batches["token_budget"][0],
                         tok.pad_token_id, tok.bos_token_id, device))  # warm-up

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
        done_tokens[name] += int(batch["attention_mask"].sum()) + int((batch["labels"] != -100).sum())
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


# --------------------------------------------------------------------------------------------
# Figure 5: FLOP rate against the machine's matmul rate
# --------------------------------------------------------------------------------------------


def matmul_rate(size: int, reps: int, device: torch.device, dtype: torch.dtype) -> float:
    """Best-of-`reps` FLOP/s of torch.mm on two size × size matrices."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    torch.mm(a, b)  # warm-up
    best = min(timed(lambda: torch.mm(a, b), device) for _ in range(reps))
    return 2.0 * size**3 / best


def figure_5(settings, fig1, device, dtype, log) -> dict:
    mm_dtype = dtype if dtype is not None else torch.float32
    rate = matmul_rate(settings.matmul_size, settings.matmul_reps, device, mm_dtype)
    results = {"matmul_flops_per_second": rate, "matmul_size": settings.matmul_size, "matmul_dtype": str(mm_dtype)}
    for preset, entry in fig1.items():
        results[preset] = {name: {"model_flops_per_second": entry[name]["model_flops_per_second"],
                                  "fraction_of_matmul_rate": entry[name]["model_flops_per_second"] / rate}
                           for name in (OURS, MARIAN)}
        log(f"[5] {preset}: ours {results[preset][OURS]['fraction_of_matmul_rate']:.1%} of "
            f"{rate / 1e9:.1f} GFLOP/s, Marian {results[preset][MARIAN]['fraction_of_matmul_rate']:.1%}")
    return results


# --------------------------------------------------------------------------------------------
# Figure 6: peak memory, each measurement in a fresh child process
# --------------------------------------------------------------------------------------------


def figure_6(settings, corpus, fig1_shared, device, workdir: Path, log) -> dict:
    """Each measurement runs in its own child process, forked from a fresh server that has only imported.

    The forkserver is a new interpreter that loads this script's imports once and then forks one
    child per measurement; every child starts from the same import-only state, so no measurement
    sees memory left over from another one (or from this parent's earlier figures).
    """
    tok = corpus.tokenizer
    sources = corpus.test_src[: settings.memory_sentences]
    length = forced_length(settings, corpus, settings.memory_sentences)
    presets = {"train": settings.memory_train_preset, "translate": settings.memory_translate_preset}
    payload = workdir / "memory_inputs.pt"
    torch.save({
        "configs": {task: vaswani_config(p, tokenizer_ids(tok), len(tok)).to_dict() for task, p in presets.items()},
        "train_batches": [{k: v.cpu() for k, v in b.items()}
                          for b in fig1_shared["batches"][: settings.memory_train_steps]],
        "translate_batches": [(i.cpu(), m.cpu()) for i, m in source_batches(sources, settings.memory_batch_size,
                                                                              tok.pad_token_id, torch.device("cpu"))],
        "generation_config": forced_generation_config(tok, length, num_beams=NUM_BEAMS).to_dict(),
    }, payload)
    results = {"train_preset": presets["train"], "translate_preset": presets["translate"],
               "train_steps": settings.memory_train_steps, "translate_sentences": len(sources),
               "translate_batch_size": settings.memory_batch_size, "forced_output_length": length}
    context = multiprocessing.get_context("forkserver")
    # Preload what this script imports (a child then re-runs its imports from cache). Listing
    # "__main__" itself would be the obvious way, but Python 3.11 ignores it for the forkserver.
    context.set_forkserver_preload(list(FORKSERVER_PRELOAD))
    for task in ("train", "translate"):
        results[task] = {}
        for system in (OURS, MARIAN):  # one child per measurement, alternating systems
            report = workdir / f"{task}_{system}.json"
            child = context.Process(target=memory_child, args=(payload, system, task, device.type, report))
            child.start()
            child.join()
            if child.exitcode != 0 or not report.exists():
                raise RuntimeError(f"The memory measurement ({system}, {task}) failed with exit code {child.exitcode}.")
            results[task][system] = json.loads(report.read_text())
        ours, theirs = results[task][OURS]["peak_rss_mib"], results[task][MARIAN]["peak_rss_mib"]
        results[task]["ratio_ours_over_marian"] = ours / theirs
        log(f"[6] {task}: peak RSS ours {ours:.0f} MiB, Marian {theirs:.0f} MiB "
            f"(both started at {results[task][OURS]['rss_at_start_mib']:.0f} MiB)")
    return results


def memory_child(payload: Path, system: str, task: str, device_name: str, report: Path) -> None:
    """In a fresh child: build one model, run one workload, write resident memory (MiB) as JSON."""
    at_start = _current_rss_mib()
    device = torch.device(device_name)
    data = torch.load(payload, weights_only=False)
    config = VaswaniConfig.from_dict(data["configs"][task], attn_implementation="sdpa")
    torch.manual_seed(0)
    model = (VaswaniForConditionalGeneration(config) if system == OURS
             else MarianMTModel(marian_twin_config(config))).to(device)
    setup = _max_rss_mib()
    start = time.perf_counter()
    if task == "train":
        trainer = TrainingStep(system, model, None, device)
        for batch in data["train_batches"]:
            trainer.step({k: v.to(device) for k, v in batch.items()})
    else:
        model.eval()
        generation_config = GenerationConfig(**data["generation_config"])
        for input_ids, mask in data["translate_batches"]:
            model.generate(input_ids=input_ids.to(device), attention_mask=mask.to(device),
                           generation_config=generation_config)
    synchronize(device)
    report.write_text(json.dumps({"rss_at_start_mib": at_start, "rss_after_setup_mib": setup,
                                  "peak_rss_mib": _max_rss_mib(), "workload_seconds": time.perf_counter() - start,
                                  "cpu_seconds": resource.getrusage(resource.RUSAGE_SELF).ru_utime}))


def _current_rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def _max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


# --------------------------------------------------------------------------------------------
# Figure 7 (optional): torch.compile of the training step
# --------------------------------------------------------------------------------------------


def figure_7(settings, corpus, fig1_shared, device, dtype, log) -> dict:
    tok = corpus.tokenizer
    config = vaswani_config(settings.compile_preset, tokenizer_ids(tok), len(tok))
    batches = fig1_shared["batches"]
    tokens = sum(real_tokens(b) for b in batches)
    torch.manual_seed(0)
    eager_model = VaswaniForConditionalGeneration(config).to(device)
    torch.manual_seed(0)
    compiled_base = VaswaniForConditionalGeneration(config).to(device)
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


# --------------------------------------------------------------------------------------------
# Appendix: would a fused Q/K/V projection pay?
# --------------------------------------------------------------------------------------------


def appendix_fused_qkv(settings, corpus, device, log) -> dict:
    """Three separate projections (the model as written) against one matmul on the concatenated weights.

    The saved parameters stay three Linears, so a fused path would have to concatenate the weights
    on every call; this measures whether one bigger matmul wins that back. Rows: one token-budget
    batch side (training, forward + backward) and one beam-search step of a figure-2 batch
    (generation, forward only).
    """
    import torch.nn.functional as F

    results = {}
    for preset in settings.presets:
        d = vaswani_config(preset, tokenizer_ids(corpus.tokenizer), len(corpus.tokenizer)).d_model
        for what, rows, train in (("training", settings.max_tokens, True),
                                  ("generation_step", settings.beam_batch_size * 4, False)):
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


# --------------------------------------------------------------------------------------------
# Profiles (the "why" behind the ratios)
# --------------------------------------------------------------------------------------------


TRAINING_CATEGORIES = (
    ("matmul (Linear layers, output projection)", ("aten::mm", "aten::addmm", "aten::bmm")),
    ("attention kernel (SDPA)", ("scaled_dot_product", "flash_attention", "efficient_attention")),
    ("dropout masks", ("bernoulli", "dropout")),
    ("softmax and loss", ("softmax", "gather", "nll_loss")),
    ("layer norm", ("layer_norm",)),
)
GENERATION_CATEGORIES = (
    ("matmul (Linear layers, output projection)", ("aten::mm", "aten::addmm", "aten::bmm")),
    ("attention kernel (SDPA)", ("scaled_dot_product", "flash_attention", "efficient_attention")),
    ("log-softmax over the vocabulary", ("softmax",)),
    ("beam bookkeeping and cache (topk, sort, gather, index_select, cat)",
     ("topk", "sort", "gather", "index_select", "aten::cat", "aten::index")),
    ("layer norm", ("layer_norm",)),
)
OTHER = "other ops (element-wise, copies, embeddings, ...)"
OUTSIDE = "outside any op (Python, dispatch, profiler overhead)"


def write_profiles(settings, corpus, fig1_shared, device, dtype, out_dir: Path, log) -> dict:
    """torch.profiler of one training step and of one beam-search batch per system, at the largest preset.

    Writes the profiler's op tables next to the results and returns, for the CPU, where the time goes
    by category (the "why" behind figures 1, 2 and 5).
    """
    from torch.profiler import ProfilerActivity, profile

    tok = corpus.tokenizer
    preset = settings.presets[-1]
    config = vaswani_config(preset, tokenizer_ids(tok), len(tok))
    batch = fig1_shared["batches"][0]
    length = forced_length(settings, corpus, settings.beam_sentences)
    (input_ids, mask), *_ = source_batches(corpus.test_src[: settings.beam_batch_size], settings.beam_batch_size,
                                           tok.pad_token_id, device)
    generation_config = forced_generation_config(tok, length, num_beams=NUM_BEAMS)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    results = {"preset": preset, "files": {}, "training_breakdown": {}, "generation_breakdown": {}}
    for name, model in build_pair(config, device).items():
        trainer = TrainingStep(name, model, dtype, device)

        def translate():
            model.eval()
            with autocast(device, dtype):
                model.generate(input_ids=input_ids, attention_mask=mask, generation_config=generation_config)

        for what, work, categories in (("train_step", lambda: trainer.step(batch), TRAINING_CATEGORIES),
                                       ("beam_search", translate, GENERATION_CATEGORIES)):
            work()  # warm-up
            with profile(activities=activities) as prof:
                wall = timed(work, device)
            path = out_dir / f"profile_{name}_{preset}_{what}.txt"
            path.write_text(prof.key_averages().table(sort_by=sort, row_limit=30))
            results["files"][f"{name}_{what}"] = path.name
            if device.type == "cpu":
                key = "training_breakdown" if what == "train_step" else "generation_breakdown"
                results[key][name] = cpu_time_breakdown(prof.events(), categories, wall)
        del trainer, model
    log(f"[profile] {', '.join(results['files'].values())}")
    return results


def cpu_time_breakdown(events, categories, wall_seconds: float) -> dict:
    """Fractions of the profiled wall time: the Adam step (inclusive) if present, every other op's self time by
    category, and what no op accounts for (Python and dispatch between ops, and the profiler's own cost)."""
    def inside_optimizer(event):
        parent = event.cpu_parent
        while parent is not None:
            if parent.name.startswith("Optimizer.step"):
                return True
            parent = parent.cpu_parent
        return False

    totals = {category: 0.0 for category, _ in categories}
    totals["Adam step"] = totals[OTHER] = 0.0
    for event in events:
        if inside_optimizer(event):
            continue
        if event.name.startswith("Optimizer.step"):
            totals["Adam step"] += event.cpu_time_total
            continue
        for category, keys in categories:
            if any(key in event.name for key in keys):
                totals[category] += event.self_cpu_time_total
                break
        else:
            totals[OTHER] += event.self_cpu_time_total
    if not totals["Adam step"]:
        del totals["Adam step"]
    whole = wall_seconds * 1e6  # the profiler reports microseconds
    totals[OUTSIDE] = max(0.0, whole - sum(totals.values()))
    return {category: value / whole for category, value in totals.items()}


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------


def machine_info(device: torch.device) -> dict:
    model_name = platform.processor() or "unknown"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model_name = line.split(":", 1)[1].strip()
    info = {
        "cpu_model_name": model_name,
        "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "device": device.type,
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def check_targets(results: dict) -> list:
    """The recorded (not asserted) targets: [{target, measured, met, shortfall}], only for figures that ran."""
    rows = []

    def add(target, measured, goal, text):
        rows.append({"target": target, "measured": text, "met": measured >= goal,
                     "shortfall": None if measured >= goal else f"{(goal - measured) / goal:.1%} below"})

    f1, f2 = results.get(FIGURE_KEYS[1]), results.get(FIGURE_KEYS[2])
    for preset, entry in (f1 or {}).items():
        add(f"training step ≥ 1.0× Marian ({preset})", entry["ratio_ours_over_marian"], 1.0,
            f"{entry['ratio_ours_over_marian']:.3f}×")
    for preset, entry in (f2 or {}).items():
        if isinstance(entry, dict):
            add(f"beam-4 generation ≥ 1.0× Marian ({preset})", entry["ratio_ours_over_marian"], 1.0,
                f"{entry['ratio_ours_over_marian']:.3f}×")
    f4 = results.get(FIGURE_KEYS[4])
    if f4:
        add("token-budget real tokens/s ≥ 1.3× fixed-size batches", f4["ratio_token_budget_over_fixed"], 1.3,
            f"{f4['ratio_token_budget_over_fixed']:.2f}×")
    f5 = results.get(FIGURE_KEYS[5])
    if f5:
        preset = "base" if "base" in f5 else [p for p in f5 if isinstance(f5[p], dict)][-1]
        fraction = f5[preset][OURS]["fraction_of_matmul_rate"]
        add(f"model FLOP/s ≥ 70% of the measured matmul rate ({preset})", fraction, 0.70, f"{fraction:.1%}")
    f3 = results.get(FIGURE_KEYS[3])
    if f3:
        cached = f3["fits"]["ours_cached_generate"]["total_time_exponent"]
        recomputing = f3["fits"]["ours_recomputing_greedy_decode"]["total_time_exponent"]
        rows.append({"target": "cached generation linear (total ∝ L^k, k ≈ 1), recomputing quadratic (k ≈ 2)",
                     "measured": f"cached k = {cached:.2f}, recomputing k = {recomputing:.2f}",
                     "met": cached < 1.3 and recomputing > 1.5, "shortfall": None})
    return rows


def markdown_tables(results: dict) -> str:
    machine = results["machine"]
    lines = [
        f"Command: `{results['command']}` (dtype {results['dtype']}, {results['total_seconds'] / 60:.1f} minutes)",
        "",
        f"Machine: {machine['cpu_model_name']}, {machine['cpu_cores']} cores ({machine['torch_threads']} torch threads)"
        + (f", GPU {machine['gpu']}" if "gpu" in machine else "")
        + f"; Python {machine['python']}, torch {machine['torch']}, transformers {machine['transformers']}.",
        "",
    ]

    def table(title, header, rows):
        lines.extend([f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)])
        lines.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
        lines.append("")

    if results.get("targets"):
        table("Targets (recorded, not asserted)", ["target", "measured", "met"],
              [[t["target"], t["measured"], "yes" if t["met"] else f"**no** ({t['shortfall'] or 'see text'})"]
               for t in results["targets"]])
    params = results.get("parameters")
    if params:
        table("Parameters", ["preset", "ours trainable", "Marian trainable", "difference",
                             "Marian frozen position tables + buffers"],
              [[p, f"{c[OURS]['trainable']:,}", f"{c[MARIAN]['trainable']:,}",
                f"{c['trainable_difference_percent']:+.3f}%",
                f"{c[MARIAN]['all_parameters'] - c[MARIAN]['trainable']:,} + {c[MARIAN]['buffers']:,}"]
               for p, c in params.items()])
    f1 = results.get(FIGURE_KEYS[1])
    if f1:
        table("Figure 1 — training step (forward + backward + Adam), real source+target tokens/s",
              ["preset", "batches × sentences", "ours tok/s", "Marian tok/s", "ours s/step", "Marian s/step",
               "ours / Marian"],
              [[p, f"{e['batches']} × {e['sentences_per_pass'] / e['batches']:.0f}",
                f"{e[OURS]['tokens_per_second']:,.0f}", f"{e[MARIAN]['tokens_per_second']:,.0f}",
                f"{e[OURS]['seconds_per_step']:.3f}", f"{e[MARIAN]['seconds_per_step']:.3f}",
                f"**{e['ratio_ours_over_marian']:.3f}**"] for p, e in f1.items()])
    f2 = results.get(FIGURE_KEYS[2])
    if f2:
        presets = [p for p in f2 if isinstance(f2[p], dict)]
        table(f"Figure 2 — beam 4, {f2['sentences']} sentences, forced length {f2['forced_output_length']}",
              ["preset", "ours sent/s", "Marian sent/s", "ours tok/s", "Marian tok/s", "ours / Marian"],
              [[p, f"{f2[p][OURS]['sentences_per_second']:.2f}", f"{f2[p][MARIAN]['sentences_per_second']:.2f}",
                f"{f2[p][OURS]['tokens_per_second']:.1f}", f"{f2[p][MARIAN]['tokens_per_second']:.1f}",
                f"**{f2[p]['ratio_ours_over_marian']:.3f}**"] for p in presets])
    f3 = results.get(FIGURE_KEYS[3])
    if f3:
        table(f"Figure 3 — greedy decoding, ms per generated token ({f3['preset']}, batch {f3['batch_size']})",
              ["output length", "ours cached generate", "ours recomputing greedy_decode", "Marian cached generate",
               "recomputing / cached"],
              [[k, f"{e['ours_cached_generate']['ms_per_generated_token']:.2f}",
                f"{e['ours_recomputing_greedy_decode']['ms_per_generated_token']:.2f}",
                f"{e['marian_cached_generate']['ms_per_generated_token']:.2f}",
                f"{e['recomputing_over_cached']:.1f}×"] for k, e in f3["lengths"].items()])
        table("Figure 3 — fits", ["decoder", "ms/token at L→0", "ms/token added per unit length",
                                  "total time ∝ L^k, k ="],
              [[n, f"{f['ms_per_token_intercept']:.3f}", f"{f['ms_per_token_per_unit_length']:.4f}",
                f"{f['total_time_exponent']:.2f}"] for n, f in f3["fits"].items()])
    f4 = results.get(FIGURE_KEYS[4])
    if f4:
        table(f"Figure 4 — data pipeline ({f4['preset']} model, budget {f4['max_tokens']} tokens/side, "
              f"fixed batch size {f4['fixed_batch_size']})",
              ["batching", "batches/epoch", "measured", "mean real tokens/batch", "padding efficiency",
               "real tokens/s", "epoch seconds"],
              [[n, e["batches_per_epoch"], f"{e['batches_measured']}" + ("" if e["whole_epoch_measured"] else
                                                                          " (time cap)"),
                f"{e['mean_real_tokens_per_batch']:.0f}", f"{e['padding_efficiency']:.3f}",
                f"{e['real_tokens_per_second']:,.0f}",
                f"{e['epoch_seconds']:.0f}" + (" (extrapolated)" if e["epoch_seconds_is_extrapolated"] else "")]
               for n, e in ((k, f4[k]) for k in ("token_budget", "fixed_size_random"))])
        lines.append(f"Token budget / fixed size: **{f4['ratio_token_budget_over_fixed']:.2f}×** real tokens/s.\n")
    f5 = results.get(FIGURE_KEYS[5])
    if f5:
        presets = [p for p in f5 if isinstance(f5[p], dict)]
        table(f"Figure 5 — model FLOP/s of the training step vs torch.mm "
              f"({f5['matmul_size']}², {f5['matmul_dtype']}: "
              f"{f5['matmul_flops_per_second'] / 1e9:.1f} GFLOP/s)",
              ["preset", "ours GFLOP/s", "ours fraction", "Marian GFLOP/s", "Marian fraction"],
              [[p, f"{f5[p][OURS]['model_flops_per_second'] / 1e9:.1f}",
                f"{f5[p][OURS]['fraction_of_matmul_rate']:.1%}",
                f"{f5[p][MARIAN]['model_flops_per_second'] / 1e9:.1f}",
                f"{f5[p][MARIAN]['fraction_of_matmul_rate']:.1%}"] for p in presets])
    f6 = results.get(FIGURE_KEYS[6])
    if f6:
        table(f"Figure 6 — peak resident memory, MiB (train: {f6['train_preset']}, {f6['train_steps']} steps; "
              f"translate: {f6['translate_preset']}, {f6['translate_sentences']} sentences, beam 4, batch "
              f"{f6['translate_batch_size']}, forced length {f6['forced_output_length']})",
              ["workload", "child start", "ours after model build", "ours peak", "Marian after model build",
               "Marian peak", "ours / Marian peak"],
              [[t, f"{f6[t][OURS]['rss_at_start_mib']:.0f}", f"{f6[t][OURS]['rss_after_setup_mib']:.0f}",
                f"{f6[t][OURS]['peak_rss_mib']:.0f}", f"{f6[t][MARIAN]['rss_after_setup_mib']:.0f}",
                f"{f6[t][MARIAN]['peak_rss_mib']:.0f}", f"{f6[t]['ratio_ours_over_marian']:.3f}"]
               for t in ("train", "translate")])
    profiles = results.get("profiles") or {}
    for key, what in (("training_breakdown", "one training step (figure 1's first batch)"),
                      ("generation_breakdown", "one beam-search batch (figure 2's first batch)")):
        breakdown = profiles.get(key)
        if breakdown:
            table(f"Where the CPU time goes: {what}, {profiles['preset']} (torch.profiler, share of the profiled time)",
                  ["category", "ours", "Marian"],
                  [[c, f"{breakdown[OURS][c]:.1%}", f"{breakdown[MARIAN][c]:.1%}"] for c in breakdown[OURS]])
    qkv = results.get("appendix_fused_qkv_projection")
    if qkv:
        table("Appendix — Q/K/V projections: three Linears vs one matmul on concatenated weights (median s)",
              ["shape", "separate", "fused", "fused / separate"],
              [[k, f"{e['separate']:.4f}", f"{e['fused']:.4f}", f"{e['fused_over_separate_time']:.3f}"]
               for k, e in qkv.items()])
    f7 = results.get(FIGURE_KEYS[7])
    if f7 and "skipped" not in f7:
        table(f"Figure 7 — torch.compile of the training step ({f7['preset']})",
              ["mode", "tokens/s", "first pass incl. compilation (s)"],
              [["eager", f"{f7['eager']['tokens_per_second']:,.0f}", ""],
               ["compiled", f"{f7['compiled']['tokens_per_second']:,.0f}",
                f"{f7['first_pass_seconds_including_compilation']:.1f}"]])
        lines.append(f"Compiled / eager: **{f7['ratio_compiled_over_eager']:.3f}×**.\n")
    return "\n".join(lines)


def fill_results_md(path: Path, section: str, tables: str) -> None:
    """Replace what lies between the `<!-- generated:SECTION:begin -->` and `...:end -->` markers of `path`."""
    begin, end = f"<!-- generated:{section}:begin -->", f"<!-- generated:{section}:end -->"
    text = path.read_text() if path.exists() else ""
    if begin not in text or end not in text:
        raise ValueError(f"{path} has no '{begin}' … '{end}' markers to write the {section} tables between.")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    path.write_text(f"{head}{begin}\n{tables}\n{end}{tail}")


def plot(results: dict, path: Path) -> None:
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    f1, f3 = results.get(FIGURE_KEYS[1]), results.get(FIGURE_KEYS[3])
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    if f3:
        lengths = np.array([int(k) for k in f3["lengths"]])
        styles = {"ours_cached_generate": ("C0", "o", "ours, cached generate"),
                  "marian_cached_generate": ("C1", "s", "Marian, cached generate"),
                  "ours_recomputing_greedy_decode": ("C3", "^", "ours, recomputing greedy_decode")}
        grid = np.linspace(lengths.min(), lengths.max(), 100)
        for name, (color, marker, label) in styles.items():
            ms = [f3["lengths"][str(k)][name]["ms_per_generated_token"] for k in lengths]
            fit = f3["fits"][name]
            left.plot(lengths, ms, marker, color=color, label=f"{label} (total ∝ L^{fit['total_time_exponent']:.2f})")
            left.plot(grid, fit["ms_per_token_intercept"] + fit["ms_per_token_per_unit_length"] * grid, "-",
                      color=color, alpha=0.6)
        left.set_xscale("log", base=2)
        left.set_yscale("log")
        left.set_xticks(lengths, [str(k) for k in lengths])
        left.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        left.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        left.set_xlabel("forced output length L (tokens)")
        left.set_ylabel("ms per generated token (log)")
        left.set_title(f"Figure 3: greedy decoding, {f3['preset']}, batch {f3['batch_size']}\n"
                       "markers measured, lines: least-squares a + b·L", fontsize=10)
        left.legend(fontsize=8)
    if f1:
        presets = list(f1)
        x = np.arange(len(presets))
        ours = [f1[p][OURS]["tokens_per_second"] for p in presets]
        theirs = [f1[p][MARIAN]["tokens_per_second"] for p in presets]
        right.bar(x - 0.2, ours, 0.4, label="modeling_vaswani", color="C0")
        right.bar(x + 0.2, theirs, 0.4, label="MarianMTModel", color="C1")
        for i, p in enumerate(presets):
            right.annotate(f"{f1[p]['ratio_ours_over_marian']:.2f}×", (x[i], max(ours[i], theirs[i])),
                           ha="center", va="bottom")
        right.set_xticks(x, presets)
        right.set_ylabel("real source+target tokens / s")
        right.set_title("Figure 1: training step (forward + backward + Adam)\nsame Multi30k token-budget batches, "
                        "ours / Marian above the bars", fontsize=10)
        right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Tiny sizes: proves the code runs, measures nothing.")
    parser.add_argument("--figures", default="1,2,3,4,5,6,7", help="Comma-separated figure numbers to run.")
    parser.add_argument("--presets", default=None,
                        help="Comma-separated presets for figures 1, 2, 5 (default small,base).")
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


def main(argv=None) -> dict:
    args = parse_args(argv)
    try:
        figures = sorted({int(x) for x in args.figures.split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"--figures must be comma-separated numbers from 1 to 7, got {args.figures!r}.") from None
    if not set(figures) <= set(FIGURE_KEYS):
        raise ValueError(f"--figures must name figures 1 to 7, got {args.figures!r}.")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was given but PyTorch sees no CUDA device; use --device cpu.")
    dtype = torch.bfloat16 if args.dtype == "bfloat16" else None
    if args.results_md:  # fail now, not after the whole run
        section = "gpu" if device.type == "cuda" else "cpu"
        text = Path(args.results_md).read_text() if Path(args.results_md).exists() else ""
        if f"<!-- generated:{section}:begin -->" not in text or f"<!-- generated:{section}:end -->" not in text:
            raise ValueError(f"--results-md {args.results_md}: no '<!-- generated:{section}:begin -->' … "
                             f"'<!-- generated:{section}:end -->' markers to write the tables between.")
    settings = dataclasses.replace(QUICK if args.quick else FULL)
    if args.max_tokens is not None:
        if args.max_tokens < 1:
            raise ValueError(f"--max-tokens must be a positive number of tokens, got {args.max_tokens}.")
        settings.max_tokens = args.max_tokens
    if device.type == "cuda":  # a GPU needs bigger matrices to reach its peak matmul rate
        settings.matmul_size, settings.matmul_reps = 8192, 10
    if args.presets:
        settings.presets = tuple(p.strip() for p in args.presets.split(",") if p.strip())
    if args.no_compile:
        settings.run_compile = False
    elif args.compile:
        settings.run_compile = True
    out_dir = Path(args.output_dir) if args.output_dir else (
        Path(tempfile.mkdtemp(prefix="vaswani-bench-")) if args.quick else ROOT / "benchmarks")
    out_dir.mkdir(parents=True, exist_ok=True)

    began = time.perf_counter()

    def log(message):
        print(f"{time.perf_counter() - began:7.1f}s {message}", flush=True)

    results = {
        "command": " ".join([Path(sys.executable).name, "benchmarks/run.py", *sys.argv[1:]])
        if argv is None else "benchmarks/run.py " + " ".join(argv),
        "quick": args.quick,
        "machine": machine_info(device),
        "dtype": args.dtype,
        "settings": dataclasses.asdict(settings),
    }
    log(f"machine: {results['machine']}")
    corpus = prepare_corpus(settings)
    log(f"corpus: {len(corpus.train_src)} training pairs, vocabulary {len(corpus.tokenizer)}")

    fig1, counts, shared = figure_1(settings, corpus, device, dtype, log) if {1, 5, 6, 7} & set(figures) else (
        None, None, None)
    if 1 in figures:
        results["parameters"] = counts
        results[FIGURE_KEYS[1]] = fig1
    if 2 in figures:
        results[FIGURE_KEYS[2]] = figure_2(settings, corpus, device, dtype, log)
    if 3 in figures:
        results[FIGURE_KEYS[3]] = figure_3(settings, corpus, device, dtype, log)
    if 4 in figures:
        results[FIGURE_KEYS[4]] = figure_4(settings, corpus, device, dtype, log)
    if 5 in figures:
        results[FIGURE_KEYS[5]] = figure_5(settings, fig1, device, dtype, log)
    if 6 in figures:
        with tempfile.TemporaryDirectory(prefix="vaswani-bench-mem-") as workdir:
            results[FIGURE_KEYS[6]] = figure_6(settings, corpus, shared, device, Path(workdir), log)
    if 7 in figures:
        if settings.run_compile:
            results[FIGURE_KEYS[7]] = figure_7(settings, corpus, shared, device, dtype, log)
        else:
            results[FIGURE_KEYS[7]] = {"skipped": "quick mode or --no-compile"}
    if 5 in figures:
        results["appendix_fused_qkv_projection"] = appendix_fused_qkv(settings, corpus, device, log)
    if not args.no_profile and shared is not None:
        results["profiles"] = write_profiles(settings, corpus, shared, device, dtype, out_dir, log)
    results["targets"] = check_targets(results)
    results["total_seconds"] = time.perf_counter() - began

    (out_dir / "results.json").write_text(json.dumps(results, indent=2))
    tables = markdown_tables(results)
    (out_dir / "tables.md").write_text(tables)
    if 1 in figures or 3 in figures:
        plot(results, out_dir / "figures.png")
    if args.results_md:
        fill_results_md(Path(args.results_md), "gpu" if device.type == "cuda" else "cpu", tables)
    print(markdown_tables(results))
    log(f"wrote {out_dir / 'results.json'}")
    return results


if __name__ == "__main__":
    from modeling_vaswani.cli import run_main

    run_main(main)
