"""chunked_loss: the training step without (B, T, V) logits gives the loss and gradients of the model's forward."""

import pytest
import torch

from modeling_vaswani.training import chunked_loss
from modeling_vaswani.training.chunked_loss import fast_path_applies, projected_smoothed_loss, training_loss
from tiny_data import MODEL


def _batch():
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(3, 300, (4, 7), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, 4:] = 0  # a padded source
    labels = torch.randint(3, 300, (4, 6), generator=generator)
    labels[1, 3:] = -100  # a padded target
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def _loss_and_grads(model, loss_fn):
    model.zero_grad(set_to_none=True)
    loss = loss_fn()
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("overrides", [dict(label_smoothing=0.1), dict(label_smoothing=0.0),
                                       dict(label_smoothing=0.1, final_logits_bias=True)])
def test_loss_and_gradients_equal_the_models_forward_with_labels(make_model, overrides):
    model = make_model(**MODEL, **overrides).train()
    if model.final_logits_bias is not None:
        model.final_logits_bias.normal_()
    batch = _batch()
    expected, expected_grads = _loss_and_grads(model, lambda: model(**batch).loss)
    loss, grads = _loss_and_grads(model, lambda: training_loss(model, batch))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert grads.keys() == expected_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def _projection(rows, matmul_dtype=None):
    """Loss and gradients of 23 positions (one ignored) over a 50-word vocabulary, `rows` positions at a time."""
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(23, 8, generator=generator, requires_grad=True)
    weight = torch.randn(50, 8, generator=generator, requires_grad=True)
    labels = torch.randint(0, 50, (23,), generator=generator)
    labels[5] = -100
    loss = projected_smoothed_loss(hidden, weight, labels, 0.1, rows=rows, matmul_dtype=matmul_dtype)
    (3.0 * loss).backward()  # the upstream gradient scales both
    return loss.detach(), hidden.grad, weight.grad


def test_chunks_of_any_size_sum_to_the_same_loss_and_gradients():
    results = [_projection(rows) for rows in (1, 7, 23, 100)]
    for result in results[1:]:
        torch.testing.assert_close(result, results[0])
    assert results[0][1][5].abs().max() == 0  # the ignored position gets no gradient


@pytest.mark.parametrize("kept", [chunked_loss.MAX_KEPT_GRADIENT, 0])  # ∂/∂W in one product, or chunk by chunk
def test_bf16_products_give_the_float32_gradients_to_bf16_precision(monkeypatch, kept):
    monkeypatch.setattr(chunked_loss, "MAX_KEPT_GRADIENT", kept)
    full, half = _projection(7), _projection(7, torch.bfloat16)
    for got, want in zip(half[1:], full[1:]):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


def test_sum_over_num_items_in_batch_and_bf16_products(make_model):
    model = make_model(**MODEL, label_smoothing=0.1).train()
    batch = _batch()
    with torch.no_grad():
        expected = model(**batch, num_items_in_batch=torch.tensor(1000)).loss
        assert training_loss(model, batch, torch.tensor(1000)).item() == pytest.approx(expected.item(), rel=1e-6)
        plain = training_loss(model, batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):  # products in bf16, sums in float32
            loss = training_loss(model, batch)
    assert loss.dtype == torch.float32 and loss.item() != plain.item()
    assert loss.item() == pytest.approx(plain.item(), rel=2e-2)


@pytest.mark.parametrize("bad", [300, -5])
def test_a_label_outside_the_vocabulary_is_refused(make_model, bad):
    batch = _batch()
    batch["labels"][2, 1] = bad
    with pytest.raises(ValueError, match=str(bad)):
        training_loss(make_model(**MODEL), batch)


def test_fast_path_is_for_the_model_itself_and_the_collators_keys(make_model):
    model = make_model(**MODEL)
    batch = _batch()
    assert fast_path_applies(model, batch)
    assert not fast_path_applies(model, {k: v for k, v in batch.items() if k != "labels"})
    assert not fast_path_applies(model, {**batch, "inputs_embeds": torch.zeros(1)})
    assert not fast_path_applies(torch.nn.Module(), batch)
