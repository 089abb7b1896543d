"""Marian's config.json as ours, and back: each Marian setting a config option of ours or refused (separate
vocabularies, an untied output projection, different encoder/decoder widths or heads, other activations, the
legacy options set against us); layerdrop and activation_dropout are dropped with a warning.
"""

from __future__ import annotations

import warnings

from transformers import MarianConfig

from ..model.configuration_vaswani import VaswaniConfig

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
    decoder_vocab_size = getattr(c, "decoder_vocab_size", None) or c.vocab_size
    if not getattr(c, "share_encoder_decoder_embeddings", True) or decoder_vocab_size != c.vocab_size:
        raise MarianConversionError(f"Separate source and target vocabularies (share_encoder_decoder_embeddings="
                                    f"{getattr(c, 'share_encoder_decoder_embeddings', True)}, vocab_size={c.vocab_size}, "
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
        positional_encoding="sinusoidal", share_embeddings=True, scale_embedding=bool(c.scale_embedding),
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
    if not config.share_embeddings:
        raise MarianConversionError("share_embeddings=False cannot be exported: the conversion supports one matrix "
                                    "shared by both embeddings and the output projection (§3.4), as in the Opus-MT "
                                    "models.")
    if not config.tie_word_embeddings:
        raise MarianConversionError("tie_word_embeddings=False cannot be exported: the conversion supports an output "
                                    "projection tied to the shared embedding matrix (§3.4), as in the Opus-MT models.")
    if config.d_k * config.num_heads != config.d_model or config.d_v * config.num_heads != config.d_model:
        raise MarianConversionError(f"d_k={config.d_k}, d_v={config.d_v} with num_heads={config.num_heads} cannot be "
                                    f"exported: MarianMTModel's heads are d_model / h = "
                                    f"{config.d_model / config.num_heads:g} wide.")
    return MarianConfig(
        vocab_size=config.vocab_size, decoder_vocab_size=config.vocab_size, encoder_layers=config.num_layers,
        decoder_layers=config.num_decoder_layers, encoder_ffn_dim=config.d_ff, decoder_ffn_dim=config.d_ff,
        encoder_attention_heads=config.num_heads, decoder_attention_heads=config.num_heads,
        activation_function=config.activation_function, dropout=config.dropout,
        attention_dropout=config.attention_dropout, activation_dropout=0.0, scale_embedding=bool(config.scale_embedding),
        share_encoder_decoder_embeddings=True, tie_word_embeddings=True,
        forced_eos_token_id=None,  # MarianConfig defaults to forcing token 0; ours forces nothing
        # layer_norm_eps: not read by transformers' MarianMTModel (see the module docstring); read back by import.
        **{name: getattr(config, name) for name in (*SHARED_SETTINGS, "layer_norm_eps", "label_smoothing")},
    )
