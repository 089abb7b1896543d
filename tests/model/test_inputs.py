"""What forward and generate refuse before computing (a ValueError naming the argument and value), and controls."""

import pytest
import torch

from checks import assert_names

IDS = torch.tensor([[5, 6, 7, 2], [5, 6, 2, 0]])
PADDED = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
START = torch.ones(2, 1, dtype=torch.long)  # one decoder start token per sentence
LONG = torch.ones(1, 3, dtype=torch.long)


def run(model, entry, input_ids, **inputs):
    """forward with one decoder step, or generate."""
    if entry == "forward":
        return model(input_ids=input_ids, decoder_input_ids=torch.ones(max(len(input_ids), 1), 1, dtype=torch.long),
                     **inputs)
    return model.generate(input_ids=input_ids, max_new_tokens=2, num_beams=1, **inputs)


ADDITIVE_MASKS = {  # values other than 0 and 1, floating or integer, or 0 everywhere
    "minus-inf": torch.zeros(2, 4).masked_fill(PADDED == 0, float("-inf")),
    "integer-minus-1": (PADDED - 1),
    "additive-without-padding": torch.zeros(2, 4),  # all zeros: every position masked
}
# case: (input_ids, other inputs, what the error names); each through forward and generate
SOURCE_CASES = {
    **{f"id-{bad}": (torch.tensor([[bad, 2]]), {}, [f"Token id {bad}", "vocab_size=40"]) for bad in (40, -1)},
    "1-d": (torch.tensor([5, 6, 2]), {}, ["input_ids", "(3,)"]),
    "float": (torch.tensor([[5.0, 6.0]]), {}, ["input_ids", "torch.float32"]),
    "empty-batch": (torch.zeros(0, 3, dtype=torch.long), {}, ["input_ids", "empty batch"]),
    "zero-length": (torch.zeros(2, 0, dtype=torch.long), {}, ["input_ids", "length 0"]),
    "mask-shape": (torch.tensor([[5, 6, 7, 2]]), dict(attention_mask=LONG), ["attention_mask", "(1, 3)", "(1, 4)"]),
    **{f"additive-{name}": (IDS, dict(attention_mask=mask), ["attention_mask"]) for name, mask in ADDITIVE_MASKS.items()},
}


@pytest.mark.parametrize("entry", ["forward", "generate"])
@pytest.mark.parametrize("case", list(SOURCE_CASES))
def test_malformed_source(tiny_model, case, entry):
    input_ids, inputs, names = SOURCE_CASES[case]
    with pytest.raises(ValueError) as error:
        run(tiny_model, entry, input_ids, **inputs)
    assert_names(error, *names)
    if case.startswith("additive"):  # read the other way round: either values other than 0/1, or all 0
        assert "0 and 1" in str(error.value) or "0 everywhere" in str(error.value)


