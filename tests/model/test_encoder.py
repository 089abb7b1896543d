"""The encoder stack of §3.1 (shapes, and that padding changes nothing, for random configurations:
test_properties.py)."""

import pytest
import torch
from torch import nn

from modeling_vaswani.model.embeddings import ScaledEmbedding
from modeling_vaswani.model.masking import padding_mask
from modeling_vaswani.model.positional_encoding import sinusoidal_table
from modeling_vaswani.model.stacks import VaswaniEncoder


@pytest.fixture
def make_encoder(make_config):
    """A three-layer encoder of the tiny config over 30 token ids, seeded, in eval mode, as transformers
    calls it (stacks.py: the paper's Encoder inside, with output classes and input checks)."""

    def make(**overrides):
        torch.manual_seed(0)
        return VaswaniEncoder(make_config(vocab_size=30, num_layers=3, **overrides), ScaledEmbedding(30, 16)).eval()

    return make


def test_bottom_is_scaled_embedding_plus_positional_encoding(make_encoder):
    encoder = make_encoder()
    ids = torch.tensor([[5, 6, 7]])
    out = encoder(input_ids=ids, output_hidden_states=True)
    expected = encoder.embed_tokens.weight[ids] * 4.0 + sinusoidal_table(3, 16)
    torch.testing.assert_close(out.hidden_states[0], expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_post_ln_has_no_final_layernorm_pre_ln_ends_with_one(make_encoder, norm_first):
    encoder = make_encoder(norm_first=norm_first)
    assert (encoder.final_norm is not None) is norm_first
    assert sum(isinstance(m, nn.LayerNorm) for m in encoder.modules()) == 3 * 2 + norm_first  # one per sub-layer
    if norm_first:
        with torch.no_grad():
            encoder.final_norm.weight.fill_(2.0)
    out = encoder(input_ids=torch.randint(4, 30, (2, 5)), output_hidden_states=True)
    # hidden_states[-2] is the input of the last layer; the output is (final_norm of) the last layer's.
    last_layer, _ = encoder.layers[-1](out.hidden_states[-2], None)
    torch.testing.assert_close(out.last_hidden_state, encoder.final_norm(last_layer) if norm_first else last_layer,
                               rtol=0, atol=1e-6)


def test_layer_is_self_attention_then_feed_forward(make_encoder):
    encoder = make_encoder()
    layer = encoder.layers[0]
    x = torch.randn(2, 4, 16)
    keep = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    mask = padding_mask(keep, x.dtype)
    h = layer.self_attn_sublayer.norm(x + layer.self_attn(x, attention_mask=mask)[0])
    expected = layer.feed_forward_sublayer.norm(h + layer.feed_forward(h))
    torch.testing.assert_close(layer(x, mask)[0], expected, rtol=0, atol=1e-6)


def test_every_position_sees_every_other(make_encoder):
    encoder = make_encoder()
    ids = torch.tensor([[5, 6, 7, 8]])
    changed = torch.tensor([[5, 6, 7, 9]])  # only the last token differs
    a, b = encoder(input_ids=ids).last_hidden_state, encoder(input_ids=changed).last_hidden_state
    assert not torch.allclose(a[:, 0], b[:, 0])  # no causal mask in the encoder
