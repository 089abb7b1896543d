#!/usr/bin/env python
"""Train a Transformer the way §5 of "Attention Is All You Need" describes, with Seq2SeqTrainer.

With no flags: the "small" preset (N = 3, d_model = 256, h = 4) on the embedded Multi30k
English→German corpus, 10 epochs, validation BLEU and a checkpoint after each epoch, and a model
folder in outputs/multi30k-en-de that loads with from_pretrained and translates.

    python scripts/train.py --preset tiny --max_train_minutes 5 --save_every_minutes 1 --average_last 3
    python scripts/train.py
    python scripts/train.py --preset base --max_tokens 25000 --save_every_minutes 10 --average_last 5
    python scripts/train.py --source_lang de --target_lang en --output_dir outputs/multi30k-de-en
    python scripts/train.py --dataset_name wmt14 --dataset_config_name de-en --preset base
    python scripts/train.py --model_name_or_path outputs/multi30k-en-de --train_source my.en --train_target my.de
    python scripts/train.py --output_dir outputs/multi30k-en-de --resume_from_checkpoint outputs/multi30k-en-de/checkpoint-900
    torchrun --nproc_per_node 2 scripts/train.py ...      # data-parallel; accelerate launch on GPUs

The paper's procedure is the default: §5.1 batches of about --max_tokens source and target
tokens per optimizer step (all processes together), §5.3 Adam (β1 0.9, β2 0.98, ε 1e-9) with the
Eq. (3) learning rate and no gradient clipping, §5.4 label smoothing 0.1, §6.1 checkpoint
averaging with --average_last. Every other Seq2SeqTrainingArguments flag works too (--bf16,
--gradient_accumulation_steps, --torch_compile, ...): --help_all lists them.
"""

import time

RUN_START = time.monotonic()  # --max_train_minutes and the run record count from here
RUN_START_WALL = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli  # noqa: E402
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli  # noqa: E402

logger = logging.getLogger("train")

PRESETS = ("base", "big", "small", "tiny")  # Table 3's two rows, and two of ours for CPUs and tests
DEFAULT_PRESET = "small"
DEFAULT_VOCAB_SIZE = 8000
SIZE_FLAGS = ("d_model", "d_ff", "num_heads", "num_layers", "positional_encoding")
REGULARISATION_FLAGS = ("dropout", "label_smoothing")

# Trainer flags this script shows in --help and sets itself; every other Seq2SeqTrainingArguments
# flag goes to the Trainer as given.
TRAINER_FLAGS = ("output_dir", "num_train_epochs", "max_steps", "max_grad_norm", "seed", "data_seed",
                 "save_strategy", "save_steps", "save_total_limit", "eval_strategy", "eval_steps",
                 "generation_num_beams", "per_device_eval_batch_size", "logging_steps",
                 "resume_from_checkpoint", "report_to")
# Set for every run, not shown.
FIXED_TRAINER_SETTINGS = dict(predict_with_generate=True, logging_first_step=True,
                              # Every parameter takes part in every step: no search for unused ones.
                              ddp_find_unused_parameters=False)

# Trainer flags that would do nothing here (or something other than the paper), refused by name.
REFUSED_FLAGS = {
    "learning_rate": "Eq. (3) sets the learning rate from d_model and the step; scale it with --noam_scale",
    "lr_scheduler_type": "the schedule is Eq. (3); see --warmup_steps_noam and --noam_scale",
    "lr_scheduler_kwargs": "the schedule is Eq. (3); see --warmup_steps_noam and --noam_scale",
    "warmup_steps": "Eq. (3)'s warm-up is --warmup_steps_noam",
    "warmup_ratio": "Eq. (3)'s warm-up is --warmup_steps_noam (a number of steps)",
    "label_smoothing_factor": "§5.4 smoothing is the model's own: use --label_smoothing",
    "optim": "§5.3 fixes the optimizer: Adam with β1 0.9, β2 0.98, ε 1e-9",
    "optim_args": "§5.3 fixes the optimizer: Adam with β1 0.9, β2 0.98, ε 1e-9",
    "adam_beta1": "§5.3 fixes β1 = 0.9",
    "adam_beta2": "§5.3 fixes β2 = 0.98",
    "adam_epsilon": "§5.3 fixes ε = 1e-9",
    "group_by_length": "§5.1 batches by length already (--max_tokens)",
}


