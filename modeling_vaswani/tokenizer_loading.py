"""Loading a saved tokenizer strictly (not from the paper): what does not parse is refused in one line naming
the file, a panic of the `tokenizers` library included."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerFast

from .cli import looks_like_hub_id, one_line
from .model.strict_json import read_json


def load_tokenizer(path):
    """The tokenizer of a save_pretrained folder (tokenizer.json), else by AutoTokenizer (tokenizer_config.json
    alone, as Marian's sentencepiece tokenizer; a Hub id), never running shipped code."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{directory} is a file, not a tokenizer folder; point to the model's folder.")
    if not directory.exists() and looks_like_hub_id(str(path)):
        return _loaded(lambda: AutoTokenizer.from_pretrained(str(path), trust_remote_code=False), str(path))
    if (directory / "tokenizer.json").is_file():
        return _loaded(lambda: PreTrainedTokenizerFast.from_pretrained(str(directory)),
                       str(directory / "tokenizer.json"))
    if (directory / "tokenizer_config.json").is_file():
        return _loaded(lambda: AutoTokenizer.from_pretrained(str(directory), trust_remote_code=False),
                       str(directory / "tokenizer_config.json"))
    raise FileNotFoundError(f"No tokenizer found at {directory}: expected {directory / 'tokenizer.json'}. Train "
                            "one with train_bpe_tokenizer(...) and save it with tokenizer.save_pretrained(path).")


# What from_pretrained puts into a tokenizer's init_kwargs about how it was loaded (offline mode,
# local files) and what tokenizer.json already holds (its truncation). save_pretrained would write
# them into tokenizer_config.json, so a folder loaded and saved again would differ from the original.
_LOADER_STATE = ("is_local", "local_files_only", "max_length", "stride", "truncation_side", "truncation_strategy")

# The small JSON files beside tokenizer.json that transformers reads too.
_TOKENIZER_SIDE_FILES = ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")


def _loaded(load, name: str):
    folder = Path(name).parent if Path(name).is_file() else None
    for side in _TOKENIZER_SIDE_FILES if folder is not None else ():
        if (folder / side).is_file():
            read_json(folder / side)
    try:
        tokenizer = load()
        for key in _LOADER_STATE:
            getattr(tokenizer, "init_kwargs", {}).pop(key, None)
        return tokenizer
    except (FileNotFoundError, PermissionError):
        raise
    except BaseException as error:  # json, tokenizers (a bare Exception) and transformers errors alike
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise
        if isinstance(error, OSError) and not Path(name).exists():
            raise  # a Hub id that cannot be fetched: transformers' message says why
        raise ValueError(f"{name} is not a valid tokenizer ({one_line(error)}); save the tokenizer again with save_pretrained, "
                         "or copy the model's tokenizer files (tokenizer.json, tokenizer_config.json) from where the "
                         "model came from.") from None
