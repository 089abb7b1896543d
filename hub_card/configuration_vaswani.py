"""Table 3 — the hyper-parameters of the Transformer, as a Hugging Face config.

`VaswaniConfig` keeps the paper's names (N, d_model, d_ff, h, d_k, d_v, P_drop, ε_ls) and `attribute_map`
translates them to the names the rest of Hugging Face reads (`hidden_size`, ...). `from_preset("base" |
"big")` reproduces the two rows of Table 3. A strict dataclass, as transformers declares its own configs:
a config.json is untrusted input, and a field of the wrong type or range, or fields that disagree, are
refused in one ValueError line that names the field.
"""

import os
from functools import partial

from huggingface_hub.dataclasses import strict, validated_field
from huggingface_hub.errors import StrictDataclassClassValidationError, StrictDataclassFieldValidationError
from transformers import PreTrainedConfig

from .pipeline_vaswani import CUSTOM_PIPELINES
from .strict_json import read_json

# Table 3: "base" and "big" rows; "small" and "tiny" are ours, for CPUs and tests.
PRESETS = {
    "base": dict(d_model=512, d_ff=2048, num_heads=8, num_layers=6, dropout=0.1, label_smoothing=0.1),
    "big": dict(d_model=1024, d_ff=4096, num_heads=16, num_layers=6, dropout=0.3, label_smoothing=0.1),
    "small": dict(d_model=256, d_ff=1024, num_heads=4, num_layers=3, dropout=0.1, label_smoothing=0.1),
    "tiny": dict(d_model=32, d_ff=64, num_heads=4, num_layers=2, dropout=0.0, label_smoothing=0.1),
}


# Kinds of field: strict checks a value against the annotation, then `check`; a refusal says it must be `rule`.
def _field(default, rule, check=lambda value: True):
    def validator(value):
        if not check(value):
            raise ValueError(rule)
    return validated_field(validator, default=default, metadata={"rule": rule})


def one_of(*choices):  # the first is the default
    return _field(choices[0], f"one of {choices}", lambda value: value in choices)


flag = partial(_field, rule="True or False")  # the annotation, bool, says it all
# A width, a count of heads or layers, a vocabulary: nothing can be built with 0 of them.
size = partial(_field, rule="a positive integer", check=lambda value: value is None or value > 0)
# A probability: at 1, dropout drops (and label smoothing smooths away) everything.
rate = partial(_field, rule="a number in [0, 1)", check=lambda value: 0 <= value < 1)
positive = partial(_field, rule="a positive number", check=lambda value: value is None or value > 0)
# An index into the vocabulary (its upper end depends on vocab_size: validate_token_ids).
token_id = partial(_field, rule="a token id, an integer in [0, vocab_size)", check=lambda value: value is None or value >= 0)


def _one_line_errors(cls):
    """strict's two-line errors of its own classes as one ValueError line that starts `VaswaniConfig.<field>`."""
    strict_validate, strict_setattr = cls.validate, cls.__setattr__

    def validate(self):  # after __init__, and in save_pretrained
        try:
            strict_validate(self)
        except StrictDataclassClassValidationError as error:  # a validate_* method's ValueError
            raise ValueError(str(error.__cause__)) from None

    def __setattr__(self, name, value):
        name = cls.attribute_map.get(name, name)  # hidden_size = ... is checked as d_model
        if name == "tie_word_embeddings" and not isinstance(value, bool):  # Hugging Face's flag: strict skips it
            raise ValueError(f"VaswaniConfig.tie_word_embeddings must be True or False, got {value!r}.")
        try:
            strict_setattr(self, name, value)
        except StrictDataclassFieldValidationError as error:
            rule = cls.__dataclass_fields__[name].metadata.get("rule")  # None on transformers' own fields
            raise ValueError(f"VaswaniConfig.{name} must be {rule}, got {value!r}." if rule
                             else f"VaswaniConfig.{name}: {error.__cause__}") from None

    cls.validate, cls.__setattr__ = validate, __setattr__
    return cls