# --- reading the command line (standard library only) ---------------------------------------

def _number(kind, low, low_included, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or value < low or (value == low and not low_included):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text}")
        return value

    return parse


positive_int = cli.positive_int
positive_float = _number(float, 0, False, "a positive number")
non_negative_int = _number(int, 0, True, "a whole number, 0 or more")
non_negative_float = _number(float, 0, True, "a number, 0 or more")


def probability(text):
    value = _number(float, 0, True, "a probability in [0, 1)")(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1), got {text}")
    return value


def boolean(text):
    if text.lower() in ("true", "yes", "1"):
        return True
    if text.lower() in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class Refuse(argparse.Action):
    """A Trainer flag that this script does not use: an error that says what to use instead."""

    def __init__(self, option_strings, dest, **kwargs):
        kwargs.update(nargs="?", help=argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is not used: {REFUSED_FLAGS[self.dest]}")


class ScriptParser(cli.ScriptParser, argparse.ArgumentParser):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = ScriptParser(
        description=__doc__, usage="python scripts/train.py [flags]", allow_abbrev=False,
        epilog="Refused, because this script sets what they would: --learning_rate (Eq. (3); scale it with\n"
               "--noam_scale), --warmup_steps and --warmup_ratio (--warmup_steps_noam), --lr_scheduler_type,\n"
               "--label_smoothing_factor (--label_smoothing), --optim and --adam_* (§5.3), --group_by_length\n"
               "(§5.1), and --per_device_train_batch_size unless --max_tokens 0.",
    )
    add = parser.add_argument_group("the model (§3, Table 3)").add_argument
    add("--preset", choices=PRESETS, help=f"Table 3 row for a new model (default: {DEFAULT_PRESET}; "
        "base = N 6, d_model 512, d_ff 2048, h 8; big doubles the widths; tiny is for tests).")
    add("--d_model", metavar="N", type=positive_int, help="Override the preset's d_model.")
    add("--d_ff", metavar="N", type=positive_int, help="Override d_ff.")
    add("--num_heads", metavar="N", type=positive_int, help="Override h.")
    add("--num_layers", metavar="N", type=positive_int, help="Override N (both stacks).")
    add("--positional_encoding", choices=("sinusoidal", "learned"), help="§3.5, or Table 3 row (E).")
    add("--dropout", metavar="P", type=probability, help="Override P_drop (§5.4).")
    add("--label_smoothing", metavar="P", type=probability, help="Override ε_ls (§5.4; the paper's is 0.1).")
    add("--vocab_size", metavar="N", type=positive_int,
        help=f"Shared BPE vocabulary learned for a new model (default: {DEFAULT_VOCAB_SIZE}; the paper's ≈ 37000).")
    add("--model_name_or_path", metavar="DIR",
        help="Fine-tune this trained model (folder or Hub id) with its own tokenizer "
        "and sizes; --dropout and --label_smoothing still apply.")

    add = parser.add_argument_group("training (§5)").add_argument
    add("--max_tokens", metavar="N", type=non_negative_int, default=4096,
        help="§5.1: padded source (and target) tokens per optimizer step, all processes and "
             "accumulated batches together (the paper: 25000); 0 = fixed batches of "
             "--per_device_train_batch_size sentences.")
    add("--warmup_steps_noam", metavar="N", type=positive_int,
        help="Eq. (3) warmup_steps (default: the preset's; 4000 for base and big, 1000 small, 100 tiny).")
    add("--noam_scale", metavar="X", type=positive_float, default=1.0, help="Factor on the Eq. (3) learning rate.")
    add("--max_grad_norm", metavar="X", type=non_negative_float, default=0.0,
        help="Clip gradients to this norm; 0 = no clipping, as in the paper (the Trainer's own default is 1.0).")
    add("--num_train_epochs", type=positive_float, default=10, metavar="X", help="Passes over the training data.")
    add("--max_steps", metavar="N", type=positive_int,
        help="Stop after this many optimizer steps (wins over --num_train_epochs).")
    add("--max_train_minutes", metavar="MIN", type=positive_float,
        help="Wall-clock budget for the whole run: loading, training, the last checkpoint, the final "
             "evaluation and --average_last all fit in it. Training stops early enough, with a checkpoint.")
    add("--seed", metavar="N", type=int, default=42, help="Seeds the initial weights and the data order.")
    add("--data_seed", metavar="N", type=int, help="Seeds the data order alone (default: --seed).")
    add("--threads", metavar="N", type=positive_int,
        help="CPU threads per process (default: OMP_NUM_THREADS if set, else 1 for a model under 20M "
             "parameters and all the process's cores above; small models lose to thread contention).")

    add = parser.add_argument_group("checkpoints, evaluation and logs (§6.1)").add_argument
    add("--output_dir", metavar="DIR", default="outputs/multi30k-en-de",
        help="Where the model folder and checkpoints go.")
    add("--overwrite_output_dir", metavar="BOOL", type=boolean, nargs="?", const=True, default=False,
        help="Replace an earlier run in --output_dir (its checkpoints, averaged/ and results are deleted).")
    add("--resume_from_checkpoint", metavar="DIR",
        help="Go on with a run from its checkpoint-<step> folder; the model is built from the checkpoint.")
    add("--save_every_minutes", metavar="MIN", type=positive_float,
        help="A checkpoint every this many minutes, and at the end (§6.1: every 10); replaces the "
             "epoch checkpoints unless --save_strategy is given too.")
    add("--save_strategy", choices=("no", "steps", "epoch", "best"), help="Trainer checkpoints (default: epoch).")
    add("--save_steps", metavar="N", type=positive_int,
        help="With --save_strategy steps: a checkpoint every this many steps.")
    add("--save_total_limit", metavar="N", type=positive_int, default=5,
        help="Checkpoints kept (the oldest are deleted).")
    add("--average_last", metavar="K", type=non_negative_int, default=0,
        help="§6.1: average the last K checkpoints into <output_dir>/averaged and score it (the paper: 5, big: 20).")
    add("--eval_strategy", choices=("no", "steps", "epoch"), default="epoch", help="Validation BLEU.")
    add("--eval_steps", metavar="N", type=positive_int,
        help="With --eval_strategy steps: evaluate every this many steps.")
    add("--generation_num_beams", metavar="N", type=positive_int, default=1,
        help="Beam size for validation BLEU during training (1 = greedy, fast; §6.1's 4 in evaluate_model.py).")
    add("--per_device_eval_batch_size", type=positive_int, default=128, metavar="N",
        help="Sentences per evaluation batch.")
    add("--logging_steps", metavar="N", type=positive_int, default=50,
        help="Log the loss every this many steps; the first and the last step are always logged.")
    add("--report_to", metavar="NAME", default="tensorboard",
        help="Where logs go besides the console: tensorboard, none, ...")

    add = parser.add_argument_group("data (§5.1)").add_argument
    add("--source_lang", default="en", metavar="LANG", help="Translate from this language.")
    add("--target_lang", default="de", metavar="LANG", help="... into this one.")
    add("--dataset_name", metavar="NAME",
        help="A Hub translation dataset, e.g. wmt14 (default: the embedded Multi30k).")
    add("--dataset_config_name", metavar="NAME", help="Its config, e.g. de-en.")
    add("--train_source", metavar="FILE", help="Local parallel text, one sentence a line: source side.")
    add("--train_target", metavar="FILE", help="... and target side.")
    add("--validation_source", metavar="FILE", help="Local validation text: source side.")
    add("--validation_target", metavar="FILE", help="... and target side.")
    add("--max_train_samples", metavar="N", type=positive_int, help="Only the first N training pairs.")
    add("--max_eval_samples", metavar="N", type=positive_int, help="Only the first N validation pairs.")
    add("--max_source_length", metavar="N", type=positive_int, default=256, help="Truncate longer sources (tokens).")
    add("--max_target_length", metavar="N", type=positive_int, default=256, help="Truncate longer targets (tokens).")

    parser.add_argument("--help_all", action="store_true",
                        help="List every flag, the Trainer's own included (slower: it loads transformers).")
    for name in REFUSED_FLAGS:
        parser.add_argument(f"--{name}", action=Refuse)
    return parser


def _given(options, name) -> bool:
    return getattr(options, name) is not None


def _pair(options, what):
    source, target = getattr(options, f"{what}_source"), getattr(options, f"{what}_target")
    if (source is None) != (target is None):
        raise ValueError(f"--{what}_source and --{what}_target go together; give both files or neither.")
    return (source, target) if source is not None else None


def check_model_source(options) -> None:
    """A model folder that is not there, and sizes that a trained model or a checkpoint already has."""
    name = options.model_name_or_path
    if name is not None and not Path(name).is_dir():
        looks_local = Path(name).is_absolute() or name.startswith(".") or name.count("/") != 1
        if looks_local or os.environ.get("HF_HUB_OFFLINE") == "1":
            raise FileNotFoundError(f"--model_name_or_path {name}: no such model folder.")
    if name is not None and not options.resume_from_checkpoint:
        for flag in (*SIZE_FLAGS, "preset", "vocab_size"):
            if _given(options, flag):
                raise ValueError(f"--{flag} sets up a new model; the model of --model_name_or_path {name} keeps "
                                 f"its own sizes and vocabulary. Leave --{flag} out.")


def check_options(options) -> None:
    """Every combination of flags that could not run as asked, before any work starts."""
    _pair(options, "train")
    _pair(options, "validation")
    check_model_source(options)
    if options.save_steps is not None and options.save_strategy != "steps":
        raise ValueError("--save_steps needs --save_strategy steps.")
    if options.eval_steps is not None and options.eval_strategy != "steps":
        raise ValueError("--eval_steps needs --eval_strategy steps.")
    if options.average_last == 1:
        raise ValueError("--average_last 1 averages nothing; give 2 or more (the paper: 5) or leave it out.")
    if options.average_last:
        if options.save_strategy == "no" and options.save_every_minutes is None:
            raise ValueError(f"--average_last {options.average_last} needs checkpoints; --save_strategy no writes "
                             "none (use --save_every_minutes or --save_strategy steps/epoch).")
        if options.save_total_limit < options.average_last:
            raise ValueError(f"--average_last {options.average_last} needs at least that many checkpoints kept; "
                             f"raise --save_total_limit (now {options.save_total_limit}).")
    if options.source_lang == options.target_lang:
        raise ValueError(f"--source_lang and --target_lang are both {options.source_lang!r}.")


def parse_options(argv=None) -> argparse.Namespace:
    """The script's flags, checked; the Trainer's other flags are kept in `options.trainer_argv`."""
    parser = build_parser()
    options, rest = parser.parse_known_args(argv)
    options.trainer_argv = rest
    if options.help_all:
        return options
    try:
        check_options(options)
    except ValueError as error:
        parser.error(cli.one_line(error).removesuffix("."))
    return options


def trainer_arguments(options):
    """Seq2SeqTrainingArguments from this script's flags and every other Trainer flag given."""
    import torch
    from transformers import HfArgumentParser, Seq2SeqTrainingArguments

    class TrainerParser(cli.ScriptParser, HfArgumentParser):
        pass

    parser = TrainerParser(Seq2SeqTrainingArguments, allow_abbrev=False,
                           usage="python scripts/train.py [flags]", description=__doc__)
    if options.help_all:
        parser.print_help()
        sys.exit(0)
    defaults = {name: getattr(options, name) for name in TRAINER_FLAGS}
    defaults["max_steps"] = options.max_steps or -1
    if options.save_strategy is None:
        # --save_every_minutes stands in for the epoch checkpoints, unless both are asked for.
        defaults["save_strategy"] = "no" if options.save_every_minutes else "epoch"
    defaults["save_steps"] = options.save_steps or 500
    defaults["eval_steps"] = options.eval_steps
    # On a machine without a GPU the Trainer must be told so, or torchrun's processes each train
    # alone (and DataLoader warns about pinned memory with no GPU to pin it for).
    defaults["use_cpu"] = not torch.accelerator.is_available()
    parser.set_defaults(**defaults, **FIXED_TRAINER_SETTINGS)
    training_args, unknown = parser.parse_args_into_dataclasses(args=options.trainer_argv,
                                                               return_remaining_strings=True)
    if unknown:
        flag = next((arg for arg in unknown if arg.startswith("-")), unknown[0])
        parser.error(f"unrecognized argument {flag}; --help_all lists every flag, the Trainer's included")
    if options.max_tokens and "--per_device_train_batch_size" in options.trainer_argv:
        parser.error("--per_device_train_batch_size is not used with a token budget: batches hold "
                     "--max_tokens tokens per step (give --max_tokens 0 for fixed batches)")
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched > 1 and training_args.world_size != launched:
        raise ValueError(f"launched as {launched} processes (WORLD_SIZE) but the Trainer runs "
                         f"{training_args.world_size}; leave --use_cpu as it is")
    return training_args


# --- the run folder ----------------------------------------------------------------------------

def is_main_launch() -> bool:
    """Whether this process is the only one, or the first of a torchrun/accelerate launch."""
    return os.environ.get("RANK", "0") == "0"


def claim_output_dir(options):
    """Lock --output_dir for this run and make sure no earlier run is in it (unless said so)."""
    from modeling_vaswani.training.run_record import RunLock, clear_earlier_run, earlier_run

    lock = RunLock(options.output_dir, flag="--output_dir")
    lock.acquire()
    try:
        found, latest = earlier_run(options.output_dir)
        if found and not options.resume_from_checkpoint:
            if not options.overwrite_output_dir:
                going_on = (f", or --resume_from_checkpoint {latest} to go on with it" if latest else "")
                raise ValueError(f"--output_dir {options.output_dir} holds an earlier run ({', '.join(found)}); "
                                 f"add --overwrite_output_dir to replace it{going_on}.")
            clear_earlier_run(options.output_dir)
    except BaseException:
        lock.release()
        raise
    return lock


# --- the work ------------------------------------------------------------------------------------

def load_data(options):
    from modeling_vaswani.training.data import load_translation_dataset, select_first

    data = load_translation_dataset(
        options.source_lang,
        options.target_lang,
        dataset_name=options.dataset_name,
        dataset_config_name=options.dataset_config_name,
        train_files=_pair(options, "train"),
        validation_files=_pair(options, "validation"),
    )
    if "train" not in data:
        raise ValueError("The dataset has no train split.")
    data["train"] = select_first(data["train"], options.max_train_samples)
    if "validation" in data:
        data["validation"] = select_first(data["validation"], options.max_eval_samples)
    for split in [name for name in data if name not in ("train", "validation")]:
        del data[split]  # test sets are for scripts/evaluate_model.py
    return data


def check_resumed_model(options, checkpoint) -> None:
    """Model flags given with --resume_from_checkpoint must agree with the checkpoint's model."""
    from modeling_vaswani.model.configuration_vaswani import PRESETS as PRESET_SIZES

    config = json.loads((Path(checkpoint) / "config.json").read_text(encoding="utf-8"))
    wanted = {}  # name -> (value, the flag that asks for it)
    if options.preset:
        preset = PRESET_SIZES[options.preset]
        wanted.update({name: (value, f"--preset {options.preset}") for name, value in preset.items() if name in SIZE_FLAGS})
    for name in (*SIZE_FLAGS, *REGULARISATION_FLAGS):
        if _given(options, name):
            wanted[name] = (getattr(options, name), f"--{name} {getattr(options, name)}")
    for name, (value, flag) in wanted.items():
        if name in config and config[name] != value:
            raise ValueError(f"{flag} asks for {name}={value!r} but the checkpoint {checkpoint} has {config[name]!r}; "
                             "a resumed run keeps its model: leave the flag out.")


def build_model(options, tokenizer):
    from transformers import AutoModelForSeq2SeqLM

    from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration

    regularisation = {name: getattr(options, name) for name in REGULARISATION_FLAGS if _given(options, name)}
    if options.resume_from_checkpoint:
        # The checkpoint's own model (the Trainer then loads its weights and optimizer again).
        return VaswaniForConditionalGeneration.from_pretrained(options.resume_from_checkpoint)
    if options.model_name_or_path:
        # The package's own classes, never code shipped inside the folder (see translation.load_translator).
        return AutoModelForSeq2SeqLM.from_pretrained(options.model_name_or_path, trust_remote_code=False,
                                                     **regularisation)
    sizes = {name: getattr(options, name) for name in SIZE_FLAGS if _given(options, name)}
    config = VaswaniConfig.from_preset(
        options.preset or DEFAULT_PRESET,
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
        **sizes,
        **regularisation,
    )
    return VaswaniForConditionalGeneration(config)


def tokenize(data, tokenizer, options):
    src, tgt = options.source_lang, options.target_lang

    def encode(batch):
        sources = [pair[src] for pair in batch["translation"]]
        targets = [pair[tgt] for pair in batch["translation"]]
        encoded = tokenizer(sources, max_length=options.max_source_length, truncation=True)
        encoded["labels"] = tokenizer(text_target=targets, max_length=options.max_target_length,
                                      truncation=True)["input_ids"]
        return encoded

    began = time.monotonic()
    tokenized = data.map(encode, batched=True, remove_columns=data["train"].column_names)
    logger.info("tokenized %s in %.1f s", ", ".join(f"{len(part):,} {name} pairs" for name, part in tokenized.items()),
                time.monotonic() - began)
    return tokenized


def record_run(output_dir, model, resuming, **facts):
    """Add this invocation (command, machine, threads, batching) to the run's record, for the model card."""
    from modeling_vaswani.machine import describe_machine, hardware_line
    from modeling_vaswani.training.run_record import start_segment

    machine = describe_machine()
    segment = {"command": "python scripts/train.py " + shlex.join(sys.argv[1:]), "hardware": hardware_line(machine),
               **facts}
    about_model = {"parameters": f"{model.num_parameters():,}", "torch": machine["torch"],
                   "transformers": machine["transformers"]}
    start_segment(output_dir, segment, about_model, resuming=resuming)


def estimate_evaluation_seconds(trainer) -> float:
    """Seconds one evaluation of the validation split takes, timed on its first batch.

    The model is untrained, so every translation runs to the length limit: an overestimate that
    the first real evaluation replaces.
    """
    dataset = trainer.eval_dataset
    size = min(len(dataset), trainer.args.per_device_eval_batch_size * trainer.args.world_size)
    began = time.monotonic()
    trainer.predict(dataset.select(range(size)), metric_key_prefix="timing")
    return (time.monotonic() - began) * math.ceil(len(dataset) / size)


def average_last(trainer, options):
    """§6.1: the mean of the last --average_last checkpoints, in <output_dir>/averaged, and its score."""
    from modeling_vaswani.training.checkpoint_averaging import average_checkpoints, complete_checkpoints

    output = Path(trainer.args.output_dir)
    checkpoints = complete_checkpoints(output)[0][-options.average_last:]
    if len(checkpoints) < 2:
        logger.warning("--average_last %d: the run wrote %d checkpoint(s), nothing to average; train longer or "
                       "save more often (--save_every_minutes, --save_strategy steps --save_steps N).",
                       options.average_last, len(checkpoints))
        return None
    if len(checkpoints) < options.average_last:
        logger.warning("--average_last %d: the run wrote only %d checkpoints; averaging those %d.",
                       options.average_last, len(checkpoints), len(checkpoints))
    averaged = output / "averaged"
    if trainer.is_world_process_zero():
        average_checkpoints(checkpoints, averaged)
        logger.info("§6.1 averaged %s into %s", [c.name for c in checkpoints], averaged)
    trainer.accelerator.wait_for_everyone()
    if trainer.eval_dataset is not None and trainer.args.eval_strategy != "no":
        # Scored by the same Trainer (its processes, logs and reports), with the averaged weights
        # in place of the final ones for as long as it takes.
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
    from modeling_vaswani.training.checkpoint_averaging import complete_checkpoints

    folder = shlex.quote(str(output_dir))
    if averaged is not None:
        return f"python scripts/evaluate_model.py --model {shlex.quote(str(averaged))} --split test"
    written = len(complete_checkpoints(output_dir)[0])
    if written >= 2:
        return f"python scripts/average_checkpoints.py --run_dir {folder}"
    return f"python scripts/evaluate_model.py --model {folder} --split test"


def train(options, training_args):
    import transformers
    from transformers import DataCollatorForSeq2Seq

    from modeling_vaswani.training.checkpoint_averaging import check_resumable_checkpoint
    from modeling_vaswani.training.optimization import PRESET_WARMUP_STEPS
    from modeling_vaswani.training.run_record import RunClock, SaveEveryMinutes, TimeBudget
    from modeling_vaswani.training.threads import choose_threads, use_threads
    from modeling_vaswani.training.tokenization import load_tokenizer, train_tokenizer_for_dataset
    from modeling_vaswani.training.trainer import VaswaniTrainer, bleu_metrics_fn

    checkpoint = options.resume_from_checkpoint
    if checkpoint:
        # The Trainer would otherwise load whatever a run stopped mid-save left behind.
        check_resumable_checkpoint(checkpoint)
        check_resumed_model(options, checkpoint)

    data = load_data(options)
    if checkpoint:
        tokenizer = load_tokenizer(checkpoint)  # the vocabulary it was trained with
    elif options.model_name_or_path:
        tokenizer = load_tokenizer(options.model_name_or_path)  # keep the model's own vocabulary
    else:
        # §5.1: one BPE vocabulary shared by source and target, learned on the training split.
        tokenizer = train_tokenizer_for_dataset(data, options.source_lang, options.target_lang,
                                                vocab_size=options.vocab_size or DEFAULT_VOCAB_SIZE)
    # The Trainer seeds only when it is built; seed here so that --seed also fixes the initial weights.
    if training_args.full_determinism:
        transformers.enable_full_determinism(training_args.seed)
    else:
        transformers.set_seed(training_args.seed)
    model = build_model(options, tokenizer)
    logger.info("model: %s parameters, config %s", f"{model.num_parameters():,}", model.config.to_diff_dict())
    threads, why = choose_threads(model.num_parameters(), options.threads)
    use_threads(threads)
    logger.info("CPU threads: %d per process (%s)", threads, why)

    tokenized = tokenize(data, tokenizer, options)
    if "validation" not in tokenized and training_args.eval_strategy != "no":
        logger.warning("No validation split: evaluation is switched off.")
        training_args.eval_strategy = "no"
    evaluating = training_args.eval_strategy != "no"
    callbacks = [RunClock(training_args.output_dir, start=RUN_START)]
    if options.save_every_minutes:
        callbacks.append(SaveEveryMinutes(options.save_every_minutes))
    budget = None
    if options.max_train_minutes:
        budget = TimeBudget(options.max_train_minutes, start=RUN_START,
                            evaluations_after=evaluating * (1 + bool(options.average_last)),
                            saves_after=1 + options.average_last)
        callbacks.append(budget)
    warmup = options.warmup_steps_noam or PRESET_WARMUP_STEPS[options.preset or DEFAULT_PRESET]
    trainer = VaswaniTrainer(
        model=model,
        args=training_args,
        train_dataset=tokenized["train"],
        eval_dataset=tokenized.get("validation"),
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        processing_class=tokenizer,
        compute_metrics=bleu_metrics_fn(tokenizer),
        max_tokens=options.max_tokens or None,
        noam_scale=options.noam_scale,
        warmup_steps=warmup,
        callbacks=callbacks,
    )
    facts = {"threads": threads, "threads_rule": why, "processes": training_args.world_size}
    if options.max_tokens:
        batching = trainer.batching_summary()
        facts["batching"] = batching
        logger.info(
            "§5.1 token-budget batches: %d per epoch, %d per process; %d steps per epoch of at most %d tokens "
            "per side (%d processes × %d accumulated batches of ≤ %d); tokens per step: %d source, %d target "
            "(padded), padding efficiency %.3f",
            batching["batches_per_epoch"], batching["batches_per_process"], batching["steps_per_epoch"],
            options.max_tokens, batching["processes"], batching["gradient_accumulation_steps"],
            batching["max_tokens_per_batch"], batching["tokens_per_step"]["source"],
            batching["tokens_per_step"]["target"], batching["padding_efficiency"])

    if trainer.is_world_process_zero():
        record_run(training_args.output_dir, model, resuming=bool(checkpoint), **facts)
    if budget is not None and evaluating:
        budget.evaluation_seconds = estimate_evaluation_seconds(trainer)
        logger.info("--max_train_minutes %g: the whole run, evaluation included (one evaluation ≈ %.0f s, "
                    "estimated from one batch)", options.max_train_minutes, budget.evaluation_seconds)
    result = trainer.train(resume_from_checkpoint=checkpoint)
    if budget is not None and budget.stopped_at is not None:
        logger.info("--max_train_minutes %g: stopped at step %d after %.1f minutes, leaving time for the closing work",
                    options.max_train_minutes, *budget.stopped_at)
    trainer.save_model(training_args.output_dir)  # model, tokenizer, generation config, code
    trainer.log_metrics("train", result.metrics)
    trainer.save_metrics("train", result.metrics)
    trainer.save_state()

    if trainer.eval_dataset is not None and evaluating:
        metrics = trainer.evaluate()  # the last step's evaluation, if training already made it
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
    averaged = average_last(trainer, options) if options.average_last else None

    output = Path(training_args.output_dir)
    if trainer.is_world_process_zero():
        callbacks[0].record()  # the run's minutes, evaluation and averaging included
        weights = output / "model.safetensors"
        if not weights.is_file() or weights.stat().st_mtime < RUN_START_WALL - 1:
            raise SystemExit(f"error: training ended but saved no model in {output}")
        print(f"saved the model in {output}; next: {next_step(output, averaged)}", file=sys.stderr)
    return trainer


def main(argv=None):
    options = parse_options(argv)
    training_args = trainer_arguments(options)
    # One process speaks for a data-parallel run; the others only warn.
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        level=logging.INFO if is_main_launch() else logging.WARNING)
    import datasets
    import transformers

    transformers.utils.logging.set_verbosity_warning()
    # The Trainer's own progress bar stays (--disable_tqdm); one bar per tokenized split and per
    # saved weights file would be noise.
    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    lock = claim_output_dir(options) if is_main_launch() else None
    try:
        return train(options, training_args)
    finally:
        if lock is not None:
            lock.release()


if __name__ == "__main__":
    cli.run_main(main)
