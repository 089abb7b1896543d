"""The end of a training recipe run: §6.1's averaging of the last checkpoints, scored like the final
model, and the one command to run next.
"""

from __future__ import annotations

import json
import logging
import shlex
from pathlib import Path

from ..checkpoint_averaging import average_checkpoints, complete_checkpoints

logger = logging.getLogger("train")  # the script's own log: its lines read "train: ..."


def average_last(trainer, options):
    """§6.1: the mean of the last --average_last checkpoints, in <output_dir>/averaged, and its score."""
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
    folder = shlex.quote(str(output_dir))
    if averaged is not None:
        return f"python scripts/evaluate_model.py --model {shlex.quote(str(averaged))} --split test"
    written = len(complete_checkpoints(output_dir)[0])
    if written >= 2:
        return f"python scripts/average_checkpoints.py --run_dir {folder}"
    return f"python scripts/evaluate_model.py --model {folder} --split test"