@_one_line_errors
@strict
class VaswaniConfig(PreTrainedConfig):
    """Configuration of the Transformer (§3): the base model of Table 3 with a Multi30k-sized vocabulary."""

    model_type = "vaswani"
    # The Trainer leaves the generation cache out of predictions (its name before and since transformers 5.24).
    keys_to_ignore_at_inference = ["past_key_values", "cache"]
    attribute_map = {
        "hidden_size": "d_model",
        "num_attention_heads": "num_heads",
        # The generation cache reads num_hidden_layers: it must count decoder layers.
        "num_hidden_layers": "num_decoder_layers",
        "intermediate_size": "d_ff",
        "encoder_layers": "num_layers",
        "decoder_layers": "num_decoder_layers",
        "max_length_positions": "max_position_embeddings",
    }

    vocab_size: int = size(8000)
    # Table 3, base row: N, d_model, d_ff, h, d_k, d_v, P_drop, ε_ls.
    num_layers: int = size(6)
    num_decoder_layers: int | None = size(None)  # None: N, as num_layers
    d_model: int = size(512)
    d_ff: int = size(2048)
    num_heads: int = size(8)
    # §3.2.2: "d_k = d_v = d_model / h" unless given explicitly (Table 3 rows A, B).
    d_k: int | None = size(None)
    d_v: int | None = size(None)
    dropout: float | int = rate(0.1)
    attention_dropout: float | int = rate(0.0)  # not in the paper: dropout on the attention weights
    label_smoothing: float | int = rate(0.1)
    # §3.5: sinusoids; "learned" is Table 3 row (E).
    positional_encoding: str = one_of("sinusoidal", "learned")
    max_position_embeddings: int = size(1024)
    # §3.4: one weight matrix for both embeddings and the pre-softmax projection. share_embeddings
    # shares it between the two embeddings; tie_word_embeddings (Hugging Face's flag, as in Marian;
    # not a field: it follows share_embeddings unless given) ties the projection to it. Deviation:
    # either may be turned off (Figure 1 with an untied projection, or separate matrices).
    share_embeddings: bool = flag(True)
    scale_embedding: bool = flag(True)  # §3.4: embeddings multiplied by √d_model
    norm_first: bool = flag(False)  # §3.1: LayerNorm(x + Sublayer(x)), post-LN; True is pre-LN
    layer_norm_eps: float | int = positive(1e-6)
    # §3.2.2: the projections W^Q, W^K, W^V and W^O are matrices, without biases (as in
    # tensor2tensor's attention since November 2017; its first release used biased 1×1
    # convolutions). Deviation (opt-in): biases; config.json files saved before this field
    # existed describe models that had them, and load with True (`from_dict`).
    attention_bias: bool = flag(False)
    # Deviations, off by default, for models converted from Marian: a SiLU FFN (feed_forward.py; Eq. (2)
    # uses ReLU) and a per-token bias on the logits (modeling_vaswani.py).
    activation_function: str = one_of("relu", "swish")
    final_logits_bias: bool = flag(False)
    init_std: float | int | None = positive(None)  # not in the paper; None: d_model^-0.5 (tensor2tensor, fairseq)
    pad_token_id: int | None = token_id(0)
    bos_token_id: int | None = token_id(1)
    eos_token_id: int | None = token_id(2)
    decoder_start_token_id: int | None = token_id(1)
    use_cache: bool = flag(True)
    is_encoder_decoder: bool = _field(True, "True (the Transformer is an encoder–decoder)", lambda value: value is True)

    def __post_init__(self, **kwargs):
        per_head = self.d_model // self.num_heads if self.d_model % self.num_heads == 0 else None
        self.d_k = per_head if self.d_k is None else self.d_k  # None (h does not divide d_model): refused below
        self.d_v = per_head if self.d_v is None else self.d_v
        if self.num_decoder_layers is None:
            self.num_decoder_layers = self.num_layers
        kwargs.setdefault("tie_word_embeddings", self.share_embeddings)
        # Eq. (3)'s warmup_steps is a training setting (VaswaniTrainer); config.json files written
        # before it moved there still carry it, and load without it.
        kwargs.pop("warmup_steps", None)
        # Lets pipeline("translation", model=<saved folder>, trust_remote_code=True) find our pipeline.
        kwargs.setdefault("custom_pipelines", CUSTOM_PIPELINES)
        super().__post_init__(**kwargs)

    def validate_head_sizes(self):
        """§3.2.2 splits d_model into h heads: d_k and d_v must be given where h does not divide d_model."""
        if self.d_k is None or self.d_v is None:
            raise ValueError(f"VaswaniConfig.d_model ({self.d_model}) is not divisible by num_heads ({self.num_heads}); "
                             "pass d_k and d_v explicitly.")

    def validate_size(self):
        """Refuse, before anything is allocated, a model beyond the bounds below (needs d_k: validate_head_sizes)."""
        if os.environ.get(ALLOW_LARGE_MODELS_ENV, "").strip().lower() in ("1", "true", "yes"):
            return
        override = f"Fix the config, or set the environment variable {ALLOW_LARGE_MODELS_ENV}=1 if you mean it."
        for name in ("num_layers", "num_decoder_layers"):
            if getattr(self, name) > MAX_LAYERS:
                raise ValueError(f"VaswaniConfig.{name}={getattr(self, name)} is more than {MAX_LAYERS} layers (the "
                                 f"paper uses 6). {override}")
        table = self.max_position_embeddings * self.d_model
        if table > MAX_POSITION_TABLE:
            raise ValueError(f"VaswaniConfig.max_position_embeddings={self.max_position_embeddings} with d_model="
                             f"{self.d_model} asks for a position table of {table:,} entries, more than "
                             f"{MAX_POSITION_TABLE:,}. {override}")
        estimate = parameter_estimate(self)
        if estimate > MAX_PARAMETERS:
            raise ValueError(f"VaswaniConfig describes a model of about {estimate:,} parameters (vocab_size="
                             f"{self.vocab_size}, d_model={self.d_model}, d_ff={self.d_ff}, num_heads={self.num_heads}, "
                             f"{self.num_layers}+{self.num_decoder_layers} layers), more than {MAX_PARAMETERS:,}. {override}")

    def validate_token_ids(self):
        """A special token outside the vocabulary would index past the embeddings (transformers only warns)."""
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if value is not None and value >= self.vocab_size:
                raise ValueError(f"VaswaniConfig.{name} ({value!r}) must be a token id, an integer in "
                                 f"[0, vocab_size={self.vocab_size}).")

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """`PretrainedConfig.from_pretrained`, whose errors on a field name the file it came from."""
        try:
            return super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        except ValueError as error:
            if not str(error).startswith("VaswaniConfig"):
                raise
            raise ValueError(f"{str(pretrained_model_name_or_path)!r} (config.json): {error}") from None

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        """Read config.json, refusing a missing one (Hugging Face returns the default config) or one written for
        another architecture (it only warns, and builds a Transformer from the fields that share a name)."""
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if not config_dict:
            raise FileNotFoundError(f"No config.json in {str(pretrained_model_name_or_path)!r} (an interrupted save "
                                    "or copy?).")
        model_type = config_dict.get("model_type")
        if model_type is not None and model_type != cls.model_type:
            raise ValueError(
                f"{str(pretrained_model_name_or_path)!r} holds a config.json for model_type {model_type!r}, not "
                f"{cls.model_type!r}; load it with its own class (e.g. AutoConfig) or point to a folder saved from "
                "a Vaswani model."
            )
        return config_dict, kwargs

    @classmethod
    def _dict_from_json_file(cls, json_file):
        """Through strict_json.py: NaN and Infinity refused, not decoded from {"__float__": ...} tags."""
        return read_json(json_file)

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """Every loaded config passes here: one saved before `attention_bias` existed describes a model whose
        projections have biases (a missing entry means True; new configs default to the paper's False)."""
        if "attention_bias" not in config_dict:
            config_dict = {**config_dict, "attention_bias": True}
        return super().from_dict(config_dict, **kwargs)

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "VaswaniConfig":
        """A config from a named row of Table 3 ("base", "big") or one of ours ("small", "tiny")."""
        if name not in PRESETS:
            raise ValueError(f"Unknown preset {name!r}; choose one of {sorted(PRESETS)}.")
        return cls(**{**PRESETS[name], **overrides})


