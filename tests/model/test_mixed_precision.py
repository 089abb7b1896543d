"""Mixed precision: bf16 training steps and generation stay finite (masks use the dtype's own minimum).

§3.2.3 masks illegal connections with −∞; the model adds finfo(dtype).min instead (masking.py).
Under `torch.autocast` the attention scores are bf16 while the hidden states stay float32, so the
mask must be built in the scores' dtype: these tests fail if a mask overflows, if a fully padded
position turns into NaN, or if the mask's dtype does not follow autocast.
"""

import pytest
import torch

from modeling_vaswani.training.optimization import create_adam

BF16 = torch.bfloat16
MODEL = dict(preset="tiny", vocab_size=60, dropout=0.1)  # with dropout: the training steps use it


def padded_batch():
    torch.manual_seed(1)
    input_ids = torch.randint(4, 60, (3, 7))
    attention_mask = torch.ones_like(input_ids)
    input_ids[0, 3:], attention_mask[0, 3:] = 0, 0
    labels = torch.randint(4, 60, (3, 5))
    labels[2, 2:] = -100
    return input_ids, attention_mask, labels


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_bf16_autocast_training_steps_stay_finite(make_model, impl):
    model = make_model(**MODEL, attn_implementation=impl).train()
    optimizer = create_adam(model.parameters(), lr=1e-3)
    input_ids, attention_mask, labels = padded_batch()
    before = model.model.shared.weight.detach().clone()
    for _ in range(3):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=BF16):
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        assert out.logits.dtype == BF16  # the projections really ran in bf16
        assert torch.isfinite(out.loss)
        out.loss.backward()
        for name, parameter in model.named_parameters():
            assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        optimizer.step()
    assert not torch.equal(before, model.model.shared.weight)  # the steps did update the weights


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("num_beams", [1, 4])
def test_bf16_autocast_generation_is_finite(make_model, impl, num_beams):
    model = make_model(**MODEL, attn_implementation=impl)
    input_ids, attention_mask, _ = padded_batch()
    with torch.autocast("cpu", dtype=BF16):
        out = model.generate(input_ids=input_ids, attention_mask=attention_mask, num_beams=num_beams,
                             min_new_tokens=5, max_new_tokens=5, output_scores=True, return_dict_in_generate=True)
    assert out.sequences.shape == (3, 6)
    assert ((out.sequences >= 0) & (out.sequences < 60)).all()
    for step in out.scores:
        assert not torch.isnan(step).any()  # −inf is allowed (e.g. </s> before min_new_tokens), NaN is not
    if num_beams > 1:
        assert torch.isfinite(out.sequences_scores).all()


def test_masks_follow_the_autocast_dtype(make_model):
    model = make_model(**MODEL, attn_implementation="sdpa").train()
    seen = []
    for attention in (model.model.encoder.layers[0].self_attn, model.model.decoder.layers[0].cross_attn):
        attention.register_forward_pre_hook(lambda _, args, kwargs: seen.append(kwargs["attention_mask"]),
                                            with_kwargs=True)
    input_ids, attention_mask, labels = padded_batch()
    with torch.autocast("cpu", dtype=BF16):
        model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    (encoder_bf16, cross_bf16, encoder_fp32, _) = seen
    for mask, dtype in ((encoder_bf16, BF16), (cross_bf16, BF16), (encoder_fp32, torch.float32)):
        assert mask.dtype == dtype
        assert mask[0, 0, 0, 3:].eq(torch.finfo(dtype).min).all()  # padding: the dtype's most negative number
        assert mask[0, 0, 0, :3].eq(0).all()


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_pure_bf16_model_trains_and_generates_without_nan(make_model, impl):
    model = make_model(**MODEL, attn_implementation=impl).to(BF16).train()
    input_ids, attention_mask, labels = padded_batch()
    attention_mask[1] = 0  # a sentence of padding only: every key hidden, the worst case for the mask
    loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
    assert torch.isfinite(loss)
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    out = model.eval().generate(input_ids=input_ids, attention_mask=attention_mask, num_beams=4,
                                min_new_tokens=4, max_new_tokens=4)
    assert out.shape == (3, 5)
