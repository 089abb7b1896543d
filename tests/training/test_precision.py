"""precision: the precision a run records beside the CPU's bf16 support; --bf16 on the CPU is kept only where a
probe of the training step measures it faster."""

import logging
from types import SimpleNamespace

import pytest
import torch

from modeling_vaswani import machine
from modeling_vaswani.training import precision


def _args(bf16=True, world_size=1, fp16=False):
    mixed_precision = "bf16" if bf16 else "fp16" if fp16 else "no"
    return SimpleNamespace(bf16=bf16, fp16=fp16, mixed_precision=mixed_precision, device=torch.device("cpu"),
                           world_size=world_size)


@pytest.mark.parametrize("args, fp32, bf16, kept", [(_args(), 0.2, 0.1, True), (_args(), 0.1, 0.2, False),
                                                    (_args(bf16=False), None, None, False),  # nothing probed
                                                    (_args(world_size=2), None, None, True)])  # several processes
def test_bf16_is_kept_only_where_the_probe_measures_it_faster(monkeypatch, caplog, args, fp32, bf16, kept):
    probed = fp32 is not None
    monkeypatch.setattr(precision, "probe_step_seconds", lambda model, batch: {"fp32": fp32, "bf16": bf16}
                        if probed else pytest.fail("probed"))
    with caplog.at_level(logging.INFO):
        numbers = precision.probe_precision(args, None, lambda: {"labels": torch.ones(2, 3)} if probed
                                            else pytest.fail("batch built"))
    assert args.bf16 is kept and precision.training_precision(args) == ("bf16" if kept else "fp32")
    assert numbers == ({"precision_probe_ms": {"fp32": 1000 * fp32, "bf16": 1000 * bf16}} if probed else {})
    assert not probed or ("bf16" in caplog.text and ("float32" in caplog.text) is not kept)


@pytest.mark.parametrize("faster", ["fp32", "bf16"])
def test_the_trainer_computes_in_the_precision_the_probe_chose(monkeypatch, tmp_path, make_model, faster):
    """The Trainer's accelerator reads `mixed_precision`, fixed when the arguments were made, not `bf16`."""
    from transformers import Seq2SeqTrainingArguments

    from modeling_vaswani.training.trainer import VaswaniTrainer

    monkeypatch.setattr(precision, "probe_step_seconds", lambda model, batch: {"fp32": 0.1, "bf16": 0.05 if faster == "bf16" else 0.2})
    args = Seq2SeqTrainingArguments(output_dir=str(tmp_path), bf16=True, use_cpu=True, report_to="none")
    precision.probe_precision(args, None, lambda: {"labels": torch.ones(2, 3)})
    trainer = VaswaniTrainer(model=make_model(), args=args)
    assert (trainer.accelerator.mixed_precision, precision.training_precision(args)) == (
        {"fp32": ("no", "fp32"), "bf16": ("bf16", "bf16")}[faster])
    with trainer.accelerator.autocast():
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == {"fp32": torch.float32, "bf16": torch.bfloat16}[faster]


def test_training_precision_is_recorded_with_the_cpus_bf16_support(monkeypatch, caplog):
    monkeypatch.setattr(precision, "bf16_support", lambda: "none")
    with caplog.at_level(logging.INFO):
        assert precision.report_precision(_args()) == {"precision": "bf16", "cpu_bf16": "none"}
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "--bf16" in warning and "runs as asked" in warning
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert precision.report_precision(_args(bf16=False))["precision"] == "fp32"
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    assert precision.training_precision(_args(bf16=False, fp16=True)) == "fp16"
    assert machine.slow_bf16_warning(support="amx") is None


def test_the_probe_leaves_the_models_weights_gradients_and_random_numbers_alone(make_model):
    model = make_model(vocab_size=300, num_heads=2, num_layers=1, dropout=0.1).train()
    batch = {"input_ids": torch.randint(3, 300, (2, 5)), "attention_mask": torch.ones(2, 5, dtype=torch.long),
             "labels": torch.randint(3, 300, (2, 4))}
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    rng = torch.get_rng_state()
    seconds = precision.probe_step_seconds(model, batch, rounds=1)
    assert set(seconds) == {"fp32", "bf16"}
    assert torch.equal(torch.get_rng_state(), rng)
    for name, p in model.named_parameters():
        assert p.grad is None and torch.equal(p, before[name])


def test_first_batch_fits_the_budget(tokenizer):
    from transformers import DataCollatorForSeq2Seq

    rows = [{"input_ids": [5] * n, "attention_mask": [1] * n, "labels": [6] * n} for n in (4, 6, 8, 3, 9)]
    batch = precision.first_batch(rows, DataCollatorForSeq2Seq(tokenizer), max_tokens=24)
    assert batch["input_ids"].shape == (3, 8)  # a fourth row would make 4 × 8 > 24
    assert precision.first_batch(rows[4:], DataCollatorForSeq2Seq(tokenizer), max_tokens=2)["input_ids"].shape == (1, 9)
