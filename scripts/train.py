#!/usr/bin/env python
"""Train a Transformer the way §5 of "Attention Is All You Need" describes, with Seq2SeqTrainer.

With no arguments it trains the "small" preset on the embedded Multi30k English→German corpus and
writes a complete model folder (config, safetensors weights, tokenizer, generation config and the
model code for trust_remote_code) to outputs/multi30k-en-de:

    python scripts/train.py
    python scripts/train.py --preset base --max_tokens 25000 --num_train_epochs 20
    python scripts/train.py --source_lang de --target_lang en --average_last 5
    python scripts/train.py --dataset_name wmt14 --dataset_config_name de-en --source_lang en --target_lang de
    python scripts/train.py --model_name_or_path outputs/multi30k-en-de --train_source my.en --train_target my.de
    torchrun --nproc_per_node 2 scripts/train.py ...      # data-parallel (accelerate launch on GPUs)

Every `Seq2SeqTrainingArguments` flag works too (--bf16, --torch_compile, --resume_from_checkpoint,
--gradient_accumulation_steps, --report_to, ...).
"""

import json
import logging
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import transformers
from transformers import (
    AutoModelForSeq2SeqLM,
    DataCollatorForSeq2Seq,
    HfArgumentParser,
    Seq2SeqTrainingArguments,
    TrainerCallback,
)

import modeling_vaswani  # noqa: F401  (registers the model with the Auto classes)
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.training.checkpoint_averaging import average_checkpoints, check_resumable_checkpoint, find_checkpoints
from modeling_vaswani.cli import OneLineErrors, run_main
from modeling_vaswani.training.data import load_translation_dataset, select_first
from modeling_vaswani.training.optimization import PRESET_WARMUP_STEPS
from modeling_vaswani.training.run_record import RunClock, start_segment
from modeling_vaswani.training.tokenization import load_tokenizer, train_tokenizer_for_dataset
from modeling_vaswani.training.trainer import VaswaniTrainer, bleu_metrics_fn

logger = logging.getLogger("train")


@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "Start from this trained model (folder or Hub id) and its tokenizer."}
    )
    preset: str = field(default="small", metadata={"help": "Table 3 preset for a new model: base, big, small, tiny."})
    d_model: int | None = field(default=None, metadata={"help": "Override d_model of the preset."})
    d_ff: int | None = field(default=None, metadata={"help": "Override d_ff."})
    num_heads: int | None = field(default=None, metadata={"help": "Override h."})
    num_layers: int | None = field(default=None, metadata={"help": "Override N (both stacks)."})
    dropout: float | None = field(default=None, metadata={"help": "Override P_drop (§5.4)."})
    label_smoothing: float | None = field(default=None, metadata={"help": "Override ε_ls (§5.4)."})
    positional_encoding: str | None = field(default=None, metadata={"help": "sinusoidal or learned (Table 3 E)."})
    warmup_steps_noam: int | None = field(
        default=None, metadata={"help": "Eq. (3) warmup_steps (default: the preset's; 4000 for base and big)."}
    )
    noam_scale: float = field(default=1.0, metadata={"help": "Factor on the Eq. (3) learning rate."})
    vocab_size: int = field(default=8000, metadata={"help": "Shared BPE vocabulary size for a new tokenizer."})


