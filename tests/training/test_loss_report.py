"""training/loss_report.py: the loss on reference translations, each number others report named."""

import math

import pytest
import torch
import torch.nn.functional as F

from modeling_vaswani.model.label_smoothing import label_smoothed_cross_entropy, target_entropy
from modeling_vaswani.training.loss_report import LossSums, reference_losses

SOURCES = ["Two dogs are playing in the snow.", "A man rides a bike.", "A girl."]
REFERENCES = ["Zwei Hunde spielen im Schnee.", "Ein Mann fährt Fahrrad.", "Ein Mädchen sitzt auf einer Bank."]


def test_reference_losses_are_means_over_every_reference_token(translation_model, tokenizer):
    model = translation_model
    # Batches of 2 and 1 sentences: a mean of batch means would weigh the third sentence's tokens more.
    measured = reference_losses(model, tokenizer, SOURCES, REFERENCES, batch_size=2)

    encoded = tokenizer(SOURCES, text_target=REFERENCES, padding=True, return_tensors="pt")
    labels = encoded["labels"].masked_fill(encoded["labels"] == tokenizer.pad_token_id, -100)
    with torch.no_grad():
        logits = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], labels=labels).logits
    tokens = int((labels != -100).sum())
    smoothed = label_smoothed_cross_entropy(logits, labels, 0.1, reduction="sum").item() / tokens
    nll = F.cross_entropy(logits.transpose(1, 2), labels, reduction="sum").item() / tokens
    assert measured["reference_tokens"] == tokens == sum(len(tokenizer(text_target=r)["input_ids"]) for r in REFERENCES)
    floor = target_entropy(0.1, model.config.vocab_size)
    assert [measured[name] for name in ("loss", "kl_loss", "nll_loss", "ppl")] == pytest.approx(
        [smoothed, smoothed - floor, nll, math.exp(nll)], rel=1e-5)


def test_no_reference_tokens(translation_model, tokenizer):
    assert LossSums(0.1, 40).metrics("eval") == {}  # nothing seen: nothing claimed
    with pytest.raises(ValueError, match="no reference tokens"):
        reference_losses(translation_model, tokenizer, [], [])


def test_watching_counts_only_passes_given_labels(make_model):
    model = make_model()
    sums = LossSums(0.1, 40)
    labels = torch.tensor([[5, 6, 2], [7, 2, -100]])
    inputs = torch.tensor([[4, 5, 2], [8, 2, 0]])
    with sums.watching(model):
        model(input_ids=inputs, labels=labels)
        model(input_ids=inputs, decoder_input_ids=inputs)  # no labels: a generation step, say
    model(input_ids=inputs, labels=labels)  # after the block: not watched
    assert sums.tokens == 5
