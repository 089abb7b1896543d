"""The precision a training run computes in (not from the paper). --bf16 trains under the Trainer's CPU autocast;
whether that pays depends on more than the CPU's flags: at a small model's widths the casts can outweigh faster
products. So `probe_precision` times the run's own step on a first batch in both precisions, in turns, and
keeps bf16 only where its best step was faster.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging

from ..machine import bf16_support, fastest, slow_bf16_warning
from .chunked_loss import training_loss
from .fast_modules import use_fast_modules

logger = logging.getLogger("train")  # scripts/train.py's log: its lines read "train: ..."
PROBE_ROUNDS = 3  # timed steps per precision after an untimed one; the best counts (other work only adds time)


def training_precision(training_args) -> str:
    """What the Trainer's accelerator will compute in: `mixed_precision`, which TrainingArguments derives from
    --bf16/--fp16 once, when they are made (so a later change of `bf16` alone would not reach the run)."""
    return {"no": "fp32"}.get(training_args.mixed_precision, training_args.mixed_precision)


def report_precision(training_args) -> dict:
    """Log the run's precision and the CPU's bf16 support, warn when bf16 will be slow; {precision, cpu_bf16}."""
    precision, support = training_precision(training_args), bf16_support()
    logger.info("precision: %s (CPU bf16 support: %s)", precision, support)
    if precision == "bf16" and training_args.device.type == "cpu" and (message := slow_bf16_warning(support=support)):
        logger.warning(message)
    return {"precision": precision, "cpu_bf16": support}


def probe_step_seconds(model, batch: dict, rounds: int = PROBE_ROUNDS) -> dict:
    """{"fp32": s, "bf16": s} of a forward + backward on `batch`, on a copy of `model` (the run's weights,
    gradients and random numbers are left as they were)."""
    import torch

    probe = copy.deepcopy(model).train()
    use_fast_modules(probe)  # the step as the trainer takes it
    contexts = {"fp32": contextlib.nullcontext, "bf16": lambda: torch.autocast("cpu", dtype=torch.bfloat16)}

    def step(context):
        with context():
            training_loss(probe, batch).backward()
        probe.zero_grad(set_to_none=True)

    with torch.random.fork_rng(devices=[]):  # dropout draws here must not shift the run's own
        return fastest({name: (lambda c=context: step(c)) for name, context in contexts.items()}, rounds)


def probe_precision(training_args, model, make_batch) -> dict:
    """With --bf16 on the CPU (one process): keep bf16 only if the step on `make_batch()` is faster in it;
    the probe's numbers for the run record ({} if none)."""
    if training_precision(training_args) != "bf16" or training_args.device.type != "cpu" or training_args.world_size > 1:
        return {}
    batch = make_batch()
    seconds = probe_step_seconds(model, batch)
    faster = seconds["bf16"] < seconds["fp32"]
    training_args.bf16, training_args.mixed_precision = faster, "bf16" if faster else "no"
    logger.info("precision probe (forward + backward on a first batch of %d target tokens, best of %d alternating): "
             "fp32 %.0f ms, bf16 %.0f ms a step; %s", int((batch["labels"] != -100).sum()), PROBE_ROUNDS,
             1000 * seconds["fp32"], 1000 * seconds["bf16"],
             "training in bf16, as asked" if faster else "training in float32: bf16 measured slower on this machine")
    return {"precision_probe_ms": {name: round(1000 * s, 1) for name, s in seconds.items()}}


def first_batch(dataset, collator, max_tokens: int) -> dict:
    """The first examples of `dataset` that fit `max_tokens` a side once padded (at least one), collated."""
    rows, longest = [], 0
    for row in itertools.islice(iter(dataset), max_tokens):
        longest = max(longest, len(row["input_ids"]), len(row["labels"]))
        if rows and longest * (len(rows) + 1) > max_tokens:
            break
        rows.append({key: row[key] for key in ("input_ids", "attention_mask", "labels") if key in row})
    return dict(collator(rows))
