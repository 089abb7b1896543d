"""The combinations of the training recipe's flags that could not run as asked, refused before any
work starts (not from the paper): each as one line that names the flag and what to give instead.

Standard library only at import, like `flags`, so scripts/train.py checks its command line
before torch and transformers are imported.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ...cli import looks_like_hub_id, one_line
from .flags import REGULARISATION_FLAGS, SIZE_FLAGS, build_parser


def given(options, name) -> bool:
    """Whether the flag `name` was given (its default is None)."""
    return getattr(options, name) is not None


def paired_files(options, what):
    """(source, target) of --<what>_source and --<what>_target, or None; one without the other is refused."""
    source, target = getattr(options, f"{what}_source"), getattr(options, f"{what}_target")
    if (source is None) != (target is None):
        raise ValueError(f"--{what}_source and --{what}_target go together; give both files or neither.")
    return (source, target) if source is not None else None


def check_model_source(options) -> None:
    """A model folder that is not there, and sizes that a trained model or a checkpoint already has."""
    name = options.model_name_or_path
    if name is not None and not Path(name).is_dir():
        if not looks_like_hub_id(name) or os.environ.get("HF_HUB_OFFLINE") == "1":
            raise FileNotFoundError(f"--model_name_or_path {name}: no such model folder.")
    if name is not None and not options.resume_from_checkpoint:
        for flag in (*SIZE_FLAGS, "preset", "vocab_size"):
            if given(options, flag):
                raise ValueError(f"--{flag} sets up a new model; the model of --model_name_or_path {name} keeps "
                                 f"its own sizes and vocabulary. Leave --{flag} out.")


def check_data_options(options) -> None:
    """Data files given two ways at once, and a stream without a step count or token budget."""
    for what in ("train", "validation"):
        if getattr(options, f"{what}_file") and getattr(options, f"{what}_source"):
            raise ValueError(f"Give the {what} pairs as --{what}_source/--{what}_target or as --{what}_file, not both.")
    if options.dataset_name and (options.train_file or options.validation_file):
        raise ValueError("--dataset_name and --train_file/--validation_file name two datasets; give one.")
    if options.streaming and not options.max_steps:
        raise ValueError("--streaming needs --max_steps: a stream has no length, so epochs cannot be counted.")
    if options.streaming and options.max_tokens == 0:
        raise ValueError("--streaming batches by the §5.1 token budget; give --max_tokens N, not 0.")


def check_options(options) -> None:
    """Every combination of flags that could not run as asked, before any work starts."""
    paired_files(options, "train")
    paired_files(options, "validation")
    check_data_options(options)
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


def parse_options(argv=None, description: str | None = None, usage: str | None = None) -> argparse.Namespace:
    """The recipe's flags, checked; the Trainer's other flags are kept in `options.trainer_argv`."""
    parser = build_parser(description, usage)
    options, rest = parser.parse_known_args(argv)
    options.trainer_argv = rest
    if options.help_all:
        return options
    try:
        check_options(options)
    except ValueError as error:
        parser.error(one_line(error).removesuffix("."))
    return options



def check_resumed_model(options, checkpoint) -> None:
    """Model flags given with --resume_from_checkpoint must agree with the checkpoint's model."""
    from modeling_vaswani.model.configuration_vaswani import PRESETS as PRESET_SIZES
    from modeling_vaswani.model.strict_json import read_json

    config = read_json(Path(checkpoint) / "config.json")
    wanted = {}  # name -> (value, the flag that asks for it)
    if options.preset:
        preset = PRESET_SIZES[options.preset]
        wanted.update({name: (value, f"--preset {options.preset}") for name, value in preset.items() if name in SIZE_FLAGS})
    for name in (*SIZE_FLAGS, *REGULARISATION_FLAGS):
        if given(options, name):
            wanted[name] = (getattr(options, name), f"--{name} {getattr(options, name)}")
    for name, (value, flag) in wanted.items():
        if name in config and config[name] != value:
            raise ValueError(f"{flag} asks for {name}={value!r} but the checkpoint {checkpoint} has {config[name]!r}; "
                             "a resumed run keeps its model: leave the flag out.")

