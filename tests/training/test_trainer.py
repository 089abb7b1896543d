"""`VaswaniTrainer` trains the way §5 says: §5.1 token-budget batches, §5.3 Adam and Eq. (3), §5.4 the
model's label-smoothed loss, §6.1 BLEU from generated ids."""

import numpy as np
import pytest
import torch
import transformers
from datasets import Dataset
from transformers import EvalPrediction, Seq2SeqTrainer, TrainerCallback

import modeling_vaswani.training.trainer as trainer_module
from modeling_vaswani.training.batching import TokenBudgetStream
from modeling_vaswani.model.label_smoothing import label_smoothed_cross_entropy, target_entropy
from modeling_vaswani.training.loss_report import LossSums
from modeling_vaswani.training.optimization import noam_lr
from modeling_vaswani.training.trainer import bleu_metrics_fn
from tiny_data import MODEL, VOCAB, epoch, rows


def data(n=120, seed=0):
    return Dataset.from_list(rows(n, seed))


def test_adam_settings_noam_rate_scale_and_the_last_steps_loss(build_trainer):
    trainer = build_trainer(max_steps=3, warmup_steps=50, noam_scale=2.0, logging_steps=2, learning_rate=5e-5)
    trainer.train()
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    assert type(optimizer) is torch.optim.Adam and optimizer.param_groups[0]["betas"] == (0.9, 0.98)
    # After k updates the rate is Eq. (3) at step k + 1, whatever --learning_rate says; the Trainer logs, at
    # step j, the rate update j was taken with: at step 2, and at the last step (3) though logging_steps is 2.
    assert trainer.lr_scheduler.get_last_lr()[0] == pytest.approx(2.0 * noam_lr(4, 16, 50), rel=1e-12)
    logged = [(entry["step"], entry["learning_rate"]) for entry in trainer.state.log_history if "loss" in entry]
    assert logged == [(step, pytest.approx(2.0 * noam_lr(step, 16, 50), rel=1e-6)) for step in (2, 3)]
    assert build_trainer(warmup_steps=None).warmup_steps == 4000


@pytest.mark.parametrize("kwargs, name", [(dict(label_smoothing_factor=0.1), "label_smoothing_factor"),
                                          (dict(max_tokens=0), "max_tokens")])
def test_refuses_the_trainers_own_label_smoothing_and_an_empty_budget(build_trainer, kwargs, name):
    with pytest.raises(ValueError, match=name):
        build_trainer(**kwargs)


def test_the_loss_is_the_label_smoothed_cross_entropy_taken_in_chunks(build_trainer, make_model, monkeypatch):
    """A training step takes chunked_loss.training_loss (its gradients: test_chunked_loss.py)."""
    model = make_model(**MODEL, label_smoothing=0.1)
    trainer = build_trainer(model=model)
    batch = trainer.data_collator(rows(6))
    assert (batch["labels"] == -100).any()  # padding is present and must be ignored
    calls, chunked = [], trainer_module.training_loss
    monkeypatch.setattr(trainer_module, "training_loss", lambda *args: calls.append(1) or chunked(*args))
    with torch.no_grad():
        logits = model.eval()(**{k: v for k, v in batch.items() if k != "labels"}).logits
        expected = label_smoothed_cross_entropy(logits, batch["labels"], 0.1).item()
        assert trainer.compute_loss(model, batch).item() == pytest.approx(expected, rel=1e-5) and calls == []
        assert trainer.compute_loss(model.train(), batch).item() == pytest.approx(expected, rel=1e-5)
    assert calls == [1]  # the sum over the accumulated batch's tokens: test_chunked_loss.py


