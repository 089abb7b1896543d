"""How a new model's weights start (initialization.py; the paper is silent)."""

import math

import pytest
import torch
from torch import nn

from modeling_vaswani.model.positional_encoding import SinusoidalPositionalEncoding, sinusoidal_table


def test_embeddings_have_std_d_model_to_the_minus_half_unless_init_std_says(make_model):
    weight = make_model(d_model=64, num_heads=4, vocab_size=2000).get_input_embeddings().weight
    assert weight.std().item() == pytest.approx(64 ** -0.5, rel=0.05) and weight.mean().abs().item() < 0.01
    weight = make_model(init_std=0.02, vocab_size=2000).get_input_embeddings().weight
    assert weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_every_linear_is_xavier_uniform_with_zero_bias(make_model):
    model = make_model(attention_bias=True, tie_word_embeddings=False)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert linears
    for linear in linears:
        fan_out, fan_in = linear.weight.shape
        bound = math.sqrt(6 / (fan_in + fan_out))
        assert linear.weight.abs().max().item() <= bound
        # Uniform on (−bound, bound): the largest entries come close to the bound (a Normal would not stop there).
        assert linear.weight.abs().max().item() > 0.8 * bound
        if linear.bias is not None:
            assert torch.count_nonzero(linear.bias) == 0


def test_layer_norms_the_identity_sinusoids_recomputed_and_the_logits_bias_zero(make_model):
    model = make_model(final_logits_bias=True)
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    tables = [m for m in model.modules() if isinstance(m, SinusoidalPositionalEncoding)]
    assert norms and tables
    for norm in norms:
        assert torch.equal(norm.weight, torch.ones_like(norm.weight)) and not norm.bias.any()
    for module in tables:  # a buffer: recomputed, not random
        assert torch.allclose(module.table, sinusoidal_table(module.table.shape[0], module.d_model))
    assert model.final_logits_bias is not None and torch.count_nonzero(model.final_logits_bias) == 0
