"""Tests for modeling_vaswani.model.masking: the padding and causal masks of §3.2.3."""

import pytest
import torch

from modeling_vaswani.model.masking import causal_mask, decoder_self_attention_mask, padding_mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_padding_mask_is_zero_where_allowed_and_min_where_pad(dtype):
    keep = torch.tensor([[1, 1, 0], [1, 0, 0]])
    mask = padding_mask(keep, dtype)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == dtype
    low = torch.finfo(dtype).min
    assert mask[:, 0, 0].tolist() == [[0.0, 0.0, low], [0.0, low, low]]
    assert not torch.isinf(mask).any()  # finite, so a fully hidden row cannot give NaN


def test_causal_mask_is_lower_triangular_after_the_cached_positions():
    mask = causal_mask(4, 4, "cpu", torch.float32)
    assert mask.shape == (1, 1, 4, 4)
    allowed = mask[0, 0] == 0
    assert torch.equal(allowed, torch.ones(4, 4, dtype=torch.bool).tril())
    assert torch.all(mask[0, 0][~allowed] == torch.finfo(torch.float32).min)
    # Two new queries after three cached positions sit at absolute positions 3 and 4; one new query sees all.
    assert (causal_mask(2, 5, "cpu", torch.float32)[0, 0] == 0).tolist() == [[True] * 4 + [False], [True] * 5]
    assert torch.all(causal_mask(1, 7, "cpu", torch.float32) == 0)


def test_decoder_mask_combines_causal_and_padding():
    keep = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    mask = decoder_self_attention_mask(4, 4, keep, "cpu", torch.float32)
    assert mask.shape == (2, 1, 4, 4)
    allowed = mask[:, 0] == 0
    tril = torch.ones(4, 4, dtype=torch.bool).tril()
    assert torch.equal(allowed[0], tril)
    assert torch.equal(allowed[1], tril & torch.tensor([True, True, False, False]))
    # Without a padding mask it is just the causal mask.
    torch.testing.assert_close(decoder_self_attention_mask(4, 4, None, "cpu", torch.float32),
                               causal_mask(4, 4, "cpu", torch.float32))
    # After cached positions: key 1 is padding, the two new queries sit at positions 3 and 4.
    mask = decoder_self_attention_mask(2, 5, torch.tensor([[1, 0, 1, 1, 1]]), "cpu", torch.float32)
    assert (mask[0, 0] == 0).tolist() == [[True, False, True, True, False], [True, False, True, True, True]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_fully_padded_row_gives_no_nan(make_model, dtype, impl):
    model = make_model(vocab_size=30, dropout=0.1, attn_implementation=impl).to(dtype).train()  # dropout: training
    input_ids = torch.tensor([[5, 6, 7, 2], [0, 0, 0, 0]])
    attention_mask = torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]])  # the second source is all padding
    labels = torch.tensor([[8, 9, 2], [4, 2, -100]])
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels,
                decoder_attention_mask=torch.tensor([[1, 1, 1], [0, 0, 0]]))  # and so is its target
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    generated = model.eval().generate(input_ids=input_ids, attention_mask=attention_mask, num_beams=4,
                                      min_new_tokens=4, max_new_tokens=4)
    assert generated.shape == (2, 5)
