"""The command line of scripts/train.py (not from the paper): the recipe's flags in the groups of the paper's
sections, each value checked once in `__post_init__`; every other flag goes to `Seq2SeqTrainingArguments`.
No torch until the Trainer's arguments are built, so --help and a wrong value answer at once.
"""

import argparse
import dataclasses
import math
import os
import textwrap
from pathlib import Path
from typing import Literal, get_type_hints

from transformers import HfArgumentParser

from ...cli import ScriptParser, looks_like_hub_id, one_line

DEFAULT_PRESET = "small"
DEFAULT_VOCAB_SIZE = 8000
SIZE_FLAGS = ("d_model", "d_ff", "num_heads", "num_layers", "positional_encoding", "share_embeddings")
REGULARISATION_FLAGS = ("dropout", "label_smoothing")  # probabilities
AT_LEAST_ZERO = ("max_tokens", "max_grad_norm", "average_last")  # every other number but the seeds is positive
GROUPS = {"preset": "the model (§3, Table 3)", "max_tokens": "training (§5)",  # a group's first flag: its title
          "output_dir": "checkpoints, evaluation and logs (§6.1)", "source_lang": "data (§5.1)"}
SCHEDULE = "the schedule is Eq. (3); see --warmup_steps_noam and --noam_scale"
ADAM = "§5.3 fixes the optimizer: Adam with β1 0.9, β2 0.98, ε 1e-9"
# Trainer flags that would do nothing here (or something other than the paper), refused by name.
REFUSED_FLAGS = {
    "learning_rate": "Eq. (3) sets the learning rate from d_model and the step; scale it with --noam_scale",
    "lr_scheduler_type": SCHEDULE, "lr_scheduler_kwargs": SCHEDULE,
    "warmup_steps": "Eq. (3)'s warm-up is --warmup_steps_noam",
    "warmup_ratio": "Eq. (3)'s warm-up is --warmup_steps_noam (a number of steps)",
    "label_smoothing_factor": "§5.4 smoothing is the model's own: use --label_smoothing",
    "optim": ADAM, "optim_args": ADAM,
    "adam_beta1": "§5.3 fixes β1 = 0.9", "adam_beta2": "§5.3 fixes β2 = 0.98",
    "adam_epsilon": "§5.3 fixes ε = 1e-9",
    "group_by_length": "§5.1 batches by length already (--max_tokens)",
}
EPILOG = textwrap.fill("Refused, because this script sets what they would (each error says what to use instead): "
                       + ", ".join(f"--{name}" for name in REFUSED_FLAGS)
                       + ", and --per_device_train_batch_size unless --max_tokens 0.", 100)
# Set for every run, not shown; every parameter takes part in every step: no search for unused ones.
FIXED_TRAINER_SETTINGS = dict(predict_with_generate=True, logging_first_step=True, ddp_find_unused_parameters=False)


def flag(default=None, help="", metavar=None):
    return dataclasses.field(default=default, metadata={"help": help, **({"metavar": metavar} if metavar else {})})


