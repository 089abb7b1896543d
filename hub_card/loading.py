"""Strict loading and saving of checkpoints (Hugging Face glue, not from the paper).

Hugging Face only logs a warning when a weights file lacks some parameters, and fills them with
random values. `save_pretrained` writes config.json first and model.safetensors last, so a save
that was interrupted would then load as a valid-looking but untrained model. `StrictCheckpoints`
(mixed into `VaswaniPreTrainedModel`) makes a loaded model complete or makes loading fail:
- a folder without model.safetensors → FileNotFoundError;
- a truncated or corrupted safetensors file → ValueError naming it;
- weights that do not cover every parameter → ValueError naming the missing tensors;
- a tensor whose shape differs from the one config.json implies → ValueError naming it
  (pass `ignore_mismatched_sizes=True` to re-initialise such tensors on purpose).
Weights are read from safetensors only: pickled `pytorch_model.bin` files are never unpickled,
because unpickling can run arbitrary code.
"""

from pathlib import Path

from safetensors import SafetensorError

from .generation import drop_generate_fallbacks


class StrictCheckpoints:
    """`from_pretrained` that refuses incomplete weights; `save_pretrained` that never leaves old
    weights beside a new config. Mixed in before `PreTrainedModel`."""

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        if kwargs.get("use_safetensors") is False:
            raise ValueError("use_safetensors=False is not supported: weights are loaded from safetensors only.")
        kwargs["use_safetensors"] = True
        folder = Path(pretrained_model_name_or_path) if pretrained_model_name_or_path is not None else None
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
        missing = sorted(info["missing_keys"])
        if missing:
            raise ValueError(
                f"The weights of {str(pretrained_model_name_or_path)!r} lack {len(missing)} of the model's tensors "
                f"(first: {missing[0]!r}); they would start from random values. The weights file is incomplete or "
                "belongs to another model; save the model again or point to a complete folder."
            )
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
        """
        if kwargs.get("is_main_process", True):
            for name in ("model.safetensors", "model.safetensors.index.json"):
                (Path(save_directory) / name).unlink(missing_ok=True)
        generation_config = getattr(self, "generation_config", None)
        if generation_config is not None:
            drop_generate_fallbacks(generation_config)
        return super().save_pretrained(save_directory, *args, **kwargs)


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