def test_logs_name_the_losses_others_report(build_trainer, make_model, tokenizer):
    """Training entries: H(q, p) and H(q, p) − H(q). Evaluation: also −log p(y) and its perplexity, each the
    mean over every reference token, with or without generation; generating leaves the generation config as set."""
    model = make_model(**MODEL, label_smoothing=0.1)
    eval_data = data(10, seed=3)
    trainer = build_trainer(model=model, max_steps=2, logging_steps=1, per_device_eval_batch_size=4,
                            predict_with_generate=True, generation_max_length=4)
    trainer.compute_metrics = bleu_metrics_fn(tokenizer)  # generation runs, its passes carry no labels
    set_before = model.generation_config.to_diff_dict()
    trainer.train()
    floor = target_entropy(0.1, VOCAB)
    for entry in (e for e in trainer.state.log_history if "loss" in e):
        assert entry["kl_loss"] == pytest.approx(entry["loss"] - floor)

    metrics = trainer.evaluate(eval_dataset=eval_data)
    sums = LossSums(0.1, VOCAB)  # its four numbers against their formulas: test_loss_report.py
    with torch.no_grad(), sums.watching(model):
        model.eval()(**trainer.data_collator(list(eval_data)))  # all 10 in one batch: the mean over every token
    expected = sums.metrics("eval")
    assert len(expected) == 4 and {name: metrics[name] for name in expected} == pytest.approx(expected, rel=1e-5)
    assert "eval_bleu" in metrics and model.generation_config.to_diff_dict() == set_before
    assert model.generation_config.max_length is None and model.generation_config.top_k is None
    assert (model.generation_config.num_beams, model.generation_config.length_penalty) == (4, 0.6)
    logged = next(e for e in reversed(trainer.state.log_history) if "eval_loss" in e)
    assert logged["eval_ppl"] == metrics["eval_ppl"]


@pytest.mark.parametrize("streamed", [False, True], ids=["dataset", "stream"])
def test_token_budget_batches_share_the_steps_budget_cover_the_data_and_change_each_epoch(build_trainer, streamed):
    """120 tokens a step in 2 accumulated batches (as 2 processes): 60 a batch. A stream keeps a column the model
    ignores, and is arranged a shuffle buffer at a time."""
    data = (Dataset.from_list([{**row, "source_text": "pair"} for row in rows()]).to_iterable_dataset(num_shards=3)
            if streamed else Dataset.from_list(rows()))
    trainer = build_trainer(dataset=data, max_tokens=120, gradient_accumulation_steps=2, max_steps=3)
    assert (trainer.batches_per_step, trainer.max_tokens_per_batch) == (2, 60)
    loader = trainer.get_train_dataloader()
    epochs = [epoch(loader)]
    loader.set_epoch(1)  # each epoch a new arrangement (the Trainer calls set_epoch), still covering everything
    epochs.append(epoch(loader))
    for batches in epochs:
        assert sorted(i - 4 for *_, firsts in batches for i in firsts) == list(range(120))  # each once
        assert all(n * src <= 60 and n * tgt <= 60 for n, src, tgt, _ in batches)  # padded tokens a side
    assert [firsts for *_, firsts in epochs[1]] != [firsts for *_, firsts in epochs[0]]
    summary = trainer.batching_summary()
    assert (summary["max_tokens_per_step"], summary["max_tokens_per_batch"]) == (120, 60)
    assert 60 < summary["tokens_per_step"]["target"] <= 120  # padded tokens per step: most of the budget used
    if streamed:
        assert isinstance(loader.dataset, TokenBudgetStream) and summary["shuffle_buffer"] == 40
        assert summary["examples_in_first_buffer"] == 40 and summary["batches_in_first_buffer"] > 1
        assert 0 < summary["padding_efficiency"] <= 1
    else:
        sizes = [n for n, *_ in epochs[0]]
        assert len(set(sizes)) > 2 and max(sizes) > 8 and len(loader) == len(epochs[0])  # not the fixed 8
        one = build_trainer(max_tokens=120).batching_summary()  # the whole budget in one batch a step
        assert 60 < one["tokens_per_step"]["target"] <= 120
        assert abs(summary["steps_per_epoch"] - one["steps_per_epoch"]) <= 0.3 * one["steps_per_epoch"]


def test_without_a_budget_batches_are_of_8_sentences_and_the_data_seed_orders_budgeted_ones(build_trainer):
    assert {b["input_ids"].shape[0] for b in build_trainer().get_train_dataloader()} == {8}

    def order(seed):
        return [firsts for *_, firsts in epoch(build_trainer(max_tokens=120, data_seed=seed).get_train_dataloader())]

    assert order(3) == order(3) != order(4)


