"""The work of scripts/train.py, §5 end to end: data and one shared BPE vocabulary (§5.1), the model (a Table 3
preset, a trained model to fine-tune or a checkpoint to resume), `VaswaniTrainer`, then the model folder, its
evaluation, §6.1's averaging of the last checkpoints and the one command to run next."""

import gc
import json
import logging
import shlex
import sys
import time
from pathlib import Path

import datasets
import torch
import transformers
from transformers import AutoModelForSeq2SeqLM, DataCollatorForSeq2Seq

from ...machine import describe_machine, hardware_line
from ...model.configuration_vaswani import PRESETS, VaswaniConfig
from ...model.modeling_vaswani import VaswaniForConditionalGeneration
from ...model.strict_json import read_json
from ...threads import use_threads
from ...tokenizer_loading import load_tokenizer
from ..allocator import keep_kernels
from ..checkpoint_averaging import average_checkpoints, check_resumable_checkpoint, complete_checkpoints
from ..data import in_memory, load_translation_dataset, select_first
from ..optimization import PRESET_WARMUP_STEPS
from ..precision import first_batch, probe_precision, report_precision
from ..run_clocks import run_clocks
from ..run_folder import claim_output_dir, is_main_launch, start_segment
from ..tokenization import train_tokenizer_for_dataset
from ..trainer import VaswaniTrainer, bleu_metrics_fn
from .arguments import DEFAULT_PRESET, DEFAULT_VOCAB_SIZE, REGULARISATION_FLAGS, SIZE_FLAGS, RecipeArguments

logger = logging.getLogger("train")  # the script's own log: its lines read "train: ..."
STREAM_VOCABULARY_PAIRS = 200_000  # a new vocabulary, with --streaming, is learned on the stream's first pairs


def check_resumed_model(options: RecipeArguments, checkpoint) -> None:
    config = read_json(Path(checkpoint) / "config.json")
    wanted = {name: (value, f"--preset {options.preset}") for name, value in PRESETS.get(options.preset, {}).items()
              if name in SIZE_FLAGS}  # name -> (value, the flag that asks for it)
    wanted.update({name: (value, f"--{name} {value}") for name, value in
                   options.given(*SIZE_FLAGS, *REGULARISATION_FLAGS).items()})
    for name, (value, flag) in wanted.items():
        if name in config and config[name] != value:
            raise ValueError(f"{flag} asks for {name}={value!r} but the checkpoint {checkpoint} has {config[name]!r}; "
                             "a resumed run keeps its model: leave the flag out.")


def load_data(options: RecipeArguments):
    data = load_translation_dataset(
        options.source_lang, options.target_lang, dataset_name=options.dataset_name,
        dataset_config_name=options.dataset_config_name, train_files=options.files("train"),
        validation_files=options.files("validation"), train_file=options.train_file,
        validation_file=options.validation_file, streaming=options.streaming)
    data["train"] = select_first(data["train"], options.max_train_samples)
    if "validation" in data:
        data["validation"] = select_first(data["validation"], options.max_eval_samples)
    return {name: data[name] for name in ("train", "validation") if name in data}  # test sets are for evaluate_model.py


def load_tokenizer_for(options: RecipeArguments, data):
    """The checkpoint's or the trained model's vocabulary, or §5.1's one learned on the training split."""
    if options.resume_from_checkpoint or options.model_name_or_path:
        return load_tokenizer(options.resume_from_checkpoint or options.model_name_or_path)
    pairs = select_first(data["train"], STREAM_VOCABULARY_PAIRS) if options.streaming else data["train"]
    return train_tokenizer_for_dataset(in_memory(pairs), options.source_lang, options.target_lang,
                                       vocab_size=options.vocab_size or DEFAULT_VOCAB_SIZE)


def build_model(options: RecipeArguments, tokenizer):
    """The model to train: the checkpoint's when resuming, a trained one to fine-tune, or a new one of a preset."""
    if options.resume_from_checkpoint:  # the Trainer then loads its weights and optimizer again
        return VaswaniForConditionalGeneration.from_pretrained(options.resume_from_checkpoint)
    regularisation = options.given(*REGULARISATION_FLAGS)
    if options.model_name_or_path:  # the package's own classes, never code shipped inside the folder
        return AutoModelForSeq2SeqLM.from_pretrained(options.model_name_or_path, trust_remote_code=False,
                                                     **regularisation)
    sizes = options.given(*SIZE_FLAGS)
    if sizes.get("share_embeddings") is False:  # the encoder's matrix its own; the decoder's stays the projection
        sizes["tie_word_embeddings"] = True
    config = VaswaniConfig.from_preset(
        options.preset or DEFAULT_PRESET, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id, **sizes, **regularisation)
    return VaswaniForConditionalGeneration(config)


