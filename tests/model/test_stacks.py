"""The encoder and decoder stacks of §3.1 (shapes and masking for random configurations: test_properties.py)."""

import pytest
import torch
from torch import nn

from modeling_vaswani.model.decoder import Decoder
from modeling_vaswani.model.embeddings import ScaledEmbedding
from modeling_vaswani.model.masking import padding_mask
from modeling_vaswani.model.positional_encoding import sinusoidal_table
from modeling_vaswani.model.stacks import VaswaniDecoder, VaswaniEncoder

MEMORY = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(1))


@pytest.fixture
def make_stack(make_config):
    """make_stack(stack, **overrides): a seeded 3-layer stack of the tiny config over 30 ids, in eval mode."""

    def make(stack, **overrides):
        torch.manual_seed(0)
        return stack(make_config(vocab_size=30, num_layers=3, num_decoder_layers=3, **overrides),
                     ScaledEmbedding(30, 16)).eval()

    return make


def causal(length):
    return torch.full((length, length), torch.finfo(torch.float32).min).triu(1)[None, None]


def test_the_encoder_starts_from_the_scaled_embedding_plus_positions_and_every_position_sees_every_other(make_stack):
    encoder = make_stack(VaswaniEncoder)
    ids = torch.tensor([[5, 6, 7, 8]])
    out = encoder(input_ids=ids, output_hidden_states=True)
    torch.testing.assert_close(out.hidden_states[0], encoder.embed_tokens.weight[ids] * 4.0 + sinusoidal_table(4, 16))
    changed = encoder(input_ids=torch.tensor([[5, 6, 7, 9]])).last_hidden_state  # only the last token differs
    assert not torch.allclose(out.last_hidden_state[:, 0], changed[:, 0])  # no causal mask in the encoder


def test_layers_are_their_sublayers_in_order(make_stack):
    """Encoder: self-attention, feed-forward; decoder: masked self-, cross-attention, feed-forward; post-LN."""
    x, mask = torch.randn(2, 4, 16), padding_mask(torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]), torch.float32)
    layer = make_stack(VaswaniEncoder).layers[0]
    h = layer.self_attn_sublayer.norm(x + layer.self_attn(x, attention_mask=mask)[0])
    torch.testing.assert_close(layer(x, mask)[0], layer.feed_forward_sublayer.norm(h + layer.feed_forward(h)),
                               rtol=0, atol=1e-6)
    layer = make_stack(Decoder).layers[0]
    h = layer.self_attn_sublayer.norm(x + layer.self_attn(x, attention_mask=causal(4))[0])
    h = layer.cross_attn_sublayer.norm(h + layer.cross_attn(h, key_value_states=MEMORY)[0])
    torch.testing.assert_close(layer(x, MEMORY, causal(4), None)[0],
                               layer.feed_forward_sublayer.norm(h + layer.feed_forward(h)), rtol=0, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("stack", [VaswaniEncoder, Decoder])
def test_post_ln_has_no_final_layernorm_pre_ln_ends_with_one(make_stack, stack, norm_first):
    module = make_stack(stack, norm_first=norm_first)
    sublayers = 2 if stack is VaswaniEncoder else 3
    assert (module.final_norm is not None) is norm_first
    assert sum(isinstance(m, nn.LayerNorm) for m in module.modules()) == 3 * sublayers + norm_first  # one per sub-layer
    if norm_first:
        with torch.no_grad():
            module.final_norm.weight.fill_(2.0)
            module.final_norm.bias.fill_(0.5)
    # hidden_states[-2] is the input of the last layer; the output is (final_norm of) the last layer's.
    if stack is VaswaniEncoder:
        out = module(input_ids=torch.randint(4, 30, (2, 5)), output_hidden_states=True)
        out, last = out.last_hidden_state, module.layers[-1](out.hidden_states[-2], None)[0]
    else:
        out, hidden, _, _ = module(torch.tensor([[1, 5, 6]]), MEMORY[:1])
        last = module.layers[-1](hidden[-2], MEMORY[:1], causal(3), None)[0]
    torch.testing.assert_close(out, module.final_norm(last) if norm_first else last, rtol=0, atol=1e-6)


def test_missing_decoder_input_is_a_clear_error(make_stack):
    with pytest.raises(ValueError, match="decoder_input_ids"):
        make_stack(VaswaniDecoder)(None, MEMORY)
