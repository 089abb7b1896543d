"""Marian in, Marian out: transformers' `MarianMTModel` (the Opus-MT models) as our model, and back.

The parts: `marian_config` maps the settings (and refuses what the other side cannot compute),
`marian_weights` the weights (one permutation of the d_model coordinates maps Marian's layout of
the sinusoids onto ours); this module converts models and folders with them.

Export writes our `layer_norm_eps` into the Marian config.json (`layer_norm_eps`, which import
reads back). transformers' `MarianMTModel` does not read it and normalises with ε = 1e-5, so a
model trained with another ε (ours default to 1e-6) gives logits that differ by about the ratio
of the ε to the variance of the normalised vectors; `export_marian` warns when that is the case.

Decoding settings travel as they are, in generation_config.json both ways. A converted Marian model
decodes as transformers' MarianMTModel does (its num_beams, max_length, bad_words_ids, ...). An
exported model keeps our entries too (`max_output_length_offset`, `length_penalty_formula`,
`beam_termination`), which transformers ignores: MarianMTModel decodes with transformers' own beam
search and without §6.1's "input length + 50" limit, so pass `max_new_tokens` to its `generate`;
ours decodes the same way with `generate(..., **TRANSFORMERS_BEAM_SEARCH)` (model/generation.py).
"""

from __future__ import annotations

import copy
import os
import warnings
from pathlib import Path
from typing import Union

import torch
from transformers import AutoTokenizer, MarianMTModel, PretrainedConfig

from ..model.configuration_vaswani import VaswaniConfig
from ..model.modeling_vaswani import VaswaniForConditionalGeneration
from ..outputs import claim, write_folder
from .marian_config import MARIAN_LAYER_NORM_EPS, MarianConversionError, config_from_marian, config_to_marian
from .marian_weights import is_attention_bias, marian_order, permute, weight_names

PathLike = Union[str, os.PathLike]


# --- models --------------------------------------------------------------------------------------


def from_marian(marian: MarianMTModel) -> VaswaniForConditionalGeneration:
    """Our model computing what `marian` computes (same logits to float rounding, same outputs)."""
    theirs = marian.state_dict()
    names = weight_names(marian.config.encoder_layers, marian.config.decoder_layers)
    _check_covered(theirs, {marian_name for _, marian_name, _ in names}, "Marian", "ours")
    bias = theirs.get("final_logits_bias")
    config = config_from_marian(
        marian.config, final_logits_bias=bias is not None and bool(bias.any()),
        attention_bias=any(bool(theirs[name].any()) for _, name, _ in names if is_attention_bias(name)))
    model = VaswaniForConditionalGeneration(config).to(marian.dtype)
    expected = model.state_dict()
    inverse = torch.argsort(marian_order(config.d_model))  # ours[..., k] = marian[..., inverse[k]]
    state = {}
    for ours_name, marian_name, layout in names:
        if ours_name in expected:  # else a bias that is all zeros in Marian: ours adds none
            state[ours_name] = permute(theirs[marian_name], layout, inverse)
    model.load_state_dict(state, strict=True)
    model.generation_config = copy.deepcopy(marian.generation_config)  # Marian's decoding settings
    return model.eval()


def to_marian(model: VaswaniForConditionalGeneration) -> MarianMTModel:
    """A MarianMTModel computing what `model` computes (see the module docstring on layer_norm_eps)."""
    config = model.config
    marian = MarianMTModel(config_to_marian(config)).to(model.dtype)
    ours = model.state_dict()
    names = weight_names(config.num_layers, config.num_decoder_layers)
    _check_covered(ours, {ours_name for ours_name, _, _ in names}, "our", "Marian's")
    order = marian_order(config.d_model)
    state = dict(marian.state_dict())  # keeps Marian's sinusoid tables
    for ours_name, marian_name, layout in names:
        if ours_name not in ours:
            if not (ours_name == "final_logits_bias" or is_attention_bias(ours_name)):
                raise MarianConversionError(f"Our model has no tensor {ours_name!r}, which MarianMTModel needs.")
            state[marian_name] = torch.zeros_like(state[marian_name])  # a bias ours does without
        else:
            state[marian_name] = permute(ours[ours_name], layout, order)
    marian.load_state_dict(state, strict=True)
    marian.generation_config = copy.deepcopy(model.generation_config)
    return marian.eval()


