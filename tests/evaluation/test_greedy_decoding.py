"""evaluation/greedy_decoding.py: the hand-written greedy decoder of §3 against `generate`."""

import pytest
import torch

from modeling_vaswani.evaluation.greedy_decoding import greedy_decode

EOS = 2
SOURCE = torch.tensor([[5, 6, 7, EOS, 0, 0], [8, 9, 10, 11, 12, EOS], [13, EOS, 0, 0, 0, 0]])
SOURCE_MASK = (SOURCE != 0).long()
CONFIG = dict(vocab_size=16, d_model=32, d_ff=64, num_heads=4, num_layers=2, dropout=0.0)


@pytest.fixture(scope="module")
def model(make_model):
    """A tiny model taught to copy its input, so decoding ends with </s> at different steps per row."""
    model = make_model(**CONFIG).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(30):
        loss = model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=SOURCE.masked_fill(SOURCE == 0, -100)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


@pytest.mark.parametrize("max_new_tokens", [None, 3])
def test_greedy_decode_equals_generate_on_a_padded_batch(model, max_new_tokens):
    ours = greedy_decode(model, SOURCE, SOURCE_MASK, max_new_tokens=max_new_tokens)
    limit = {} if max_new_tokens is None else {"max_new_tokens": max_new_tokens}
    assert torch.equal(ours, model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=1,
                                            do_sample=False, **limit))
    if max_new_tokens is None:  # the copy was learned; rows end at different steps, finished rows pad
        assert ours.tolist() == [[1, 5, 6, 7, EOS, 0, 0], [1, 8, 9, 10, 11, 12, EOS], [1, 13, EOS, 0, 0, 0, 0]]
    else:
        assert ours.shape[1] <= 4


def test_default_limit_is_input_length_plus_50_like_generate(make_model):
    untrained = make_model(seed=1, **CONFIG)
    # Forbid </s> at the output layer, for both decoders alike: only the length limit can stop them.
    untrained.lm_head.register_forward_hook(lambda module, args, logits: logits.index_fill(-1, torch.tensor([EOS]), -1e9))
    ours = greedy_decode(untrained, SOURCE[:2], SOURCE_MASK[:2])
    assert ours.shape == (2, 1 + 6 + 50)
    assert torch.equal(ours, untrained.generate(input_ids=SOURCE[:2], attention_mask=SOURCE_MASK[:2], num_beams=1))