@dataclasses.dataclass
class RecipeArguments:
    preset: Literal["base", "big", "small", "tiny"] | None = flag(None, (
        f"Table 3 row for a new model (default: {DEFAULT_PRESET}; base = N 6, d_model 512, d_ff 2048, h 8; "
        "big doubles the widths; tiny is for tests)."))
    d_model: int | None = flag(None, "Override the preset's d_model.", "N")
    d_ff: int | None = flag(None, "Override d_ff.", "N")
    num_heads: int | None = flag(None, "Override h.", "N")
    num_layers: int | None = flag(None, "Override N (both stacks).", "N")
    positional_encoding: Literal["sinusoidal", "learned"] | None = flag(None, "§3.5, or Table 3 row (E).")
    share_embeddings: bool | None = flag(None, "§3.4: one matrix for both embeddings and the projection "
                                             "(default: true); false gives the encoder one of its own "
                                             "(German→English learns far faster so: docs/training).",
                                       "BOOL")
    dropout: float | None = flag(None, "Override P_drop (§5.4).", "P")
    label_smoothing: float | None = flag(None, "Override ε_ls (§5.4; the paper's is 0.1).", "P")
    vocab_size: int | None = flag(None, f"Shared BPE vocabulary of a new model (default: {DEFAULT_VOCAB_SIZE}; "
                                        "the paper's ≈ 37000).", "N")
    model_name_or_path: str | None = flag(None, "Fine-tune this trained model (folder or Hub id) with its own tokenizer "
                                                "and sizes; --dropout and --label_smoothing still apply.", "DIR")

    max_tokens: int = flag(4096, "§5.1: padded source (and target) tokens per optimizer step, all processes and "
                                 "accumulated batches together (the paper: 25000); 0 = fixed batches of "
                                 "--per_device_train_batch_size sentences.", "N")
    warmup_steps_noam: int | None = flag(None, "Eq. (3) warmup_steps (default: the preset's; 4000 for base and "
                                               "big, 1000 small, 100 tiny).", "N")
    noam_scale: float = flag(1.0, "Factor on the Eq. (3) learning rate.", "X")
    max_grad_norm: float = flag(0.0, "Clip gradients to this norm; 0 = no clipping, as in the paper.", "X")
    num_train_epochs: float = flag(10, "Passes over the training data.", "X")
    max_steps: int | None = flag(None, "Stop after this many optimizer steps (wins over --num_train_epochs).", "N")
    max_train_minutes: float | None = flag(None, "Wall-clock budget for the whole run, loading, last checkpoint, "
                                                 "evaluation and --average_last included.", "MIN")
    seed: int = flag(42, "Seeds the initial weights and the data order.", "N")
    data_seed: int | None = flag(None, "Seeds the data order alone (default: --seed).", "N")
    threads: int | None = flag(None, "CPU threads per process (default: OMP_NUM_THREADS if set, else 1 under 20M "
                                     "parameters and all the process's cores above).", "N")

    output_dir: str = flag("outputs/multi30k-en-de", "Where the model folder and checkpoints go.", "DIR")
    overwrite_output_dir: bool = flag(False, "Replace an earlier run in --output_dir (its checkpoints, averaged/ "
                                             "and results are deleted).", "BOOL")
    resume_from_checkpoint: str | None = flag(None, "Go on with a run from its checkpoint-<step> folder.", "DIR")
    save_every_minutes: float | None = flag(None, "A checkpoint every this many minutes and at the end (§6.1: 10); "
                                                  "replaces the epoch ones unless --save_strategy is given.", "MIN")
    save_strategy: Literal["no", "steps", "epoch", "best"] | None = flag(None, "Trainer checkpoints (default: epoch).")
    save_steps: int | None = flag(None, "With --save_strategy steps: a checkpoint every this many steps.", "N")
    save_total_limit: int = flag(5, "Checkpoints kept (the oldest are deleted).", "N")
    average_last: int = flag(0, "§6.1: average the last K checkpoints into <output_dir>/averaged and score it "
                                "(the paper: 5, big: 20).", "K")
    eval_strategy: Literal["no", "steps", "epoch"] = flag("epoch", "Validation BLEU.")
    eval_steps: int | None = flag(None, "With --eval_strategy steps: evaluate every this many steps.", "N")
    generation_num_beams: int = flag(1, "Beam size for validation BLEU during training (1 = greedy).", "N")
    per_device_eval_batch_size: int = flag(128, "Sentences per evaluation batch.", "N")
    logging_steps: int = flag(50, "Log the loss every this many steps (and at the first and last).", "N")
    report_to: str = flag("tensorboard", "Where logs go besides the console: tensorboard, none, ...", "NAME")

    source_lang: str = flag("en", "Translate from this language.", "LANG")
    target_lang: str = flag("de", "... into this one.", "LANG")
    dataset_name: str | None = flag(None, "A Hub translation dataset, e.g. wmt14 (default: the embedded Multi30k).",
                                    "NAME")
    dataset_config_name: str | None = flag(None, "Its config, e.g. de-en.", "NAME")
    train_source: str | None = flag(None, "Local parallel text, one sentence a line: source side.", "FILE")
    train_target: str | None = flag(None, "... and target side.", "FILE")
    validation_source: str | None = flag(None, "Local validation text: source side.", "FILE")
    validation_target: str | None = flag(None, "... and target side.", "FILE")
    train_file: list[str] | None = flag(None, (
        "Training pairs in JSON lines, csv or tsv files (or .gz, .bz2, .xz of them): a 'translation' column of "
        "{LANG: sentence} rows, or one column per language named by its code."), "FILE")
    validation_file: list[str] | None = flag(None, "Validation pairs in such files.", "FILE")
    streaming: bool = flag(False, "Read the training data as training goes (needs --max_steps).", "BOOL")
    shuffle_buffer: int = flag(10000, "With --streaming: §5.1 batches are formed N examples at a time.", "N")
    max_train_samples: int | None = flag(None, "Only the first N training pairs.", "N")
    max_eval_samples: int | None = flag(None, "Only the first N validation pairs.", "N")
    max_source_length: int = flag(256, "Truncate longer sources (tokens).", "N")
    max_target_length: int = flag(256, "Truncate longer targets (tokens).", "N")

    def __post_init__(self):
        for name, value in vars(self).items():  # every number but the seeds
            if type(value) not in (int, float) or name in ("seed", "data_seed"):
                continue
            whole = type(value) is int
            if name in REGULARISATION_FLAGS:
                what, bad = "a probability in [0, 1)", not 0 <= value < 1
            elif name in AT_LEAST_ZERO:
                what, bad = "a whole number, 0 or more" if whole else "a number, 0 or more", value < 0
            else:
                what, bad = "a positive integer" if whole else "a positive number", value <= 0
            if bad or not math.isfinite(value):
                raise ValueError(f"argument --{name}: expected {what}, got {value}")
        for what in ("train", "validation"):
            if self.files(what) and getattr(self, f"{what}_file"):
                raise ValueError(f"Give the {what} pairs as --{what}_source/--{what}_target or as --{what}_file, "
                                 "not both.")
        if self.dataset_name and (self.train_file or self.validation_file):
            raise ValueError("--dataset_name and --train_file/--validation_file name two datasets; give one.")
        if self.streaming and not self.max_steps:
            raise ValueError("--streaming needs --max_steps: a stream has no length, so epochs cannot be counted.")
        if self.streaming and self.max_tokens == 0:
            raise ValueError("--streaming batches by the §5.1 token budget; give --max_tokens N, not 0.")
        name = self.model_name_or_path
        if name is not None and not Path(name).is_dir():
            if not looks_like_hub_id(name) or os.environ.get("HF_HUB_OFFLINE") == "1":
                raise FileNotFoundError(f"--model_name_or_path {name}: no such model folder.")
        sizes = self.given(*SIZE_FLAGS, "preset", "vocab_size")
        if name is not None and not self.resume_from_checkpoint and sizes:
            size = next(iter(sizes))
            raise ValueError(f"--{size} sets up a new model; the model of --model_name_or_path {name} keeps "
                             f"its own sizes and vocabulary. Leave --{size} out.")
        for what in ("save", "eval"):
            if getattr(self, f"{what}_steps") is not None and getattr(self, f"{what}_strategy") != "steps":
                raise ValueError(f"--{what}_steps needs --{what}_strategy steps.")
        if self.average_last == 1:
            raise ValueError("--average_last 1 averages nothing; give 2 or more (the paper: 5) or leave it out.")
        if self.average_last and self.save_strategy == "no" and self.save_every_minutes is None:
            raise ValueError(f"--average_last {self.average_last} needs checkpoints; --save_strategy no writes "
                             "none (use --save_every_minutes or --save_strategy steps/epoch).")
        if self.average_last and self.save_total_limit < self.average_last:
            raise ValueError(f"--average_last {self.average_last} needs at least that many checkpoints kept; "
                             f"raise --save_total_limit (now {self.save_total_limit}).")
        if self.source_lang == self.target_lang:
            raise ValueError(f"--source_lang and --target_lang are both {self.source_lang!r}.")

    def given(self, *names) -> dict:
        """The flags of `names` that were given (their default is None), with their values."""
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}

    def files(self, what: str) -> tuple[str, str] | None:
        """(source, target) of --<what>_source and --<what>_target, or None; one without the other is refused."""
        source, target = getattr(self, f"{what}_source"), getattr(self, f"{what}_target")
        if (source is None) != (target is None):
            raise ValueError(f"--{what}_source and --{what}_target go together; give both files or neither.")
        return (source, target) if source is not None else None


