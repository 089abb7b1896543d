"""Tests for modeling_vaswani.evaluation.translation: text in, text out, in the input's order."""

import itertools

import pytest
import torch

from modeling_vaswani.evaluation.translation import load_translator, translate, translate_stream

FAST = dict(num_beams=1, max_new_tokens=6)  # decoding settings that keep an untrained model quick
SENTENCES = [
    "Two young men are playing soccer in a park with many people watching.",
    "A dog runs.",
    "",
    "A woman in a red dress sits on a bench.",
    "   ",
    "People walk down the street.",
]


@pytest.fixture
def translator(translation_model, tokenizer):
    return translation_model, tokenizer


class EchoModel:
    """Stands in for a model whose "translation" is its input, so every output names its source."""

    device = torch.device("cpu")

    def __init__(self):
        self.batches = []

    def generate(self, input_ids, attention_mask, **kwargs):
        self.batches.append(input_ids.shape[0])
        return input_ids.masked_fill(attention_mask == 0, 0)  # padding → <pad>, dropped when decoding


@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_translate_keeps_input_order_and_blank_lines(translator, batch_size):
    _, tokenizer = translator
    echo = EchoModel()
    # Batches are formed from the sentences sorted by length, i.e. out of input order.
    assert translate(echo, tokenizer, SENTENCES, batch_size=batch_size) == [s.strip() for s in SENTENCES]
    assert sum(echo.batches) == 4  # blank lines never reach the model
    assert max(echo.batches) == min(batch_size, 4)


def test_real_model_batched_equals_one_by_one(translator):
    model, tokenizer = translator
    together = translate(model, tokenizer, SENTENCES, batch_size=2, **FAST)
    one_by_one = [translate(model, tokenizer, [s], **FAST)[0] for s in SENTENCES]
    assert together == one_by_one
    assert together[2] == "" and together[4] == ""
    assert all(isinstance(t, str) for t in together)


def test_translate_matches_generate(translator):
    model, tokenizer = translator
    encoded = tokenizer([SENTENCES[1]], return_tensors="pt")
    ids = model.generate(**encoded, **FAST)
    assert translate(model, tokenizer, [SENTENCES[1]], **FAST) == [
        tokenizer.decode(ids[0], skip_special_tokens=True).strip()
    ]


def test_empty_input_gives_empty_output(translator):
    model, tokenizer = translator
    assert translate(model, tokenizer, []) == []
    assert translate(model, tokenizer, ["", " "]) == ["", ""]


@pytest.mark.parametrize("bad", [None, 3, b"bytes"])
def test_non_string_is_a_clear_error(translator, bad):
    model, tokenizer = translator
    with pytest.raises(ValueError, match=r"Sentence 1 is a .*not a string"):
        translate(model, tokenizer, ["fine", bad], **FAST)


def test_bad_batch_size_is_a_clear_error(translator):
    model, tokenizer = translator
    with pytest.raises(ValueError, match="batch_size"):
        translate(model, tokenizer, ["A dog."], batch_size=0)


def test_translate_stream_yields_the_same_as_translate(translator):
    model, tokenizer = translator
    expected = translate(model, tokenizer, SENTENCES, **FAST)
    lines = (s + "\n" for s in SENTENCES)  # as read from a file, lazily
    stream = translate_stream(model, tokenizer, lines, batch_size=4, **FAST)
    assert not isinstance(stream, list)
    assert list(stream) == expected


def test_translate_stream_is_lazy(translator):
    _, tokenizer = translator
    echo = EchoModel()
    endless = itertools.cycle(["A dog runs.\n", "Two men.\n", "\n"])
    first = list(itertools.islice(translate_stream(echo, tokenizer, endless, batch_size=3), 5))
    assert first == ["A dog runs.", "Two men.", "", "A dog runs.", "Two men."]
    assert echo.batches == [2, 2]  # two batches of three lines read, the blank ones not decoded


def test_load_translator_from_a_saved_folder(translator, tmp_path):
    model, tokenizer = translator
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded_model, loaded_tokenizer = load_translator(str(tmp_path), device="cpu")
    assert not loaded_model.training
    assert translate(loaded_model, loaded_tokenizer, SENTENCES[:2], **FAST) == translate(
        model, tokenizer, SENTENCES[:2], **FAST
    )
