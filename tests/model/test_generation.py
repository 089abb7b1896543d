"""generate's settings at their edges: a sensible output or a ValueError naming the setting."""

import pytest
import torch

from checks import assert_names

SOURCE = torch.tensor([[5, 6, 2]])


def test_more_beams_than_vocabulary_gives_a_sensible_output(make_model):
    # transformers accepts it (beams past the vocabulary simply hold low-scoring hypotheses).
    model = make_model(vocab_size=12)
    output = model.generate(input_ids=SOURCE, num_beams=20, num_return_sequences=20, max_new_tokens=3)
    assert output.shape[0] == 20 and output.shape[1] <= 4 and output.min() >= 0 and output.max() < 12
    assert (output[:, 0] == model.config.decoder_start_token_id).all()


@pytest.mark.parametrize("value", [0, -1])
def test_max_new_tokens_below_one(tiny_model, value):
    with pytest.raises(ValueError) as error:
        tiny_model.generate(input_ids=SOURCE, max_new_tokens=value)
    assert_names(error, "max_new_tokens", value)


def test_missing_decoder_start_falls_back_to_bos_and_without_either_is_refused(make_model):
    model = make_model(decoder_start_token_id=None)  # transformers starts with bos_token_id
    output = model.generate(input_ids=SOURCE, num_beams=1, max_new_tokens=4)
    reference = make_model(decoder_start_token_id=model.config.bos_token_id)
    assert torch.equal(output, reference.generate(input_ids=SOURCE, num_beams=1, max_new_tokens=4))
    with pytest.raises(ValueError) as error:
        make_model(decoder_start_token_id=None, bos_token_id=None).generate(input_ids=SOURCE, max_new_tokens=2)
    assert_names(error, "decoder_start_token_id", "bos_token_id")