class Parser(ScriptParser, HfArgumentParser):
    """HfArgumentParser with one-line errors."""

    def _add_dataclass_arguments(self, dtype):
        # HfArgumentParser gives a dataclass one group; the recipe's flags follow the paper's sections in four.
        hints, group = get_type_hints(dtype), self
        for field in dataclasses.fields(dtype):
            group = self.add_argument_group(GROUPS[field.name]) if field.name in GROUPS else group
            field.type = hints[field.name]
            self._parse_dataclass_field(group, field)
            action = self._actions[-1]  # one spelling, as the Trainer's flags are given: no --max-tokens
            for alias in action.option_strings[1:]:
                del self._option_string_actions[alias]
            action.option_strings = action.option_strings[:1]


def trainer_parser(**kwargs):
    from transformers import Seq2SeqTrainingArguments  # imports torch

    return Parser(Seq2SeqTrainingArguments, allow_abbrev=False, **kwargs)


class Refuse(argparse.Action):
    """A Trainer flag that this script does not use: an error that says what to use instead."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is not used: {REFUSED_FLAGS[self.dest]}")


class HelpAll(argparse.Action):
    def __call__(self, parser, *_):
        trainer_parser(usage=parser.usage, description=parser.description).print_help()
        parser.exit()


def trainer_arguments(recipe: RecipeArguments, argv: list[str], description=None, usage=None):
    """Seq2SeqTrainingArguments: the recipe's Trainer flags, the paper's settings where the Trainer's defaults
    differ, the machine's (the CPU when there is no GPU), and every other Trainer flag in `argv` as given."""
    import torch

    from ...machine import cpp_compiler

    parser = trainer_parser(description=description, usage=usage)
    trainer_fields = {field.name for field in dataclasses.fields(parser.dataclass_types[0])}
    defaults = {name: value for name, value in dataclasses.asdict(recipe).items() if name in trainer_fields}
    defaults.update(max_steps=recipe.max_steps or -1, save_steps=recipe.save_steps or 500)
    if recipe.save_strategy is None:
        # --save_every_minutes stands in for the epoch checkpoints, unless both are asked for.
        defaults["save_strategy"] = "no" if recipe.save_every_minutes else "epoch"
    # Without a GPU the Trainer must be told so, or torchrun's processes each train alone (and DataLoader
    # warns about pinned memory with no GPU to pin it for).
    defaults["use_cpu"] = not torch.accelerator.is_available()
    # On a CPU each layer compiled is faster than eager (benchmarks/RESULTS.md), where inductor finds a C++ compiler.
    defaults["torch_compile"] = defaults["use_cpu"] and cpp_compiler() is not None
    parser.set_defaults(**defaults, **FIXED_TRAINER_SETTINGS)
    training_args, unknown = parser.parse_args_into_dataclasses(argv, return_remaining_strings=True,
                                                               look_for_args_file=False)
    if unknown:
        flag_name = next((arg for arg in unknown if arg.startswith("-")), unknown[0])
        parser.error(f"unrecognized argument {flag_name}; --help_all lists every flag, the Trainer's included")
    if recipe.max_tokens and any(arg.split("=")[0].replace("-", "_") == "__per_device_train_batch_size"
                                 for arg in argv):
        parser.error("--per_device_train_batch_size is not used with a token budget: batches hold "
                     "--max_tokens tokens per step (give --max_tokens 0 for fixed batches)")
    launched = int(os.environ.get("WORLD_SIZE", "1"))
    if launched > 1 and training_args.world_size != launched:
        raise ValueError(f"launched as {launched} processes (WORLD_SIZE) but the Trainer runs "
                         f"{training_args.world_size}; leave --use_cpu as it is")
    return training_args


def parse_args(argv=None, description=None, usage=None):
    """The command line, parsed once: the recipe's flags (checked before torch is imported), then the Trainer's."""
    parser = Parser(RecipeArguments, description=description, usage=usage, allow_abbrev=False, epilog=EPILOG)
    parser.add_argument("--help_all", action=HelpAll, nargs=0,
                        help="List every flag, the Trainer's own included (slower: it loads transformers).")
    for name in REFUSED_FLAGS:
        parser.add_argument(f"--{name}", f"--{name.replace('_', '-')}", action=Refuse, nargs="?",
                            help=argparse.SUPPRESS)
    try:
        recipe, *_, rest = parser.parse_args_into_dataclasses(argv, return_remaining_strings=True,
                                                              look_for_args_file=False)
    except ValueError as error:
        parser.error(one_line(error).removesuffix("."))
    return recipe, trainer_arguments(recipe, rest, description, usage)
