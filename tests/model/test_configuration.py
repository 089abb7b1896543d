"""Tests for modeling_vaswani.model.configuration_vaswani: Table 3 as a Hugging Face config."""

import json

import pytest
from transformers import AutoConfig

import modeling_vaswani  # noqa: F401  (registers "vaswani" with the Auto classes)
from checks import DELETE, assert_names, edit_json
from modeling_vaswani import VaswaniConfig
from modeling_vaswani.model.configuration_vaswani import PRESETS

TINY = dict(vocab_size=50, d_model=16, d_ff=32, num_heads=4, num_layers=2)


@pytest.mark.parametrize(
    "name, d_model, d_ff, heads, p_drop",
    [("base", 512, 2048, 8, 0.1), ("big", 1024, 4096, 16, 0.3)],
)
def test_presets_are_table_3(name, d_model, d_ff, heads, p_drop):
    config = VaswaniConfig.from_preset(name)
    assert (config.num_layers, config.num_decoder_layers, config.d_model, config.d_ff, config.num_heads, config.d_k,
            config.d_v, config.dropout, config.label_smoothing) == (6, 6, d_model, d_ff, heads, 64, 64, p_drop, 0.1)
    assert config.positional_encoding == "sinusoidal" and not config.norm_first  # post-LN, as in the paper
    assert config.activation_function == "relu" and config.final_logits_bias is False
    assert config.share_embeddings and config.tie_word_embeddings and config.scale_embedding
    assert config.is_encoder_decoder and not hasattr(config, "warmup_steps")  # a training setting


def test_presets_overrides_defaults_and_derived_sizes():
    config = VaswaniConfig.from_preset("base", vocab_size=37000, dropout=0.2, num_layers=4)
    assert (config.vocab_size, config.dropout, config.num_layers, config.num_decoder_layers) == (37000, 0.2, 4, 4)
    assert config.d_model == 512  # the rest of the row is kept
    with pytest.raises(ValueError, match="huge") as info:
        VaswaniConfig.from_preset("huge")
    assert_names(info, "base", "big")  # the choices
    config = VaswaniConfig(**TINY, num_decoder_layers=3)
    assert config.d_k == config.d_v == 4  # d_model / h
    assert (config.pad_token_id, config.bos_token_id, config.eos_token_id, config.decoder_start_token_id) == (0, 1, 2, 1)
    assert VaswaniConfig(**TINY).num_decoder_layers == 2  # N, unless given
    # Hugging Face's names; the generation cache sizes itself from num_hidden_layers: the decoder's depth.
    assert (config.hidden_size, config.num_attention_heads, config.intermediate_size) == (16, 4, 32)
    assert (config.num_hidden_layers, config.encoder_layers, config.decoder_layers) == (3, 2, 3)
    config.hidden_size = 24  # writes through to the paper's name
    assert config.d_model == 24
    with pytest.raises(ValueError, match="d_model") as info:
        VaswaniConfig(**{**TINY, "d_model": 18})
    assert_names(info, "num_heads", "d_k")
    explicit = VaswaniConfig(**{**TINY, "d_model": 18}, d_k=5, d_v=7)
    assert (explicit.d_k, explicit.d_v) == (5, 7)
    # §3.2.2's projections are matrices (biases: a deviation, and a saved config.json from before the field).
    assert not any(VaswaniConfig.from_preset(name).attention_bias for name in PRESETS)
    assert VaswaniConfig().attention_bias is False


SIZES = ["vocab_size", "d_model", "d_ff", "num_heads", "num_layers", "num_decoder_layers", "max_position_embeddings",
         "d_k", "d_v"]
RATES = ["dropout", "attention_dropout", "label_smoothing"]
TOKEN_IDS = ["pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"]
INVALID = ([(field, value) for field in SIZES for value in (0, -3)]  # sizes below one
           # not an integer (read from a file, every field: tests/untrusted_folders/test_damaged_folders.py)
           + [("vocab_size", value) for value in (2.0, "2", True)]
           + [(field, value) for field in RATES for value in (-0.1, 1.0, 1.5)]  # rates outside [0, 1)
           + [(field, value) for field in TOKEN_IDS for value in (50, -1)]  # ids outside the vocabulary
           + [(field, value) for field in ("tie_word_embeddings", "final_logits_bias") for value in ("no", None)]
           + [("positional_encoding", "rotary"), ("activation_function", "gelu")])


