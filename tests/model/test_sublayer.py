"""Tests for modeling_vaswani.model.sublayer: LayerNorm(x + Dropout(Sublayer(x))) (§3.1, §5.4) and pre-LN."""

import torch
import torch.nn.functional as F

from modeling_vaswani.model.sublayer import SublayerConnection


def sublayer(h):
    return torch.tanh(h) * 3.0 + 1.0


def test_post_ln_is_layernorm_of_residual_sum():
    torch.manual_seed(0)
    block = SublayerConnection(8, dropout=0.0, layer_norm_eps=1e-6, norm_first=False)
    with torch.no_grad():
        block.norm.weight.uniform_(0.5, 1.5)
        block.norm.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 5, 8)
    s = x + sublayer(x)
    mean = s.mean(-1, keepdim=True)
    var = s.var(-1, unbiased=False, keepdim=True)
    expected = (s - mean) / torch.sqrt(var + 1e-6) * block.norm.weight + block.norm.bias
    torch.testing.assert_close(block(x, sublayer), expected, rtol=0, atol=1e-5)


def test_pre_ln_normalizes_the_sublayer_input_only():
    torch.manual_seed(0)
    block = SublayerConnection(8, dropout=0.0, layer_norm_eps=1e-6, norm_first=True)
    x = torch.randn(2, 5, 8) * 10
    expected = x + sublayer(F.layer_norm(x, (8,), block.norm.weight, block.norm.bias, 1e-6))
    out = block(x, sublayer)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5)
    assert out.std() > 3  # the residual path is not normalized


def test_dropout_hits_the_sublayer_output_not_the_residual_and_only_in_training():
    torch.manual_seed(0)
    block = SublayerConnection(8, dropout=0.5, layer_norm_eps=1e-6, norm_first=True).train()
    x = torch.randn(4, 6, 8)
    added = block(x, lambda h: torch.ones_like(h)) - x
    # Each sub-layer output (1) is dropped to 0 or kept and scaled to 1 / (1 − 0.5) = 2.
    assert set(added.round(decimals=4).unique().tolist()) == {0.0, 2.0}
    torch.testing.assert_close(block.eval()(x, lambda h: torch.ones_like(h)), x + 1)
    post = SublayerConnection(8, dropout=0.5, layer_norm_eps=1e-6, norm_first=False).eval()
    torch.testing.assert_close(post(x, sublayer), F.layer_norm(x + sublayer(x), (8,), eps=1e-6))
    assert not torch.allclose(post.train()(x, sublayer), F.layer_norm(x + sublayer(x), (8,), eps=1e-6))
