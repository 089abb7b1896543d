"""Our model as a CTranslate2 model folder (optional: `pip install ctranslate2`), built straight from our
weights into a `TransformerSpec` (the Marian route would assume Opus-MT's pad and start ids, which ours lack).
Every setting of ours maps but d_k, d_v ≠ d_model / h (refused); in float32 log-probabilities equal ours to
~1e-6. `evaluation.ctranslate2_engine` decodes with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..model.configuration_vaswani import VaswaniConfig
from ..model.positional_encoding import LearnedPositionalEmbedding, sinusoidal_table
from ..model.strict_json import read_json
from ..outputs import claim, write_folder

# Sinusoid rows stored at least: 512 source tokens (evaluation's MAX_SOURCE_LENGTH) + 50 fit with room.
MIN_SINUSOID_POSITIONS = 1024
CTRANSLATE2_FILES = ("model.bin", "shared_vocabulary.json")  # a folder holding them is a CTranslate2 model
CONVERSION_RECORD = "conversion.json"  # source, parameter count, weight type: read by the engine
UNUSED_TOKEN = "<unused_{}>"  # names for ids the model has but the tokenizer lacks (vocab_size rounded up)


class CTranslate2NotInstalledError(ImportError, ValueError):
    """CTranslate2 is not installed (a ValueError too: the scripts report it as one line)."""


class CTranslate2ConversionError(ValueError):
    """A setting of our model that the CTranslate2 Transformer spec cannot represent."""


def import_ctranslate2():
    try:
        import ctranslate2
    except ImportError:
        raise CTranslate2NotInstalledError("CTranslate2 is not installed; `pip install ctranslate2` (or `pip install "
                                           "modeling_vaswani[ctranslate2]`).") from None
    return ctranslate2


def check_convertible(config: VaswaniConfig, error_class=CTranslate2ConversionError,
                      target: str = "converted: CTranslate2's") -> None:
    """Refuse heads narrower or wider than d_model / h, which CTranslate2 and Marian cannot represent."""
    head = config.d_model / config.num_heads
    if config.d_k != head or config.d_v != head:
        raise error_class(f"d_k={config.d_k}, d_v={config.d_v} with num_heads={config.num_heads} cannot be {target} "
                          f"heads are d_model / h = {head:g} wide.")


def vocabulary(tokenizer, vocab_size: int) -> list[str]:
    """The tokens of ids 0 … vocab_size−1 (placeholder names where the tokenizer has none)."""
    by_id = {index: token for token, index in tokenizer.get_vocab().items()}
    if max(by_id) >= vocab_size:
        raise CTranslate2ConversionError(f"The tokenizer has token id {max(by_id)} but the model only "
                                         f"vocab_size={vocab_size} ids; convert the model with the tokenizer it was "
                                         "trained with.")
    tokens, taken = [by_id.get(index) for index in range(vocab_size)], set(by_id.values())
    for index, token in enumerate(tokens):
        if token is None:
            name, n = UNUSED_TOKEN.format(index), 0
            while name in taken:  # never a name the tokenizer uses
                n += 1
                name = UNUSED_TOKEN.format(f"{index}_{n}")
            tokens[index] = name
            taken.add(name)
    return tokens


def to_ctranslate2_spec(model, tokenizer):
    """A `TransformerSpec` computing what `model` computes (float32; `convert_ctranslate2` validates and quantizes)."""
    import_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec

    config = model.config
    check_convertible(config)
    tokens = vocabulary(tokenizer, config.vocab_size)
    activation = dict(relu=common_spec.Activation.RELU, swish=common_spec.Activation.SWISH)[config.activation_function]
    spec = transformer_spec.TransformerSpec.from_config((config.num_layers, config.num_decoder_layers),
                                                        config.num_heads, pre_norm=bool(config.norm_first),
                                                        activation=activation)

    def tensor(value: torch.Tensor) -> torch.Tensor:
        return value.detach().to(device="cpu", dtype=torch.float32).contiguous()

    def linear(linear_spec, *modules) -> None:
        """One CTranslate2 Linear from one or more of ours, their output rows stacked (a fused projection)."""
        linear_spec.weight = tensor(torch.cat([m.weight for m in modules]))
        if modules[0].bias is not None:
            linear_spec.bias = tensor(torch.cat([m.bias for m in modules]))

    def norm(norm_spec, module) -> None:
        norm_spec.gamma, norm_spec.beta = tensor(module.weight), tensor(module.bias)

    def stack(stack_spec, ours) -> None:
        stack_spec.scale_embeddings = float(ours.embed_tokens.embed_scale)
        # Learned rows, or §3.5's sinusoids (CTranslate2's own table is laid out differently).
        table = (ours.embed_positions.weight if isinstance(ours.embed_positions, LearnedPositionalEmbedding) else
                 sinusoidal_table(max(config.max_position_embeddings, MIN_SINUSOID_POSITIONS), config.d_model))
        stack_spec.position_encodings.encodings = tensor(table)
        embeddings = stack_spec.embeddings[0] if isinstance(stack_spec.embeddings, list) else stack_spec.embeddings
        embeddings.weight = tensor(ours.embed_tokens.weight)
        if ours.final_norm is not None:
            norm(stack_spec.layer_norm, ours.final_norm)

    for stack_spec, ours in ((spec.encoder, model.get_encoder()), (spec.decoder, model.get_decoder())):
        stack(stack_spec, ours)
        for layer_spec, layer in zip(stack_spec.layer, ours.layers):
            attention = layer.self_attn
            linear(layer_spec.self_attention.linear[0], attention.q_proj, attention.k_proj, attention.v_proj)
            linear(layer_spec.self_attention.linear[1], attention.out_proj)
            norm(layer_spec.self_attention.layer_norm, layer.self_attn_sublayer.norm)
            if stack_spec is spec.decoder:
                attention = layer.cross_attn
                linear(layer_spec.attention.linear[0], attention.q_proj)
                linear(layer_spec.attention.linear[1], attention.k_proj, attention.v_proj)
                linear(layer_spec.attention.linear[2], attention.out_proj)
                norm(layer_spec.attention.layer_norm, layer.cross_attn_sublayer.norm)
            linear(layer_spec.ffn.linear_0, layer.feed_forward.linear_1)
            linear(layer_spec.ffn.linear_1, layer.feed_forward.linear_2)
            norm(layer_spec.ffn.layer_norm, layer.feed_forward_sublayer.norm)
    spec.decoder.projection.weight = tensor(model.lm_head.weight)
    if model.final_logits_bias is not None:
        spec.decoder.projection.bias = tensor(model.final_logits_bias.reshape(-1))

    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)  # one vocabulary: saved once, as shared_vocabulary.json
    token = {name: tokens[getattr(config, f"{name}_token_id")] for name in ("bos", "eos", "decoder_start")}
    spec.config.bos_token, spec.config.eos_token = token["bos"], token["eos"]
    spec.config.decoder_start_token = token["decoder_start"]
    unk = getattr(tokenizer, "unk_token", None)
    spec.config.unk_token = unk if unk in tokens else token["eos"]  # a token the tokenizer never makes
    spec.config.layer_norm_epsilon = float(config.layer_norm_eps)
    return spec


def convert_ctranslate2(source, output_dir, quantization: str | None = None, force: bool = False,
                        flag: str = "output_dir", **from_pretrained_kwargs) -> Path:
    """Our model folder or Hub id → a CTranslate2 folder with the tokenizer and generation config.
    `quantization`: None (float32) or a CTranslate2 weight type ("int8", ...). An `output_dir` (named `flag`
    in errors) holding files is replaced only with `force`; one that is, holds or lies inside `source`, never."""
    output_dir = claim(flag, output_dir, [("--model" if flag.startswith("--") else "source", source)], folder=True,
                       replace_flag="--force" if flag.startswith("--") else "force=True", replace=force)
    ctranslate2 = import_ctranslate2()  # CTranslate2NotInstalledError before anything is loaded
    accepted = ctranslate2.specs.model_spec.ACCEPTED_MODEL_TYPES
    if quantization is not None and quantization not in accepted:
        raise ValueError(f"quantization {quantization!r} is not one of CTranslate2's: {', '.join(accepted)}.")
    from ..model.modeling_vaswani import VaswaniForConditionalGeneration
    from ..tokenizer_loading import load_tokenizer

    check_model_type(source, VaswaniConfig.model_type, "one of ours ('vaswani')", CTranslate2ConversionError,
                     **from_pretrained_kwargs)
    model = VaswaniForConditionalGeneration.from_pretrained(source, **from_pretrained_kwargs).eval()
    tokenizer = load_tokenizer(source)
    spec = to_ctranslate2_spec(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    record = dict(source=str(source), num_parameters=model.num_parameters(), quantization=quantization or "float32",
                  ctranslate2_version=ctranslate2.__version__)
    with write_folder(output_dir) as folder:  # whole or not at all
        spec.save(str(folder))
        tokenizer.save_pretrained(folder)
        model.generation_config.save_pretrained(folder)
        (folder / CONVERSION_RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return output_dir


def read_conversion_record(folder) -> dict:
    """What `convert_ctranslate2` recorded in `folder`; {} for a folder converted otherwise."""
    path = Path(folder) / CONVERSION_RECORD
    return read_json(path) if path.is_file() else {}


def is_ctranslate2_model(folder) -> bool:
    return all((Path(folder) / name).is_file() for name in CTRANSLATE2_FILES)


def check_model_type(source, model_type: str, expected: str, error_class, **kwargs) -> None:
    """Refuse `source` unless its config.json says `model_type` (`expected` says what it should hold)."""
    from transformers import PretrainedConfig

    config_dict, _ = PretrainedConfig.get_config_dict(str(source), **kwargs)
    if not config_dict:
        raise FileNotFoundError(f"No config.json in {str(source)!r}.")
    if config_dict.get("model_type") != model_type:
        raise error_class(f"{str(source)!r} holds a {config_dict.get('model_type')!r} model, not {expected}.")
