"""A row's dev perplexity is plain cross-entropy per reference subword, whatever the model's label smoothing."""

import math

import pytest
import torch

from benchmarks.table3.models import dev_perplexity


def test_dev_perplexity_is_plain_cross_entropy_whatever_the_smoothing(make_model, trained_tokenizer, multi30k_sample):
    tokenizer = trained_tokenizer
    model = make_model(vocab_size=len(tokenizer), label_smoothing=0.1, pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       decoder_start_token_id=tokenizer.bos_token_id)
    pairs = multi30k_sample[:6]["translation"]
    sources, targets = [pair["en"] for pair in pairs], [pair["de"] for pair in pairs]
    measured = dev_perplexity(model, tokenizer, sources, targets, batch_size=4)  # two batches, unequal
    encoded = tokenizer(sources, text_target=targets, padding=True, return_tensors="pt")
    labels = encoded["labels"].masked_fill(encoded["labels"] == tokenizer.pad_token_id, -100)
    with torch.no_grad():
        logits = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], labels=labels).logits
    expected = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    assert measured["subwords"] == int((labels != -100).sum())
    assert measured["ppl"] == pytest.approx(math.exp(expected.item()), rel=1e-4)  # not the smoothed loss
