"""§6.1: "a single model obtained by averaging the last 5 checkpoints, which were written at 10-minute
intervals" (base models; the last 20 for the big ones). A checkpoint is a Trainer `checkpoint-<step>` folder
with one `model.safetensors`; it counts once the Trainer finished writing it (`is_complete_checkpoint`).
"""

from __future__ import annotations

import fnmatch
import shutil
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, sort_checkpoints

from ..model.loading import check_weights_file
from ..model.strict_json import read_json
from ..outputs import claim, write_folder

WEIGHTS_NAME = "model.safetensors"
TRAINER_STATE_NAME = "trainer_state.json"  # the Trainer writes it last (transformers 5.24, _save_checkpoint)
# Files of a checkpoint that describe the training run, not the model, and the weights (averaged apart).
_NOT_COPIED = ("optimizer*.pt", "scheduler*.pt", "scaler*.pt", "rng_state*.pth", TRAINER_STATE_NAME,
               "training_args.bin", "*.safetensors", "model.safetensors.index.json", "pytorch_model*.bin")
# config.json fields that say where and how a checkpoint was saved; every other field must agree.
_CONFIG_KEYS_NOT_COMPARED = ("_name_or_path", "transformers_version", "dtype", "torch_dtype")
SAME_MODEL = "only checkpoints of the same model can be averaged."


class CheckpointMismatchError(ValueError):
    """Checkpoints that cannot be averaged together (different tensors, shapes or configs)."""


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


def average_state_dicts(state_dicts: Iterable[Mapping[str, torch.Tensor]],
                        names: Sequence[str] | None = None) -> dict[str, torch.Tensor]:
    """Element-wise mean of state dicts (§6.1), loaded one at a time: floating tensors summed in float64 and cast
    back, integer and boolean ones not averaged (the last is kept). A mismatch names the checkpoint and tensor."""
    first = total = None
    count = 0
    for count, state_dict in enumerate(state_dicts, 1):
        if first is None:
            first, total = state_dict, {name: t.detach().to(torch.float64) if t.is_floating_point()
                                        else t.detach().clone() for name, t in state_dict.items()}
            continue
        _check_compatible(first, state_dict, f"checkpoint {count - 1}"
                          + (f" ({names[count - 1]!r})" if names is not None else ""))
        for name, tensor in state_dict.items():
            if total[name].is_floating_point():
                total[name] += tensor.detach().to(torch.float64)
            else:
                total[name] = tensor.detach().clone()
        del state_dict  # before the next one is loaded
    if first is None:
        raise ValueError("no state dicts to average: pass at least one.")
    return {name: (summed / count).to(first[name].dtype).contiguous() if summed.is_floating_point() else summed
            for name, summed in total.items()}


def _is_checkpoint_name(name: str) -> bool:
    """`checkpoint-<step>`, the Trainer's name (not checkpoint-final or checkpoint-3.bak)."""
    prefix, _, step = name.partition("-")
    return prefix == PREFIX_CHECKPOINT_DIR and step.isdigit()


def is_complete_checkpoint(checkpoint_dir: str | Path) -> bool:
    """A run killed while saving leaves a folder without trainer_state.json, whose weights may be cut short."""
    return (Path(checkpoint_dir) / TRAINER_STATE_NAME).is_file()


def _refuse_incomplete(checkpoint_dir: Path, advice: str) -> None:
    if not is_complete_checkpoint(checkpoint_dir):
        raise ValueError(f"checkpoint {str(checkpoint_dir)!r} is incomplete (no {TRAINER_STATE_NAME}, which the "
                         f"Trainer writes last): the run was probably stopped while saving it. {advice}")


def check_resumable_checkpoint(checkpoint_dir: str | Path) -> None:
    if not Path(checkpoint_dir).is_dir():
        raise FileNotFoundError(f"checkpoint folder {str(checkpoint_dir)!r} does not exist or is not a folder.")
    _refuse_incomplete(Path(checkpoint_dir), "Resume from the checkpoint before it, or delete it.")


