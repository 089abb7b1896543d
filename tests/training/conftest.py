import pytest
from datasets import Dataset
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainingArguments
from transformers.utils import logging as hf_logging

from modeling_vaswani.training.trainer import VaswaniTrainer
from tiny_data import MODEL, rows


@pytest.fixture(autouse=True)
def _quiet():
    hf_logging.set_verbosity_error()


@pytest.fixture
def build_trainer(tmp_path, tokenizer, make_model):
    """A VaswaniTrainer on the CPU, no checkpoints unless asked; Trainer arguments as keywords."""

    def build(model=None, dataset=None, eval_dataset=None, max_tokens=None, noam_scale=1.0, warmup_steps=4,
              shuffle_buffer=40, **kwargs):
        args = Seq2SeqTrainingArguments(**{
            "output_dir": str(tmp_path), "report_to": "none", "save_strategy": "no", "use_cpu": True,
            "disable_tqdm": True, "dataloader_pin_memory": False, "per_device_train_batch_size": 8, "seed": 0,
            **kwargs})
        model = model if model is not None else make_model(**MODEL)
        return VaswaniTrainer(
            model=model, args=args, train_dataset=dataset if dataset is not None else Dataset.from_list(rows()),
            eval_dataset=eval_dataset, data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
            processing_class=tokenizer, max_tokens=max_tokens, noam_scale=noam_scale, warmup_steps=warmup_steps,
            shuffle_buffer=shuffle_buffer)

    return build
