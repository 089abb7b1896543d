"""evaluation/progress.py (the progress bar) and the progress callable of translate."""

import io

import pytest
import torch

from modeling_vaswani.evaluation.progress import count_lines, progress_bar
from modeling_vaswani.evaluation.translation import translate, translate_batches


class EchoModel:
    device = torch.device("cpu")

    def generate(self, input_ids, attention_mask, **kwargs):
        return input_ids.masked_fill(attention_mask == 0, 0)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_counts_every_sentence_blank_lines_included(tokenizer):
    sentences = ["A dog runs.", "", "Two men.", "   ", "A woman sits on a bench.", "People walk."]
    done = []
    translate(EchoModel(), tokenizer, sentences, batch_size=2, progress=done.append)
    assert sum(done) == len(sentences) and done[0] == 2  # the blank lines first, then a call per batch
    done.clear()
    list(translate_batches(EchoModel(), tokenizer, iter(sentences), batch_size=4, progress=done.append))
    assert sum(done) == len(sentences)


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
