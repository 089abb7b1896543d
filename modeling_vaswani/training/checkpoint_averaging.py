"""§6.1 — checkpoint averaging.

The paper does not evaluate the weights of the final training step. For the base models it
saves a checkpoint every 10 minutes and uses a single model whose parameters are the average
of the last 5 checkpoints; for the big models it averages the last 20. Averaging weights from
the end of training smooths out the noise of the last few updates.

Here a "checkpoint" is a folder written by the Hugging Face `Trainer` (`checkpoint-<step>`)
holding the weights in a single `model.safetensors` file. `average_state_dicts` is the
averaging itself, `find_checkpoints` picks the last k checkpoints of a run, and
`average_checkpoints` writes a folder that `from_pretrained` can load: the averaged weights
plus the config, generation config, tokenizer and code files of the last checkpoint. A
`checkpoint-<step>` folder counts only once the Trainer has finished writing it
(`is_complete_checkpoint`), so a run stopped while saving never feeds half-written weights in.

The paper's checkpoints were written every 10 minutes of wall-clock time:
`scripts/train.py --save_every_minutes 10` does the same (`run_clocks.SaveEveryMinutes`); the
Trainer's own strategies save every `save_steps` updates or every epoch instead.
"""

from __future__ import annotations

import fnmatch
import logging
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, sort_checkpoints

from ..model.strict_json import read_json
from ..outputs import claim, write_folder

# §6.1: "averaging the last 5 checkpoints" (base) and "the last 20 checkpoints" (big).
BASE_CHECKPOINTS = 5
BIG_CHECKPOINTS = 20

WEIGHTS_NAME = "model.safetensors"
# The Trainer writes this file last into a checkpoint folder; see `is_complete_checkpoint`.
TRAINER_STATE_NAME = "trainer_state.json"

logger = logging.getLogger(__name__)
# Files in a Trainer checkpoint that describe the training run, not the model: never copied.
_TRAINING_STATE_PATTERNS = (
    "optimizer*.pt",
    "scheduler*.pt",
    "scaler*.pt",
    "rng_state*.pth",
    "trainer_state.json",
    "training_args.bin",
    # Weights: the averaged ones are written separately.
    "*.safetensors",
    "model.safetensors.index.json",
    "pytorch_model*.bin",
)
# config.json fields that say where and how a checkpoint was saved, not what model it is: every other
# field must agree for weights to be averaged meaningfully.
_CONFIG_KEYS_NOT_COMPARED = ("_name_or_path", "transformers_version", "dtype", "torch_dtype")
SAME_MODEL = "only checkpoints of the same model can be averaged."


class CheckpointMismatchError(ValueError):
    """Checkpoints that cannot be averaged together (different tensors, shapes or configs)."""


