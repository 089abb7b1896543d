"""Example 11 — encoder–decoder attention of a trained model, drawn as a word alignment.

In encoder–decoder attention "the queries come from the previous decoder layer, and the memory
keys and values come from the output of the encoder" (§3.2.3): while the decoder writes each
output token it spreads one unit of attention over the source tokens. For a trained translation
model those weights often line up with the words being translated, like an alignment.

What this script does: takes a real Multi30k validation sentence, translates it with the model
(§6.1 beam search), then runs the model once more on its own translation with
`output_attentions=True` (the eager attention path returns the weights) and draws the
encoder–decoder weights of every decoder layer, averaged over the heads: source tokens across,
output tokens down. It also prints, for each output token, the source token it attended to most.

    python examples/11_trained_attention.py                       # the shipped model in hub_card/
    python examples/11_trained_attention.py --model outputs/multi30k-en-de --index 3
"""

import argparse
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import torch
from transformers.utils import logging as hf_logging

from modeling_vaswani import VaswaniForConditionalGeneration, shipped_model_path
from modeling_vaswani.cli import run_main
from modeling_vaswani.training.data import DEFAULT_DATA_DIR, MULTI30K_SPLITS, read_lines
from modeling_vaswani.tokenizer_loading import load_tokenizer

OUTPUT_DIR = Path(os.environ.get("EXAMPLES_OUTPUT_DIR", Path(__file__).resolve().parent))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a saved model folder (default: the shipped model, hub_card/)")
    parser.add_argument("--index", type=int, default=6, help="which Multi30k validation sentence (default 6)")
    parser.add_argument("--source_lang", default="en", help="the model's source language (default en)")
    return parser.parse_args()


def load_model(folder: str):
    """The model (eager attention, so weights can be returned) and its tokenizer, or a one-line error."""
    path = Path(folder)
    if not (path / "config.json").is_file() or not (path / "model.safetensors").is_file():
        raise FileNotFoundError(
            f"no trained model in {folder} (config.json and model.safetensors needed); "
            "train one with `python scripts/train.py` and pass --model outputs/multi30k-en-de"
        )
    hf_logging.disable_progress_bar()
    model = VaswaniForConditionalGeneration.from_pretrained(str(path), attn_implementation="eager").eval()
    return model, load_tokenizer(path)


def main():
    args = parse_args()
    model, tokenizer = load_model(args.model or shipped_model_path())
    sentences = read_lines(DEFAULT_DATA_DIR / f"{MULTI30K_SPLITS['validation']}.{args.source_lang}.gz")
    if not 0 <= args.index < len(sentences):
        raise ValueError(f"--index must be in [0, {len(sentences)}), got {args.index}")
    sentence = sentences[args.index]

    encoded = tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        generated = model.generate(**encoded)  # the model's own decoding settings (§6.1)
        # Decoder input = [<s>, y_1, …, y_m−1]; row t of the attention belongs to predicting y_t.
        outputs = model(**encoded, decoder_input_ids=generated[:, :-1], output_attentions=True)
    source_tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    target_tokens = tokenizer.convert_ids_to_tokens(generated[0, 1:])
    print(f"source (validation #{args.index}): {sentence}")
    print(f"translation: {tokenizer.decode(generated[0], skip_special_tokens=True).strip()}")
    print(f"source tokens ({len(source_tokens)}): {' '.join(source_tokens)}")
    print(f"output tokens ({len(target_tokens)}): {' '.join(target_tokens)}")

    # One tensor per decoder layer: (B=1, h, T, S) → averaged over heads (T, S).
    layers = [weights[0].mean(0) for weights in outputs.cross_attentions]
    print(f"\ncross-attention: {len(layers)} layers × {outputs.cross_attentions[0].shape[1]} heads, "
          f"each (T={len(target_tokens)}, S={len(source_tokens)}); every row sums to 1")
    last = layers[-1]
    print("most-attended source token per output token (last layer, mean over heads):")
    for t, token in enumerate(target_tokens):
        s = int(last[t].argmax())
        print(f"  {token:>14} ← {source_tokens[s]:<14} ({last[t, s]:.2f})")

    width = min(24.0, 0.45 * len(source_tokens) * len(layers) + 3)  # deep models: narrower panels
    fig, axes = plt.subplots(1, len(layers), figsize=(width, 0.38 * len(target_tokens) + 2.5), squeeze=False)
    for layer, (axis, weights) in enumerate(zip(axes[0], layers), start=1):
        axis.imshow(weights.numpy(), cmap="Greys", vmin=0, vmax=1)
        axis.set_xticks(range(len(source_tokens)), source_tokens, rotation=90, fontsize=8)
        axis.set_yticks(range(len(target_tokens)), target_tokens, fontsize=8)
        axis.set_title(f"decoder layer {layer}")
        axis.set_xlabel("source token (keys)")
    axes[0][0].set_ylabel("output token (queries)")
    fig.suptitle("Encoder–decoder attention, mean over heads (§3.2.3)")
    fig.tight_layout()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / "11_trained_attention.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    print(f"saved {path}")


if __name__ == "__main__":
    run_main(main)
    sys.exit(0)
