"""The decoder stack of §3.1 (shapes, that no position sees a later one and that source padding is hidden from
encoder–decoder attention, for random configurations: test_properties.py)."""

import pytest
import torch
from torch import nn

from modeling_vaswani.model.decoder import Decoder
from modeling_vaswani.model.embeddings import ScaledEmbedding
from modeling_vaswani.model.stacks import VaswaniDecoder


@pytest.fixture
def make_decoder(make_config):
    """A three-layer decoder of the tiny config over 30 token ids, seeded, in eval mode: the paper's
    stack, or (stack=VaswaniDecoder) the stack as transformers calls it, with a generation cache."""

    def make(stack=Decoder, **overrides):
        torch.manual_seed(0)
        config = make_config(vocab_size=30, num_decoder_layers=3, **overrides)
        return stack(config, ScaledEmbedding(30, 16)).eval()

    return make


MEMORY = torch.randn(2, 6, 16, generator=torch.Generator().manual_seed(1))


def test_layer_has_three_sublayers_in_order(make_decoder):
    decoder = make_decoder()
    layer = decoder.layers[0]
    x = torch.randn(2, 4, 16)
    causal = torch.full((4, 4), torch.finfo(x.dtype).min).triu(1)[None, None]
    h = layer.self_attn_sublayer.norm(x + layer.self_attn(x, attention_mask=causal)[0])
    h = layer.cross_attn_sublayer.norm(h + layer.cross_attn(h, key_value_states=MEMORY)[0])
    expected = layer.feed_forward_sublayer.norm(h + layer.feed_forward(h))
    out, _, _ = layer(x, MEMORY, causal, None)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_post_ln_has_no_final_layernorm_pre_ln_has_one(make_decoder, norm_first):
    decoder = make_decoder(norm_first=norm_first)
    assert (decoder.final_norm is not None) is norm_first
    assert sum(isinstance(m, nn.LayerNorm) for m in decoder.modules()) == 3 * 3 + norm_first
    if norm_first:
        with torch.no_grad():
            decoder.final_norm.bias.fill_(0.5)
    out, hidden, _, _ = decoder(torch.tensor([[1, 5, 6]]), MEMORY[:1])
    causal = torch.full((3, 3), torch.finfo(torch.float32).min).triu(1)[None, None]
    last = decoder.layers[-1](hidden[-2], MEMORY[:1], causal, None)[0]
    torch.testing.assert_close(out, decoder.final_norm(last) if norm_first else last, rtol=0, atol=1e-6)


def test_missing_input_is_a_clear_error(make_decoder):
    with pytest.raises(ValueError, match="decoder_input_ids"):
        make_decoder(VaswaniDecoder)(None, MEMORY)
