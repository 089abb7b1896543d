"""The explorer's numbers come from the model, and bad input is refused with a message (no browser)."""

import pytest
import torch

from modeling_vaswani import shipped_model_path
from modeling_vaswani.evaluation.translation import load_translator
from modeling_vaswani.explorer.analysis import MAX_CHARACTERS, InputRejected, analyse, check_text
from modeling_vaswani.explorer.views import attention_matrix, beam_html, message_html, pieces_html
from modeling_vaswani.model.generation import TRANSFORMERS_BEAM_SEARCH

SENTENCE = "A man in a blue shirt is riding a bike down the street."


@pytest.fixture(scope="module")
def shipped():
    return load_translator(shipped_model_path(), "cpu")


@pytest.fixture(scope="module")
def analysis(shipped):
    return analyse(*shipped, SENTENCE)


def test_heatmap_is_the_models_cross_attention(shipped, analysis):
    model, tokenizer = shipped
    batch = tokenizer([SENTENCE], return_tensors="pt")
    output = model.generate(**batch)
    with torch.no_grad():
        weights = model(**batch, decoder_input_ids=output[:, :-1], output_attentions=True).cross_attentions
    for layer in (1, len(weights)):
        torch.testing.assert_close(attention_matrix(analysis, "cross", layer, "2"), weights[layer - 1][0, 1])
        torch.testing.assert_close(attention_matrix(analysis, "cross", layer, "average"), weights[layer - 1][0].mean(0))
    assert analysis.target_pieces == tokenizer.convert_ids_to_tokens(output[0, 1:].tolist())


# The two length penalties choose differently on this one (examples/12_greedy_vs_beam.py shows why).
DIFFERING = "A three man band is performing on stage."


@pytest.mark.parametrize("sentence", [SENTENCE, DIFFERING])
@pytest.mark.parametrize("search, settings", [("gnmt", {}), ("transformers", TRANSFORMERS_BEAM_SEARCH)])
def test_beam_view_ends_with_generates_output(shipped, sentence, search, settings):
    model, tokenizer = shipped
    result = analyse(model, tokenizer, sentence)
    generated = model.generate(**tokenizer([sentence], return_tensors="pt"), **settings)[0].tolist()
    assert result.sequences[search] == generated
    if search == "gnmt":  # the traced search: its last step holds what generate() returns
        assert result.trace[-1]["done"] == [True]
        assert [model.config.decoder_start_token_id, *result.trace[-1]["finished"][0][0][0]] == generated
    view = beam_html(result, search, tokenizer.decode)
    assert all(translation in view for translation in result.translations.values())
    assert (len(set(result.translations.values())) == 2) == (sentence == DIFFERING)


@pytest.mark.parametrize("text", ["", "   \n", "x" * 10_000, "?!... —", "我爱你", "Привет мир"])
def test_refused_text_gets_a_message(shipped, text):
    with pytest.raises(InputRejected):
        analyse(*shipped, text)


def test_length_limit():
    assert check_text("a" * MAX_CHARACTERS) == "a" * MAX_CHARACTERS
    with pytest.raises(InputRejected, match=str(MAX_CHARACTERS + 1)):
        check_text("a" * (MAX_CHARACTERS + 1))


def test_html_is_shown_as_text(shipped):
    model, tokenizer = shipped
    text = '<script>alert("x")</script> A dog <img src=x onerror=alert(1)> runs 我.'
    result = analyse(model, tokenizer, text)
    assert result.unknown == ["<", ">", "我"]
    for html in (pieces_html(result.source_pieces), beam_html(result, "gnmt", tokenizer.decode),
                 message_html(text)):
        assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in message_html(text)


def test_serves_this_machine_only_unless_told(repo_root, load_module):
    explore = load_module(repo_root / "scripts" / "explore.py")
    assert explore.parse_args([]).host == "127.0.0.1"
    assert explore.parse_args(["--host", "0.0.0.0"]).host == "0.0.0.0"
