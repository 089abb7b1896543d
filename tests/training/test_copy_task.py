"""The copy task of examples/10_toy_copy_task.py: a model trained by §5's loop (paper_loop.py) must copy digit
strings it has never seen; a bug in the masks, the shift, the encodings, the loss or the optimizer shows here."""

import pytest
import torch

from modeling_vaswani.model.label_smoothing import target_entropy


@pytest.fixture(scope="module")
def copy_example(repo_root, load_module):
    return load_module(repo_root / "examples" / "10_toy_copy_task.py", "toy_copy_task")


@pytest.mark.slow
def test_copy_task_reaches_95_percent_exact_match(copy_example, tmp_path):
    model, tokenizer, log = copy_example.train_copy_model(seed=0)
    train_strings = copy_example.training_strings(0)
    held_out = copy_example.held_out_strings(200, train_strings)
    assert not set(held_out) & set(train_strings)

    accuracy = copy_example.exact_match(model, tokenizer, held_out)
    assert accuracy >= 0.95

    # The loss falls from about log V towards the label-smoothing floor H(q), never below it.
    losses = [entry["loss"] for entry in log]
    floor = target_entropy(model.config.label_smoothing, model.config.vocab_size)
    assert [entry["step"] for entry in log] == list(range(10, copy_example.STEPS + 1, 10))
    assert losses[0] > 2.0 and sum(losses[-5:]) / 5 < floor + 0.1 and min(losses) > floor - 0.01
    assert log[-1]["kl_loss"] == pytest.approx(losses[-1] - floor)

    copies = copy_example.copy_strings(model, tokenizer, held_out[:5])
    assert sum(c == s for c, s in zip(copies, held_out[:5])) >= 4

    copy_example.plot_training(log, model.config, copy_example.WARMUP_STEPS, tmp_path / "loss.png")
    assert (tmp_path / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_exact_match_counts_only_complete_copies(copy_example):
    """A model that never stops, or stops early, must score 0: the metric itself can fail."""
    tokenizer = copy_example.digit_tokenizer()
    strings = ["1 2 3 4", "5 6 7 8 9"]

    class Echo:
        """Emits <s>, the source digits, then `tail` (what comes after the copy)."""

        def __init__(self, tail):
            self.tail = tail

        def generate(self, input_ids, attention_mask, **kwargs):
            rows = []
            for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
                digits = [i for i, m in zip(ids, mask) if m and i != tokenizer.eos_token_id]
                rows.append([tokenizer.bos_token_id] + self.tail(digits))
            width = max(map(len, rows))
            return torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])

    eos = tokenizer.eos_token_id
    assert copy_example.exact_match(Echo(lambda d: d + [eos]), tokenizer, strings) == 1.0
    assert copy_example.exact_match(Echo(lambda d: d + d[:1]), tokenizer, strings) == 0.0  # never stops
    assert copy_example.exact_match(Echo(lambda d: d[:-1] + [eos]), tokenizer, strings) == 0.0  # one short
    assert copy_example.exact_match(Echo(lambda d: d + [d[0], eos]), tokenizer, strings) == 0.0  # one too many