# Bounds on what an untrusted config.json may ask to allocate, checked before any tensor exists (the paper's
# big model: 213M parameters, 6 layers per stack). An environment variable lifts them: a config field could
# be set by the downloaded file itself.
MAX_PARAMETERS = 20_000_000_000
MAX_LAYERS = 1000
MAX_POSITION_TABLE = 2**28  # entries of one max_position_embeddings × d_model table: 1 GiB in float32
ALLOW_LARGE_MODELS_ENV = "VASWANI_ALLOW_LARGE_MODELS"


def parameter_estimate(config) -> int:
    """About how many numbers (parameters and position tables) a model of `config` holds."""
    d, heads = config.d_model, config.num_heads
    qk, v = heads * config.d_k, heads * config.d_v
    attention = d * (2 * qk + v) + v * d + 2 * qk + v + d
    feed_forward = 2 * d * config.d_ff + config.d_ff + d
    encoder_layer = attention + feed_forward + 4 * d
    decoder_layer = 2 * attention + feed_forward + 6 * d
    embeddings = config.vocab_size * d * (1 if config.share_embeddings else 2)
    if not config.tie_word_embeddings:
        embeddings += config.vocab_size * d
    positions = 2 * config.max_position_embeddings * d  # one table per stack
    return (embeddings + positions + config.num_layers * encoder_layer
            + config.num_decoder_layers * decoder_layer + 4 * d + config.vocab_size)

