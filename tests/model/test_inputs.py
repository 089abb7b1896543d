"""Tests for modeling_vaswani.model.inputs: what forward and generate refuse before computing.

Every refusal is a ValueError that names the offending argument and value; the controls beside
them show that the inputs the checks let through give the expected result.
"""

import pytest
import torch

from checks import assert_names
from modeling_vaswani import VaswaniModel

IDS = torch.tensor([[5, 6, 7, 2], [5, 6, 2, 0]])
PADDED = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
START = torch.ones(2, 1, dtype=torch.long)  # one decoder start token per sentence


def run(model, entry, input_ids, **inputs):
    """forward with one decoder step, or generate."""
    if entry == "forward":
        return model(input_ids=input_ids, decoder_input_ids=torch.ones(max(len(input_ids), 1), 1, dtype=torch.long),
                     **inputs)
    return model.generate(input_ids=input_ids, max_new_tokens=2, num_beams=1, **inputs)


def test_the_full_message_of_a_refused_input(tiny_model):
    """The one test that pins wording: what a user reads for a token id outside the vocabulary."""
    with pytest.raises(ValueError, match=r"^Token id 40 is outside the vocabulary \(vocab_size=40\)"):
        tiny_model(input_ids=torch.tensor([[5, 40, 2]]), decoder_input_ids=torch.tensor([[1]]))


@pytest.mark.parametrize("where,bad_id", [("source", 40), ("source", 1000), ("source", -1), ("target", 40),
                                          ("target", -1), ("generate", 40), ("generate", -1)])
def test_token_id_outside_the_vocabulary(tiny_model, where, bad_id):
    """Checked once, at the model's entry, for the source and the target ids."""
    with pytest.raises(ValueError) as error:
        if where == "generate":
            tiny_model.generate(input_ids=torch.tensor([[bad_id, 2]]), max_new_tokens=2)
        elif where == "source":
            tiny_model(input_ids=torch.tensor([[5, bad_id, 2]]), decoder_input_ids=torch.tensor([[1]]))
        else:
            tiny_model(input_ids=torch.tensor([[5, 2]]), decoder_input_ids=torch.tensor([[1, bad_id]]))
    assert_names(error, f"Token id {bad_id}", "vocab_size=40")


def test_no_source_at_all(tiny_model):
    with pytest.raises(ValueError) as error:
        tiny_model(decoder_input_ids=torch.tensor([[1]]))
    assert_names(error, "input_ids")


@pytest.mark.parametrize("input_ids,names", [
    (torch.tensor([5, 6, 2]), ["input_ids", "(3,)"]),
    (torch.tensor([[5.0, 6.0]]), ["input_ids", "torch.float32"]),
    (torch.zeros(0, 3, dtype=torch.long), ["input_ids", "empty batch"]),
    (torch.zeros(2, 0, dtype=torch.long), ["input_ids", "length 0"]),
], ids=["1-d", "float", "empty-batch", "zero-length"])
@pytest.mark.parametrize("entry", ["forward", "generate"])
def test_malformed_source_batch(tiny_model, input_ids, names, entry):
    with pytest.raises(ValueError) as error:
        run(tiny_model, entry, input_ids)
    assert_names(error, *names)


def test_zero_length_target(tiny_model):
    # Without the check the model returns empty logits and a loss of nothing.
    with pytest.raises(ValueError) as error:
        tiny_model(input_ids=torch.tensor([[5, 2]]), decoder_input_ids=torch.zeros(1, 0, dtype=torch.long))
    assert_names(error, "decoder_input_ids", "length 0")


@pytest.mark.parametrize("entry", ["forward", "generate"])
def test_attention_mask_of_the_wrong_shape(tiny_model, entry):
    with pytest.raises(ValueError) as error:
        run(tiny_model, entry, torch.tensor([[5, 6, 7, 2]]), attention_mask=torch.ones(1, 3, dtype=torch.long))
    assert_names(error, "attention_mask", "(1, 3)", "(1, 4)")