@dataclass
class DataArguments:
    source_lang: str = field(default="en")
    target_lang: str = field(default="de")
    dataset_name: str | None = field(default=None, metadata={"help": "A Hub translation dataset, e.g. wmt14."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its config, e.g. de-en."})
    train_source: str | None = field(default=None, metadata={"help": "Local parallel text: source side."})
    train_target: str | None = field(default=None, metadata={"help": "Local parallel text: target side."})
    validation_source: str | None = field(default=None)
    validation_target: str | None = field(default=None)
    max_train_samples: int | None = field(default=None)
    max_eval_samples: int | None = field(default=None)
    max_source_length: int = field(default=256, metadata={"help": "Truncate longer sources (tokens)."})
    max_target_length: int = field(default=256, metadata={"help": "Truncate longer targets (tokens)."})
    max_tokens: int | None = field(
        default=4096, metadata={"help": "§5.1 token budget per batch and side (paper: 25000); 0 = fixed batches."}
    )
    average_last: int = field(default=0, metadata={"help": "§6.1: also average the last K checkpoints."})
    max_train_minutes: float | None = field(
        default=None, metadata={"help": "Stop (with a checkpoint) after this much training time."}
    )


TRAINING_DEFAULTS = dict(
    output_dir="outputs/multi30k-en-de",
    num_train_epochs=10,
    eval_strategy="epoch",
    save_strategy="epoch",
    logging_steps=50,
    predict_with_generate=True,
    generation_num_beams=1,
    report_to="tensorboard",
    save_total_limit=5,
    per_device_eval_batch_size=128,
)


class TimeBudget(TrainerCallback):
    """Ends training after a wall-clock budget, saving and evaluating at that step.

    Eq. (3) does not depend on the total number of steps, so stopping early leaves a model
    trained exactly as a longer run would have been up to that point.
    """

    def __init__(self, minutes: float):
        self.seconds = minutes * 60
        self.start = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        if time.monotonic() - self.start >= self.seconds:
            control.should_training_stop = True
            control.should_save = True
            control.should_evaluate = args.eval_strategy != "no"
        return control


class ArgumentParser(OneLineErrors, HfArgumentParser):
    """HfArgumentParser whose errors are one line (its usage block lists hundreds of flags)."""


def parse_args(argv=None):
    parser = ArgumentParser((ModelArguments, DataArguments, Seq2SeqTrainingArguments))
    parser.set_defaults(**TRAINING_DEFAULTS)
    return parser.parse_args_into_dataclasses(args=argv)


def _pair(source, target, what):
    if (source is None) != (target is None):
        raise ValueError(f"--{what}_source and --{what}_target go together; give both files or neither.")
    return (source, target) if source is not None else None


def load_data(data_args):
    data = load_translation_dataset(
        data_args.source_lang,
        data_args.target_lang,
        dataset_name=data_args.dataset_name,
        dataset_config_name=data_args.dataset_config_name,
        train_files=_pair(data_args.train_source, data_args.train_target, "train"),
        validation_files=_pair(data_args.validation_source, data_args.validation_target, "validation"),
    )
    if "train" not in data:
        raise ValueError("The dataset has no train split.")
    data["train"] = select_first(data["train"], data_args.max_train_samples)
    if "validation" in data:
        data["validation"] = select_first(data["validation"], data_args.max_eval_samples)
    return data


def build_model(model_args, tokenizer):
    if model_args.model_name_or_path:
        # The package's own classes, never code shipped inside the folder (see translation.load_translator).
        return AutoModelForSeq2SeqLM.from_pretrained(model_args.model_name_or_path, trust_remote_code=False)
    overrides = {
        name: getattr(model_args, name)
        for name in ("d_model", "d_ff", "num_heads", "num_layers", "dropout", "label_smoothing", "positional_encoding")
        if getattr(model_args, name) is not None
    }
    config = VaswaniConfig.from_preset(
        model_args.preset,
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
        **overrides,
    )
    return VaswaniForConditionalGeneration(config)


def tokenize(data, tokenizer, data_args):
    src, tgt = data_args.source_lang, data_args.target_lang

    def encode(batch):
        sources = [pair[src] for pair in batch["translation"]]
        targets = [pair[tgt] for pair in batch["translation"]]
        encoded = tokenizer(sources, max_length=data_args.max_source_length, truncation=True)
        encoded["labels"] = tokenizer(text_target=targets, max_length=data_args.max_target_length,
                                      truncation=True)["input_ids"]
        return encoded

    return data.map(encode, batched=True, remove_columns=data["train"].column_names, desc="Tokenizing")


def record_run(output_dir, model, resuming):
    """Add this invocation (command, machine) to the run's record, for the model card."""
    import platform
    import shlex

    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    segment = {
        "command": "python scripts/train.py " + shlex.join(sys.argv[1:]),
        "hardware": (torch.cuda.get_device_name() if torch.cuda.is_available()
                     else f"CPU: {cpu}, {torch.get_num_threads()} threads"),
    }
    about_model = {"parameters": f"{model.num_parameters():,}", "torch": torch.__version__,
                   "transformers": transformers.__version__}
    start_segment(output_dir, segment, about_model, resuming=resuming)


def main(argv=None):
    model_args, data_args, training_args = parse_args(argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    transformers.utils.logging.set_verbosity_warning()
    if model_args.model_name_or_path and not (
        Path(model_args.model_name_or_path).is_dir() or os.environ.get("HF_HUB_OFFLINE") != "1"
    ):
        raise FileNotFoundError(f"--model_name_or_path {model_args.model_name_or_path}: no such model folder.")
    if training_args.resume_from_checkpoint:
        # The Trainer would otherwise load whatever a run stopped mid-save left behind.
        check_resumable_checkpoint(training_args.resume_from_checkpoint)

    limit = training_args.save_total_limit
    if data_args.average_last > 1 and limit is not None and limit < data_args.average_last:
        raise ValueError(
            f"--average_last {data_args.average_last} needs at least that many checkpoints kept; "
            f"raise --save_total_limit (now {limit})."
        )
    data = load_data(data_args)
    if model_args.model_name_or_path:
        tokenizer = load_tokenizer(model_args.model_name_or_path)  # keep the model's own vocabulary
    elif training_args.resume_from_checkpoint:
        tokenizer = load_tokenizer(training_args.resume_from_checkpoint)  # the vocabulary it was trained with
    else:
        # §5.1: one BPE vocabulary shared by source and target, learned on the training split.
        tokenizer = train_tokenizer_for_dataset(data, data_args.source_lang, data_args.target_lang,
                                                vocab_size=model_args.vocab_size)
    # The Trainer seeds only when it is built; seed here so that --seed also fixes the initial weights.
    if training_args.full_determinism:
        transformers.enable_full_determinism(training_args.seed)
    else:
        transformers.set_seed(training_args.seed)
    model = build_model(model_args, tokenizer)
    logger.info("model: %s parameters, config %s", f"{model.num_parameters():,}", model.config.to_diff_dict())

    tokenized = tokenize(data, tokenizer, data_args)
    if "validation" not in tokenized and training_args.eval_strategy != "no":
        logger.warning("No validation split: evaluation is switched off.")
        training_args.eval_strategy = "no"
    trainer = VaswaniTrainer(
        model=model,
        args=training_args,
        train_dataset=tokenized["train"],
        eval_dataset=tokenized.get("validation"),
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        processing_class=tokenizer,
        compute_metrics=bleu_metrics_fn(tokenizer),
        max_tokens=data_args.max_tokens or None,
        noam_scale=model_args.noam_scale,
        warmup_steps=model_args.warmup_steps_noam or PRESET_WARMUP_STEPS[model_args.preset],
        callbacks=[RunClock(training_args.output_dir),
                   *([TimeBudget(data_args.max_train_minutes)] if data_args.max_train_minutes else [])],
    )
    if data_args.max_tokens:
        sampler = trainer.token_budget_sampler(trainer._remove_unused_columns(tokenized["train"]))
        # Data-parallel processes each take every world_size-th batch (the last few repeat to even out).
        logger.info("§5.1 token-budget batches: %d per epoch, %d per process, padding efficiency %.3f",
                    len(sampler), -(-len(sampler) // training_args.world_size), sampler.padding_efficiency)

    if trainer.is_world_process_zero():
        record_run(training_args.output_dir, model, resuming=bool(training_args.resume_from_checkpoint))
    result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)  # model, tokenizer, generation config, code
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()

    if data_args.average_last > 1 and trainer.is_world_process_zero():
        checkpoints = find_checkpoints(training_args.output_dir, data_args.average_last)
        averaged = Path(training_args.output_dir) / "averaged"
        average_checkpoints(checkpoints, averaged)
        logger.info("§6.1 averaged %s into %s", [c.name for c in checkpoints], averaged)
        if trainer.eval_dataset is not None:
            scorer = VaswaniTrainer(
                model=AutoModelForSeq2SeqLM.from_pretrained(averaged, trust_remote_code=False),
                args=training_args,
                eval_dataset=trainer.eval_dataset,
                data_collator=trainer.data_collator,
                processing_class=tokenizer,
                compute_metrics=trainer.compute_metrics,
            )
            metrics = scorer.evaluate(metric_key_prefix="eval_averaged")
            scorer.log_metrics("eval_averaged", metrics)
            (averaged / "eval_results.json").write_text(json.dumps(metrics, indent=2))

    if trainer.eval_dataset is not None and training_args.eval_strategy != "no":
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    return trainer


if __name__ == "__main__":
    run_main(main)
    sys.exit(0)