def complete_checkpoints(output_dir: str | Path) -> tuple[list[Path], list[str]]:
    """(complete, incomplete names): a run's `checkpoint-<step>` folders by step, as the Trainer sorts them."""
    if not Path(output_dir).is_dir():
        raise FileNotFoundError(f"run folder {str(output_dir)!r} does not exist or is not a folder.")
    folders = [path for path in map(Path, sort_checkpoints(str(output_dir))) if _is_checkpoint_name(path.name)]
    return ([path for path in folders if is_complete_checkpoint(path)],
            sorted(path.name for path in folders if not is_complete_checkpoint(path)))


def _weights_file(checkpoint_dir: Path) -> Path:
    if not checkpoint_dir.is_dir():
        raise FileNotFoundError(f"checkpoint folder {str(checkpoint_dir)!r} does not exist or is not a folder.")
    check_weights_file(checkpoint_dir)  # safetensors, never pickles
    if not (checkpoint_dir / WEIGHTS_NAME).is_file():
        raise ValueError(f"{str(checkpoint_dir)!r} holds sharded weights (model.safetensors.index.json); only a "
                         "single model.safetensors file is supported. Re-save the model unsharded.")
    return checkpoint_dir / WEIGHTS_NAME


def _load_weights(weights: Path) -> dict[str, torch.Tensor]:
    try:
        return load_file(weights)
    except (SafetensorError, OSError, ValueError, RuntimeError) as error:
        raise ValueError(f"could not read {str(weights)!r}: {error}") from error


def _check_configs(checkpoint_dirs: Sequence[Path]) -> None:
    """Refuse checkpoints whose config.json differ in a field that describes the model, or only some have one."""
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
                raise CheckpointMismatchError(f"config.json of {str(path)!r} has {key}={config.get(key)!r} but "
                                              f"{str(first_path)!r} has {key}={first.get(key)!r}; {SAME_MODEL}")


def average_checkpoints(checkpoint_dirs: Sequence[str | Path], output_dir: str | Path,
                        flag: str = "output_dir") -> Path:
    """Average checkpoint folders into a folder `from_pretrained` loads (§6.1); the path of its weights. The
    last checkpoint's other model files are copied, its training state is not. Refused: a folder given twice,
    an `output_dir` (named `flag`) that clashes with them, an incomplete checkpoint, missing, sharded or
    unreadable weights, checkpoints of different models."""
    checkpoint_dirs = [Path(path) for path in checkpoint_dirs]
    if not checkpoint_dirs:
        raise ValueError("no checkpoint folders to average: pass at least one.")
    output_dir = Path(output_dir)
    weights = []
    for path in checkpoint_dirs:
        weights.append(_weights_file(path))  # a missing file fails before gigabytes of the others are read
        if _is_checkpoint_name(path.name):
            _refuse_incomplete(path, "Its weights may be cut short; leave it out.")
    seen = {}
    for path in checkpoint_dirs:
        if (twice := seen.setdefault(path.resolve(), path)) is not path:
            raise ValueError(f"checkpoint {str(path)!r} is given twice (also as {str(twice)!r}); averaging it twice "
                             "would weigh it double. Give each checkpoint once.")
    claim(flag, output_dir, [("checkpoint", path) for path in checkpoint_dirs], folder=True)
    _check_configs(checkpoint_dirs)
    averaged = average_state_dicts(map(_load_weights, weights), names=[str(p) for p in checkpoint_dirs])
    with write_folder(output_dir) as folder:  # whole or not at all; an earlier one is replaced only at the end
        for item in sorted(checkpoint_dirs[-1].iterdir()):
            if item.is_file() and not any(fnmatch.fnmatch(item.name, p) for p in _NOT_COPIED):
                shutil.copy2(item, folder / item.name)
        save_file(averaged, str(folder / WEIGHTS_NAME), metadata={"format": "pt"})  # what transformers checks
    return output_dir / WEIGHTS_NAME
