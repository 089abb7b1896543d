"""Shared plumbing for the command-line scripts (not from the paper): a user's mistake (a wrong flag value,
a missing file) ends the program with one `error: ...` line, not a traceback; anything else is a bug and
keeps its traceback. Standard library only: scripts load it before torch (scripts/_light_cli.py)."""

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Callable

# Bad input raises ValueError (DataError among them) or OSError (missing files, permissions, full disks).
USER_ERRORS = (ValueError, OSError)
USER_ERROR_EXIT = 2  # as argparse exits on a bad flag
INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports Ctrl-C


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The description as written (a script's docstring holds example commands); defaults the help omits."""

    def _get_help_string(self, action):
        text = action.help or ""
        unset = action.default is None or action.default is False or action.default in ("", argparse.SUPPRESS)
        if action.option_strings and not unset and "default" not in text.lower():
            text += " (default: %(default)s)"
        return text


class ScriptParser:
    """Mixin for argparse.ArgumentParser or HfArgumentParser: a bad flag is one `error: ...` line."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(USER_ERROR_EXIT, f"error: {message} (see --help)\n")


class ArgumentParser(ScriptParser, argparse.ArgumentParser):
    """`argparse.ArgumentParser` with one-line errors; build it as `ArgumentParser(description=__doc__)`."""


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


# The embedded Multi30k's split names (training/data.py maps them to files), here so a script's --help skips torch.
MULTI30K_SPLITS = ("test", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr", "train", "validation")
ENGINES = ("torch", "ctranslate2")
TORCH_DTYPES = ("float32", "bfloat16", "float16")


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """--engine, its CTranslate2 options and the torch engine's speed options, for the scripts that translate."""
    add = parser.add_argument
    add("--engine", default="torch", choices=ENGINES, help="torch: the model itself; ctranslate2: a CTranslate2 "
        "conversion of it (pip install ctranslate2), faster on CPU.")
    add("--ct2_model", help="With --engine ctranslate2: a folder written by scripts/convert_ctranslate2.py "
        "(default: --model, converted once into ~/.cache/modeling_vaswani/ctranslate2/).")
    add("--ct2_compute_type", default="default", help="With --engine ctranslate2: default (the saved weights' type), "
        "int8, float32, int8_float32, float16, ...")
    # The torch engine's speed options (evaluation/fast_path.py); unset, the model is exactly its float32 self.
    add("--dtype", default="float32", choices=TORCH_DTYPES, help="Weights and activations in this dtype (bfloat16 is "
        "fast only on CPUs with AMX or AVX512-BF16; a warning says when it is not).")
    add("--quantize", choices=("int8",), help="int8: torch's dynamic quantization of the Linear layers (CPU only).")
    add("--compile", action="store_true", help="Static key/value cache and torch.compile of the decoding step "
        "(greedy search; compiles again for every batch shape, minutes on a CPU).")


def check_engine_arguments(args) -> None:
    """Refuse the torch engine's speed options with --engine ctranslate2, which has its own."""
    given = [flag for flag, value in (("--dtype", args.dtype != "float32"), ("--quantize", args.quantize),
                                      ("--compile", args.compile)) if value]
    if args.engine == "ctranslate2" and given:
        raise ValueError(f"{', '.join(given)}: a speed option of the torch engine; with --engine ctranslate2 use "
                         "--ct2_compute_type (int8, float32, bfloat16, ...).")


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def looks_like_hub_id(name: str) -> bool:
    """Whether `name` is spelled like a Hub repository, namespace/name: the package's one rule. Anything
    else (./x, ../x, /x, ~/x, x with no slash, a/b/c, a\\b, a--b/c) can only be a local path."""
    return bool(HUB_ID.fullmatch(name)) and ".." not in name and "--" not in name


def missing_model_folder(name: str) -> str | None:
    """Why `name` names no model (said at once, not after the Hub times out), or None when it exists or may be
    a Hub id; namespace/name is a local path when `namespace` is here."""
    path = Path(name)
    if path.exists() or (looks_like_hub_id(name) and not path.parent.is_dir()):
        return None
    return (f"no such model folder ({os.path.abspath(name)} does not exist); name a folder that holds "
            "config.json, or a Hub id like user/name")


def require_model(flag: str, name: str) -> None:
    """Refuse `name` unless it is a folder or may be a Hub id; a file is refused before a loader takes it for one."""
    path = Path(name)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(f"{flag} {name}: is a file, not a model folder; name the folder that holds it.")
    if (reason := missing_model_folder(name)) is not None:
        raise FileNotFoundError(f"{flag} {name}: {reason}.")


def one_line(error: BaseException) -> str:
    """The error's message on one line (its words kept, runs of white space as one space), or its type where it
    has none."""
    return " ".join(str(error).split()) or type(error).__name__


def run_main(main: Callable[[], object]) -> None:
    """Call `main()`; a user error (a panic of the tokenizers library included) ends the program with
    one `error: ...` line and exit status 2, Ctrl-C with "interrupted" and 130."""
    try:
        main()
    except USER_ERRORS as error:
        print(f"error: {one_line(error)}", file=sys.stderr)
        sys.exit(USER_ERROR_EXIT)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(INTERRUPTED_EXIT)
    except BaseException as error:
        # The tokenizers library panics (pyo3's PanicException, a BaseException) on some input, e.g. a
        # tokenizer.json whose pattern backtracks too much: bad input, not a bug here.
        if type(error).__name__ != "PanicException":
            raise
        print(f"error: the tokenizer failed ({one_line(error)}); its tokenizer.json is damaged or holds a pattern "
              "that cannot handle this text", file=sys.stderr)
        sys.exit(USER_ERROR_EXIT)
