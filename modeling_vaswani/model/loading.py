"""Strict loading and saving of checkpoints (Hugging Face glue, not from the paper).

transformers fills tensors a weights file lacks with random values and drops those it has no place
for, with a log line; `save_pretrained` writes model.safetensors last, so an interrupted save loads as
an untrained model. `StrictCheckpoints` (mixed into `VaswaniPreTrainedModel`) makes a loaded model
complete or loading fail, naming the file or tensor: no weights (FileNotFoundError), a damaged file,
missing, extra or misshapen tensors (`ignore_mismatched_sizes=True` re-initialises the last on
purpose), and what folder_checks.py refuses. Pickled weights are never unpickled: that can run code.

Which matrices are one (§3.4, `share_embeddings` / `tie_word_embeddings`) is read from the config: a
model whose config changed after it was built is not saved, and a checkpoint saved tied loads with
`tie_word_embeddings=False`, its projection a copy of the matrix it was.
"""

from collections import defaultdict
from pathlib import Path

import torch
from safetensors import SafetensorError

from .folder_checks import (
    cached_folder, check_hub_index, check_model_files, check_model_location, check_weights_file,
)
from .generation import drop_generate_fallbacks

# What transformers loads as a model's own `generate` (GenerationMixin.load_custom_generate): a hand-over
# to the model's `generate`, copied from the same path under the model code.
MODEL_CODE = Path(__file__).parent
CUSTOM_GENERATE_FILE = "custom_generate/generate.py"
CUSTOM_GENERATE_SOURCE = MODEL_CODE / CUSTOM_GENERATE_FILE


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
            raise ValueError(
                f"Cannot read the weights {str(where)!r}: {error}. The file is truncated or corrupted (an "
                "interrupted save or download?); save or download the model again."
            ) from None
        untied = fill_untied_weights(model, info["missing_keys"])
        info["missing_keys"] = type(info["missing_keys"])(k for k in info["missing_keys"] if k not in untied)
        name = str(pretrained_model_name_or_path)
        refuse_keys(name, info["missing_keys"], "lack {} of the model's tensors (first: {!r}); they would start from "
                    "random values. The weights file is incomplete or belongs to another model; save the model again "
                    "or point to a complete folder.")
        refuse_keys(name, info["unexpected_keys"], "hold {} tensors that the model described by its config.json does "
                    "not have (first: {!r}); they would be dropped. The weights belong to a larger or another model "
                    "(more layers than num_layers / num_decoder_layers say?): fix config.json or point to the folder "
                    "the weights came with.")
        if local_folder is None and isinstance(pretrained_model_name_or_path, str):
            fetched = cached_folder(pretrained_model_name_or_path, kwargs)  # a Hub id: its files, now in the cache
            if fetched is not None:
                check_model_files(fetched, kwargs.get("generation_config") is not None, local=False)
        if info["mismatched_keys"] and not reinit_mismatched:
            key, stored, expected = sorted(info["mismatched_keys"], key=lambda item: item[0])[0]
            raise ValueError(
                f"The weights of {name!r} do not match its config: tensor {key!r} has "
                f"shape {tuple(stored)} in the file but {tuple(expected)} in the model the config describes "
                f"({len(info['mismatched_keys'])} such tensors). Fix config.json (e.g. d_model, d_ff, vocab_size) "
                "or pass ignore_mismatched_sizes=True to re-initialise those tensors."
            )
        return (model, info) if return_info else model

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Old weights in `save_directory` are removed first (model.safetensors is written last): a save
        stopped half-way leaves a folder that refuses to load, not old weights under a new config.json.
        generation_config.json lists only what was set (and §6.1's offset); `auto_map` names every model
        class (`_auto_map`); a model that generates also gets custom_generate/generate.py, which
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
            f"{config.tie_word_embeddings}) does not describe how its weights are shared "
            f"(shared now: {sorted(sorted(group) for group in actual_groups)}); was it changed after the model was "
            "built? Nothing was written. Build the model from the changed config instead, e.g. "
            "from_pretrained(folder, tie_word_embeddings=False) for a projection of its own."
        )
