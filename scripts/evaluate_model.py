#!/usr/bin/env python
"""Translate a test set with a saved model and score it (§6.1: beam 4, α = 0.6, length ≤ input + 50).

    python scripts/evaluate_model.py --model hub_card --split test
    python scripts/evaluate_model.py --model outputs/multi30k-en-de --split validation --num_beams 1
    python scripts/evaluate_model.py --model my-model --source_file test.en --reference_file test.de

Writes <output_dir>/<name>.hyp.txt (one translation per line) and <name>.scores.json: cased
detokenized sacreBLEU with its signature, lowercased tokenized BLEU, the paper's tokenized BLEU
with compound splitting, and chrF.
"""

import argparse
import json
from pathlib import Path

from modeling_vaswani.cli import ArgumentParser, run_main
from modeling_vaswani.training.data import read_lines
from modeling_vaswani.evaluation.scoring import score_model
from modeling_vaswani.training.data import multi30k_pairs
from modeling_vaswani.evaluation.translation import load_translator
from modeling_vaswani.model.generation import LENGTH_PENALTY, MAX_OUTPUT_LENGTH_OFFSET, NUM_BEAMS


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="Model folder or Hub id.")
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"],
                        help="Multi30k split (test = test_2016_flickr).")
    parser.add_argument("--source_lang", default="en")
    parser.add_argument("--target_lang", default="de")
    parser.add_argument("--source_file", help="Score on these local sources instead of Multi30k ...")
    parser.add_argument("--reference_file", help="... against these references.")
    parser.add_argument("--max_samples", type=int, help="Only the first N sentences.")
    parser.add_argument("--num_beams", type=int, default=NUM_BEAMS, help=f"§6.1: beam size {NUM_BEAMS}.")
    parser.add_argument("--length_penalty", type=float, default=LENGTH_PENALTY, help=f"§6.1: α = {LENGTH_PENALTY}.")
    parser.add_argument("--max_new_tokens", type=int,
                        help=f"Default: input length + {MAX_OUTPUT_LENGTH_OFFSET} (§6.1).")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--output_dir", help="Where to write results (default: the model folder).")
    parser.add_argument("--name", help="File name stem (default: <split>-beam<N>).")
    return parser.parse_args(argv)


def load_pairs(args):
    if (args.source_file is None) != (args.reference_file is None):
        raise ValueError("--source_file and --reference_file go together.")
    if args.source_file:
        sources, references = read_lines(args.source_file), read_lines(args.reference_file)
        if len(sources) != len(references):
            raise ValueError(f"{args.source_file} has {len(sources)} lines but {args.reference_file} "
                             f"has {len(references)}; they must be parallel.")
        return sources[:args.max_samples], references[:args.max_samples]
    return multi30k_pairs(args.split, args.source_lang, args.target_lang, args.max_samples)


def main(argv=None):
    args = parse_args(argv)
    if not Path(args.model).is_dir() and "/" not in args.model.strip("./"):
        raise FileNotFoundError(f"--model {args.model}: no such model folder (or Hub id like user/name).")
    sources, references = load_pairs(args)
    model, tokenizer = load_translator(args.model)
    generate_kwargs = {"num_beams": args.num_beams, "length_penalty": args.length_penalty}
    if args.max_new_tokens:
        generate_kwargs["max_new_tokens"] = args.max_new_tokens

    hypotheses, scores = score_model(model, tokenizer, sources, references, batch_size=args.batch_size,
                                     **generate_kwargs)
    scores.update(model=str(args.model), split=args.source_file or args.split,
                  source_lang=args.source_lang, target_lang=args.target_lang)
    out_dir = Path(args.output_dir or (args.model if Path(args.model).is_dir() else "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    name = args.name or f"{'custom' if args.source_file else args.split}-beam{args.num_beams}"
    (out_dir / f"{name}.hyp.txt").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    (out_dir / f"{name}.scores.json").write_text(json.dumps(scores, indent=2, ensure_ascii=False) + "\n")
    print(f"BLEU {scores['bleu']:.2f} ({scores['signature']}) | lowercased tokenized BLEU "
          f"{scores['bleu_lowercase_tokenized']:.2f} | paper tokenized BLEU {scores['bleu_paper_tokenized']:.2f} "
          f"| chrF {scores['chrf']:.2f} | {len(sources)} sentences in {scores['translate_seconds']:.1f} s → {out_dir / name}.*")


if __name__ == "__main__":
    run_main(main)