def tokenize(data, tokenizer, options: RecipeArguments):
    def encode(batch):
        pairs = batch["translation"]
        encoded = tokenizer([pair[options.source_lang] for pair in pairs], max_length=options.max_source_length,
                            truncation=True)
        encoded["labels"] = tokenizer(text_target=[pair[options.target_lang] for pair in pairs],
                                      max_length=options.max_target_length, truncation=True)["input_ids"]
        return encoded

    began = time.monotonic()  # a streamed split is tokenized as it is read
    tokenized = {name: part.map(encode, batched=True, remove_columns=["translation"]) for name, part in data.items()}
    logger.info("tokenized %s in %.1f s", ", ".join(
        f"{len(part):,} {name} pairs" if isinstance(part, datasets.Dataset) else f"the {name} stream (as it is read)"
        for name, part in tokenized.items()), time.monotonic() - began)
    return tokenized


def log_batching(batching: dict, max_tokens: int) -> None:
    if "shuffle_buffer" in batching:  # a stream: what its first buffer gives
        head, about = (f" of a stream, formed {batching['shuffle_buffer']} examples at a time: "
                       f"{batching['batches_in_first_buffer']} from the first buffer; steps", "about ")
    else:
        head, about = (f": {batching['batches_per_epoch']} per epoch, {batching['batches_per_process']} per process; "
                       f"{batching['steps_per_epoch']} steps per epoch", "")
    tokens = batching["tokens_per_step"]
    logger.info("§5.1 token-budget batches%s of at most %d tokens per side (%d processes × %d accumulated batches "
                "of ≤ %d); tokens per step: %s%d source, %d target (padded), padding efficiency %.3f", head,
                max_tokens, batching["processes"], batching["gradient_accumulation_steps"],
                batching["max_tokens_per_batch"], about, tokens["source"], tokens["target"],
                batching["padding_efficiency"])


def average_last(trainer, wanted: int):
    """§6.1: the mean of the last --average_last checkpoints, in <output_dir>/averaged, and its score."""
    output = Path(trainer.args.output_dir)
    checkpoints = complete_checkpoints(output)[0][-wanted:]
    if len(checkpoints) < 2:
        logger.warning("--average_last %d: the run wrote %d checkpoint(s), nothing to average; train longer or save "
                       "more often (--save_every_minutes, --save_strategy steps --save_steps N).",
                       wanted, len(checkpoints))
        return None
    if len(checkpoints) < wanted:
        logger.warning("--average_last %d: the run wrote only %d checkpoints; averaging those %d.",
                       wanted, len(checkpoints), len(checkpoints))
    averaged = output / "averaged"
    if trainer.is_world_process_zero():
        average_checkpoints(checkpoints, averaged)
        logger.info("§6.1 averaged %s into %s", [c.name for c in checkpoints], averaged)
    trainer.accelerator.wait_for_everyone()
    if trainer.eval_dataset is not None and trainer.args.eval_strategy != "no":
        # Scored by the same Trainer (its processes, logs, reports), the averaged weights in place for a while.
        final = {name: tensor.clone() for name, tensor in trainer.model.state_dict().items()}
        trainer.model.load_state_dict(type(trainer.model).from_pretrained(averaged).state_dict())
        try:
            metrics = trainer.evaluate(metric_key_prefix="eval_averaged")
        finally:
            trainer.model.load_state_dict(final)
        trainer.log_metrics("eval_averaged", metrics)
        if trainer.is_world_process_zero():
            (averaged / "eval_results.json").write_text(json.dumps(metrics, indent=2))
    return averaged


def next_step(output_dir: Path, averaged) -> str:
    """The one command to run after this one."""
    if averaged is None and len(complete_checkpoints(output_dir)[0]) >= 2:
        return f"python scripts/average_checkpoints.py --run_dir {shlex.quote(str(output_dir))}"
    return f"python scripts/evaluate_model.py --model {shlex.quote(str(averaged or output_dir))} --split test"


