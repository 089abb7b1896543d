"""Strict loading and saving of checkpoints (Hugging Face glue, not from the paper).

transformers fills tensors a weights file lacks with random values, drops those it has no place for and
replaces a broken generation_config.json by defaults, with a log line at most. `StrictCheckpoints` makes
a loaded model complete or loading fail, naming the file, tensor or field. Pickled weights are never read.

Which matrices are one (§3.4, `share_embeddings` / `tie_word_embeddings`) is read from the config: a
model whose config changed after it was built is not saved, and a checkpoint saved tied loads with
`tie_word_embeddings=False`, its projection a copy of the matrix it was.
"""

import os
from collections import defaultdict
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from transformers.utils import cached_file

from .generation import check_decoding, drop_generate_fallbacks
from .strict_json import read_json

# What transformers loads as a model's own `generate` (GenerationMixin.load_custom_generate): a hand-over
# to the model's `generate`, copied from the same path under the model code.
MODEL_CODE = Path(__file__).parent
CUSTOM_GENERATE_FILE = "custom_generate/generate.py"
CUSTOM_GENERATE_SOURCE = MODEL_CODE / CUSTOM_GENERATE_FILE
# Tensors of this model are floating point; integer or 8-bit float weights are quantized ones.
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
WEIGHTS_INDEX = "model.safetensors.index.json"


class StrictCheckpoints:
    """Mixed in before `PreTrainedModel`: strict `from_pretrained`, `save_pretrained` as below."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        if kwargs.get("use_safetensors") is False:
            raise ValueError("use_safetensors=False is not supported: weights are loaded from safetensors only.")
        kwargs["use_safetensors"] = True
        local_folder = check_model_location(pretrained_model_name_or_path)  # a file is refused here
        if local_folder is not None:
            check_model_files(local_folder / kwargs.get("subfolder", ""), kwargs.get("generation_config") is not None)
        elif isinstance(pretrained_model_name_or_path, str):
            check_hub_index(pretrained_model_name_or_path, kwargs)
        reinit_mismatched = kwargs.pop("ignore_mismatched_sizes", False)
        return_info = kwargs.pop("output_loading_info", False)
        try:
            # Mismatched shapes are let through here and reported below with their names.
            model, info = super().from_pretrained(
                pretrained_model_name_or_path, *model_args, ignore_mismatched_sizes=True, output_loading_info=True,
                **kwargs,
            )
        except OSError:
            if local_folder is not None and (local_folder / "config.json").is_file():
                check_weights_file(local_folder)  # a clearer message when the weights file is what is missing
            raise
        except SafetensorError as error:
            where = local_folder / "model.safetensors" if local_folder is not None else pretrained_model_name_or_path
            raise ValueError(f"Cannot read the weights {str(where)!r}: {error}. The file is truncated or corrupted (an "
                             "interrupted save or download?).") from None
        untied = fill_untied_weights(model, info["missing_keys"])
        info["missing_keys"] = type(info["missing_keys"])(k for k in info["missing_keys"] if k not in untied)
        name = str(pretrained_model_name_or_path)
        refuse_keys(name, info["missing_keys"], "lack {} of the model's tensors (first: {!r}), which would start "
                    "from random values: an incomplete file, or another model's.")
        refuse_keys(name, info["unexpected_keys"], "hold {} tensors that the model of its config.json does not have (first: "
                    "{!r}), which would be dropped: more layers than num_layers / num_decoder_layers say, or another model's.")
        if local_folder is None and isinstance(pretrained_model_name_or_path, str):
            fetched = cached_folder(pretrained_model_name_or_path, kwargs)  # a Hub id: its files, now in the cache
            if fetched is not None:
                check_model_files(fetched, kwargs.get("generation_config") is not None, local=False)
        if info["mismatched_keys"] and not reinit_mismatched:
            key, stored, expected = sorted(info["mismatched_keys"], key=lambda item: item[0])[0]
            raise ValueError(f"The weights of {name!r} do not match its config: tensor {key!r} has shape {tuple(stored)}, "
                             f"the config says {tuple(expected)} ({len(info['mismatched_keys'])} such tensors); fix "
                             "config.json or pass ignore_mismatched_sizes=True to re-initialise them.")
        return (model, info) if return_info else model

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Old weights are removed first: a save stopped half-way leaves a folder that refuses to load, not old
        weights under a new config.json. A model that generates also gets custom_generate/generate.py, which
        transformers makes its `generate` under `trust_remote_code=True` (a hand-over to §6.1's search)."""
        check_shared_weights_match_config(self)  # before anything is written
        if getattr(self, "_auto_class", None) is not None:
            module = type(self).__module__.rsplit(".", 1)[-1]
            names = {auto: f"{module}.{name}" for auto, name in getattr(self, "_auto_map", {}).items()}
            self.config.auto_map = {**(getattr(self.config, "auto_map", None) or {}), **names}
        if kwargs.get("is_main_process", True):
            for name in ("model.safetensors", "model.safetensors.index.json"):
                (Path(save_directory) / name).unlink(missing_ok=True)
            if self.can_generate():
                target = Path(save_directory) / CUSTOM_GENERATE_FILE
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(CUSTOM_GENERATE_SOURCE.read_bytes())
        generation_config = getattr(self, "generation_config", None)
        if generation_config is not None:
            drop_generate_fallbacks(generation_config)
        return super().save_pretrained(save_directory, *args, **kwargs)