def _check_covered(state: dict, known: set, side: str, other: str) -> None:
    """Refuse a model with a tensor the name table does not know (a variant this conversion does not cover)."""
    unknown = sorted(name for name in state if name not in known and ".embed_positions." not in name)
    if unknown:
        raise MarianConversionError(
            f"Tensor {unknown[0]!r} of the {side} model ({len(unknown)} such) has no counterpart in {other} model."
        )


# --- folders -------------------------------------------------------------------------------------


def convert_marian(source: PathLike, output_dir: PathLike, flag: str = "output_dir", **from_pretrained_kwargs) -> Path:
    """A MarianMTModel folder or Hub id → our model folder at `output_dir`, with its tokenizer.

    The folder loads with `VaswaniForConditionalGeneration.from_pretrained` (or, where this package
    is not installed, `AutoModelForSeq2SeqLM.from_pretrained(..., trust_remote_code=True)`); the
    tokenizer is Marian's own (sentencepiece: `pip install sentencepiece`). `output_dir` (named `flag` in
    errors) is written whole or not at all, and never over `source` (`outputs.claim`).
    """
    claim(flag, output_dir, [("--model" if flag.startswith("--") else "source", source)], folder=True)
    model_type = _model_type(source, **from_pretrained_kwargs)
    if model_type != "marian":
        raise MarianConversionError(f"{str(source)!r} holds a {model_type!r} model, not a Marian one (MarianMTModel).")
    marian = MarianMTModel.from_pretrained(source, **from_pretrained_kwargs)
    tokenizer = AutoTokenizer.from_pretrained(source, **from_pretrained_kwargs)
    model = from_marian(marian)
    with write_folder(output_dir) as folder:  # whole or not at all
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return Path(output_dir)


def export_marian(source: PathLike, output_dir: PathLike, flag: str = "output_dir", **from_pretrained_kwargs) -> Path:
    """Our model folder or Hub id → a MarianMTModel folder at `output_dir`, with the tokenizer.

    Warns when the model's layer_norm_eps is not Marian's 1e-5 (see the module docstring). `output_dir`
    (named `flag` in errors) is written whole or not at all, and never over `source` (`outputs.claim`).
    """
    claim(flag, output_dir, [("--model" if flag.startswith("--") else "source", source)], folder=True)
    model_type = _model_type(source, **from_pretrained_kwargs)
    if model_type != VaswaniConfig.model_type:
        raise MarianConversionError(f"{str(source)!r} holds a {model_type!r} model, not one of ours ('vaswani').")
    model = VaswaniForConditionalGeneration.from_pretrained(source, **from_pretrained_kwargs)
    tokenizer = AutoTokenizer.from_pretrained(source, **from_pretrained_kwargs)
    if model.config.layer_norm_eps != MARIAN_LAYER_NORM_EPS:
        warnings.warn(
            f"layer_norm_eps={model.config.layer_norm_eps:g} is written to config.json, but transformers' "
            f"MarianMTModel normalises with {MARIAN_LAYER_NORM_EPS:g}: its logits differ slightly from this model's.",
            stacklevel=2,
        )
    marian = to_marian(model)
    with write_folder(output_dir) as folder:  # whole or not at all
        marian.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return Path(output_dir)


def _model_type(source: PathLike, **kwargs) -> str | None:
    config_dict, _ = PretrainedConfig.get_config_dict(str(source), **kwargs)
    if not config_dict:
        raise FileNotFoundError(f"No config.json in {str(source)!r}.")
    return config_dict.get("model_type")