# case: (forward's inputs besides input_ids=IDS, what the error names)
FORWARD_CASES = {
    "no-source": (dict(input_ids=None, decoder_input_ids=START), ["input_ids"]),
    **{f"target-id-{bad}": (dict(decoder_input_ids=torch.tensor([[1, bad]] * 2)), [f"Token id {bad}"])
       for bad in (40, -1)},
    "zero-length-target": (dict(decoder_input_ids=torch.zeros(2, 0, dtype=torch.long)),
                           ["decoder_input_ids", "length 0"]),  # else: empty logits and a loss of nothing
    "decoder-mask-batch": (dict(decoder_input_ids=torch.ones(2, 3, dtype=torch.long),
                                decoder_attention_mask=torch.ones(3, 3).bool()), ["decoder_attention_mask", "(3, 3)"]),
    "decoder-mask-length": (dict(decoder_input_ids=torch.ones(2, 3, dtype=torch.long),
                                 decoder_attention_mask=torch.ones(2, 2)), ["decoder_attention_mask", "(2, 2)", "(2, 3)"]),
    "additive-decoder-mask": (dict(decoder_input_ids=torch.tensor([[1, 5]] * 2),
                                   decoder_attention_mask=torch.tensor([[0.0, float("-inf")]] * 2)),
                              ["decoder_attention_mask", "0 and 1"]),
    "both-source-inputs": (dict(inputs_embeds=torch.zeros(2, 4, 16), decoder_input_ids=START),
                           ["input_ids", "inputs_embeds", "not both"]),
    "both-target-inputs": (dict(decoder_input_ids=START, decoder_inputs_embeds=torch.zeros(2, 1, 16)),
                           ["decoder_input_ids", "decoder_inputs_embeds", "not both"]),
    "labels-fewer-rows": (dict(labels=torch.tensor([[5, 2]])), ["labels", "1 sentences", "holds 2"]),
    "labels-more-rows": (dict(labels=torch.tensor([[5, 2]] * 3)), ["labels", "3 sentences"]),
    "labels-1-d": (dict(labels=torch.tensor([5, 2])), ["labels", "(batch, length)"]),
    "labels-float": (dict(labels=torch.tensor([[5.0, 2.0]] * 2)), ["labels", "integer"]),
    "labels-unlike-decoder-inputs": (dict(labels=torch.tensor([[5, 2]] * 2), decoder_input_ids=torch.ones(2, 3).long()),
                                     ["labels", "(2, 2)", "(2, 3)"]),
    "labels-fewer-rows-than-embeds": (dict(labels=torch.tensor([[5, 2]]), inputs_embeds=torch.zeros(2, 4, 16),
                                           input_ids=None), ["labels", "1 sentences", "holds 2"]),
}


@pytest.mark.parametrize("case", list(FORWARD_CASES))
def test_malformed_forward_inputs(tiny_model, case):
    inputs, names = FORWARD_CASES[case]
    with pytest.raises(ValueError) as error:
        tiny_model(**{"input_ids": IDS, **inputs})
    assert_names(error, *names)


def test_decoder_attention_mask_after_cached_tokens(tiny_model):
    cache = tiny_model(input_ids=IDS[:1], decoder_input_ids=torch.ones(1, 2, dtype=torch.long), use_cache=True).cache
    with pytest.raises(ValueError) as error:  # after 2 cached tokens the mask covers 5
        tiny_model(input_ids=IDS[:1], decoder_input_ids=torch.tensor([[1, 5, 6]]), decoder_attention_mask=LONG,
                   cache=cache, use_cache=True)
    assert_names(error, "decoder_attention_mask", "(1, 3)", "(1, 5)")


def test_what_the_checks_let_through(tiny_model):
    """Controls: a ready-made 4-D decoder mask is taken as it is; 0/1 masks of any dtype agree."""
    ready = torch.zeros(1, 1, 3, 3).masked_fill(torch.ones(3, 3).triu(1).bool(), float("-inf"))
    target = torch.tensor([[1, 5, 6]])
    got = tiny_model(input_ids=IDS[:1], decoder_input_ids=target, decoder_attention_mask=ready)
    assert torch.allclose(got.logits, tiny_model(input_ids=IDS[:1], decoder_input_ids=target).logits, atol=1e-6)
    expected = tiny_model(input_ids=IDS, attention_mask=PADDED, decoder_input_ids=START)
    for mask in (PADDED.float(), PADDED.bool()):
        assert torch.allclose(expected.logits, tiny_model(input_ids=IDS, attention_mask=mask, decoder_input_ids=START).logits)


@pytest.mark.parametrize("side", ["source", "target", "generation"])
def test_longer_than_max_positions_with_learned_positions(make_model, side):
    model = make_model(positional_encoding="learned", max_position_embeddings=16)
    with pytest.raises(ValueError) as error:
        if side == "generation":  # no early end: decoding must reach position 16
            model.generate(input_ids=torch.tensor([[5, 6, 2]]), max_new_tokens=40, num_beams=1, eos_token_id=None)
        else:
            model(input_ids=torch.randint(4, 40, (1, 20 if side == "source" else 5)),
                  decoder_input_ids=torch.randint(4, 40, (1, 20 if side == "target" else 5)))
    # Named with the way out: sinusoids extend to any length.
    assert_names(error, "max_position_embeddings=16", "sinusoidal", *(["position 19"] if side != "generation" else []))
