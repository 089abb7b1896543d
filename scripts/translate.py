#!/usr/bin/env python
"""Translate sentences with a trained model (§6.1 decoding: beam 4, α = 0.6, length ≤ input + 50).

    python scripts/translate.py "Two dogs are playing in the snow."
    python scripts/translate.py --file news.en --output news.de --batch_size 32
    cat news.en | python scripts/translate.py --model outputs/multi30k-en-de --num_beams 1

The model defaults to hub_card/, the English→German Multi30k model shipped with the repository.
Input files are read and translated a batch at a time, so their size does not matter.
"""

import argparse
import sys
from contextlib import nullcontext
from pathlib import Path

from modeling_vaswani.cli import ArgumentParser, run_main
from modeling_vaswani.evaluation.translation import load_translator, translate, translate_stream

DEFAULT_MODEL = str(Path(__file__).resolve().parent.parent / "hub_card")


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sentences", nargs="*", help="Sentences to translate (else --file, else stdin).")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="Model folder or Hub id (default: hub_card).")
    parser.add_argument("--file", help="Translate this file, one sentence per line.")
    parser.add_argument("--output", help="Write translations here (default: stdout).")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--num_beams", type=int, help="Beam size (default: the model's, 4 in the paper).")
    parser.add_argument("--max_new_tokens", type=int, help="Length limit (default: input length + 50).")
    parser.add_argument("--device", help="cpu, cuda, ... (default: cuda if available).")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.batch_size < 1:
        raise ValueError(f"--batch_size must be at least 1, got {args.batch_size}.")
    if args.sentences and args.file:
        raise ValueError("Give sentences as arguments or --file, not both.")
    if args.file and not Path(args.file).is_file():
        raise FileNotFoundError(f"--file {args.file}: no such file.")
    if not Path(args.model).is_dir() and "/" not in args.model.strip("./"):
        raise FileNotFoundError(f"--model {args.model}: no such model folder (or Hub id like user/name).")
    model, tokenizer = load_translator(args.model, args.device)
    generate_kwargs = {k: v for k, v in (("num_beams", args.num_beams), ("max_new_tokens", args.max_new_tokens))
                       if v is not None}

    with (open(args.output, "w", encoding="utf-8") if args.output else nullcontext(sys.stdout)) as out:
        if args.sentences:
            results = translate(model, tokenizer, args.sentences, batch_size=args.batch_size, **generate_kwargs)
        else:
            source = open(args.file, encoding="utf-8", errors="strict") if args.file else nullcontext(sys.stdin)
            with source as lines:
                results = translate_stream(model, tokenizer, lines, batch_size=args.batch_size, **generate_kwargs)
                for text in results:
                    print(text, file=out, flush=not args.output)
                return
        for text in results:
            print(text, file=out)


if __name__ == "__main__":
    run_main(main)
