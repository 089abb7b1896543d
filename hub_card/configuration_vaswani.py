"""Table 3 — the hyper-parameters of the Transformer, as a Hugging Face config.

The paper describes its models by a handful of numbers (Table 3): the number of layers N, the
model width d_model, the inner width of the feed-forward network d_ff, the number of attention
heads h with per-head sizes d_k and d_v, the dropout rate P_drop and the label-smoothing rate
ε_ls. `VaswaniConfig` keeps exactly those names, and `attribute_map` translates them to the
names the rest of the Hugging Face library reads (`hidden_size`, `num_attention_heads`, ...).

`VaswaniConfig.from_preset("base" | "big")` reproduces the two rows of Table 3; "small" is a
model sized to learn Multi30k on a laptop CPU (not from the paper).
"""

import os

from transformers import PretrainedConfig

from .pipeline_vaswani import CUSTOM_PIPELINES

# Table 3: "base" and "big" rows; "small" and "tiny" are ours, for CPUs and tests.
PRESETS = {
    "base": dict(d_model=512, d_ff=2048, num_heads=8, num_layers=6, dropout=0.1, label_smoothing=0.1),
    "big": dict(d_model=1024, d_ff=4096, num_heads=16, num_layers=6, dropout=0.3, label_smoothing=0.1),
    "small": dict(d_model=256, d_ff=1024, num_heads=4, num_layers=3, dropout=0.1, label_smoothing=0.1),
    "tiny": dict(d_model=32, d_ff=64, num_heads=4, num_layers=2, dropout=0.0, label_smoothing=0.1),
}

POSITIONAL_ENCODINGS = ("sinusoidal", "learned")
# Eq. (2) uses ReLU; "swish" (SiLU) is a deviation for models brought in from Marian (feed_forward.py).
ACTIVATION_FUNCTIONS = ("relu", "swish")


