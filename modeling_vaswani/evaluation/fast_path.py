"""A faster translation path on the same weights (not from the paper): bf16/fp16 weights, int8 dynamic
quantization of nn.Linear (CPU only), or generate's compiled static-cache step. Default: exact float32.
`FastPath.check` refuses what cannot run before anything loads; bf16 without AMX/AVX512-BF16 is warned.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings

import torch

from ..machine import slow_bf16_warning

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

logger = logging.getLogger(__name__)


class FastPathError(ValueError):
    """A speed option that cannot run as asked (a dtype, quantization or device that do not go together)."""


@dataclasses.dataclass(frozen=True)
class FastPath:
    """The speed options of one translation run: `dtype`, `quantize` (None or "int8"), `compile`."""

    dtype: str = "float32"
    quantize: str | None = None
    compile: bool = False

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    @property
    def is_default(self) -> bool:
        return self == FastPath()

    def describe(self) -> str:
        """For a progress bar and a results file: "float32", "bfloat16", "int8", "float32, compiled"."""
        return ", ".join([self.quantize or self.dtype] + (["compiled"] if self.compile else []))

    def check(self, device: torch.device) -> None:
        if self.dtype not in DTYPES:
            raise FastPathError(f"--dtype {self.dtype!r}: choose one of {', '.join(DTYPES)}.")
        if self.quantize is not None and self.quantize != "int8":
            raise FastPathError(f"--quantize {self.quantize!r}: only int8 is offered.")
        if self.quantize and device.type != "cpu":
            raise FastPathError(f"--quantize int8 is torch's dynamic quantization, which runs on the CPU only; "
                                f"drop it on {device.type}, or use --device cpu.")
        if self.quantize and self.dtype != "float32":
            raise FastPathError(f"--quantize int8 quantizes float32 Linear layers; drop --dtype {self.dtype}.")
        if self.dtype == "bfloat16" and device.type == "cpu" and (message := slow_bf16_warning(
                "--dtype bfloat16", "--dtype float32 or --quantize int8 are faster here")):
            logger.warning("warning: %s", message)

    def apply(self, model):
        """The loaded model (already in `dtype`) with its Linear layers int8 and/or its decoding compiled."""
        if self.quantize == "int8":
            from torch.ao.quantization import quantize_dynamic

            with warnings.catch_warnings():  # torch 2.10+ announces that torch.ao.quantization moves to torchao
                warnings.simplefilter("ignore", DeprecationWarning)
                warnings.simplefilter("ignore", UserWarning)
                # DynamicQuantizedLinear: int8 weights, activations quantized per batch.
                model = quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        if self.compile:  # a static cache and torch.compile for every later generate() call
            from transformers import CompileConfig

            compile_config = CompileConfig(fullgraph=True)
            compile_config._compile_all_devices = True  # generate() compiles on accelerators only, unless told
            model.generation_config.cache_implementation = "static"
            model.generation_config.compile_config = compile_config
        return model
