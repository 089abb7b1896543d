"""The precision a training run computes in, and whether this CPU does it fast (not from the paper).

`scripts/train.py --bf16` trains under the Trainer's CPU autocast: matrix products in bfloat16,
weights and Adam in float32. On a CPU without AMX or AVX512-BF16 that is slower than float32
(bf16_speed.py), so a run asked for bf16 there says so in one warning line, and still runs.
`report_precision` logs the precision with the CPU's bf16 support and returns both for the run record.
"""

from __future__ import annotations

import logging

from ..bf16_speed import slow_bf16_warning
from ..machine import bf16_support

logger = logging.getLogger(__name__)


def training_precision(training_args) -> str:
    """"bf16", "fp16" or "fp32": what the Trainer's autocast computes the matrix products in."""
    if getattr(training_args, "bf16", False):
        return "bf16"
    if getattr(training_args, "fp16", False):
        return "fp16"
    return "fp32"


def on_cpu(training_args) -> bool:
    device = getattr(training_args, "device", None)
    return getattr(device, "type", "cpu") == "cpu"


def report_precision(training_args, log: logging.Logger = logger) -> dict:
    """Log the run's precision and the CPU's bf16 support, warn when bf16 will be slow; {precision, cpu_bf16}."""
    precision, support = training_precision(training_args), bf16_support()
    log.info("precision: %s (CPU bf16 support: %s)", precision, support)
    if precision == "bf16" and on_cpu(training_args) and (message := slow_bf16_warning(support=support)):
        log.warning(message)
    return {"precision": precision, "cpu_bf16": support}
