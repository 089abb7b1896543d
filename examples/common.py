"""What the numbered examples share: matplotlib without a display, where pictures go, and a trained model."""

import argparse
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # draw to files; no display needed
import matplotlib.pyplot as plt  # noqa: F401  (the examples draw with it)
from transformers.utils import logging as hf_logging

from modeling_vaswani import VaswaniForConditionalGeneration, shipped_model_path
from modeling_vaswani.cli import run_main as run  # noqa: F401  (a user error ends in one `error:` line)
from modeling_vaswani.text_lines import read_lines
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.data import DEFAULT_DATA_DIR, MULTI30K_SPLITS

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))


def save(fig, name: str) -> None:
    fig.tight_layout()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    fig.savefig(OUTPUT_DIR / name, dpi=110, bbox_inches="tight")
    print(f"\nsaved {OUTPUT_DIR / name}")


def trained_model(doc: str, flags: dict, **kwargs):
    """(arguments, model, tokenizer) of an example that reads a trained model: --model and `flags`,
    {name: (default, help)}, the type that of the default."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a saved model folder (default: the shipped model, hub_card/)")
    for name, (default, about) in flags.items():
        parser.add_argument(f"--{name}", type=type(default), default=default, help=f"{about} (default {default})")
    args = parser.parse_args()
    return args, *load_trained(args.model, **kwargs)


def load_trained(folder: str | None, **kwargs):
    """The model in `folder` (default: the shipped one) and its tokenizer, or a one-line error if none is there."""
    path = Path(folder or shipped_model_path())
    if not all((path / name).is_file() for name in ("config.json", "model.safetensors")):
        raise FileNotFoundError(f"no trained model in {path} (config.json and model.safetensors needed); "
                                "train one with `python scripts/train.py` and pass --model outputs/multi30k-en-de")
    hf_logging.disable_progress_bar()
    return VaswaniForConditionalGeneration.from_pretrained(str(path), **kwargs).eval(), load_tokenizer(path)


def validation_lines(language: str) -> list[str]:
    return read_lines(DEFAULT_DATA_DIR / f"{MULTI30K_SPLITS['validation']}.{language}.gz")