def _running_sum(state_dict: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    # Floating tensors are summed in float64 so that many checkpoints add up without rounding.
    return {
        name: tensor.detach().to(torch.float64) if tensor.is_floating_point() else tensor.detach().clone()
        for name, tensor in state_dict.items()
    }


def _check_compatible(reference: Mapping[str, torch.Tensor], state_dict: Mapping[str, torch.Tensor], label: str) -> None:
    for names, has, lacks, kind in ((set(reference) - set(state_dict), "lacks", "has", "missing"),
                                    (set(state_dict) - set(reference), "has", "lacks", "extra")):
        if names:
            raise CheckpointMismatchError(f"{label} {has} tensor {min(names)!r} that checkpoint 0 {lacks} "
                                          f"({len(names)} {kind} in all); {SAME_MODEL}")
    for name, tensor in state_dict.items():
        if tensor.shape != reference[name].shape:
            raise CheckpointMismatchError(f"{label}: tensor {name!r} has shape {tuple(tensor.shape)} but checkpoint 0 "
                                          f"has {tuple(reference[name].shape)}; {SAME_MODEL}")


def _accumulate(total: dict[str, torch.Tensor], state_dict: Mapping[str, torch.Tensor]) -> None:
    for name, tensor in state_dict.items():
        if total[name].is_floating_point():
            total[name] += tensor.detach().to(torch.float64)
        else:
            # Integer/bool buffers (counters, index tables) are not averaged: the last one is kept.
            total[name] = tensor.detach().clone()


def _finish(total: dict[str, torch.Tensor], first: Mapping[str, torch.Tensor], count: int) -> dict[str, torch.Tensor]:
    # Cast each mean back to the dtype it was stored in (fp32, fp16, bf16, ...).
    return {
        name: (summed / count).to(first[name].dtype).contiguous() if summed.is_floating_point() else summed
        for name, summed in total.items()
    }


def average_state_dicts(state_dicts: Iterable[Mapping[str, torch.Tensor]],
                        names: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    """Element-wise mean of several state dicts with the same tensor names and shapes (§6.1).

    Floating-point tensors are averaged in float64 and cast back to their own dtype. Integer
    and boolean tensors are not averaged: the value from the last state dict is kept. Only the
    first, the running sum and the current one are held, so `state_dicts` may load each in turn.

    Raises:
        ValueError: if there are none, or (as `CheckpointMismatchError`) if a state dict
            lacks a tensor, has an extra one, or has one of a different shape; the message
            names the checkpoint's position in the list (and its entry in `names`) and the tensor.
    """
    first = total = None
    count = 0
    for state_dict in state_dicts:
        count += 1
        if first is None:
            first, total = state_dict, _running_sum(state_dict)
            continue
        name = f" ({names[count - 1]!r})" if names is not None else ""
        _check_compatible(first, state_dict, f"checkpoint {count - 1}{name}")
        _accumulate(total, state_dict)
        del state_dict  # before the next one is loaded
    if first is None:
        raise ValueError("no state dicts to average: pass at least one.")
    return _finish(total, first, count)


def _is_checkpoint_name(name: str) -> bool:
    """`checkpoint-<step>`, the Trainer's name for a checkpoint folder (not checkpoint-final or checkpoint-3.bak)."""
    prefix, _, step = name.partition("-")
    return prefix == PREFIX_CHECKPOINT_DIR and step.isdigit()


def is_complete_checkpoint(checkpoint_dir: str | Path) -> bool:
    """Whether a Trainer `checkpoint-<step>` folder was written to the end.

    The Trainer writes a checkpoint straight into its final folder, in this order: code, config,
    weights, optimizer, scheduler, RNG state, and `trainer_state.json` last (transformers 5.24,
    `Trainer._save_checkpoint`). A run killed while saving therefore leaves a folder without
    `trainer_state.json`, whose weights may be missing or cut short.
    """
    return (Path(checkpoint_dir) / TRAINER_STATE_NAME).is_file()


def check_resumable_checkpoint(checkpoint_dir: str | Path) -> Path:
    """Raise unless `checkpoint_dir` is a complete Trainer checkpoint to resume training from."""
    checkpoint_dir = Path(checkpoint_dir)
    if not checkpoint_dir.is_dir():
        raise FileNotFoundError(f"checkpoint folder {str(checkpoint_dir)!r} does not exist or is not a folder.")
    if not is_complete_checkpoint(checkpoint_dir):
        raise ValueError(
            f"checkpoint {str(checkpoint_dir)!r} is incomplete (no {TRAINER_STATE_NAME}, which the Trainer writes "
            "last): the run was probably stopped while saving it. Resume from the checkpoint before it, or delete it."
        )
    return checkpoint_dir


def complete_checkpoints(output_dir: str | Path) -> tuple[list[Path], list[str]]:
    """(complete, incomplete): a run's `checkpoint-<step>` folders, the complete ones oldest first.

    Folders are ordered by their step number (so checkpoint-10 comes after checkpoint-9), as the
    Trainer orders them itself (`sort_checkpoints`); incomplete ones (see `is_complete_checkpoint`)
    are only named.

    Raises:
        FileNotFoundError: if `output_dir` is not a folder.
    """
    if not Path(output_dir).is_dir():
        raise FileNotFoundError(f"run folder {str(output_dir)!r} does not exist or is not a folder.")
    folders = [path for path in map(Path, sort_checkpoints(str(output_dir))) if _is_checkpoint_name(path.name)]
    return ([path for path in folders if is_complete_checkpoint(path)],
            sorted(path.name for path in folders if not is_complete_checkpoint(path)))


def find_checkpoints(output_dir: str | Path, last: int = BASE_CHECKPOINTS) -> list[Path]:
    """The last `last` complete `checkpoint-<step>` folders of a training run, oldest first.

    Ordered as `complete_checkpoints` orders them; incomplete folders are skipped with a warning.

    Raises:
        FileNotFoundError: if `output_dir` is not a folder.
        ValueError: if `last` is not a positive integer or the run has fewer complete checkpoints.
    """
    if isinstance(last, bool) or not isinstance(last, int) or last < 1:
        raise ValueError(f"last must be a positive integer (the paper averages 5 or 20), got {last!r}.")
    found, incomplete = complete_checkpoints(output_dir)
    if incomplete:
        logger.warning("skipping incomplete checkpoints (no %s): %s", TRAINER_STATE_NAME, ", ".join(incomplete))
    if len(found) < last:
        skipped = f" (skipped incomplete: {', '.join(incomplete)})" if incomplete else ""
        raise ValueError(
            f"asked for the last {last} checkpoints but {str(output_dir)!r} holds only {len(found)} complete "
            f"checkpoint-<step> folders{skipped}; lower the number or train longer."
        )
    return found[-last:]


def _weights_file(checkpoint_dir: Path) -> Path:
    if not checkpoint_dir.is_dir():
        raise FileNotFoundError(f"checkpoint folder {str(checkpoint_dir)!r} does not exist or is not a folder.")
    weights = checkpoint_dir / WEIGHTS_NAME
    if weights.is_file():
        return weights
    if (checkpoint_dir / f"{WEIGHTS_NAME}.index.json").is_file():
        raise ValueError(
            f"{str(checkpoint_dir)!r} holds sharded weights (model.safetensors.index.json); only a "
            "single model.safetensors file is supported. Re-save the model unsharded."
        )
    if any(checkpoint_dir.glob("pytorch_model*.bin")):
        raise ValueError(
            f"{str(checkpoint_dir)!r} holds pickled weights (pytorch_model.bin), which are not loaded "
            "for safety; re-save the model with safetensors."
        )
    raise FileNotFoundError(f"checkpoint folder {str(checkpoint_dir)!r} has no {WEIGHTS_NAME}.")


def _load_weights(checkpoint_dir: Path) -> dict[str, torch.Tensor]:
    weights = _weights_file(checkpoint_dir)
    try:
        return load_file(weights)
    except (SafetensorError, OSError, ValueError, RuntimeError) as error:
        raise ValueError(f"could not read {str(weights)!r}: {error}") from error


def _check_configs(checkpoint_dirs: Sequence[Path]) -> None:
    """Refuse checkpoints whose config.json differ in any field that describes the model, or of which only some
    have one."""
    configs = [(path, read_json(path / "config.json") if (path / "config.json").is_file() else None)
               for path in checkpoint_dirs]
    first_path, first = configs[0]
    for path, config in configs[1:]:
        if (config is None) != (first is None):
            without = path if config is None else first_path
            raise CheckpointMismatchError(f"{str(without)!r} has no config.json but the other checkpoints have; "
                                          + SAME_MODEL)
        for key in sorted(set(config or {}) | set(first or {})):
            if key not in _CONFIG_KEYS_NOT_COMPARED and config.get(key) != first.get(key):
                raise CheckpointMismatchError(
                    f"config.json of {str(path)!r} has {key}={config.get(key)!r} but {str(first_path)!r} "
                    f"has {key}={first.get(key)!r}; {SAME_MODEL}"
                )


def average_checkpoints(checkpoint_dirs: Sequence[str | Path], output_dir: str | Path,
                        flag: str = "output_dir") -> Path:
    """Average the weights of several checkpoint folders into a loadable model folder (§6.1).

    Reads `model.safetensors` from each folder, averages them with the rules of
    `average_state_dicts`, and writes `output_dir/model.safetensors`. Every other file of the
    last checkpoint that describes the model (config.json, generation_config.json, tokenizer
    files, code files) is copied too, so `from_pretrained(output_dir)` works; optimizer,
    scheduler, RNG and trainer state are left behind.

    Returns:
        The path of the written `model.safetensors`.

    Raises:
        FileNotFoundError: if a folder or its `model.safetensors` is missing.
        ValueError: if no folders are given, one is given twice, `output_dir` (named `flag` in errors)
            is, holds or lies inside one of them (`outputs.OutputClashError`), a `checkpoint-<step>`
            folder is incomplete, a weights file cannot be read or is sharded, or (as
            `CheckpointMismatchError`) the checkpoints differ in a config.json field, tensor names or
            shapes.
    """
    checkpoint_dirs = [Path(path) for path in checkpoint_dirs]
    if not checkpoint_dirs:
        raise ValueError("no checkpoint folders to average: pass at least one.")
    output_dir = Path(output_dir)
    for path in checkpoint_dirs:
        _weights_file(path)  # fail on a missing file before reading gigabytes of the others
        if _is_checkpoint_name(path.name) and not is_complete_checkpoint(path):
            raise ValueError(
                f"checkpoint {str(path)!r} is incomplete (no {TRAINER_STATE_NAME}, which the Trainer writes last): "
                "the run was probably stopped while saving it, so its weights may be cut short. Leave it out."
            )
    seen = {}
    for path in checkpoint_dirs:
        if (twice := seen.setdefault(path.resolve(), path)) is not path:
            raise ValueError(f"checkpoint {str(path)!r} is given twice (also as {str(twice)!r}); averaging it twice "
                             "would weigh it double. Give each checkpoint once.")
    claim(flag, output_dir, [("checkpoint", path) for path in checkpoint_dirs], folder=True)
    _check_configs(checkpoint_dirs)

    # Loaded one at a time (two, with the first, plus the running sum), so 20 big checkpoints fit.
    averaged = average_state_dicts(map(_load_weights, checkpoint_dirs), names=[str(p) for p in checkpoint_dirs])

    with write_folder(output_dir) as folder:  # whole or not at all; an earlier one is replaced only at the end
        for item in sorted(checkpoint_dirs[-1].iterdir()):
            if item.is_file() and not any(fnmatch.fnmatch(item.name, p) for p in _TRAINING_STATE_PATTERNS):
                shutil.copy2(item, folder / item.name)
        # The "format" metadata is what transformers checks when loading a safetensors file.
        save_file(averaged, str(folder / WEIGHTS_NAME), metadata={"format": "pt"})
    return output_dir / WEIGHTS_NAME
