"""Marian in, Marian out: transformers' `MarianMTModel` (the Opus-MT models) as our model, and back.

`MarianMTModel` computes the Transformer of §3 — post-LN encoder and decoder stacks, multi-head
attention with biased projections, a two-layer position-wise FFN, fixed sinusoids, one shared
vocabulary — with a few settings of its own. Each is a config option of ours (off by default,
flagged `Deviation:` where it acts in `modeling_vaswani/model/`) or refused with a one-line error:

| Marian                                               | ours                                                  |
|------------------------------------------------------|-------------------------------------------------------|
| `activation_function` "swish"/"silu" or "relu"       | `activation_function` "swish" or "relu"               |
| `final_logits_bias` (a buffer; zeros in many models) | `final_logits_bias=True` when it is not all zeros     |
| biases in W^Q, W^K, W^V, W^O                         | `attention_bias=True` when they are not all zeros     |
| LayerNorm ε = 1e-5 (fixed in transformers' code)     | `layer_norm_eps=1e-5`                                 |
| `scale_embedding`                                    | `scale_embedding`                                     |
| pad = decoder start token, `bos_token_id` None       | the same token ids                                    |
| the decoding settings (generation_config.json)       | carried over as they are                              |
| separate source/target vocabularies, an untied       | refused                                               |
| output projection, encoder and decoder of different  |                                                       |
| widths or heads, other activations, and the legacy   |                                                       |
| `normalize_embedding`, `normalize_before`,           |                                                       |
| `add_final_layer_norm`, `add_bias_logits` = true or  |                                                       |
| `static_position_embeddings` = false                 |                                                       |

Training-only settings that ours has no place for (`encoder_layerdrop`, `decoder_layerdrop`,
`activation_dropout`, `init_std`) are dropped; a non-zero dropout among them is reported as a warning.

The one difference that is no setting is the layout of the sinusoids (§3.5): ours interleave,
PE(pos, 2i) = sin and PE(pos, 2i+1) = cos, while Marian puts all the sines in the first half of
d_model and all the cosines in the second. One permutation of the d_model coordinates maps the
one layout onto the other, and every part of the model is equivariant under it: a Linear whose
input (or output) coordinates are permuted gives the same result when its weight's columns (or
rows and bias) are permuted alike; LayerNorm's mean and variance do not depend on the order of
the coordinates, so permuting its input, γ and β permutes its output; the FFN and attention act
on d_model only through such Linears (the head dimensions are untouched); and the embeddings,
shared with the output projection, are rows of d_model coordinates. So converting permutes the
d_model side of every weight — embedding columns, the input columns of W^Q, W^K, W^V and W_1, the
output rows and biases of W^O and W_2, every γ and β — and nothing else. The two models then do
the same arithmetic in a different order: logits agree to float rounding (about 1e-6 relative in
float32), greedy and beam outputs are the same, and ours → Marian → ours gives back the same
tensors bit for bit (a permutation and its inverse only move numbers).

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
from transformers import AutoTokenizer, MarianConfig, MarianMTModel, PretrainedConfig

from ..model.configuration_vaswani import VaswaniConfig
from ..model.modeling_vaswani import VaswaniForConditionalGeneration

PathLike = Union[str, os.PathLike]

# transformers' MarianMTModel builds every nn.LayerNorm with PyTorch's default ε.
MARIAN_LAYER_NORM_EPS = 1e-5
# Marian's activation names → ours (transformers' "swish" and "silu" are the same function).
ACTIVATIONS = {"relu": "relu", "swish": "swish", "silu": "swish"}
# Legacy fields of Marian config.json files (written by transformers 4) whose non-default value asks
# for a computation that neither transformers' MarianMTModel nor ours performs.
UNSUPPORTED_LEGACY = {
    "normalize_embedding": (False, "a LayerNorm on the embeddings"),
    "normalize_before": (False, "pre-LN layers"),
    "add_final_layer_norm": (False, "a final LayerNorm after each stack"),
    "add_bias_logits": (False, "a bias inside the output projection"),
    "static_position_embeddings": (True, "learned position embeddings"),
}
# Training-only Marian settings ours has no field for.
DROPPED_TRAINING_SETTINGS = ("encoder_layerdrop", "decoder_layerdrop", "activation_dropout")

# How each weight's d_model side is laid out: IN = its last dimension (embedding columns, a Linear's
# input), OUT = its first dimension (a Linear's output rows, or a d_model vector), NONE = no d_model side.
IN, OUT, NONE = "in", "out", "none"


class MarianConversionError(ValueError):
    """A setting of the model to convert that the other side cannot represent."""


def marian_order(d_model: int) -> torch.Tensor:
    """The permutation from our d_model coordinates to Marian's: marian[..., j] = ours[..., order[j]].

    Marian's coordinate j < ⌈d/2⌉ holds sin(pos / 10000^(2j/d)), ours at 2j; Marian's ⌈d/2⌉ + i holds
    the cosine of frequency i, ours at 2i + 1.
    """
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def weight_names(num_layers: int, num_decoder_layers: int) -> list[tuple[str, str, str]]:
    """(our state_dict name, Marian's, layout of the d_model side) for every weight of both models.

    Ours may lack the attention biases and the logits bias (Marian's are all zeros then).
    """
    names = [(name, name, IN) for name in ("model.shared.weight", "model.encoder.embed_tokens.weight",
                                          "model.decoder.embed_tokens.weight", "lm_head.weight")]

    def attention(ours: str, theirs: str):
        for projection in ("q_proj", "k_proj", "v_proj"):
            names.append((f"{ours}.{projection}.weight", f"{theirs}.{projection}.weight", IN))
            names.append((f"{ours}.{projection}.bias", f"{theirs}.{projection}.bias", NONE))
        names.append((f"{ours}.out_proj.weight", f"{theirs}.out_proj.weight", OUT))
        names.append((f"{ours}.out_proj.bias", f"{theirs}.out_proj.bias", OUT))

    def norm(ours: str, theirs: str):
        names.append((f"{ours}.weight", f"{theirs}.weight", OUT))
        names.append((f"{ours}.bias", f"{theirs}.bias", OUT))

    def feed_forward(prefix: str):
        names.append((f"{prefix}.feed_forward.linear_1.weight", f"{prefix}.fc1.weight", IN))
        names.append((f"{prefix}.feed_forward.linear_1.bias", f"{prefix}.fc1.bias", NONE))
        names.append((f"{prefix}.feed_forward.linear_2.weight", f"{prefix}.fc2.weight", OUT))
        names.append((f"{prefix}.feed_forward.linear_2.bias", f"{prefix}.fc2.bias", OUT))

    for i in range(num_layers):
        prefix = f"model.encoder.layers.{i}"
        attention(f"{prefix}.self_attn", f"{prefix}.self_attn")
        norm(f"{prefix}.self_attn_sublayer.norm", f"{prefix}.self_attn_layer_norm")
        feed_forward(prefix)
        norm(f"{prefix}.feed_forward_sublayer.norm", f"{prefix}.final_layer_norm")
    for i in range(num_decoder_layers):
        prefix = f"model.decoder.layers.{i}"
        attention(f"{prefix}.self_attn", f"{prefix}.self_attn")
        norm(f"{prefix}.self_attn_sublayer.norm", f"{prefix}.self_attn_layer_norm")
        attention(f"{prefix}.cross_attn", f"{prefix}.encoder_attn")
        norm(f"{prefix}.cross_attn_sublayer.norm", f"{prefix}.encoder_attn_layer_norm")
        feed_forward(prefix)
        norm(f"{prefix}.feed_forward_sublayer.norm", f"{prefix}.final_layer_norm")
    names.append(("final_logits_bias", "final_logits_bias", NONE))
    return names


def is_attention_bias(name: str) -> bool:
    return name.endswith("_proj.bias")


def _permute(tensor: torch.Tensor, layout: str, order: torch.Tensor) -> torch.Tensor:
    if layout == IN:
        return tensor.index_select(tensor.dim() - 1, order.to(tensor.device))
    if layout == OUT:
        return tensor.index_select(0, order.to(tensor.device))
    return tensor.clone()


# --- configs -------------------------------------------------------------------------------------


def config_from_marian(marian_config: MarianConfig, final_logits_bias: bool = True,
                       attention_bias: bool = True) -> VaswaniConfig:
    """Our config for the computation `marian_config` describes; MarianConversionError if ours has none.

    `final_logits_bias`, `attention_bias`: whether the Marian model's logits bias, or any bias of its
    attention projections, has a non-zero entry (ours then keeps them; zeros add nothing).
    """
    c = marian_config
    if getattr(c, "model_type", None) != "marian":
        raise MarianConversionError(f"Not a Marian config: model_type is {getattr(c, 'model_type', None)!r}.")
    decoder_vocab_size = getattr(c, "decoder_vocab_size", None) or c.vocab_size
    if not getattr(c, "share_encoder_decoder_embeddings", True) or decoder_vocab_size != c.vocab_size:
        raise MarianConversionError(
            f"Separate source and target vocabularies (share_encoder_decoder_embeddings="
            f"{getattr(c, 'share_encoder_decoder_embeddings', True)}, vocab_size={c.vocab_size}, "
            f"decoder_vocab_size={decoder_vocab_size}) are not supported: ours shares one vocabulary (§3.4)."
        )
    if not getattr(c, "tie_word_embeddings", True):
        raise MarianConversionError(
            "tie_word_embeddings=False (an output projection apart from the embeddings) is not supported: "
            "ours shares one matrix between the embeddings and the output projection (§3.4)."
        )
    for name, (supported, meaning) in UNSUPPORTED_LEGACY.items():
        value = getattr(c, name, supported)
        if bool(value) != supported:
            raise MarianConversionError(
                f"{name}={value} ({meaning}) is not supported: neither ours nor transformers' MarianMTModel "
                "computes it."
            )
    if c.activation_function not in ACTIVATIONS:
        raise MarianConversionError(
            f"activation_function={c.activation_function!r} is not supported: ours has 'relu' (Eq. (2)) "
            "and 'swish'."
        )
    for encoder_name, decoder_name in (("encoder_ffn_dim", "decoder_ffn_dim"),
                                       ("encoder_attention_heads", "decoder_attention_heads")):
        if getattr(c, encoder_name) != getattr(c, decoder_name):
            raise MarianConversionError(
                f"{encoder_name}={getattr(c, encoder_name)} differs from {decoder_name}={getattr(c, decoder_name)}: "
                "ours uses one value for both stacks."
            )
    for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
        value = getattr(c, name, None)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise MarianConversionError(f"{name}={value!r} is not supported: ours takes one token id.")
    dropped = {name: getattr(c, name, 0.0) for name in DROPPED_TRAINING_SETTINGS if getattr(c, name, 0.0)}
    if dropped:
        settings = ", ".join(f"{name}={value}" for name, value in dropped.items())
        warnings.warn(f"{settings}: training settings ours does not have; the converted model trains without them.",
                      stacklevel=2)
    return VaswaniConfig(
        vocab_size=c.vocab_size,
        d_model=c.d_model,
        d_ff=c.encoder_ffn_dim,
        num_heads=c.encoder_attention_heads,
        num_layers=c.encoder_layers,
        num_decoder_layers=c.decoder_layers,
        dropout=float(c.dropout),
        attention_dropout=float(c.attention_dropout),
        label_smoothing=getattr(c, "label_smoothing", 0.1),  # written by export_marian; Marian has none
        positional_encoding="sinusoidal",
        max_position_embeddings=c.max_position_embeddings,
        share_embeddings=True,
        scale_embedding=bool(c.scale_embedding),
        norm_first=False,
        attention_bias=bool(attention_bias),  # Marian's projections have biases; all-zero ones are left out
        # transformers' Marian always uses 1e-5; a config written by export_marian carries ours.
        layer_norm_eps=getattr(c, "layer_norm_eps", MARIAN_LAYER_NORM_EPS),
        activation_function=ACTIVATIONS[c.activation_function],
        final_logits_bias=bool(final_logits_bias),
        pad_token_id=c.pad_token_id,
        bos_token_id=c.bos_token_id,
        eos_token_id=c.eos_token_id,
        decoder_start_token_id=c.decoder_start_token_id,
        use_cache=c.use_cache,
    )


def config_to_marian(config: VaswaniConfig) -> MarianConfig:
    """The MarianConfig of the computation `config` describes; MarianConversionError if Marian has none."""
    if config.norm_first:
        raise MarianConversionError("norm_first=True (pre-LN) cannot be exported: MarianMTModel is post-LN only.")
    if config.positional_encoding != "sinusoidal":
        raise MarianConversionError(
            f"positional_encoding={config.positional_encoding!r} cannot be exported: MarianMTModel has fixed "
            "sinusoids only."
        )
    if not config.share_embeddings:
        raise MarianConversionError(
            "share_embeddings=False cannot be exported: the conversion supports one matrix shared by both "
            "embeddings and the output projection (§3.4), as in the Opus-MT models."
        )
    if not config.tie_word_embeddings:
        raise MarianConversionError(
            "tie_word_embeddings=False cannot be exported: the conversion supports an output projection tied to "
            "the shared embedding matrix (§3.4), as in the Opus-MT models."
        )
    if config.d_k * config.num_heads != config.d_model or config.d_v * config.num_heads != config.d_model:
        raise MarianConversionError(
            f"d_k={config.d_k}, d_v={config.d_v} with num_heads={config.num_heads} cannot be exported: "
            f"MarianMTModel's heads are d_model / h = {config.d_model / config.num_heads:g} wide."
        )
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
        activation_function=config.activation_function,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=0.0,
        scale_embedding=bool(config.scale_embedding),
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=config.pad_token_id,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        decoder_start_token_id=config.decoder_start_token_id,
        forced_eos_token_id=None,  # MarianConfig defaults to forcing token 0; ours forces nothing
        use_cache=config.use_cache,
        # Not read by transformers' MarianMTModel (see the module docstring); read back by import.
        layer_norm_eps=config.layer_norm_eps,
        label_smoothing=config.label_smoothing,
    )


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
            state[ours_name] = _permute(theirs[marian_name], layout, inverse)
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
            state[marian_name] = _permute(ours[ours_name], layout, order)
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


def convert_marian(source: PathLike, output_dir: PathLike, **from_pretrained_kwargs) -> Path:
    """A MarianMTModel folder or Hub id → our model folder at `output_dir`, with its tokenizer.

    The folder loads with `VaswaniForConditionalGeneration.from_pretrained` (or, where this package
    is not installed, `AutoModelForSeq2SeqLM.from_pretrained(..., trust_remote_code=True)`); the
    tokenizer is Marian's own (sentencepiece: `pip install sentencepiece`).
    """
    model_type = _model_type(source, **from_pretrained_kwargs)
    if model_type != "marian":
        raise MarianConversionError(f"{str(source)!r} holds a {model_type!r} model, not a Marian one (MarianMTModel).")
    marian = MarianMTModel.from_pretrained(source, **from_pretrained_kwargs)
    tokenizer = AutoTokenizer.from_pretrained(source, **from_pretrained_kwargs)
    model = from_marian(marian)
    output_dir = Path(output_dir)
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def export_marian(source: PathLike, output_dir: PathLike, **from_pretrained_kwargs) -> Path:
    """Our model folder or Hub id → a MarianMTModel folder at `output_dir`, with the tokenizer.

    Warns when the model's layer_norm_eps is not Marian's 1e-5 (see the module docstring).
    """
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
    output_dir = Path(output_dir)
    marian.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


def _model_type(source: PathLike, **kwargs) -> str | None:
    config_dict, _ = PretrainedConfig.get_config_dict(str(source), **kwargs)
    if not config_dict:
        raise FileNotFoundError(f"No config.json in {str(source)!r}.")
    return config_dict.get("model_type")
