"""Translating with CTranslate2: a converted folder as a `CTranslate2Engine`, with our model's `generate`, so
`translation` and `scoring` run it unchanged. Settings map one to one: num_beams → beam_size; α → length_penalty
(log P / |Y|^α, |Y| counting </s>: return_end_token); max_new_tokens (default: input length + 50, §6.1) →
max_decoding_length; early_stopping=True → patience=1; min_decoding_length=0 (1 would forbid </s> first).
CTranslate2 lacks GNMT's penalty and the paper's stopping rule: a model decoding with them gets one warning
that some beam translations may differ. Greedy decoding is the same either way.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import warnings
from pathlib import Path

import torch
from transformers import GenerationConfig

from ..conversion.ctranslate2 import (convert_ctranslate2, import_ctranslate2, is_ctranslate2_model,
                                      read_conversion_record)
from ..model.generation import (LENGTH_PENALTY, MAX_OUTPUT_LENGTH_OFFSET, NUM_BEAMS, check_decoding,
                                decoding_settings, length_limit_chosen, output_length_offset)
from ..model.loading import check_decoding_file
from ..model.strict_json import read_json
from ..tokenizer_loading import load_tokenizer
from ..threads import choose_threads

logger = logging.getLogger(__name__)

# generate() settings the engine maps; any other is refused rather than silently ignored.
GENERATE_SETTINGS = ("num_beams", "length_penalty", "max_new_tokens")
# Files of a model folder whose change calls for a new conversion in the cache.
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
               "pytorch_model.bin", "tokenizer.json", "tokenizer_config.json")


class CTranslate2Engine:
    """A CTranslate2 folder with our model's `generate` and `device`. `device`: cpu, cuda, cuda:N (None: cuda
    if CTranslate2 sees one); `threads`: None for `choose_threads`'s rule, 0 for CTranslate2's default."""

    def __init__(self, folder, device: str | None = None, compute_type: str = "default", threads: int | None = None):
        ctranslate2 = import_ctranslate2()
        folder = Path(folder)
        if not is_ctranslate2_model(folder):
            raise FileNotFoundError(f"{folder} is not a CTranslate2 model folder (no model.bin and "
                                    "shared_vocabulary.json); convert one with scripts/convert_ctranslate2.py.")
        kind, index = _device(device, ctranslate2)
        self.folder = folder
        self.conversion = read_conversion_record(folder)
        # Our reader first: CTranslate2 reads config.json too, and ends in a C++ exception on a bad one.
        self.tokens = read_json(folder / "shared_vocabulary.json", list)
        self.ids = {token: index for index, token in enumerate(self.tokens)}
        ct2_config = read_json(folder / "config.json")
        self.threads_chosen_by = "--threads"
        if threads is None:
            threads, self.threads_chosen_by = choose_threads(self.conversion.get("num_parameters", 0))
        self.threads = threads
        self.translator = ctranslate2.Translator(str(folder), device=kind, device_index=index,
                                                 compute_type=compute_type, intra_threads=threads)
        self.decoder_start_token_id = self.ids[ct2_config["decoder_start_token"]]
        self.eos_token_id = self.ids[ct2_config["eos_token"]]
        self.pad_token_id = self.ids.get("<pad>", self.eos_token_id)
        if (folder / "generation_config.json").is_file():
            check_decoding_file(folder / "generation_config.json")
            self.generation_config = GenerationConfig.from_pretrained(folder)
        else:  # §6.1 with transformers' rule
            self.generation_config = GenerationConfig(num_beams=NUM_BEAMS, length_penalty=LENGTH_PENALTY,
                                                      early_stopping=True,
                                                      max_output_length_offset=MAX_OUTPUT_LENGTH_OFFSET)
        self.device = torch.device("cpu")  # token ids go back on the CPU, wherever CTranslate2 computes
        self._warned = False

    def settings(self, input_length: int, num_beams=None, length_penalty=None, max_new_tokens=None) -> dict:
        config = self.generation_config
        if max_new_tokens is None:
            if length_limit_chosen(config):  # the saved config's own limit replaces §6.1's, as in ours
                max_new_tokens = config.max_new_tokens or config.max_length - 1  # max_length counts the start token
            else:
                max_new_tokens = input_length + output_length_offset(config)  # §6.1: input length + 50
        return dict(beam_size=num_beams or config.num_beams or 1,
                    length_penalty=config.length_penalty if length_penalty is None else length_penalty,
                    patience=1.0, max_decoding_length=max_new_tokens, min_decoding_length=0,
                    return_end_token=True, max_input_length=0)

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs) -> torch.Tensor:
        """Translations of the batch as token ids (B, T): decoder start token, tokens, </s>, padding."""
        unknown = sorted(set(kwargs) - set(GENERATE_SETTINGS))
        if unknown:
            raise ValueError(f"The ctranslate2 engine does not support {', '.join(unknown)}; it takes "
                             f"{', '.join(GENERATE_SETTINGS)}.")
        settings = {k: v for k, v in kwargs.items() if v is not None}
        check_decoding(decoding_settings(self.generation_config, settings), "generate()", *input_ids.shape)
        options = self.settings(input_ids.shape[1], **settings)
        if options["beam_size"] > 1:
            self._warn_if_other_search()
        rows = input_ids.tolist()
        if attention_mask is not None:  # padding left out, on whichever side the tokenizer put it
            rows = [[index for index, keep in zip(row, mask) if keep] for row, mask in zip(rows, attention_mask.tolist())]
        results = self.translator.translate_batch([[self.tokens[index] for index in row] for row in rows], **options)
        outputs = [[self.decoder_start_token_id] + [self.ids[token] for token in result.hypotheses[0]]
                   for result in results]
        width = max(len(ids) for ids in outputs)
        return torch.tensor([ids + [self.pad_token_id] * (width - len(ids)) for ids in outputs], dtype=torch.long)

    def _warn_if_other_search(self) -> None:
        config = self.generation_config
        other = [f"{name}={getattr(config, name)!r}" for name in ("length_penalty_formula", "beam_termination")
                 if getattr(config, name, None) is not None]
        if config.early_stopping is not True:
            other.append(f"early_stopping={config.early_stopping!r}")
        if other and not self._warned:
            self._warned = True
            warnings.warn(f"This model decodes with {', '.join(other)}; CTranslate2's beam search ranks hypotheses by "
                          "log P / |Y|^α and stops once k have finished (transformers' rule), so a few beam "
                          "translations may differ from the PyTorch model's.", stacklevel=3)


def load_ctranslate2_translator(folder, device: str | None = None, compute_type: str = "default",
                                threads: int | None = None):
    """(engine, tokenizer), as `translation.load_translator` returns (model, tokenizer)."""
    return CTranslate2Engine(folder, device=device, compute_type=compute_type, threads=threads), load_tokenizer(folder)


def cached_ctranslate2_model(model_name_or_path: str, quantization: str | None = None, cache_dir=None) -> Path:
    """The CTranslate2 conversion of a model folder or Hub id, kept in `cache_dir` (default: under
    $MODELING_VASWANI_CACHE, else $XDG_CACHE_HOME or ~/.cache, /modeling_vaswani/ctranslate2/); made again
    when a folder's files change (sizes and mtimes key it) or a Hub id's commit does."""
    import_ctranslate2()
    if cache_dir is None:
        base = os.environ.get("MODELING_VASWANI_CACHE") or (
            Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "modeling_vaswani")
        cache_dir = Path(base) / "ctranslate2"
    root = Path(cache_dir)
    name, key = _cache_key(model_name_or_path, quantization)
    target = root / f"{name}-{quantization or 'float32'}-{key}"
    if is_ctranslate2_model(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    logger.warning("converting %s to CTranslate2 (%s) into %s", model_name_or_path, quantization or "float32", target)
    building = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        convert_ctranslate2(model_name_or_path, building, quantization=quantization, force=True)
        try:
            os.replace(building, target)  # whole or not at all, if another process converts at the same time
        except OSError:
            if not is_ctranslate2_model(target):
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


def _cache_key(model_name_or_path: str, quantization: str | None) -> tuple[str, str]:
    local = Path(model_name_or_path)
    digest = hashlib.sha256(f"{quantization}".encode())
    if not local.is_dir():
        from huggingface_hub import hf_hub_download

        # .../snapshots/<commit>/config.json: the commit a Hub id resolves to now (or offline, the cached one).
        commit = Path(hf_hub_download(model_name_or_path, "config.json")).parent.name
        digest.update(f"{model_name_or_path}@{commit}".encode())
        return model_name_or_path.replace("/", "--"), digest.hexdigest()[:12]
    local = local.resolve()
    digest.update(str(local).encode())
    for file in MODEL_FILES:
        if (local / file).is_file():
            stat = (local / file).stat()
            digest.update(f"{file}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return local.name, digest.hexdigest()[:12]


def _device(device: str | None, ctranslate2) -> tuple[str, int]:
    """CTranslate2's (device, device_index) for a torch-style name: cpu, cuda, cuda:1."""
    count = ctranslate2.get_cuda_device_count()
    if device is None:
        return ("cuda" if count > 0 else "cpu"), 0
    kind, _, index = device.partition(":")
    if kind not in ("cpu", "cuda") or (index and not index.isdigit()):
        raise ValueError(f"device {device!r}: the ctranslate2 engine runs on cpu, cuda or cuda:N.")
    if kind == "cuda" and count <= int(index or 0):
        raise ValueError(f"device {device!r} is not available to CTranslate2 here ({count} CUDA devices); use cpu.")
    return kind, int(index or 0)
