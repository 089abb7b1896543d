"""The command line of the training recipe (scripts/train.py): its flags, grouped by the section of
the paper they follow, their value types, and the Trainer flags it refuses by name (not from the paper).

Standard library only, like `cli`: scripts/train.py loads this module without the package, so
--help and a wrong value answer before torch and transformers are imported. The flags it does not
know are left for the Trainer (`arguments`); the combinations that could not run are
checked in `checks`.
"""

from __future__ import annotations

import argparse
import math

from ...cli import ArgumentParser, positive_int

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


def build_parser(description: str | None = None, usage: str | None = None) -> argparse.ArgumentParser:
    """The recipe's flags in four groups (the model, training, checkpoints and evaluation, data),
    each with the section of the paper it follows, then --help_all and the refused Trainer flags."""
    parser = ArgumentParser(
        description=description, usage=usage, allow_abbrev=False,
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
    add("--train_file", metavar="FILE", nargs="+",
        help="Training pairs in JSON lines (.json, .jsonl), csv or tsv files (or .gz, .bz2, .xz of them): a "
             "'translation' column of {LANG: sentence} rows, or one column per language named by its code (en, de).")
    add("--validation_file", metavar="FILE", nargs="+", help="Validation pairs in such files.")
    add("--streaming", action="store_true",
        help="Read the training data as training goes (a Hub dataset or local files larger than memory); "
             "needs --max_steps, since a stream has no length.")
    add("--shuffle_buffer", metavar="N", type=positive_int, default=10000,
        help="With --streaming: §5.1 batches are formed N examples at a time (sorted by length, cut at "
             "--max_tokens, shuffled); more groups lengths better and mixes more, in more memory.")
    add("--max_train_samples", metavar="N", type=positive_int, help="Only the first N training pairs.")
    add("--max_eval_samples", metavar="N", type=positive_int, help="Only the first N validation pairs.")
    add("--max_source_length", metavar="N", type=positive_int, default=256, help="Truncate longer sources (tokens).")
    add("--max_target_length", metavar="N", type=positive_int, default=256, help="Truncate longer targets (tokens).")

    parser.add_argument("--help_all", action="store_true",
                        help="List every flag, the Trainer's own included (slower: it loads transformers).")
    for name in REFUSED_FLAGS:
        parser.add_argument(f"--{name}", action=Refuse)
    return parser

