"""Strict loading and saving of checkpoints (Hugging Face glue, not from the paper).

Hugging Face only logs a warning when a weights file lacks some parameters, and fills them with
random values. `save_pretrained` writes config.json first and model.safetensors last, so a save
that was interrupted would then load as a valid-looking but untrained model. `StrictCheckpoints`
(mixed into `VaswaniPreTrainedModel`) makes a loaded model complete or makes loading fail:
- a folder without model.safetensors → FileNotFoundError;
- a truncated or corrupted safetensors file → ValueError naming it;
- weights that do not cover every parameter → ValueError naming the missing tensors;
- a tensor whose shape differs from the one config.json implies → ValueError naming it
  (pass `ignore_mismatched_sizes=True` to re-initialise such tensors on purpose);
- tensors the config has no place for (the weights of a deeper model under a shallower config),
  which transformers would drop → ValueError naming the first;
- weights stored as integers or 8-bit floats (quantized), which would be cast value by value into
  garbage → ValueError naming the tensor and its dtype;
- a generation_config.json that is not strict JSON (transformers would fall back to defaults without
  a word) or whose decoding fields are wrong (decoding_checks.py) → ValueError naming the file and field;
- a weights index naming a shard that is not a .safetensors file inside the folder → ValueError;
- a path to a file instead of a folder → NotADirectoryError, before anything reads it.
Weights are read from safetensors only: pickled `pytorch_model.bin` files are never unpickled,
because unpickling can run arbitrary code.

Which matrices are one (§3.4's sharing, `share_embeddings` / `tie_word_embeddings`) is read from
the config, so `save_pretrained` refuses a model whose config was changed after it was built
(the folder would not load), and a checkpoint saved tied loads with `tie_word_embeddings=False`:
the projection then starts as a copy of the matrix it was.
"""

from collections import defaultdict
from pathlib import Path

import torch
from safetensors import SafetensorError

from .folder_checks import (
    cached_folder, check_hub_index, check_model_files, check_model_location, check_unexpected_keys, check_weights_file,
)
from .generation import drop_generate_fallbacks

# The file transformers loads as a model's own `generate` (GenerationMixin.load_custom_generate), copied
# from the same path under the model code: a few lines that hand over to the model's `generate`, not a
# second copy of beam_search.py (custom_generate/generate.py says why it cannot import it).
MODEL_CODE = Path(__file__).parent
CUSTOM_GENERATE_FILE = "custom_generate/generate.py"
CUSTOM_GENERATE_SOURCE = MODEL_CODE / CUSTOM_GENERATE_FILE


class StrictCheckpoints:
    """`from_pretrained` that refuses incomplete weights; `save_pretrained` that never leaves old
    weights beside a new config. Mixed in before `PreTrainedModel`."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        if kwargs.get("use_safetensors") is False:
            raise ValueError("use_safetensors=False is not supported: weights are loaded from safetensors only.")
        kwargs["use_safetensors"] = True
        folder = Path(pretrained_model_name_or_path) if pretrained_model_name_or_path is not None else None
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
            if folder is not None and folder.is_dir() and (folder / "config.json").is_file():
                check_weights_file(folder)  # a clearer message when the weights file is what is missing
            raise
        except SafetensorError as error:
            local = folder is not None and folder.is_dir()
            where = folder / "model.safetensors" if local else pretrained_model_name_or_path
            raise ValueError(
                f"Cannot read the weights {str(where)!r}: {error}. The file is truncated or corrupted (an "
                "interrupted save or download?); save or download the model again."
            ) from None
        untied = fill_untied_weights(model, info["missing_keys"])
        info["missing_keys"] = type(info["missing_keys"])(k for k in info["missing_keys"] if k not in untied)
        missing = sorted(info["missing_keys"])
        if missing:
            raise ValueError(
                f"The weights of {str(pretrained_model_name_or_path)!r} lack {len(missing)} of the model's tensors "
                f"(first: {missing[0]!r}); they would start from random values. The weights file is incomplete or "
                "belongs to another model; save the model again or point to a complete folder."
            )
        check_unexpected_keys(pretrained_model_name_or_path, info["unexpected_keys"])
        if local_folder is None and isinstance(pretrained_model_name_or_path, str):
            fetched = cached_folder(pretrained_model_name_or_path, kwargs)  # a Hub id: its files, now in the cache
            if fetched is not None:
                check_model_files(fetched, kwargs.get("generation_config") is not None, local=False)
        if info["mismatched_keys"] and not reinit_mismatched:
            name, stored, expected = sorted(info["mismatched_keys"], key=lambda item: item[0])[0]
            raise ValueError(
                f"The weights of {str(pretrained_model_name_or_path)!r} do not match its config: tensor {name!r} has "
                f"shape {tuple(stored)} in the file but {tuple(expected)} in the model the config describes "
                f"({len(info['mismatched_keys'])} such tensors). Fix config.json (e.g. d_model, d_ff, vocab_size) "
                "or pass ignore_mismatched_sizes=True to re-initialise those tensors."
            )
        return (model, info) if return_info else model

    def save_pretrained(self, save_directory, *args, **kwargs):
        """A folder is a model once its model.safetensors is whole, and `save_pretrained` writes that
        file last. Saving over an earlier model (a re-saved checkpoint, a rerun into the same output
        folder), the old weights are removed first: a save stopped half-way then leaves a folder that
        refuses to load, not the earlier weights under the new config.json. The saved
        generation_config.json lists only what was set, and always the §6.1 length offset.
        `auto_map` names every model class of the saved code (`_auto_map`), so the folder loads
        with `AutoModel` as well as with the class it was saved from. A model that generates also
        gets custom_generate/generate.py, which transformers makes the model's `generate` when the
        folder is loaded with `trust_remote_code=True`; it hands over to the model's own `generate`,
        which decodes with §6.1's search (beam_search.py, saved with the rest of the code).
        """
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


def fill_untied_weights(model, missing_keys) -> list[str]:
    """Projection weights a checkpoint lacks because it was saved tied, copied from their source.

    A model loaded with `tie_word_embeddings=False` from a folder saved with it true has its own
    `lm_head.weight`, which the file does not hold: in the saved model that matrix *was* the
    embedding it was tied to (`_tied_weights_keys`), so the copy is the trained projection, not a
    random start. Returns the names filled.
    """
    filled = []
    for target, source in (getattr(model, "_tied_weights_keys", None) or {}).items():
        if target in missing_keys and source not in missing_keys and target not in model.all_tied_weights_keys:
            with torch.no_grad():
                model.get_parameter(target).copy_(model.get_parameter(source))
            filled.append(target)
    return filled


def check_shared_weights_match_config(model) -> None:
    """Refuse to save a model whose shared matrices are not the ones its config declares.

    transformers saves one copy of each tied matrix and re-ties on loading from the config; a
    model whose `tie_word_embeddings` or `share_embeddings` was changed after it was built would
    be written as a folder that does not load (or loads with other weights).
    """
    declared = defaultdict(set)
    for target, source in model.get_expanded_tied_weights_keys(all_submodels=True).items():
        declared[source].update((source, target))
    parameters = dict(model.named_parameters(remove_duplicate=False))
    actual = defaultdict(set)
    for name, parameter in parameters.items():
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