def refuse_keys(name: str, keys, problem: str) -> None:
    """A ValueError naming the first of `keys` (tensors missing from, or extra in, the weights), if any."""
    if keys:
        raise ValueError(f"The weights of {name!r} " + problem.format(len(keys), sorted(keys)[0]))


def fill_untied_weights(model, missing_keys) -> list[str]:
    """The names of projection weights a checkpoint saved tied lacks, filled with a copy of the matrix they
    were tied to (`_tied_weights_keys`): the trained projection, not a random start."""
    filled = []
    for target, source in (getattr(model, "_tied_weights_keys", None) or {}).items():
        if target in missing_keys and source not in missing_keys and target not in model.all_tied_weights_keys:
            with torch.no_grad():
                model.get_parameter(target).copy_(model.get_parameter(source))
            filled.append(target)
    return filled


def check_shared_weights_match_config(model) -> None:
    """Refuse to save a model whose shared matrices are not the ones its config declares: transformers
    saves one copy of each tied matrix and re-ties from the config, so the folder would not load."""
    declared, actual = defaultdict(set), defaultdict(set)
    for target, source in model.get_expanded_tied_weights_keys(all_submodels=True).items():
        declared[source].update((source, target))
    for name, parameter in model.named_parameters(remove_duplicate=False):
        actual[id(parameter)].add(name)
    declared_groups = {frozenset(group) for group in declared.values()}
    actual_groups = {frozenset(group) for group in actual.values() if len(group) > 1}
    if declared_groups != actual_groups:
        config = model.config
        raise ValueError(
            f"The model's config (share_embeddings={config.share_embeddings}, tie_word_embeddings="
            f"{config.tie_word_embeddings}) does not describe how its weights are shared (shared now: "
            f"{sorted(sorted(group) for group in actual_groups)}); nothing was written. Build the model from the "
            "changed config, e.g. from_pretrained(folder, tie_word_embeddings=False).")


def check_weights_file(folder: Path) -> None:
    """A local model folder must hold safetensors weights (pickled ones are never unpickled)."""
    if (folder / "model.safetensors").is_file() or (folder / WEIGHTS_INDEX).is_file():
        return
    if any(folder.glob("pytorch_model*.bin")):
        raise ValueError(f"{str(folder)!r} holds only pickled weights (pytorch_model.bin), never loaded because "
                         "unpickling can run code; convert them to model.safetensors with a trusted tool.")
    raise FileNotFoundError(f"{str(folder)!r} has no model.safetensors (an interrupted save: it is written last).")


def check_model_location(name) -> Path | None:
    """The local folder `name` names, or None for a Hub id. A file is refused before anything reads it
    (transformers would take it for a config file, then hand it to its weights loaders)."""
    if not isinstance(name, (str, os.PathLike)):
        return None
    path = Path(name)
    if path.is_dir():
        return path
    if path.exists():
        raise NotADirectoryError(f"{str(path)!r} is a file, not a model folder (or a Hub id like user/name).")
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
                raise ValueError(f"{str(weights)!r} stores tensor {key!r} as {dtype}, not as floating point: "
                                 "quantized or integer weights would load as garbage.")


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
                             "inside the model folder.")
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
