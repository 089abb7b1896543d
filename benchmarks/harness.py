"""What every measurement shares: the two systems (ours, and MarianMTModel doing the same computation), the sizes,
the corpus, timing in alternation (A B A B ..., so a drift of the machine hits both alike) and the files a run
writes."""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from pathlib import Path
from typing import Callable

import torch
from transformers import DataCollatorForSeq2Seq, GenerationConfig, MarianMTModel

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.conversion.marian import config_to_marian
from modeling_vaswani.machine import describe_machine
from modeling_vaswani.model.generation import LENGTH_PENALTY
from modeling_vaswani.model.label_smoothing import LABEL_SMOOTHING, label_smoothed_cross_entropy
from modeling_vaswani.model.modeling_vaswani import shift_tokens_right
from modeling_vaswani.training.batching import token_budget_batches
from modeling_vaswani.training.data import load_multi30k, select_first
from modeling_vaswani.training.optimization import create_adam
from modeling_vaswani.training.tokenization import train_bpe_tokenizer

OURS, MARIAN = "modeling_vaswani", "marian"


@dataclasses.dataclass
class Settings:
    """Sizes of every measurement; `FULL` is the recorded run, `QUICK` only proves that the code runs."""
    presets: tuple = ("small", "base")
    vocab_size: int = 8000  # tokenization.py's default for Multi30k
    train_sentences: int | None = None  # None = all 29,000 pairs
    max_tokens: int = 4096  # §5.1 token budget per side (scripts/train.py's default)
    train_batches: int = 3  # batches per timed pass of the training step
    train_reps: int = 3
    beam_sentences: int = 200
    beam_batch_size: int = 50
    beam_reps: int = 3
    beam_length: int | None = None  # forced output length; None = mean reference length of the sentences
    decode_preset: str = "small"
    decode_lengths: tuple = (16, 64, 256)
    decode_batch_size: int = 4
    decode_reps: int = 3
    epoch_seconds: float | None = 90.0  # data pipeline: time cap per batching scheme; None = whole epoch
    matmul_size: int = 2048
    matmul_reps: int = 5
    memory_train_preset: str = "base"
    memory_translate_preset: str = "small"  # 1,000 sentences of base-preset beam search: minutes per system
    memory_train_steps: int = 2
    memory_sentences: int = 1000
    memory_batch_size: int = 100
    compile_preset: str = "small"
    run_compile: bool = True
    train_dtypes: tuple = ("float32", "bfloat16")  # figure 1's precisions (bfloat16: CPU autocast)
    bf16_presets: tuple | None = None  # figure 1b's presets (None: all of `presets`)
    translate_sentences: int | None = None  # figure 8: None = all 1,000 of test_2016_flickr
    translate_batch_size: int = 32
    translate_reps: int = 3
    translate_threads: tuple = (1, 2)
    search_preset: str = "base"  # figure 8b: the two beam searches, random weights
    search_sentences: int = 100
    compile_batches: int = 3  # figure 8c: the first test batches


FULL = Settings()
QUICK = Settings(
    presets=("tiny",), vocab_size=300, train_sentences=300, max_tokens=256, train_batches=2, train_reps=1,
    beam_sentences=8, beam_batch_size=4, beam_reps=1, beam_length=6, decode_preset="tiny", decode_lengths=(4, 8, 16),
    decode_batch_size=2, decode_reps=1, epoch_seconds=0.5, matmul_size=128, matmul_reps=2,
    memory_train_preset="tiny", memory_translate_preset="tiny", memory_train_steps=1, memory_sentences=8,
    memory_batch_size=4, compile_preset="tiny", run_compile=False, translate_sentences=8, translate_batch_size=4,
    translate_reps=1, translate_threads=(1,), search_preset="tiny", search_sentences=8, compile_batches=1)


def marian_twin_config(config: VaswaniConfig):
    """A MarianConfig doing the computation of `config` (the converter's)."""
    if not getattr(config, "attention_bias", True):
        raise ValueError("MarianMTModel's attention projections always have biases: give attention_bias=True.")
    twin = config_to_marian(config)
    twin._attn_implementation = "sdpa"
    return twin


