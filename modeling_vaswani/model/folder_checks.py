"""What `from_pretrained` checks in a model folder beyond transformers (loading.py says why), each
refusal naming the file, tensor or field: safetensors weights of floating point, a weights index that
names only .safetensors shards inside the folder, strict and valid decoding settings."""

import os
from pathlib import Path

from safetensors import SafetensorError, safe_open
from transformers.utils import cached_file

from .decoding_checks import check_decoding
from .strict_json import read_json

# Tensors of this model are floating point; integer or 8-bit float weights are quantized ones.
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
WEIGHTS_INDEX = "model.safetensors.index.json"


def check_weights_file(folder: Path) -> None:
    """A local model folder must hold safetensors weights (pickled ones are never unpickled)."""
    if (folder / "model.safetensors").is_file() or (folder / WEIGHTS_INDEX).is_file():
        return
    if any(folder.glob("pytorch_model*.bin")):
        raise ValueError(f"{str(folder)!r} holds only pickled weights (pytorch_model.bin), which are not loaded because "
                         "unpickling can run arbitrary code; convert them to model.safetensors with a trusted tool.")
    raise FileNotFoundError(
        f"{str(folder)!r} has no model.safetensors: the folder holds no weights (save_pretrained writes them "
        "last, so an interrupted save leaves this state). Save the model again or point to a complete folder.")


def check_model_location(name) -> Path | None:
    """The local folder `name` names, or None for a Hub id. A file is refused before anything reads it
    (transformers would take it for a config file, then hand it to its weights loaders)."""
    if not isinstance(name, (str, os.PathLike)):
        return None
    path = Path(name)
    if path.is_dir():
        return path
    if path.exists():
        raise NotADirectoryError(f"{str(path)!r} is a file, not a model folder: from_pretrained takes the folder that "
                                 "holds config.json and model.safetensors (or a Hub id like user/name).")
    return None


def check_model_files(config_folder: Path, generation_config_given: bool, local: bool = True) -> None:
    """A resolved folder (local, or the Hub cache's copy): its decoding settings and stored dtypes."""
    for name in ("generation_config.json", "config.json"):
        if not generation_config_given and (config_folder / name).is_file():
            check_decoding_file(config_folder / name)
    if (config_folder / "model.safetensors").is_file():
        weights = [config_folder / "model.safetensors"]
    elif (config_folder / WEIGHTS_INDEX).is_file():
        weights = [shard for shard in check_weights_index(config_folder / WEIGHTS_INDEX, local) if shard.is_file()]
    else:
        weights = []
    for path in weights:
        check_stored_dtypes(path)


def check_decoding_file(path: Path) -> None:
    """transformers would replace a broken generation_config.json by defaults without a word, and keep wrong
    decoding fields (of it, or of config.json when it is missing)."""
    check_decoding(read_json(path), str(path))


def check_stored_dtypes(weights: Path) -> None:
    """Integer (or 8-bit float) weights would be cast value by value into this model's float tensors: garbage."""
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
                    "checkpoint.")


def check_weights_index(index: Path, local: bool = True) -> list[Path]:
    """The shards `index` names, each a .safetensors file inside its folder (a path out of it, or pickled
    weights, which transformers would unpickle, are refused); in a `local` folder not a symlink out of it
    either (the Hub cache's always are)."""
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


def _hub_file(name: str, file: str, kwargs: dict, **options):
    options.update({key: kwargs[key] for key in ("cache_dir", "revision", "subfolder") if kwargs.get(key) is not None})
    return cached_file(name, file, _raise_exceptions_for_missing_entries=False, **options)


def check_hub_index(name: str, kwargs: dict) -> None:
    """A Hub model's weights index, fetched and checked before transformers fetches the shards it names."""
    try:
        index = _hub_file(name, WEIGHTS_INDEX, kwargs)
    except (OSError, ValueError):
        return  # no such repository, or offline: from_pretrained says so
    if index:
        check_weights_index(Path(index), local=False)


def cached_folder(name: str, kwargs: dict) -> Path | None:
    """Where the Hub cache holds the files of the Hub model `name` (after from_pretrained fetched them)."""
    try:
        config = _hub_file(name, "config.json", kwargs, local_files_only=True)
    except OSError:
        return None
    return Path(config).parent if config else None