def test_bleu_metrics_fn_decodes_padding_marks(tokenizer):
    references = ["A dog runs across the green field.", "Zwei junge Mädchen spielen im Sand."]
    encoded = [tokenizer(text)["input_ids"] for text in references]
    width = max(map(len, encoded)) + 3
    # Labels are padded with -100; generated ids start with <s> and are padded with <pad>, or with -100
    # where the Trainer gathered batches of different widths.
    labels = np.array([ids + [-100] * (width - len(ids)) for ids in encoded])
    predictions = np.array([[tokenizer.bos_token_id] + ids + [-100] * (width - len(ids) - 1) for ids in encoded])
    predictions[0, len(encoded[0]) + 1] = tokenizer.pad_token_id
    metrics = bleu_metrics_fn(tokenizer)(EvalPrediction(predictions=predictions, label_ids=labels))
    assert metrics["bleu"] == pytest.approx(100.0) and metrics["chrf"] == pytest.approx(100.0)
    # gen_len counts the real generated tokens (<s>, the text, </s>), not the padding.
    assert metrics["gen_len"] == pytest.approx(np.mean([len(ids) + 1 for ids in encoded]))
    predictions[:, 1:4] = tokenizer.unk_token_id
    assert bleu_metrics_fn(tokenizer)(EvalPrediction(predictions=(predictions,), label_ids=labels))["bleu"] < 90.0


class _AskAtEveryStep(TrainerCallback):
    """Asks for an evaluation and a checkpoint at every step and epoch end, as a time budget's stop does."""

    def on_step_end(self, args, state, control, **kwargs):
        control.should_evaluate = control.should_save = True

    on_epoch_end = on_step_end


def test_resuming_warns_of_missing_weights_but_not_of_the_tied_embeddings(build_trainer, monkeypatch):
    trainer = build_trainer()
    warnings = []
    monkeypatch.setattr(transformers.trainer.logger, "warning", warnings.append)
    tied = sorted(trainer.model.all_tied_weights_keys)  # lm_head and both embeddings: saved as model.shared
    assert tied and "model.shared.weight" not in tied
    trainer._issue_warnings_after_load(torch.nn.modules.module._IncompatibleKeys(list(tied), []))
    assert warnings == []
    missing = "model.encoder.layers.0.feed_forward.w_1.weight"
    trainer._issue_warnings_after_load(torch.nn.modules.module._IncompatibleKeys([*tied, missing], []))
    assert len(warnings) == 1 and missing in warnings[0] and not any(key in warnings[0] for key in tied)


def test_one_step_is_evaluated_and_saved_once(build_trainer, monkeypatch):
    saved = []
    save = Seq2SeqTrainer._save_checkpoint
    monkeypatch.setattr(Seq2SeqTrainer, "_save_checkpoint",
                        lambda self, model, trial: saved.append(self.state.global_step) or save(self, model, trial))
    trainer = build_trainer(dataset=data(16), eval_dataset=data(8, seed=1), max_tokens=120, num_train_epochs=1,
                            eval_strategy="epoch", per_device_eval_batch_size=8)
    trainer.add_callback(_AskAtEveryStep)
    trainer.train()
    steps = trainer.state.global_step
    evaluated = [entry["step"] for entry in trainer.state.log_history if "eval_loss" in entry]
    # The last step was asked for twice (its end and the epoch's end), and is evaluated once.
    assert evaluated == saved == list(range(1, steps + 1))
    again = trainer.evaluate()  # a script's final evaluation: the same step, nothing new to score
    assert [entry["step"] for entry in trainer.state.log_history if "eval_loss" in entry] == evaluated
    assert again["eval_loss"] == next(e["eval_loss"] for e in trainer.state.log_history if e.get("step") == steps
                                      and "eval_loss" in e)
    assert trainer.evaluate(eval_dataset=data(4, seed=2))["eval_loss"] != again["eval_loss"]  # other data
