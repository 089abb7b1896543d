"""Tests for modeling_vaswani.evaluation.greedy_decoding: the hand-written greedy decoder of §3 against `generate`."""

import pytest
import torch

from modeling_vaswani.evaluation.greedy_decoding import greedy_decode

EOS = 2
SOURCE = torch.tensor([[5, 6, 7, EOS, 0, 0], [8, 9, 10, 11, 12, EOS], [13, EOS, 0, 0, 0, 0]])
SOURCE_MASK = (SOURCE != 0).long()
CONFIG = dict(vocab_size=16, d_model=32, d_ff=64, num_heads=4, num_layers=2, dropout=0.0)
STEPS = 30


@pytest.fixture(scope="module")
def model(make_model):
    """A tiny model taught to copy its input, so decoding ends with </s> at different steps per row."""
    model = make_model(**CONFIG).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    labels = SOURCE.masked_fill(SOURCE == 0, -100)
    for _ in range(STEPS):
        loss = model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def test_greedy_decode_equals_generate_on_a_padded_batch(model):
    ours = greedy_decode(model, SOURCE, SOURCE_MASK)
    theirs = model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=1, do_sample=False)
    assert torch.equal(ours, theirs)
    assert torch.all(ours[:, 0] == model.config.decoder_start_token_id)
    # The copy was learned; rows end at different steps, so finished rows are padded while others go on.
    assert ours.tolist() == [[1, 5, 6, 7, EOS, 0, 0], [1, 8, 9, 10, 11, 12, EOS], [1, 13, EOS, 0, 0, 0, 0]]
    ends = [row.tolist().index(EOS) for row in ours]
    assert len(set(ends)) > 1
    assert ours.shape[1] <= 1 + SOURCE.shape[1] + 50


def test_greedy_decode_with_an_explicit_limit(model):
    ours = greedy_decode(model, SOURCE, SOURCE_MASK, max_new_tokens=3)
    theirs = model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=1, max_new_tokens=3)
    assert ours.shape[1] <= 4
    assert torch.equal(ours, theirs)


def test_finished_rows_are_padded(model):
    ours = greedy_decode(model, SOURCE, SOURCE_MASK)
    for row in ours:
        ends = (row == EOS).nonzero()
        if len(ends):
            assert torch.all(row[ends[0, 0] + 1:] == model.config.pad_token_id)


def test_default_limit_is_input_length_plus_50_like_generate(make_model):
    untrained = make_model(seed=1, **CONFIG)
    # Forbid </s> at the output layer, for both decoders alike: only the length limit can stop them.
    untrained.lm_head.register_forward_hook(
        lambda module, args, logits: logits.index_fill(-1, torch.tensor([EOS]), -1e9)
    )
    source, mask = SOURCE[:2], SOURCE_MASK[:2]
    ours = greedy_decode(untrained, source, mask)
    theirs = untrained.generate(input_ids=source, attention_mask=mask, num_beams=1)
    assert ours.shape == (2, 1 + 6 + 50)
    assert torch.equal(ours, theirs)