@pytest.mark.parametrize("mask,cached,names", [
    (torch.ones(2, 3, dtype=torch.long), 0, ["(2, 3)", "(1, 3)"]),  # another batch size
    (torch.ones(1, 2, dtype=torch.long), 0, ["(1, 2)", "(1, 3)"]),  # another length
    (torch.ones(3, 3).bool(), 0, ["(3, 3)", "(1, 3)"]),
    (torch.ones(1, 3, dtype=torch.long), 2, ["(1, 3)", "(1, 5)"]),  # after 2 cached tokens it covers 5
], ids=["batch", "length", "bool-batch", "cached"])
def test_decoder_attention_mask_of_the_wrong_shape(tiny_model, mask, cached, names):
    cache = None
    if cached:
        cache = tiny_model(input_ids=IDS[:1], decoder_input_ids=torch.ones(1, cached, dtype=torch.long),
                           use_cache=True).past_key_values
    with pytest.raises(ValueError) as error:
        tiny_model(input_ids=IDS[:1], decoder_input_ids=torch.tensor([[1, 5, 6]]), decoder_attention_mask=mask,
                   cache=cache, use_cache=cache is not None)
    assert_names(error, "decoder_attention_mask", *names)


def test_ready_made_decoder_mask_passes(tiny_model):
    """Control: a 4-D additive mask (B, 1, T, T) is ready-made and taken as it is."""
    ready = torch.zeros(1, 1, 3, 3).masked_fill(torch.ones(3, 3).triu(1).bool(), float("-inf"))
    got = tiny_model(input_ids=IDS[:1], decoder_input_ids=torch.tensor([[1, 5, 6]]), decoder_attention_mask=ready)
    expected = tiny_model(input_ids=IDS[:1], decoder_input_ids=torch.tensor([[1, 5, 6]]))
    assert torch.allclose(got.logits, expected.logits, atol=1e-6)


ADDITIVE_MASKS = {
    "minus-inf": torch.zeros(2, 4).masked_fill(PADDED == 0, float("-inf")),
    "finfo-min": torch.zeros(2, 4).masked_fill(PADDED == 0, torch.finfo(torch.float32).min),
    "minus-10000": torch.zeros(2, 4).masked_fill(PADDED == 0, -10000.0),
    "integer-minus-1": (PADDED - 1),
    "additive-without-padding": torch.zeros(2, 4),  # all zeros: every position masked
    "half-precision": torch.zeros(2, 4, dtype=torch.float16).masked_fill(PADDED == 0, float("-inf")),
}


@pytest.mark.parametrize("entry", ["forward", "generate"])
@pytest.mark.parametrize("case", list(ADDITIVE_MASKS))
def test_additive_attention_mask(tiny_model, case, entry):
    with pytest.raises(ValueError, match=r"attention_mask (holds values other than 0 and 1|is 0 everywhere)"):
        run(tiny_model, entry, IDS, attention_mask=ADDITIVE_MASKS[case])


def test_additive_decoder_attention_mask(tiny_model):
    with pytest.raises(ValueError) as error:
        tiny_model(input_ids=IDS[:1], decoder_input_ids=torch.tensor([[1, 5]]),
                   decoder_attention_mask=torch.tensor([[0.0, float("-inf")]]))
    assert_names(error, "decoder_attention_mask", "0 and 1")


@pytest.mark.parametrize("mask", [PADDED, PADDED.float(), PADDED.bool()], ids=["long", "float", "bool"])
def test_zero_one_masks_of_any_dtype_agree(tiny_model, mask):
    """Control: the 0/1 mask, as integers, floats or booleans, gives the same logits."""
    expected = tiny_model(input_ids=IDS, attention_mask=PADDED, decoder_input_ids=START)
    got = tiny_model(input_ids=IDS, attention_mask=mask, decoder_input_ids=START)
    assert torch.allclose(expected.logits, got.logits)


