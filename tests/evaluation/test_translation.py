"""evaluation/translation.py: text in, text out, in the input's order; evaluation/progress.py, its progress bar."""

import io
import itertools

import pytest
import torch

from checks import assert_names
from modeling_vaswani.evaluation.progress import count_lines, progress_bar
from modeling_vaswani.evaluation.translation import as_one_line, translate, translate_batches

FAST = dict(num_beams=1, max_new_tokens=6)  # decoding settings that keep an untrained model quick
SENTENCES = ["Two young men are playing soccer in a park with many people watching.", "A dog runs.", "",
             "A woman in a red dress sits on a bench.", "   ", "People walk down the street.", "\t"]
TRANSLATION_LOGGER = "modeling_vaswani.evaluation.translation"


def translate_stream(model, tokenizer, lines, **kwargs):
    """translate_batches' translations one by one, as scripts/translate.py writes them."""
    return itertools.chain.from_iterable(translate_batches(model, tokenizer, lines, **kwargs))


DOORS = {"translate": translate,
         "translate_batches": lambda model, tokenizer, lines, **kw: list(translate_stream(model, tokenizer, lines, **kw))}


class EchoModel:
    """Stands in for a model whose "translation" is its input, so every output names its source."""

    device = torch.device("cpu")

    def __init__(self):
        self.batches = []

    def generate(self, input_ids, attention_mask, **kwargs):
        self.batches.append(input_ids.shape[0])
        return input_ids.masked_fill(attention_mask == 0, 0)  # padding → <pad>, dropped when decoding


@pytest.mark.parametrize("batch_size", [1, 2, 64])
def test_translate_keeps_input_order_and_blank_lines_and_counts_every_line(tokenizer, batch_size):
    echo, done = EchoModel(), []
    # Batches are formed from the sentences sorted by length, i.e. out of input order.
    assert translate(echo, tokenizer, SENTENCES, batch_size=batch_size, progress=done.append) == [
        s.strip() for s in SENTENCES]
    assert sum(echo.batches) == 4 and max(echo.batches) == min(batch_size, 4)  # blank lines never reach the model
    assert sum(done) == len(SENTENCES) and done[0] == 3  # the blank lines first, then a call per batch
    done.clear()
    list(translate_batches(EchoModel(), tokenizer, iter(SENTENCES), batch_size=4, progress=done.append))
    assert sum(done) == len(SENTENCES)


def test_batched_equals_one_by_one_and_generate(translation_model, tokenizer):
    model = translation_model
    together = translate(model, tokenizer, SENTENCES, batch_size=2, **FAST)
    assert together == [translate(model, tokenizer, [s], **FAST)[0] for s in SENTENCES]
    assert together[2] == together[4] == together[6] == ""
    ids = model.generate(**tokenizer([SENTENCES[1]], return_tensors="pt"), **FAST)
    assert together[1] == tokenizer.decode(ids[0], skip_special_tokens=True).strip()
    stream = translate_stream(model, tokenizer, (s + "\n" for s in SENTENCES), batch_size=4, **FAST)
    assert not isinstance(stream, list) and list(stream) == together
    assert translate(model, tokenizer, []) == [] and translate(model, tokenizer, ["", " "]) == ["", ""]


@pytest.mark.parametrize("sentences, kwargs, names", [
    (["fine", None], {}, ["Sentence 1", "NoneType"]),
    (["fine", 3], {}, ["Sentence 1", "int"]),
    ([b"bytes"], {}, ["Sentence 0", "bytes"]),
    ("A single string", {}, ["single string"]),
    (["A dog."], {"batch_size": 0}, ["batch_size"]),
])
def test_bad_input_is_a_clear_error(translation_model, tokenizer, sentences, kwargs, names):
    with pytest.raises(ValueError) as error:
        translate(translation_model, tokenizer, sentences, **kwargs, **FAST)
    assert_names(error, *names)


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("lines, cut", [(["dog " * 200, "A dog."], 1), (["dog " * 200] * 3, 3), (["A dog."] * 3, 0),
                                        (["dog " * 17, "A dog."], 1), (["dog " * 25_000, "A dog."], 1)],
                         ids=["one-of-two", "all", "none", "just-over", "100KB"])
