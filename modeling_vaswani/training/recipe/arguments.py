"""The Trainer's arguments for the training recipe: the paper's settings where the Trainer's defaults
differ (no gradient clipping, checkpoints by epoch or by minutes), the machine's (the CPU when there
is no GPU), and every other Seq2SeqTrainingArguments flag as given (not from the paper).

torch and transformers are imported only when the arguments are built, so scripts/train.py can
load this module before them.
"""

from __future__ import annotations

import os
import sys

from ...cli import ScriptParser
from .flags import FIXED_TRAINER_SETTINGS, TRAINER_FLAGS


def trainer_arguments(options, description: str | None = None, usage: str | None = None):
    """Seq2SeqTrainingArguments from the recipe's flags and every other Trainer flag given; with
    --help_all, the Trainer's flags listed as well, and the program ends."""
    import torch
    from transformers import HfArgumentParser, Seq2SeqTrainingArguments

    class TrainerParser(ScriptParser, HfArgumentParser):
        pass

    parser = TrainerParser(Seq2SeqTrainingArguments, allow_abbrev=False, usage=usage, description=description)
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

