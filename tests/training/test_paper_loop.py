"""training/paper_loop.py: §5 written out ends where `VaswaniTrainer` ends, on the same batches."""

import pytest
import torch
from datasets import Dataset
from transformers import DataCollatorForSeq2Seq

from modeling_vaswani.model.label_smoothing import target_entropy
from modeling_vaswani.training import paper_loop
from modeling_vaswani.training.optimization import noam_lr
from tiny_data import MODEL, rows

STEPS, MAX_TOKENS, WARMUP = 20, 96, 8
DATA = Dataset.from_list(rows(40, longest=12))  # 40 pairs: several epochs in 20 steps


def test_the_loop_ends_on_the_trainers_weights(make_model, tokenizer, build_trainer, torch_threads):
    torch.set_num_threads(1)  # one thread adds up in one order: both runs do the same arithmetic
    by_hand, by_trainer = make_model(**MODEL), make_model(**MODEL)  # dropout 0, the same weights
    collate = DataCollatorForSeq2Seq(tokenizer, model=by_hand)

    log = paper_loop.train(by_hand, DATA, collate, MAX_TOKENS, STEPS, warmup_steps=WARMUP, seed=0, log_every=5)

    trainer = build_trainer(model=by_trainer, dataset=DATA, max_tokens=MAX_TOKENS, warmup_steps=WARMUP,
                            max_steps=STEPS, max_grad_norm=0.0, logging_steps=5)
    trainer.train()

    assert len(trainer.get_train_dataloader()) < STEPS  # the epochs turned over, both rearranged alike
    for (name, ours), theirs in zip(by_hand.state_dict().items(), by_trainer.state_dict().values()):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=5e-5, msg=name)  # formula vs fast gradient: rounding, grown by Adam
    assert any(not torch.equal(a, b) for a, b in zip(by_hand.parameters(), make_model(**MODEL).parameters()))

    logged = [entry for entry in trainer.state.log_history if "loss" in entry]
    assert [entry["step"] for entry in log] == [entry["step"] for entry in logged] == [5, 10, 15, 20]
    for ours, theirs in zip(log, logged):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-4)
        assert ours["learning_rate"] == pytest.approx(noam_lr(ours["step"], 16, WARMUP), rel=1e-6)
        assert ours["kl_loss"] == pytest.approx(ours["loss"] - target_entropy(0.1, by_hand.config.vocab_size))


def test_average_last_ends_on_the_mean_of_the_last_checkpoints(make_model, tokenizer, monkeypatch):
    model = make_model(**MODEL)
    collate = DataCollatorForSeq2Seq(tokenizer, model=model)
    kept = []
    average = paper_loop.average_state_dicts
    monkeypatch.setattr(paper_loop, "average_state_dicts", lambda dicts: kept.extend(dicts) or average(dicts))
    paper_loop.train(model, DATA, collate, MAX_TOKENS, 12, warmup_steps=WARMUP, average_last=3, checkpoint_every=2)
    assert len(kept) == 3  # steps 8, 10 and 12
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, sum(d[name] for d in kept) / 3)