BOTH_INPUTS = {
    "encoder": (dict(input_ids=IDS, inputs_embeds=torch.zeros(2, 4, 16), decoder_input_ids=START),
                ["input_ids", "inputs_embeds"]),
    "decoder": (dict(input_ids=IDS, decoder_input_ids=START, decoder_inputs_embeds=torch.zeros(2, 1, 16)),
                ["decoder_input_ids", "decoder_inputs_embeds"]),
}


@pytest.mark.parametrize("side", list(BOTH_INPUTS))
@pytest.mark.parametrize("model_class", ["VaswaniModel", "VaswaniForConditionalGeneration"])
def test_ids_and_embeddings_both_given(tiny_model, side, model_class):
    model = tiny_model if model_class == "VaswaniForConditionalGeneration" else VaswaniModel(tiny_model.config)
    inputs, names = BOTH_INPUTS[side]
    with pytest.raises(ValueError, match="not both") as error:
        model(**inputs)
    assert_names(error, *names)


BAD_LABELS = {
    "fewer-rows": (dict(labels=torch.tensor([[5, 2]])), ["labels", "1 sentences", "holds 2"]),
    "more-rows": (dict(labels=torch.tensor([[5, 2]] * 3)), ["labels", "3 sentences"]),
    "one-dimensional": (dict(labels=torch.tensor([5, 2])), ["labels", "(batch, length)"]),
    "float": (dict(labels=torch.tensor([[5.0, 2.0]] * 2)), ["labels", "integer"]),
    "shape-unlike-decoder-inputs": (dict(labels=torch.tensor([[5, 2]] * 2),
                                         decoder_input_ids=torch.ones(2, 3, dtype=torch.long)),
                                    ["labels", "(2, 2)", "(2, 3)"]),
    "fewer-rows-than-embeds": (dict(labels=torch.tensor([[5, 2]]), inputs_embeds=torch.zeros(2, 4, 16),
                                    input_ids=None), ["labels", "1 sentences", "holds 2"]),
}


@pytest.mark.parametrize("case", list(BAD_LABELS))
def test_labels_that_do_not_fit_the_batch(tiny_model, case):
    inputs, names = BAD_LABELS[case]
    with pytest.raises(ValueError) as error:
        tiny_model(**{"input_ids": IDS, **inputs})
    assert_names(error, *names)


def test_labels_of_the_right_shape_give_a_loss(tiny_model):
    output = tiny_model(input_ids=IDS, labels=torch.tensor([[5, 2], [6, -100]]))
    assert output.loss is not None and torch.isfinite(output.loss)


def test_longer_than_max_positions_with_sinusoids_extrapolates(make_model):
    # §3.5: the sinusoids may let the model extrapolate; the table grows instead of failing.
    model = make_model(max_position_embeddings=16)
    logits = model(input_ids=torch.randint(4, 40, (2, 50)), decoder_input_ids=torch.randint(4, 40, (2, 30))).logits
    assert logits.shape == (2, 30, 40) and torch.isfinite(logits).all()


@pytest.mark.parametrize("side", ["source", "target", "generation"])
def test_longer_than_max_positions_with_learned_positions(make_model, side):
    model = make_model(positional_encoding="learned", max_position_embeddings=16)
    with pytest.raises(ValueError) as error:
        if side == "generation":  # no early end: decoding must reach position 16
            model.generate(input_ids=torch.tensor([[5, 6, 2]]), max_new_tokens=40, num_beams=1, eos_token_id=None)
        else:
            model(input_ids=torch.randint(4, 40, (1, 20 if side == "source" else 5)),
                  decoder_input_ids=torch.randint(4, 40, (1, 20 if side == "target" else 5)))
    assert_names(error, "max_position_embeddings=16")
    if side != "generation":
        assert_names(error, "position 19")