def train(options: RecipeArguments, training_args, started: float):
    """§5 as the flags ask, then the model folder, its evaluation and §6.1's averaging; `started`: time.monotonic()
    when the program began."""
    keep_kernels()  # before any bf16 product, the probe's included: oneDNN reads it once (allocator.py)
    checkpoint = options.resume_from_checkpoint
    if checkpoint:  # the Trainer would otherwise load whatever a run stopped mid-save left behind
        check_resumable_checkpoint(checkpoint)
        check_resumed_model(options, checkpoint)
    data = load_data(options)
    tokenizer = load_tokenizer_for(options, data)
    # The Trainer seeds only when it is built; seed here so that --seed also fixes the initial weights.
    seed = transformers.enable_full_determinism if training_args.full_determinism else transformers.set_seed
    seed(training_args.seed)
    model = build_model(options, tokenizer)
    logger.info("model: %s parameters, config %s", f"{model.num_parameters():,}", model.config.to_diff_dict())
    threads, why = use_threads(model, options.threads, training=True)
    logger.info("CPU threads: %d per process (%s)", threads, why)

    tokenized = tokenize(data, tokenizer, options)
    if "validation" not in tokenized and training_args.eval_strategy != "no":
        logger.warning("No validation split: evaluation is switched off.")
        training_args.eval_strategy = "no"
    evaluating = training_args.eval_strategy != "no"
    clocks = run_clocks(options, training_args.output_dir, evaluating, start=started)
    collator = DataCollatorForSeq2Seq(tokenizer, model=model)
    # --bf16 on the CPU: kept only where the probe measures it faster; before the Trainer reads the precision.
    probe = probe_precision(training_args, model,
                            lambda: first_batch(tokenized["train"], collator, options.max_tokens or 4096))
    trainer = VaswaniTrainer(
        model=model, args=training_args, train_dataset=tokenized["train"], eval_dataset=tokenized.get("validation"),
        data_collator=collator, processing_class=tokenizer, compute_metrics=bleu_metrics_fn(tokenizer),
        max_tokens=options.max_tokens or None, shuffle_buffer=options.shuffle_buffer, noam_scale=options.noam_scale,
        warmup_steps=options.warmup_steps_noam or PRESET_WARMUP_STEPS[options.preset or DEFAULT_PRESET],
        callbacks=clocks.callbacks)
    facts = {"threads": threads, "threads_rule": why, "processes": training_args.world_size,
             "training_step": trainer.describe_step()}
    logger.info("training step: %s", facts["training_step"])
    facts.update(report_precision(training_args), **probe)  # precision, CPU bf16 support, the probe
    if options.max_tokens:
        facts["batching"] = trainer.batching_summary()
        log_batching(facts["batching"], options.max_tokens)
    if trainer.is_world_process_zero():
        machine = describe_machine()
        segment = {"command": "python scripts/train.py " + shlex.join(sys.argv[1:]), "hardware": hardware_line(machine)}
        about_model = {"parameters": f"{model.num_parameters():,}", "torch": machine["torch"],
                       "transformers": machine["transformers"]}
        start_segment(training_args.output_dir, {**segment, **facts}, about_model, resuming=bool(checkpoint))
    if evaluating and clocks.budget is not None:
        clocks.budget.time_one_evaluation(trainer)

    result = trainer.train(resume_from_checkpoint=checkpoint)
    if training_args.torch_compile:
        log_compilation()
    if clocks.budget is not None and clocks.budget.stopped_at is not None:
        logger.info("--max_train_minutes %g: stopped at step %d after %.1f minutes, leaving time for the closing "
                    "work", options.max_train_minutes, *clocks.budget.stopped_at)
    trainer.save_model(training_args.output_dir)  # model, tokenizer, generation config, code
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()
    if trainer.eval_dataset is not None and evaluating:
        metrics = trainer.evaluate()  # the last step's evaluation, if training already made it
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    averaged = average_last(trainer, options.average_last) if options.average_last else None
    output = Path(training_args.output_dir)
    if trainer.is_world_process_zero():
        clocks.record.record()  # the run's minutes, evaluation and averaging included
        print(f"saved the model in {output}; next: {next_step(output, averaged)}", file=sys.stderr)
    return trainer


def log_compilation() -> None:
    """--torch_compile: how many graphs were compiled and for how long (forwards, then backwards at their first call)."""
    from torch._dynamo.utils import compilation_time_metrics, counters

    seconds = sum(compilation_time_metrics.get("_compile.compile_inner", []))
    seconds += sum(compilation_time_metrics.get("backward._backward_impl", []))
    logger.info("torch.compile: %d graphs compiled in %.1f s", counters["stats"]["unique_graphs"], seconds)


def run(options: RecipeArguments, training_args, started: float):
    """`train` with the logs set up for a run and --output_dir locked for as long as it lasts."""
    # One process speaks for a data-parallel run; the others only warn.
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        level=logging.INFO if is_main_launch() else logging.WARNING)
    transformers.utils.logging.set_verbosity_warning()
    # The Trainer's own progress bar stays (--disable_tqdm); one per tokenized split or saved file would be noise.
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    lock = claim_output_dir(options) if is_main_launch() else None
    try:
        train(options, training_args, started)  # the trainer, and DDP's wrapper with it, gone on return
    finally:
        if lock is not None:
            lock.release()
    # Under torchrun: a process that exits with its process group alive can abort at interpreter exit (Gloo's
    # threads outlive Python). The group goes last: DDP's reducer destroys a group it holds last without
    # releasing the GIL, which Gloo's threads may be waiting for, and the process hangs.
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        gc.collect()  # the trainer's reference cycles, the wrapper among them
        torch.distributed.destroy_process_group()
