"""Marian in, Marian out: transformers' `MarianMTModel` (the Opus-MT models) as our model, and back.

Marian lays the sinusoids (§3.5) out sines first, cosines second; ours interleave. Every part of the model is
equivariant under a permutation of the d_model coordinates, so converting permutes the d_model side of every
weight and nothing else: logits agree to float rounding, ours → Marian → ours is bit for bit. MarianMTModel
ignores `layer_norm_eps` (always 1e-5): `export_marian` warns when ours differs.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import torch
from transformers import AutoTokenizer, MarianMTModel

from ..model.configuration_vaswani import VaswaniConfig
from ..model.modeling_vaswani import VaswaniForConditionalGeneration
from ..outputs import claim, write_folder
from .ctranslate2 import check_model_type
from .marian_config import MARIAN_LAYER_NORM_EPS, MarianConversionError, config_from_marian, config_to_marian

# How each weight's d_model side is laid out: IN = its last dimension (embedding columns, a Linear's
# input), OUT = its first dimension (a Linear's output rows, or a d_model vector), NONE = no d_model side.
IN, OUT, NONE = "in", "out", "none"


def marian_order(d_model: int) -> torch.Tensor:
    """marian[..., j] = ours[..., order[j]]: Marian's sines (ours at even j), then its cosines (odd j)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def weight_names(num_layers: int, num_decoder_layers: int) -> list[tuple[str, str, str]]:
    """(our state_dict name, Marian's, layout of the d_model side) for every weight of both models."""
    names = [(name, name, IN) for name in ("model.shared.weight", "model.encoder.embed_tokens.weight",
                                          "model.decoder.embed_tokens.weight", "lm_head.weight")]

    def add(ours: str, theirs: str, weight: str, bias: str):
        names.extend([(f"{ours}.weight", f"{theirs}.weight", weight), (f"{ours}.bias", f"{theirs}.bias", bias)])

    for stack, count in (("encoder", num_layers), ("decoder", num_decoder_layers)):
        for i in range(count):
            prefix = f"model.{stack}.layers.{i}"
            blocks = [("self_attn", "self_attn", "self_attn_sublayer.norm", "self_attn_layer_norm")]
            if stack == "decoder":
                blocks.append(("cross_attn", "encoder_attn", "cross_attn_sublayer.norm", "encoder_attn_layer_norm"))
            for ours, theirs, our_norm, their_norm in blocks:
                for projection in ("q_proj", "k_proj", "v_proj"):
                    add(f"{prefix}.{ours}.{projection}", f"{prefix}.{theirs}.{projection}", IN, NONE)
                add(f"{prefix}.{ours}.out_proj", f"{prefix}.{theirs}.out_proj", OUT, OUT)
                add(f"{prefix}.{our_norm}", f"{prefix}.{their_norm}", OUT, OUT)
            add(f"{prefix}.feed_forward.linear_1", f"{prefix}.fc1", IN, NONE)
            add(f"{prefix}.feed_forward.linear_2", f"{prefix}.fc2", OUT, OUT)
            add(f"{prefix}.feed_forward_sublayer.norm", f"{prefix}.final_layer_norm", OUT, OUT)
    return names + [("final_logits_bias", "final_logits_bias", NONE)]


def is_attention_bias(name: str) -> bool:
    """A bias of W^Q, W^K, W^V or W^O (ours may do without them)."""
    return name.endswith("_proj.bias")


def permute(tensor: torch.Tensor, layout: str, order: torch.Tensor) -> torch.Tensor:
    """`tensor` with its d_model side (`layout`) in the coordinate order `order`; a copy when it has none."""
    if layout == IN:
        return tensor.index_select(tensor.dim() - 1, order.to(tensor.device))
    if layout == OUT:
        return tensor.index_select(0, order.to(tensor.device))
    return tensor.clone()


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
    # A name missing from ours is a bias that is all zeros in Marian: ours adds none.
    model.load_state_dict({ours_name: permute(theirs[marian_name], layout, inverse)
                           for ours_name, marian_name, layout in names if ours_name in expected}, strict=True)
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
        raise MarianConversionError(f"Tensor {unknown[0]!r} of the {side} model ({len(unknown)} such) has no "
                                    f"counterpart in {other} model.")


def convert_marian(source, output_dir, flag: str = "output_dir", **from_pretrained_kwargs) -> Path:
    """A MarianMTModel folder or Hub id → our model folder (with Marian's sentencepiece tokenizer), written
    whole or not at all and never over `source`; `flag` names `output_dir` in errors."""
    return _convert(source, output_dir, flag, "marian", "a Marian one (MarianMTModel)", MarianMTModel, from_marian,
                    from_pretrained_kwargs)


def export_marian(source, output_dir, flag: str = "output_dir", **from_pretrained_kwargs) -> Path:
    """Our model folder or Hub id → a MarianMTModel folder, as `convert_marian` writes; warns when the
    model's layer_norm_eps is not Marian's 1e-5."""
    def convert(model):
        if model.config.layer_norm_eps != MARIAN_LAYER_NORM_EPS:
            warnings.warn(f"layer_norm_eps={model.config.layer_norm_eps:g} is written to config.json, but "
                          f"transformers' MarianMTModel normalises with {MARIAN_LAYER_NORM_EPS:g}: its logits differ "
                          "slightly from this model's.", stacklevel=4)
        return to_marian(model)

    return _convert(source, output_dir, flag, VaswaniConfig.model_type, "one of ours ('vaswani')",
                    VaswaniForConditionalGeneration, convert, from_pretrained_kwargs)


def _convert(source, output_dir, flag, model_type, expected, model_class, convert, kwargs) -> Path:
    claim(flag, output_dir, [("--model" if flag.startswith("--") else "source", source)], folder=True)
    check_model_type(source, model_type, expected, MarianConversionError, **kwargs)
    model, tokenizer = model_class.from_pretrained(source, **kwargs), AutoTokenizer.from_pretrained(source, **kwargs)
    model = convert(model)
    with write_folder(output_dir) as folder:  # whole or not at all
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return Path(output_dir)

