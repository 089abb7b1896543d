"""Fine-tuning the end-to-end run's tiny model through scripts/train.py and the stock Seq2SeqTrainer."""

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForSeq2SeqLM, DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments
from transformers.utils import logging as hf_logging

import modeling_vaswani  # noqa: F401  (registers the model with the Auto classes)
from modeling_vaswani.tokenizer_loading import load_tokenizer
from training_runs import _json, train

pytestmark = pytest.mark.slow
SUBJECTS = [("A man", "Ein Mann"), ("A woman", "Eine Frau"), ("A child", "Ein Kind"), ("A dog", "Ein Hund")]
VERBS = [("is running", "läuft"), ("is sitting", "sitzt"), ("is waiting", "wartet")]
PLACES = [("in the park.", "im Park."), ("on the street.", "auf der Straße."), ("at the beach.", "am Strand.")]
PAIRS = [(f"{s} {v} {p}", f"{sd} {vd} {pd}") for s, sd in SUBJECTS for v, vd in VERBS for p, pd in PLACES]


def _pair_loss(model, tokenizer):
    """The model's loss (§5.4, label-smoothed) on PAIRS."""
    batch = tokenizer([s for s, _ in PAIRS], text_target=[t for _, t in PAIRS], padding=True, return_tensors="pt")
    batch["labels"] = batch["labels"].masked_fill(batch["labels"] == tokenizer.pad_token_id, -100)
    with torch.no_grad():
        return model.eval()(**batch).loss.item()


def _with_train_script(base, tmp_path):
    """scripts/train.py on two local files; the fine-tuned folder keeps the base model's vocabulary."""
    (tmp_path / "a.en").write_text("".join(s + "\n" for s, _ in PAIRS), encoding="utf-8")
    (tmp_path / "a.de").write_text("".join(t + "\n" for _, t in PAIRS), encoding="utf-8")
    output = tmp_path / "fine-tuned"
    train("--model_name_or_path", base, "--train_source", tmp_path / "a.en", "--train_target", tmp_path / "a.de",
          "--max_steps", "15", "--warmup_steps_noam", "30", "--max_tokens", "512", "--save_strategy", "no",
          "--report_to", "none", "--disable_tqdm", "true", "--use_cpu", "true", "--output_dir", output)
    assert _json(output / "tokenizer.json")["model"]["vocab"] == _json(base / "tokenizer.json")["model"]["vocab"]
    return AutoModelForSeq2SeqLM.from_pretrained(output), load_tokenizer(output)


def _with_stock_trainer(base, tmp_path):
    """The Trainer's label smoothing takes `labels` from the model: the collator builds decoder_input_ids."""
    tokenizer, model = load_tokenizer(base), AutoModelForSeq2SeqLM.from_pretrained(base)
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path), label_smoothing_factor=0.1, learning_rate=3e-3, max_steps=15,
        per_device_train_batch_size=12, report_to="none", save_strategy="no", use_cpu=True, disable_tqdm=True,
        dataloader_pin_memory=False, seed=0)
    encoded = Dataset.from_dict(dict(tokenizer([s for s, _ in PAIRS], text_target=[t for _, t in PAIRS])))
    Seq2SeqTrainer(model=model, args=args, train_dataset=encoded, processing_class=tokenizer,
                   data_collator=DataCollatorForSeq2Seq(tokenizer, model=model)).train()
    return model, tokenizer


@pytest.mark.parametrize("fine_tune", [_with_train_script, _with_stock_trainer], ids=["train.py", "Seq2SeqTrainer"])
def test_fine_tuning_learns_the_new_pairs(base_run, tmp_path, fine_tune):
    hf_logging.set_verbosity_error()
    base, _ = base_run
    before = _pair_loss(AutoModelForSeq2SeqLM.from_pretrained(base), load_tokenizer(base))
    after = _pair_loss(*fine_tune(base, tmp_path))
    print(f"loss on the new pairs: {before:.3f} → {after:.3f}")
    assert after < before - 0.3
