"""Tests for modeling_vaswani.evaluation.cpu_threads (the thread rule for translating) and
modeling_vaswani.evaluation.progress (the progress bar), and the progress callable of translate."""

import io

import pytest
import torch

from checks import assert_names
from modeling_vaswani.evaluation.cpu_threads import (
    SMALL_MODEL_PARAMETERS,
    choose_threads,
    default_threads,
    idle_cores,
    use_threads,
)
from modeling_vaswani.evaluation.progress import count_lines, progress_bar
from modeling_vaswani.evaluation.translation import translate, translate_batches

SMALL, LARGE = SMALL_MODEL_PARAMETERS - 1, SMALL_MODEL_PARAMETERS


@pytest.fixture
def torch_threads():
    """Put PyTorch's thread count back after a test that sets it."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("cores,load", [(2, 0.0), (2, 4.5), (64, 0.0)])
def test_a_small_model_translates_on_one_thread_however_many_cores_are_idle(cores, load):
    assert default_threads(SMALL, cores=cores, load=load) == (1, "the model has under 20M parameters")


@pytest.mark.parametrize("cores,load,expected", [(2, 0.0, 2), (2, 0.6, 1), (2, 4.5, 1), (16, 3.2, 13), (16, 40.0, 1)])
def test_a_large_model_takes_the_idle_cores(cores, load, expected):
    threads, why = default_threads(LARGE, cores=cores, load=load)
    assert threads == expected == idle_cores(cores, load)
    assert f"of {cores}" in why


def test_omp_num_threads_wins_over_the_rule_and_threads_over_both():
    assert choose_threads(SMALL, env={"OMP_NUM_THREADS": "3"}, cores=8, load=0.0) == (3, "OMP_NUM_THREADS")
    assert choose_threads(LARGE, requested=2, env={"OMP_NUM_THREADS": "3"}) == (2, "--threads")
    assert choose_threads(LARGE, env={"OMP_NUM_THREADS": "0"}, cores=8, load=0.0)[0] == 8  # 0 is not a count
    assert choose_threads(SMALL, env={}, cores=8, load=0.0)[0] == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_a_thread_count_that_is_not_positive_is_refused(bad):
    with pytest.raises(ValueError) as error:
        choose_threads(SMALL, requested=bad)
    assert_names(error, "--threads", bad)


def test_use_threads_sets_pytorch_threads_by_the_model_size(tiny_model, torch_threads, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert use_threads(tiny_model) == (1, "the model has under 20M parameters")
    assert torch.get_num_threads() == 1
    assert use_threads(tiny_model, 2) == (2, "--threads") and torch.get_num_threads() == 2
    assert use_threads(object())[0] == 1  # another engine standing in for the model: no parameters()


class EchoModel:
    device = torch.device("cpu")

    def generate(self, input_ids, attention_mask, **kwargs):
        return input_ids.masked_fill(attention_mask == 0, 0)


def test_progress_counts_every_sentence_blank_lines_included(tokenizer):
    sentences = ["A dog runs.", "", "Two men.", "   ", "A woman sits on a bench.", "People walk."]
    done = []
    translate(EchoModel(), tokenizer, sentences, batch_size=2, progress=done.append)
    assert sum(done) == len(sentences) and done[0] == 2  # the blank lines first, then a call per batch
    done.clear()
    for _ in translate_batches(EchoModel(), tokenizer, iter(sentences), batch_size=4, progress=done.append):
        pass
    assert sum(done) == len(sentences)


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_the_bar_is_drawn_only_on_a_terminal_and_not_when_quiet():
    assert progress_bar(10, stream=io.StringIO()) is None  # a log file, a pipe, a test's capture
    assert progress_bar(10, stream=Terminal(), quiet=True) is None
    counted = []
    assert progress_bar(lambda: counted.append(1) or 10, stream=io.StringIO()) is None
    assert not counted  # the total is only counted for a bar that is drawn
    terminal = Terminal()
    bar = progress_bar(lambda: 10, "translating (1 thread)", stream=terminal)
    bar.update(4)
    bar.close()
    assert bar.total == 10 and "translating (1 thread)" in terminal.getvalue()


@pytest.mark.parametrize("content,lines", [(b"", 0), (b"a\n", 1), (b"a\nb", 2), (b"a\r\nb\r\n\n", 3)])
def test_count_lines(tmp_path, content, lines):
    path = tmp_path / "text"
    path.write_bytes(content)
    assert count_lines(path) == lines