def test_long_sentences_are_cut_counted_and_said_once(make_model, tokenizer, caplog, door, lines, cut):
    # Learned positions fail past 64 tokens, so a translated 100KB line proves it was cut.
    model = make_model(vocab_size=len(tokenizer), positional_encoding="learned", max_position_embeddings=64)
    with caplog.at_level("WARNING", logger=TRANSLATION_LOGGER):  # batch_size=1: a stream of several batches
        DOORS[door](model, tokenizer, lines, max_source_length=16, num_beams=1, max_new_tokens=2, batch_size=1)
    warnings = [r.getMessage() for r in caplog.records if r.name == TRANSLATION_LOGGER and "were cut" in r.getMessage()]
    assert len(warnings) == (1 if cut else 0)
    if cut:
        assert_names(warnings[0], f"{cut} of {len(lines)} sentences", "16 tokens")


# Lines that show nothing: zero-width space, byte order mark, soft hyphen, word joiner, no-break and
# ideographic spaces, a control character.
INVISIBLE_LINES = ["\u200b", "\ufeff", "\u00ad", "\u200b\u2060 \u200b", "\u00a0\u3000", "\x00", "\u202f\t\u180e"]


@pytest.mark.parametrize("door", list(DOORS))
@pytest.mark.parametrize("line", INVISIBLE_LINES)
def test_a_line_of_invisible_characters_is_an_empty_line(tokenizer, door, line):
    echo = EchoModel()
    assert DOORS[door](echo, tokenizer, [line, "A dog."]) == ["", "A dog."]
    assert echo.batches == [1]  # never decoded


def test_translate_batches_is_lazy_splits_nothing_but_the_terminator_and_writes_one_line_each(tokenizer):
    echo = EchoModel()
    endless = itertools.cycle(["A dog runs.\n", "Two men.\n", "\n"])
    first = list(itertools.islice(translate_stream(echo, tokenizer, endless, batch_size=3), 5))
    assert first == ["A dog runs.", "Two men.", "", "A dog runs.", "Two men."]
    assert echo.batches == [2, 2]  # two batches of three lines read, the blank ones not decoded
    # Characters str.splitlines takes for a line break: lines end at "\n" (or "\r\n") only.
    lines = ["a\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029b\n", "c\r\n", "d"]
    assert len(list(translate_stream(echo, tokenizer, lines, batch_size=2))) == 3
    # A translation with a line break is written on one line.
    assert as_one_line("Ein Hund\nläuft\r\nschnell\r.") == "Ein Hund läuft schnell ."
    assert as_one_line("kein Umbruch\u2028hier") == "kein Umbruch\u2028hier"  # no reader of ours splits there


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_bar_is_drawn_only_on_a_terminal_and_not_when_quiet():
    counted = []
    assert progress_bar(lambda: counted.append(1) or 10, stream=io.StringIO()) is None  # a log, a pipe, a capture
    assert progress_bar(10, stream=Terminal(), quiet=True) is None
    assert not counted  # the total is only counted for a bar that is drawn
    terminal = Terminal()
    bar = progress_bar(lambda: 10, "translating (1 thread)", stream=terminal)
    bar.update(4)
    bar.close()
    assert bar.total == 10 and "translating (1 thread)" in terminal.getvalue()


@pytest.mark.parametrize("content,lines", [(b"", 0), (b"a\n", 1), (b"a\nb", 2), (b"a\r\nb\r\n\n", 3)])
def test_count_lines(tmp_path, content, lines):
    (tmp_path / "text").write_bytes(content)
    assert count_lines(tmp_path / "text") == lines
