"""fast_modules: the trainer's dropout masks from random integers have nn.Dropout's distribution, its Q, K and V in
one product give the model's attention outputs and gradients, and the trainer uses both."""

import copy

import pytest
import torch
from torch import nn

from modeling_vaswani.model.attention import MultiHeadAttention
from modeling_vaswani.training.fast_modules import FusedProjectionAttention, IntegerMaskDropout, use_fast_modules
from tiny_data import MODEL


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


def test_compiled_it_draws_eager_s_mask_in_one_graph():
    import torch._dynamo

    x = (torch.rand(64, 40) + 1.0).requires_grad_()
    dropout = IntegerMaskDropout(0.3).train()
    try:
        explanation = torch._dynamo.explain(dropout)(x)
        torch.manual_seed(1)
        y = torch.compile(dropout, fullgraph=True)(x)
    finally:
        torch._dynamo.reset()
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons
    torch.manual_seed(1)
    assert torch.equal(y, dropout(x))
    y.sum().backward()
    assert torch.allclose(x.grad, (y != 0).float() / 0.7)


def test_in_bf16_the_scale_is_applied_in_float32():
    x = torch.rand(50, 1000, dtype=torch.bfloat16) + 1.0
    y = IntegerMaskDropout(0.15).train()(x)
    kept = y != 0
    assert y.dtype == torch.bfloat16  # 1/0.85 rounded to bf16 would be 0.27 % off
    assert torch.equal(y[kept], (x[kept].float() * (1.0 / 0.85)).to(torch.bfloat16))


def test_in_eval_and_at_p_0_it_is_the_identity():
    x = torch.randn(3, 5)
    assert torch.equal(IntegerMaskDropout(0.3).eval()(x), x) and torch.equal(IntegerMaskDropout(0.0).train()(x), x)
    model = nn.Sequential(nn.Dropout(0.1), nn.Linear(5, 5), nn.Sequential(nn.Dropout(0.2)))
    assert use_fast_modules(model) == 3 and model[2][0].p == 0.2
    assert all(type(m) is IntegerMaskDropout for m in model.modules() if isinstance(m, nn.Dropout))


def _output_and_grads(model, batch):
    model.zero_grad(set_to_none=True)
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {name: p.grad for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("attention_bias", [False, True])
def test_the_loss_and_every_gradient_equal_the_models_own_projections(make_model, attention_bias):
    model = make_model(**MODEL, attention_bias=attention_bias)  # eval mode: no dropout, so both runs are the same
    fused = copy.deepcopy(model)
    # self-attention in both stacks and encoder–decoder attention in the decoder
    use_fast_modules(fused)
    attentions = [m for m in fused.modules() if isinstance(m, MultiHeadAttention)]
    assert len(attentions) == 3 * MODEL["num_layers"] and all(type(m) is FusedProjectionAttention for m in attentions)
    generator = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(3, 60, (3, 7), generator=generator),
             "labels": torch.randint(3, 60, (3, 5), generator=generator)}
    expected, expected_grads = _output_and_grads(model, batch)
    loss, grads = _output_and_grads(fused, batch)
    torch.testing.assert_close(loss, expected)
    assert grads.keys() == expected_grads.keys() and any("k_proj.bias" in n for n in grads) == attention_bias
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected_grads[name], msg=name)


def test_generation_with_a_cache_keeps_the_models_projections(make_model):
    model = make_model(**MODEL)
    fused = copy.deepcopy(model)
    use_fast_modules(fused)
    input_ids = torch.tensor([[5, 6, 7, 2]])
    assert torch.equal(fused.generate(input_ids, num_beams=2, max_new_tokens=6),
                       model.generate(input_ids, num_beams=2, max_new_tokens=6))


def test_the_trainer_uses_both(build_trainer):
    modules = list(build_trainer(max_steps=1).model.modules())
    dropouts = [m for m in modules if isinstance(m, nn.Dropout)]
    attentions = [m for m in modules if isinstance(m, MultiHeadAttention)]
    assert dropouts and all(type(m) is IntegerMaskDropout for m in dropouts)
    assert attentions and all(type(m) is FusedProjectionAttention for m in attentions)
