"""conversion/marian.py on tiny random MarianMTModels: the mapping, Marian's outputs, round trips bit for bit."""

import pytest
import torch
from transformers import MarianConfig
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

from marian_models import SENTENCES, TINY_MARIAN, TOLERANCE, VARIANTS, assert_same_state, random_marian
from modeling_vaswani.conversion.marian import (MarianConversionError, config_from_marian, config_to_marian,
                                                from_marian, marian_order, to_marian)
from modeling_vaswani.model.generation import TRANSFORMERS_BEAM_SEARCH
from modeling_vaswani.model.positional_encoding import sinusoidal_table

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request, marian_tokenizer):
    marian = random_marian(marian_tokenizer, request.param)
    return request.param, marian, from_marian(marian)


@pytest.fixture(scope="module")
def batch(marian_tokenizer):
    return marian_tokenizer(SENTENCES, return_tensors="pt", padding=True)


def decoder_inputs(model, batch_size=len(SENTENCES), length=9, seed=1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size - 1, (batch_size, length), generator=generator)
    ids[:, 0] = model.config.decoder_start_token_id
    return ids


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / a.abs().max()).item()


@pytest.mark.parametrize("d_model", [32, 15])
def test_the_permutation_maps_our_sinusoids_onto_marians(d_model):
    ours = sinusoidal_table(64, d_model)
    theirs = MarianSinusoidalPositionalEmbedding(64, d_model).create_weight()
    torch.testing.assert_close(ours[:, marian_order(d_model)], theirs, rtol=0, atol=1e-6)
    assert sorted(marian_order(d_model).tolist()) == list(range(d_model))


def test_marian_settings_become_our_options(pair, marian_tokenizer):
    variant, marian, ours = pair
    config = ours.config
    assert config.activation_function == {"opus-mt": "swish", "relu": "relu"}[variant]
    assert config.final_logits_bias is (variant == "opus-mt")
    assert config.layer_norm_eps == 1e-5  # transformers' MarianMTModel: nn.LayerNorm's default
    assert config.attention_bias  # Marian's projections have (here random, non-zero) biases
    assert config.scale_embedding is (variant == "opus-mt")
    assert (config.num_layers, config.num_decoder_layers) == (marian.config.encoder_layers, marian.config.decoder_layers)
    assert config.pad_token_id == config.decoder_start_token_id == len(marian_tokenizer) - 1
    assert (config.eos_token_id, config.bos_token_id) == (0, None)
    assert ours.generation_config.to_dict() == marian.generation_config.to_dict()


def test_logits_equal_marians_and_ours_to_marian_to_ours_is_bit_for_bit(pair, batch):
    _, marian, ours = pair
    back = to_marian(ours)
    assert_same_state(back, marian)
    again = from_marian(back)
    assert_same_state(again, ours)
    assert again.config.to_diff_dict() == ours.config.to_diff_dict()
    decoder_input_ids = decoder_inputs(marian)
    with torch.no_grad():
        expected = marian(**batch, decoder_input_ids=decoder_input_ids).logits
        got = ours(**batch, decoder_input_ids=decoder_input_ids).logits
    assert got.shape == expected.shape
    assert relative_difference(expected, got) < TOLERANCE


@pytest.mark.parametrize("settings", [dict(num_beams=1, max_new_tokens=16), dict(num_beams=4, max_new_tokens=16),
                                      {}])  # {}: Marian's own settings, beam 4, max_length 24, no <pad>
def test_greedy_and_beam_outputs_equal_marians(pair, batch, settings):
    _, marian, ours = pair
    assert torch.equal(ours.generate(**batch, **settings), marian.generate(**batch, **settings))


@pytest.mark.parametrize("layer_norm_eps, shared", [(1e-5, True), (1e-6, True), (1e-5, False)])
def test_our_model_exports_and_comes_back_bit_for_bit(make_model, layer_norm_eps, shared):
    # The paper's settings (ReLU, no logits bias, <s> starts); or each stack its own embedding, the
    # projection the decoder's, which is Marian's share_encoder_decoder_embeddings=False.
    ours = make_model(layer_norm_eps=layer_norm_eps, share_embeddings=shared, tie_word_embeddings=True)
    marian = to_marian(ours)
    assert marian.config.activation_function == "relu" and marian.config.layer_norm_eps == layer_norm_eps
    assert marian.config.share_encoder_decoder_embeddings is shared
    encoder_embedding, decoder_embedding = (m.embed_tokens.weight for m in (marian.model.encoder, marian.model.decoder))
    assert torch.equal(encoder_embedding, decoder_embedding) is shared
    assert not marian.final_logits_bias.any() and not marian.model.encoder.layers[0].self_attn.q_proj.bias.any()
    inputs = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    attention_mask = (inputs != 0).long()
    decoder_input_ids = decoder_inputs(ours, batch_size=2)
    with torch.no_grad():
        expected = ours(input_ids=inputs, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
        got = marian(input_ids=inputs, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
    # transformers' Marian normalises with ε = 1e-5 whatever the config says: exact to rounding only then.
    assert relative_difference(expected, got) < (TOLERANCE if layer_norm_eps == 1e-5 else 1e-4)
    for num_beams in (1, 4):
        settings = dict(num_beams=num_beams, max_new_tokens=10)
        # transformers' Marian decodes with transformers' beam search, ours too when told so.
        assert torch.equal(ours.generate(input_ids=inputs, attention_mask=attention_mask, **settings,
                                         **TRANSFORMERS_BEAM_SEARCH),
                           marian.generate(input_ids=inputs, attention_mask=attention_mask, **settings))
    again = from_marian(marian)
    assert_same_state(again, ours)
    assert again.config.to_diff_dict() == ours.config.to_diff_dict()


REFUSAL_BASE = dict(vocab_size=40, pad_token_id=39, decoder_start_token_id=39, eos_token_id=0, encoder_layers=1,
                    decoder_layers=1, activation_function="swish", **TINY_MARIAN)


MARIAN_REFUSED = [dict(decoder_vocab_size=50), dict(decoder_vocab_size=50, share_encoder_decoder_embeddings=False),
                  dict(tie_word_embeddings=False), dict(normalize_embedding=True), dict(normalize_before=True),
                  dict(add_final_layer_norm=True), dict(static_position_embeddings=False),
                  dict(activation_function="gelu"), dict(decoder_ffn_dim=128), dict(decoder_attention_heads=8)]
OURS_REFUSED = [dict(norm_first=True), dict(positional_encoding="learned"), dict(tie_word_embeddings=False),
                dict(d_k=8)]


@pytest.mark.parametrize("side, overrides", [("marian", o) for o in MARIAN_REFUSED] + [("ours", o) for o in OURS_REFUSED])
def test_settings_the_other_side_cannot_represent_are_refused_by_name(make_config, side, overrides):
    if side == "marian":
        config_from_marian(MarianConfig(**REFUSAL_BASE))  # converts without the override
        convert, config = config_from_marian, MarianConfig(**{**REFUSAL_BASE, **overrides})
    else:
        convert, config = config_to_marian, make_config(**overrides)
    with pytest.raises(MarianConversionError) as refused:
        convert(config)
    assert next(iter(overrides)) in str(refused.value) and "\n" not in str(refused.value)
