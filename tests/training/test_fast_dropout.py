"""fast_dropout: §5.4's dropout mask from random integers, the same distribution as nn.Dropout's, in training only."""

import pytest
import torch
from torch import nn

from modeling_vaswani.training.fast_dropout import IntegerMaskDropout, use_integer_mask_dropout


@pytest.mark.parametrize("p", [0.1, 0.15, 0.3])
def test_keeps_each_element_with_probability_1_minus_p_scaled_and_its_gradient_is_the_mask(p):
    torch.manual_seed(0)
    x = (torch.rand(400, 1000) + 1.0).requires_grad_()  # never 0: a zero in the output is a dropped element
    dropout = IntegerMaskDropout(p).train()
    y = dropout(x)
    kept = y != 0
    # 400,000 draws: the kept share is within 5 standard deviations of 1 − p.
    assert abs(kept.float().mean().item() - (1 - p)) < 5 * ((p * (1 - p)) / x.numel()) ** 0.5
    # Neighbours share a 32-bit draw (its two halves) and are still independent: both kept with (1 − p)².
    both, pairs = (kept[:, 0::2] & kept[:, 1::2]).float().mean().item(), x.numel() // 2
    assert abs(both - (1 - p) ** 2) < 5 * ((1 - p) ** 2 * (1 - (1 - p) ** 2) / pairs) ** 0.5
    assert torch.allclose(y[kept], x[kept] / (1 - p))
    y.sum().backward()
    assert torch.allclose(x.grad, kept.float() / (1 - p))
    assert not torch.equal(dropout(x), y)  # a new mask each call


def test_in_bf16_the_scale_is_applied_in_float32():
    x = torch.rand(50, 1000, dtype=torch.bfloat16) + 1.0
    y = IntegerMaskDropout(0.15).train()(x)
    kept = y != 0
    assert y.dtype == torch.bfloat16  # 1/0.85 rounded to bf16 would be 0.27 % off
    assert torch.equal(y[kept], (x[kept].float() * (1.0 / 0.85)).to(torch.bfloat16))


def test_in_eval_and_at_p_0_it_is_the_identity_and_the_trainer_uses_it_for_every_dropout(build_trainer):
    x = torch.randn(3, 5)
    assert torch.equal(IntegerMaskDropout(0.3).eval()(x), x) and torch.equal(IntegerMaskDropout(0.0).train()(x), x)
    model = nn.Sequential(nn.Dropout(0.1), nn.Linear(5, 5), nn.Sequential(nn.Dropout(0.2)))
    assert use_integer_mask_dropout(model) == 2 and model[2][0].p == 0.2
    assert all(type(m) is IntegerMaskDropout for m in model.modules() if isinstance(m, nn.Dropout))
    trainer = build_trainer(max_steps=1)
    assert all(type(m) is IntegerMaskDropout for m in trainer.model.modules() if isinstance(m, nn.Dropout))
