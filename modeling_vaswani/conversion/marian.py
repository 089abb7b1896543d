"""Marian in, Marian out: transformers' `MarianMTModel` (the Opus-MT models) as our model, and back.

Each Marian setting becomes a config option of ours or is refused (separate vocabularies, an untied output
projection, different encoder/decoder widths or heads, other activations, the legacy options set against us);
layerdrop and activation_dropout are dropped with a warning. Marian's `share_encoder_decoder_embeddings=False`
(each stack its own embedding over one vocabulary, the projection tied to the decoder's) is our
`share_embeddings=False`.

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
from transformers import AutoTokenizer, MarianConfig, MarianMTModel

from ..model.configuration_vaswani import VaswaniConfig
from ..model.modeling_vaswani import VaswaniForConditionalGeneration
from ..outputs import claim, write_folder
from .ctranslate2 import check_convertible, check_model_type

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
# Settings both configs name alike.
SHARED_SETTINGS = ("d_model", "max_position_embeddings", "pad_token_id", "bos_token_id", "eos_token_id",
                   "decoder_start_token_id", "use_cache")


class MarianConversionError(ValueError):
    """A setting of the model to convert that the other side cannot represent."""


def config_from_marian(marian_config: MarianConfig, final_logits_bias: bool = True,
                       attention_bias: bool = True) -> VaswaniConfig:
    """Our config for the computation `marian_config` describes; MarianConversionError if ours has none.
    `final_logits_bias`, `attention_bias`: whether Marian's logits bias, or any attention projection bias, has
    a non-zero entry (ours then keeps them; zeros add nothing)."""
    c = marian_config
    if getattr(c, "model_type", None) != "marian":
        raise MarianConversionError(f"Not a Marian config: model_type is {getattr(c, 'model_type', None)!r}.")
    shared = bool(getattr(c, "share_encoder_decoder_embeddings", True))
    decoder_vocab_size = getattr(c, "decoder_vocab_size", None) or c.vocab_size
    if decoder_vocab_size != c.vocab_size:
        raise MarianConversionError(f"Separate source and target vocabularies (vocab_size={c.vocab_size}, "
                                    f"decoder_vocab_size={decoder_vocab_size}) are not supported: ours shares one "
                                    "vocabulary (§3.4).")
    if not getattr(c, "tie_word_embeddings", True):
        raise MarianConversionError("tie_word_embeddings=False (an output projection apart from the embeddings) is not "
                                    "supported: ours shares one matrix between the embeddings and the output "
                                    "projection (§3.4).")
    for name, (supported, meaning) in UNSUPPORTED_LEGACY.items():
        value = getattr(c, name, supported)
        if bool(value) != supported:
            raise MarianConversionError(f"{name}={value} ({meaning}) is not supported: neither ours nor transformers' "
                                        "MarianMTModel computes it.")
    if c.activation_function not in ACTIVATIONS:
        raise MarianConversionError(f"activation_function={c.activation_function!r} is not supported: ours has "
                                    "'relu' (Eq. (2)) and 'swish'.")
    for encoder_name, decoder_name in (("encoder_ffn_dim", "decoder_ffn_dim"),
                                       ("encoder_attention_heads", "decoder_attention_heads")):
        if getattr(c, encoder_name) != getattr(c, decoder_name):
            raise MarianConversionError(f"{encoder_name}={getattr(c, encoder_name)} differs from {decoder_name}="
                                        f"{getattr(c, decoder_name)}: ours uses one value for both stacks.")
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
        vocab_size=c.vocab_size, d_ff=c.encoder_ffn_dim, num_heads=c.encoder_attention_heads,
        num_layers=c.encoder_layers, num_decoder_layers=c.decoder_layers, dropout=float(c.dropout),
        attention_dropout=float(c.attention_dropout),
        label_smoothing=getattr(c, "label_smoothing", 0.1),  # written by export_marian; Marian has none
        positional_encoding="sinusoidal", share_embeddings=shared, tie_word_embeddings=True,
        scale_embedding=bool(c.scale_embedding),
        norm_first=False,
        attention_bias=bool(attention_bias),  # Marian's projections have biases; all-zero ones are left out
        # transformers' Marian always uses 1e-5; a config written by export_marian carries ours.
        layer_norm_eps=getattr(c, "layer_norm_eps", MARIAN_LAYER_NORM_EPS),
        activation_function=ACTIVATIONS[c.activation_function],
        final_logits_bias=bool(final_logits_bias),
        **{name: getattr(c, name) for name in SHARED_SETTINGS},
    )


def config_to_marian(config: VaswaniConfig) -> MarianConfig:
    """The MarianConfig of the computation `config` describes; MarianConversionError if Marian has none."""
    if config.norm_first:
        raise MarianConversionError("norm_first=True (pre-LN) cannot be exported: MarianMTModel is post-LN only.")
    if config.positional_encoding != "sinusoidal":
        raise MarianConversionError(f"positional_encoding={config.positional_encoding!r} cannot be exported: "
                                    "MarianMTModel has fixed sinusoids only.")
    if not config.tie_word_embeddings:
        raise MarianConversionError("tie_word_embeddings=False cannot be exported: MarianMTModel's output projection "
                                    "is its (target) embedding matrix (§3.4).")
    check_convertible(config, MarianConversionError, "exported: MarianMTModel's")
    return MarianConfig(
        vocab_size=config.vocab_size, decoder_vocab_size=config.vocab_size, encoder_layers=config.num_layers,
        decoder_layers=config.num_decoder_layers, encoder_ffn_dim=config.d_ff, decoder_ffn_dim=config.d_ff,
        encoder_attention_heads=config.num_heads, decoder_attention_heads=config.num_heads,
        activation_function=config.activation_function, dropout=config.dropout,
        attention_dropout=config.attention_dropout, activation_dropout=0.0,
        scale_embedding=bool(config.scale_embedding),
        share_encoder_decoder_embeddings=config.share_embeddings, tie_word_embeddings=True,
        forced_eos_token_id=None,  # MarianConfig defaults to forcing token 0; ours forces nothing
        # layer_norm_eps: not read by transformers' MarianMTModel (see the module docstring); read back by import.
        **{name: getattr(config, name) for name in (*SHARED_SETTINGS, "layer_norm_eps", "label_smoothing")},
    )


# How each weight's d_model side is laid out: IN = its last dimension (embedding columns, a Linear's
# input), OUT = its first dimension (a Linear's output rows, or a d_model vector), NONE = no d_model side.
IN, OUT, NONE = "in", "out", "none"


def marian_order(d_model: int) -> torch.Tensor:
    """marian[..., j] = ours[..., order[j]]: Marian's sines (ours at even j), then its cosines (odd j)."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def weight_names(num_layers: int, num_decoder_layers: int, shared: bool) -> list[tuple[str, str, str]]:
    """(our state_dict name, Marian's, layout of the d_model side) for every weight of both models; `shared`:
    one embedding matrix for both stacks (both models then hold it as model.shared too)."""
    embeddings = ("model.shared.weight",) * shared + ("model.encoder.embed_tokens.weight",
                                                      "model.decoder.embed_tokens.weight", "lm_head.weight")
    names = [(name, name, IN) for name in embeddings]

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
    names = weight_names(marian.config.encoder_layers, marian.config.decoder_layers,
                         getattr(marian.config, "share_encoder_decoder_embeddings", True))
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
    names = weight_names(config.num_layers, config.num_decoder_layers, config.share_embeddings)
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
    if getattr(tokenizer, "separate_vocabs", False):  # Marian's target ids then name other tokens than its source ids
        raise MarianConversionError(f"{source}: the tokenizer has separate_vocabs=True (source and target "
                                    "vocabularies apart); ours shares one vocabulary (§3.4).")
    model = convert(model)
    with write_folder(output_dir) as folder:  # whole or not at all
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
    return Path(output_dir)

