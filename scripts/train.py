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
averaging with --average_last. On a CPU each layer is compiled where a C++ compiler is found
(--torch_compile false: eager). Every other Seq2SeqTrainingArguments flag works too (--bf16,
--gradient_accumulation_steps, ...): --help_all lists them.
"""

import time

RUN_START = time.monotonic()  # --max_train_minutes and the run record count from here

try:  # run as a script (scripts/ first on sys.path): the command line alone, so --help answers at once
    from _light_cli import load_light  # noqa: E402
except ModuleNotFoundError:  # run in-process by another program
    from importlib import import_module as load_light  # noqa: E402

cli = load_light("modeling_vaswani.cli")
arguments = load_light("modeling_vaswani.training.recipe.arguments")  # standard library and hf_argparser only
USAGE = "python scripts/train.py [flags]"


def main(argv=None):
    recipe, training_args = arguments.parse_args(argv, description=__doc__, usage=USAGE)
    from modeling_vaswani.training.recipe.run import run  # the work: torch, transformers, datasets

    run(recipe, training_args, started=RUN_START)


if __name__ == "__main__":
    cli.run_main(main)
