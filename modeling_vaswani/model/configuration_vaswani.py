"""Table 3 — the hyper-parameters of the Transformer, as a Hugging Face config.

The paper describes its models by a handful of numbers (Table 3): the number of layers N, the
model width d_model, the inner width of the feed-forward network d_ff, the number of attention
heads h with per-head sizes d_k and d_v, the dropout rate P_drop and the label-smoothing rate
ε_ls. `VaswaniConfig` keeps exactly those names, and `attribute_map` translates them to the
names the rest of the Hugging Face library reads (`hidden_size`, `num_attention_heads`, ...).

`VaswaniConfig.from_preset("base" | "big")` reproduces the two rows of Table 3; "small" is a
model sized to learn Multi30k on a laptop CPU (not from the paper).
"""

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


class VaswaniConfig(PretrainedConfig):
    """Configuration of the encoder–decoder Transformer (§3, Table 3).

    Defaults are the paper's base model (Table 3, first row) with a Multi30k-sized vocabulary.
    """

    model_type = "vaswani"
    keys_to_ignore_at_inference = ["past_key_values"]
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
        # Not in the paper; None means d_model^-0.5 (tensor2tensor / fairseq).
        self.init_std = init_std
        self.use_cache = use_cache
        # §3.4: one weight matrix for both embeddings and the pre-softmax projection. Hugging Face
        # ties weights only when tie_word_embeddings is true, so the two flags must agree.
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
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"VaswaniConfig.{name} must be in [0, 1), got {value!r}.")
        if self.positional_encoding not in POSITIONAL_ENCODINGS:
            raise ValueError(
                f"VaswaniConfig.positional_encoding must be one of {POSITIONAL_ENCODINGS}, "
                f"got {self.positional_encoding!r}."
            )
        if not self.layer_norm_eps > 0:
            raise ValueError(f"VaswaniConfig.layer_norm_eps must be positive, got {self.layer_norm_eps!r}.")
        for name in ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"VaswaniConfig.{name} ({value}) must be a token id in [0, vocab_size={self.vocab_size})."
                )
        if bool(self.share_embeddings) != bool(self.tie_word_embeddings):
            raise ValueError(
                f"VaswaniConfig.tie_word_embeddings ({self.tie_word_embeddings}) must equal share_embeddings "
                f"({self.share_embeddings}): §3.4 shares one matrix three ways, or nothing is shared."
            )

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
    def from_preset(cls, name: str, **overrides) -> "VaswaniConfig":
        """A config from a named row of Table 3 ("base", "big") or one of ours ("small", "tiny")."""
        if name not in PRESETS:
            raise ValueError(f"Unknown preset {name!r}; choose one of {sorted(PRESETS)}.")
        return cls(**{**PRESETS[name], **overrides})


def _divides(divisor, number):
    return isinstance(divisor, int) and isinstance(number, int) and divisor > 0 and number % divisor == 0