def build_model(system: str, config: VaswaniConfig, device: torch.device):
    torch.manual_seed(0)  # both systems start from equally random weights
    model = VaswaniForConditionalGeneration(config) if system == OURS else MarianMTModel(marian_twin_config(config))
    return model.to(device)


def build_pair(config: VaswaniConfig, device: torch.device) -> dict:
    return {system: build_model(system, config, device) for system in (OURS, MARIAN)}


def parameter_counts(models: dict) -> dict:
    """Trainable parameters must agree; Marian also keeps frozen position tables and a logits-bias buffer."""
    counts = {name: {"trainable": m.num_parameters(only_trainable=True), "all_parameters": m.num_parameters(),
                     "buffers": sum(b.numel() for b in m.buffers())} for name, m in models.items()}
    ours, theirs = counts[OURS]["trainable"], counts[MARIAN]["trainable"]
    return {**counts, "trainable_difference_percent": 100.0 * (theirs - ours) / ours}


def training_loss(name: str, model, batch: dict) -> torch.Tensor:
    """The same §5.4 loss for both: ours computes it inside forward, Marian's logits get the same function."""
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "decoder_input_ids")}
    if name == OURS:
        return model(**inputs, labels=batch["labels"]).loss
    return label_smoothed_cross_entropy(model(**inputs).logits, batch["labels"], LABEL_SMOOTHING)


def autocast(device: torch.device, dtype: torch.dtype | None):
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


class TrainingStep:
    """zero_grad, forward, loss (`loss(model, batch)`, else `training_loss`), backward, Adam (§5.3)."""

    def __init__(self, name: str, model, autocast_dtype: torch.dtype | None, device: torch.device, loss=None):
        self.model, self.device, self.autocast_dtype = model, device, autocast_dtype
        self.loss = loss or (lambda m, batch: training_loss(name, m, batch))
        self.optimizer = create_adam([p for p in model.parameters() if p.requires_grad], lr=1e-4)

    def step(self, batch: dict) -> torch.Tensor:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.device, self.autocast_dtype):
            loss = self.loss(self.model, batch)
        loss.backward()
        self.optimizer.step()
        return loss.detach()


def forced_generation_config(tokenizer, length: int, num_beams: int) -> GenerationConfig:
    """§6.1 decoding (its beam size and length penalty) forced to exactly `length` new tokens."""
    beam = dict(length_penalty=LENGTH_PENALTY, early_stopping=True) if num_beams > 1 else {}
    return GenerationConfig(num_beams=num_beams, do_sample=False, use_cache=True, min_new_tokens=length,
                            max_new_tokens=length, **beam, **tokenizer_ids(tokenizer))


def machine_record(device: torch.device | None = None) -> dict:
    """describe_machine() under the keys results.json has always had, and the device the numbers come from."""
    machine = describe_machine()
    return {"cpu_model_name": machine.pop("cpu"), **machine, **({"device": device.type} if device else {})}


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
    """{name: [seconds, ...]}: each job `reps` times, A B A B ..., after `warmup`'s jobs once each (one-off costs)."""
    for fn in (warmup or {}).values():
        fn()
    seconds = {name: [] for name in jobs}
    for _ in range(reps):
        for name, fn in jobs.items():
            seconds[name].append(timed(fn, device))
    return seconds


def summary(seconds: list, work: float, unit: str) -> dict:
    median = statistics.median(seconds)
    return {"seconds": seconds, "median_seconds": median, unit: work / median}


def ratio(result: dict, unit: str) -> float:  # ours / theirs for a higher-is-better rate
    return result[OURS][unit] / result[MARIAN][unit]


def clock() -> tuple[Callable[[str], None], float]:
    """A log that prints each line after the seconds since this call, and that moment."""
    began = time.perf_counter()
    return lambda message: print(f"{time.perf_counter() - began:7.1f}s {message}", flush=True), began


