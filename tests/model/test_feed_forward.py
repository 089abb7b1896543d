"""Tests for modeling_vaswani.model.feed_forward: Eq. (2), FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

import pytest
import torch

from modeling_vaswani.model.feed_forward import PositionwiseFeedForward


def test_equation_2_by_hand():
    ffn = PositionwiseFeedForward(2, 3)
    with torch.no_grad():
        ffn.linear_1.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]]))  # W_1ᵀ (d_ff × d_model)
        ffn.linear_1.bias.copy_(torch.tensor([0.0, -1.0, 0.5]))
        ffn.linear_2.weight.copy_(torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.0, 1.0]]))  # W_2ᵀ
        ffn.linear_2.bias.copy_(torch.tensor([0.25, -0.25]))
    x = torch.tensor([[[2.0, 3.0], [-1.0, 0.5]]])
    # Position 0: x W_1 + b_1 = [2, 2, -0.5] → ReLU [2, 2, 0] → [2 + 4 + 0 + 0.25, -2 + 0 + 0 − 0.25]
    # Position 1: x W_1 + b_1 = [-1, -0.5, -1] → ReLU [0, 0, 0] → b_2
    expected = torch.tensor([[[6.25, -2.25], [0.25, -0.25]]])
    torch.testing.assert_close(ffn(x), expected)


def test_same_function_at_every_position():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(8, 32)
    x = torch.randn(2, 7, 8)
    out = ffn(x)
    for b in range(2):
        for t in range(7):
            torch.testing.assert_close(out[b, t], ffn(x[b, t]), rtol=0, atol=1e-6)  # so positions never mix


def test_relu_between_the_layers_swish_as_a_deviation_and_no_other_activation():
    torch.manual_seed(0)
    relu, swish = PositionwiseFeedForward(4, 8), PositionwiseFeedForward(4, 8, activation_function="swish")
    swish.load_state_dict(relu.state_dict())
    x = torch.randn(2, 3, 4)
    hidden = relu.linear_1(x)
    torch.testing.assert_close(swish(x), swish.linear_2(hidden * torch.sigmoid(hidden)))
    torch.testing.assert_close(relu(x), relu.linear_2(hidden.clamp(min=0)))
    with pytest.raises(ValueError, match="activation_function"):
        PositionwiseFeedForward(4, 8, activation_function="gelu")
