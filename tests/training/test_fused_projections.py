"""fused_projections: W^Q, W^K and W^V in one product give the model's attention outputs and gradients."""

import copy

import pytest
import torch

from modeling_vaswani.model.attention import MultiHeadAttention
from modeling_vaswani.training.fused_projections import FusedProjectionAttention, use_fused_projections
from tiny_data import MODEL


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
    assert use_fused_projections(fused) == 3 * MODEL["num_layers"]
    generator = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(3, 60, (3, 7), generator=generator),
             "labels": torch.randint(3, 60, (3, 5), generator=generator)}
    expected, expected_grads = _output_and_grads(model, batch)
    loss, grads = _output_and_grads(fused, batch)
    torch.testing.assert_close(loss, expected)
    assert grads.keys() == expected_grads.keys() and any("k_proj.bias" in n for n in grads) == attention_bias
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected_grads[name], msg=name)


def test_generation_with_a_cache_and_the_trainer_use_them(make_model, build_trainer):
    model = make_model(**MODEL)
    fused = copy.deepcopy(model)
    use_fused_projections(fused)
    input_ids = torch.tensor([[5, 6, 7, 2]])
    assert torch.equal(fused.generate(input_ids, num_beams=2, max_new_tokens=6),
                       model.generate(input_ids, num_beams=2, max_new_tokens=6))
    trainer = build_trainer(max_steps=1)
    attentions = [m for m in trainer.model.modules() if isinstance(m, MultiHeadAttention)]
    assert attentions and all(type(m) is FusedProjectionAttention for m in attentions)