@pytest.mark.parametrize("field,value", INVALID, ids=[f"{f}={v!r}" for f, v in INVALID])
def test_an_invalid_value_names_the_field_and_the_value(field, value):
    with pytest.raises(ValueError, match=rf"\b{field}\b") as error:
        VaswaniConfig(**{**TINY, field: value})
    assert_names(error, repr(value))
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("name, field, value", [("dropout", "dropout", 1.5), ("num_heads", "num_heads", 0),
                                                ("hidden_size", "d_model", -1), ("norm_first", "norm_first", "no"),
                                                ("tie_word_embeddings", "tie_word_embeddings", "no")])
def test_values_set_after_building_are_checked_like_given_ones(name, field, value):
    config = VaswaniConfig(**TINY)
    with pytest.raises(ValueError, match=rf"VaswaniConfig\.{field}\b.*{value!r}"):
        setattr(config, name, value)
    assert getattr(config, field) == VaswaniConfig(**TINY).to_dict()[field]  # the refused value is not kept


def test_values_at_the_edges_are_valid_tying_follows_sharing_unless_given_and_a_saved_warmup_steps_is_dropped():
    assert all(getattr(VaswaniConfig(**{**TINY, field: 0.0}), field) == 0.0 for field in RATES)
    assert VaswaniConfig(**TINY, positional_encoding="learned").positional_encoding == "learned"
    for share in (True, False):
        assert VaswaniConfig(**TINY, share_embeddings=share).tie_word_embeddings is share
        # Deviation: the projection may be tied or not whatever the embeddings do (test_hf_integration.py).
        assert VaswaniConfig(**TINY, share_embeddings=share, tie_word_embeddings=not share).tie_word_embeddings != share
    config = VaswaniConfig.from_dict({**TINY, "warmup_steps": 4000})  # Eq. (3)'s, now the trainer's
    assert not hasattr(config, "warmup_steps") and "warmup_steps" not in config.to_json_string()


@pytest.mark.parametrize("attention_bias", [False, True])  # both values are written, so both survive
def test_save_load_round_trip_and_auto_config(tmp_path, attention_bias):
    config = VaswaniConfig(
        **TINY, num_decoder_layers=3, d_k=8, d_v=6, dropout=0.2, attention_dropout=0.05, label_smoothing=0.0,
        positional_encoding="learned", max_position_embeddings=77, norm_first=True, share_embeddings=False,
        scale_embedding=False, layer_norm_eps=1e-5, init_std=0.02, attention_bias=attention_bias,
    )
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["attention_bias"] is attention_bias
    assert saved["model_type"] == "vaswani" and saved["auto_map"]["AutoConfig"] == "configuration_vaswani.VaswaniConfig"
    for loaded in (VaswaniConfig.from_pretrained(tmp_path), AutoConfig.from_pretrained(tmp_path)):
        assert type(loaded) is VaswaniConfig
        got, want = loaded.to_dict(), config.to_dict()
        got.pop("_name_or_path"), want.pop("_name_or_path")  # where it was loaded from
        assert got == want and loaded.tie_word_embeddings is False
    edit_json(tmp_path / "config.json", attention_bias=DELETE)  # a config.json from before the field: biases
    assert VaswaniConfig.from_pretrained(tmp_path).attention_bias is True
    assert AutoConfig.from_pretrained(tmp_path).attention_bias is True
    assert VaswaniConfig.from_pretrained(tmp_path, attention_bias=False).attention_bias is False
    edit_json(tmp_path / "config.json", dropout=1.5)
    with pytest.raises(ValueError, match="dropout"):
        AutoConfig.from_pretrained(tmp_path)