class VaswaniConfig(PretrainedConfig):
    """Configuration of the encoder–decoder Transformer (§3, Table 3).

    Defaults are the paper's base model (Table 3, first row) with a Multi30k-sized vocabulary.
    """

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

    def __init__(
        self,
        vocab_size=8000,
        d_model=512,
        d_ff=2048,
        num_heads=8,
        num_layers=6,
        num_decoder_layers=None,
        d_k=None,
        d_v=None,
        dropout=0.1,
        attention_dropout=0.0,
        label_smoothing=0.1,
        positional_encoding="sinusoidal",
        max_position_embeddings=1024,
        share_embeddings=True,
        scale_embedding=True,
        norm_first=False,
        layer_norm_eps=1e-6,
        attention_bias=False,
        activation_function="relu",
        final_logits_bias=False,
        init_std=None,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        use_cache=True,
        **kwargs,
    ):
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.d_ff = d_ff
        self.num_heads = num_heads
        self.num_layers = num_layers
        self.num_decoder_layers = num_layers if num_decoder_layers is None else num_decoder_layers
        # §3.2.2: "d_k = d_v = d_model / h" unless given explicitly (Table 3 rows A, B).
        self.d_k = d_k if d_k is not None else (d_model // num_heads if _divides(num_heads, d_model) else None)
        self.d_v = d_v if d_v is not None else (d_model // num_heads if _divides(num_heads, d_model) else None)
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.label_smoothing = label_smoothing
        self.positional_encoding = positional_encoding
        self.max_position_embeddings = max_position_embeddings
        self.share_embeddings = share_embeddings
        self.scale_embedding = scale_embedding
        self.norm_first = norm_first
        self.layer_norm_eps = layer_norm_eps
        # §3.2.2: the projections W^Q, W^K, W^V and W^O are matrices, without biases (as in
        # tensor2tensor's attention since November 2017; its first release used biased 1×1
        # convolutions). Deviation (opt-in): biases; config.json files saved before this field
        # existed describe models that had them, and load with True (`from_dict`).
        self.attention_bias = attention_bias
        # Deviations, off by default, for models converted from Marian: a SiLU FFN (feed_forward.py) and a
        # per-token bias on the logits (modeling_vaswani.py).
        self.activation_function = activation_function
        self.final_logits_bias = final_logits_bias
        # Not in the paper; None means d_model^-0.5 (tensor2tensor / fairseq).
        self.init_std = init_std
        self.use_cache = use_cache
        # §3.4: one weight matrix for both embeddings and the pre-softmax projection. share_embeddings
        # shares it between the two embeddings; tie_word_embeddings (Hugging Face's flag, as in
        # Marian) ties the projection to it. Deviation: either may be turned off (Figure 1 with an
        # untied projection, or separate matrices); tie_word_embeddings follows share_embeddings
        # unless given.
        kwargs.setdefault("tie_word_embeddings", share_embeddings)
        # Eq. (3)'s warmup_steps is a training setting (VaswaniTrainer); config.json files written
        # before it moved there still carry it, and load without it.
        kwargs.pop("warmup_steps", None)
        kwargs.setdefault("is_encoder_decoder", True)
        # Lets pipeline("translation", model=<saved folder>, trust_remote_code=True) find our pipeline.
        kwargs.setdefault("custom_pipelines", CUSTOM_PIPELINES)
        super().__init__(
            pad_token_id=pad_token_id,
            bos_token_id=bos_token_id,
            eos_token_id=eos_token_id,
            decoder_start_token_id=decoder_start_token_id,
            **kwargs,
        )
        self.validate_fields()

    def validate_fields(self):
        """Raise ValueError naming the field and the rule it breaks."""
        for name in ("vocab_size", "d_model", "d_ff", "num_heads", "num_layers", "num_decoder_layers",
                     "max_position_embeddings"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"VaswaniConfig.{name} must be a positive integer, got {value!r}.")
        if self.d_k is None or self.d_v is None:
            raise ValueError(
                f"VaswaniConfig.d_model ({self.d_model}) is not divisible by num_heads ({self.num_heads}); "
                "§3.2.2 uses d_k = d_v = d_model / h. Choose a divisible pair or pass d_k and d_v explicitly."
            )
        for name in ("d_k", "d_v"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"VaswaniConfig.{name} must be a positive integer, got {value!r}.")
        for name in ("dropout", "attention_dropout", "label_smoothing"):
            value = getattr(self, name)
            if not _is_number(value) or not 0.0 <= value < 1.0:
                raise ValueError(f"VaswaniConfig.{name} must be a number in [0, 1), got {value!r}.")
        if self.positional_encoding not in POSITIONAL_ENCODINGS:
            raise ValueError(
                f"VaswaniConfig.positional_encoding must be one of {POSITIONAL_ENCODINGS}, "
                f"got {self.positional_encoding!r}."
            )
        if not _is_number(self.layer_norm_eps) or not self.layer_norm_eps > 0:
            raise ValueError(f"VaswaniConfig.layer_norm_eps must be a positive number, got {self.layer_norm_eps!r}.")
        if self.init_std is not None and (not _is_number(self.init_std) or not self.init_std > 0):
            raise ValueError(f"VaswaniConfig.init_std must be a positive number or None, got {self.init_std!r}.")
        if self.activation_function not in ACTIVATION_FUNCTIONS:
            raise ValueError(
                f"VaswaniConfig.activation_function must be one of {ACTIVATION_FUNCTIONS}, "
                f"got {self.activation_function!r}."
            )
        if not isinstance(self.final_logits_bias, bool):
            raise ValueError(f"VaswaniConfig.final_logits_bias must be True or False, got {self.final_logits_bias!r}.")
        if not isinstance(self.attention_bias, bool):
            raise ValueError(f"VaswaniConfig.attention_bias must be True or False, got {self.attention_bias!r}.")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 0 <= value < self.vocab_size):
                raise ValueError(
                    f"VaswaniConfig.{name} ({value!r}) must be a token id, an integer in [0, vocab_size={self.vocab_size})."
                )
        for name in ("share_embeddings", "tie_word_embeddings", "scale_embedding", "norm_first", "use_cache"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"VaswaniConfig.{name} must be True or False, got {getattr(self, name)!r}.")
        if self.is_encoder_decoder is not True:
            raise ValueError(
                f"VaswaniConfig.is_encoder_decoder must be True (the Transformer is an encoder–decoder), "
                f"got {self.is_encoder_decoder!r}."
            )
        check_size(self)

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
        """Read config.json, refusing a missing one or one written for another architecture.

        Hugging Face returns the default config (the base model) when a folder has no config.json,
        and only warns when, say, a BERT config.json is loaded into this class, building a
        Transformer from whichever fields happen to share a name. from_pretrained of the model and
        of the config both read the file through here.
        """
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if not config_dict:
            raise FileNotFoundError(
                f"No config.json in {str(pretrained_model_name_or_path)!r}; a saved model folder needs the config.json "
                "written by save_pretrained (an interrupted save or copy?)."
            )
        model_type = config_dict.get("model_type")
        if model_type is not None and model_type != cls.model_type:
            raise ValueError(
                f"{str(pretrained_model_name_or_path)!r} holds a config.json for model_type {model_type!r}, not "
                f"{cls.model_type!r}; load it with its own class (e.g. AutoConfig) or point to a folder saved from "
                "a Vaswani model."
            )
        return config_dict, kwargs

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        """A config from a saved dictionary (config.json); every loaded config passes through here.

        config.json files written before `attention_bias` existed lack it, and their models' attention
        projections have biases: a missing entry means True. Only configs built anew (VaswaniConfig(...),
        from_preset) default to the paper's bias-free projections.
        """
        if "attention_bias" not in config_dict:
            config_dict = {**config_dict, "attention_bias": True}
        return super().from_dict(config_dict, **kwargs)

    @classmethod
    def from_preset(cls, name: str, **overrides) -> "VaswaniConfig":
        """A config from a named row of Table 3 ("base", "big") or one of ours ("small", "tiny")."""
        if name not in PRESETS:
            raise ValueError(f"Unknown preset {name!r}; choose one of {sorted(PRESETS)}.")
        return cls(**{**PRESETS[name], **overrides})


# Bounds on what a config may ask to allocate, checked before any tensor exists: a config.json is
# untrusted input, and the model would otherwise try to build whatever it says (num_layers 100000, a
# position table of max_position_embeddings × d_model floats, ...). The paper's big model has 213
# million parameters and 6 layers per stack. Setting the environment variable (not a config field,
# which a downloaded config.json could set itself) lifts the bounds.
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


def check_size(config) -> None:
    """Raise ValueError, before anything is allocated, for a config larger than the bounds above."""
    if os.environ.get(ALLOW_LARGE_MODELS_ENV, "").strip().lower() in ("1", "true", "yes"):
        return
    override = f"set the environment variable {ALLOW_LARGE_MODELS_ENV}=1 if you mean it"
    for name in ("num_layers", "num_decoder_layers"):
        if getattr(config, name) > MAX_LAYERS:
            raise ValueError(
                f"VaswaniConfig.{name}={getattr(config, name)} is more than {MAX_LAYERS} layers (the paper uses 6); "
                f"the config is damaged or not meant for this model. Fix it, or {override}."
            )
    table = config.max_position_embeddings * config.d_model
    if table > MAX_POSITION_TABLE:
        raise ValueError(
            f"VaswaniConfig.max_position_embeddings={config.max_position_embeddings} with d_model={config.d_model} "
            f"asks for a position table of {table:,} entries ({table * 4 / 2**30:,.1f} GiB in float32), more than "
            f"the bound of {MAX_POSITION_TABLE:,}; the paper's inputs are sentences. Fix it, or {override}."
        )
    estimate = parameter_estimate(config)
    if estimate > MAX_PARAMETERS:
        raise ValueError(
            f"VaswaniConfig describes a model of about {estimate:,} parameters ({estimate * 4 / 2**30:,.0f} GiB in "
            f"float32; vocab_size={config.vocab_size}, d_model={config.d_model}, d_ff={config.d_ff}, "
            f"num_heads={config.num_heads}, {config.num_layers}+{config.num_decoder_layers} layers), more than the "
            f"bound of {MAX_PARAMETERS:,}. Fix the config, or {override}."
        )


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # NaN is not


def _divides(divisor, number):
    return isinstance(divisor, int) and isinstance(number, int) and divisor > 0 and number % divisor == 0