def write_results(out_dir: Path | None, results: dict, tables: Callable[[dict], str], began: float) -> str:
    """Stamp the run's total seconds; results.json and tables.md into `out_dir` (None: nowhere); the tables."""
    results["total_seconds"] = time.perf_counter() - began
    text = tables(results)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "results.json").write_text(json.dumps(results, indent=2))
        (out_dir / "tables.md").write_text(text)
    return text


@dataclasses.dataclass
class Corpus:
    tokenizer: object
    train_src: list
    train_tgt: list
    test_src: list
    test_tgt: list


def prepare_corpus(settings: Settings) -> Corpus:
    data = load_multi30k("en", "de")
    pairs, test = select_first(data["train"], settings.train_sentences)["translation"], data["test"]["translation"]
    tokenizer = train_bpe_tokenizer([p["en"] for p in pairs] + [p["de"] for p in pairs], vocab_size=settings.vocab_size)
    ids = [tokenizer([r[lang] for r in rows], max_length=256, truncation=True)["input_ids"]
           for rows in (pairs, test) for lang in ("en", "de")]
    return Corpus(tokenizer, *ids)


def tokenizer_ids(tokenizer) -> dict:
    return dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                eos_token_id=tokenizer.eos_token_id, decoder_start_token_id=tokenizer.bos_token_id)


def corpus_config(corpus: Corpus, preset: str) -> VaswaniConfig:
    """A preset sized to the corpus' vocabulary. Dropout 0.1 in every preset, so "tiny" (quick mode) runs the same
    kind of step as the others; biased Q/K/V/O projections, as Marian's always are."""
    return VaswaniConfig.from_preset(preset, vocab_size=len(corpus.tokenizer), dropout=0.1, attention_dropout=0.0,
                                     attention_bias=True, attn_implementation="sdpa", **tokenizer_ids(corpus.tokenizer))


def collate(corpus: Corpus, indices, device: torch.device) -> dict:
    """Training pairs padded by transformers' seq2seq collator (labels with -100), decoder_input_ids shifted right."""
    batch = DataCollatorForSeq2Seq(corpus.tokenizer)([{"input_ids": corpus.train_src[i], "labels": corpus.train_tgt[i]}
                                                     for i in indices])
    batch["decoder_input_ids"] = shift_tokens_right(batch["labels"], corpus.tokenizer.pad_token_id,
                                                    corpus.tokenizer.bos_token_id)
    return {k: v.to(device) for k, v in batch.items()}


def real_tokens(batch: dict) -> int:
    return int(batch["attention_mask"].sum()) + int((batch["labels"] != -100).sum())


def training_batches(settings: Settings, corpus: Corpus, device: torch.device) -> tuple[list, dict]:
    """The timed §5.1 token-budget batches (the first of a shuffled epoch: a random sample) and one for warm-up."""
    epoch = token_budget_batches([len(x) for x in corpus.train_src], [len(x) for x in corpus.train_tgt],
                                 settings.max_tokens, seed=0, shuffle=True)
    batches = [collate(corpus, indices, device) for indices in epoch[: settings.train_batches]]
    return batches, collate(corpus, epoch[settings.train_batches], device)


def source_batches(corpus: Corpus, sentences: int, batch_size: int, device: torch.device) -> list:
    """The first `sentences` test sources in consecutive padded batches: (input_ids, attention_mask) per batch."""
    ids = corpus.test_src[:sentences]
    batches = [corpus.tokenizer.pad({"input_ids": ids[start : start + batch_size]}, return_tensors="pt")
               for start in range(0, len(ids), batch_size)]
    return [(b["input_ids"].to(device), b["attention_mask"].to(device)) for b in batches]


def forced_length(settings: Settings, corpus: Corpus, sentences: int) -> int:
    """The output length both systems are held to: the mean reference length of the first `sentences`."""
    return settings.beam_length or round(statistics.mean(len(t) for t in corpus.test_tgt[:sentences]))
