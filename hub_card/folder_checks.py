"""What `from_pretrained` checks in a model folder beyond transformers (loading.py's list says why):
the weights are safetensors of floating point, a weights index names only .safetensors shards inside
the folder, the decoding settings are strict JSON and valid, and the weights hold no tensor the
config has no place for. Each check names the file, tensor or field it refuses.
"""

import os
from pathlib import Path

from safetensors import SafetensorError, safe_open
from transformers.utils import cached_file

from .decoding_checks import check_decoding
from .strict_json import read_json


def check_weights_file(folder: Path) -> None:
    """A local model folder must hold safetensors weights."""
    if (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file():
        return
    if any(folder.glob("pytorch_model*.bin")):
        raise ValueError(
            f"{str(folder)!r} holds only pickled weights (pytorch_model.bin), which are not loaded because "
            "unpickling can run arbitrary code; convert them to model.safetensors with a trusted tool."
        )
    raise FileNotFoundError(
        f"{str(folder)!r} has no model.safetensors: the folder holds no weights (save_pretrained writes them "
        "last, so an interrupted save leaves this state). Save the model again or point to a complete folder."
    )


# Tensors of this model are floating point; integer or 8-bit float weights are quantized ones.
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
WEIGHTS_INDEX = "model.safetensors.index.json"


def check_model_location(name) -> Path | None:
    """The local folder `name` names, or None for a Hub id. A path to a file is refused before
    anything is read from it: transformers would take it for a config file and, failing that, hand
    it to its weights loaders."""
    if not isinstance(name, (str, os.PathLike)):
        return None
    path = Path(name)
    if path.is_dir():
        return path
    if path.exists():
        raise NotADirectoryError(
            f"{str(path)!r} is a file, not a model folder: from_pretrained takes the folder that holds config.json "
            "and model.safetensors (or a Hub id like user/name)."
        )
    return None


def check_model_files(config_folder: Path, generation_config_given: bool, local: bool = True) -> None:
    """Check a resolved model folder (local, or the Hub cache's copy) before its weights are trusted:
    the decoding settings of generation_config.json and config.json (transformers takes them from
    config.json when generation_config.json is missing), and the dtype of every tensor in the weights."""
    for name in ("generation_config.json", "config.json"):
        if not generation_config_given and (config_folder / name).is_file():
            check_decoding_file(config_folder / name)
    for weights in _weights_files(config_folder, local):
        check_stored_dtypes(weights)


def check_decoding_file(path: Path) -> None:
    """Refuse a generation_config.json (or config.json) that is not strict JSON or whose decoding fields are wrong
    (transformers would replace the first by defaults without a word and keep the second as read)."""
    check_decoding(read_json(path), str(path))


def check_stored_dtypes(weights: Path) -> None:
    """Refuse weights stored as integers (or 8-bit floats): loaded into this model's floating-point
    tensors they would be cast value by value, and the model would translate garbage."""
    try:
        handle = safe_open(str(weights), framework="pt")
    except (SafetensorError, OSError):
        return  # a damaged file: loading it reports that, naming the file
    with handle:
        for key in handle.keys():
            dtype = handle.get_slice(key).get_dtype()
            if dtype not in FLOAT_DTYPES:
                raise ValueError(
                    f"{str(weights)!r} stores tensor {key!r} as {dtype}, not as floating point ({', '.join(FLOAT_DTYPES)}): "
                    "quantized or integer weights are not supported and would load as garbage. Use the unquantized "
                    "checkpoint."
                )


def _weights_files(folder: Path, local: bool = True) -> list[Path]:
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"]
    index = folder / WEIGHTS_INDEX
    if index.is_file():
        return [shard for shard in check_weights_index(index, local) if shard.is_file()]
    return []


def check_weights_index(index: Path, local: bool = True) -> list[Path]:
    """The shards `index` names, each a .safetensors file inside its folder: a shard named by a path
    out of the folder, or pickled (.bin, .pt) weights, which transformers would unpickle, are refused.
    In a `local` folder a shard must not be a symlink out of it either (the Hub cache's always are)."""
    weight_map = read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(name, str) for name in weight_map.values()):
        raise ValueError(f"{index}: weight_map must map each tensor name to a shard's file name.")
    folder = index.parent.resolve()
    shards = []
    for name in sorted(set(weight_map.values())):
        shard = index.parent / name
        inside = not Path(name).is_absolute() and ".." not in Path(name).parts and "\\" not in name and (
            not local or folder in shard.resolve().parents)
        if not (inside and name.endswith(".safetensors")):
            raise ValueError(f"{index}: weight_map names the shard {name!r}; shards must be .safetensors files "
                             "inside the model folder (pickled weights are never loaded).")
        shards.append(shard)
    return shards


def _hub_options(kwargs: dict) -> dict:
    return {key: kwargs[key] for key in ("cache_dir", "revision", "subfolder") if kwargs.get(key) is not None}


def check_hub_index(name: str, kwargs: dict) -> None:
    """A Hub model's weights index, fetched and checked before transformers fetches the shards it names."""
    try:
        index = cached_file(name, WEIGHTS_INDEX, _raise_exceptions_for_missing_entries=False, **_hub_options(kwargs))
    except (OSError, ValueError):
        return  # no such repository, or offline: from_pretrained says so
    if index:
        check_weights_index(Path(index), local=False)


def cached_folder(name: str, kwargs: dict) -> Path | None:
    """Where the Hub cache holds the files of the Hub model `name` (after from_pretrained fetched them)."""
    options = _hub_options(kwargs)
    try:
        config = cached_file(name, "config.json", local_files_only=True, _raise_exceptions_for_missing_entries=False,
                             **options)
    except OSError:
        return None
    return Path(config).parent if config else None


def check_unexpected_keys(name, unexpected) -> None:
    """Refuse weights holding tensors the model of config.json has no place for: transformers drops
    them with a log line, so the weights of a deeper model load under a shallower config."""
    unexpected = sorted(unexpected)
    if unexpected:
        raise ValueError(
            f"The weights of {str(name)!r} hold {len(unexpected)} tensors that the model described by its config.json "
            f"does not have (first: {unexpected[0]!r}); they would be dropped. The weights belong to a larger or "
            "another model (more layers than num_layers / num_decoder_layers say?): fix config.json or point to "
            "the folder the weights came with."
        )
