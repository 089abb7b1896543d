#!/usr/bin/env python
"""Measure what a model card reports and write it to <shipped model>/results.json.

For a finished training run (scripts/train.py ... --average_last K) this decodes the val and test
splits of Multi30k with the final weights and with the averaged weights (§6.1), each with greedy
search and with beam search (beam 4, α = 0.6), scores every combination with sacreBLEU, and adds
how the model was trained (run_info.json, trainer_state.json). scripts/push_to_hub.py renders the
model card from that file.

    python scripts/collect_results.py --run_dir outputs/multi30k-en-de
"""

import argparse
import json
from pathlib import Path

from modeling_vaswani.cli import run_main
from modeling_vaswani.evaluation.scoring import score_model
from modeling_vaswani.model.generation import LENGTH_PENALTY, NUM_BEAMS, PAPER_DECODING_TEXT
from modeling_vaswani.training.data import SPLIT_NAMES, multi30k_pairs
from modeling_vaswani.training.run_record import read_run_info, summarize
from modeling_vaswani.evaluation.translation import load_translator


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run_dir", required=True, help="Output folder of scripts/train.py.")
    parser.add_argument("--shipped", help="The model to ship (default: <run_dir>/averaged).")
    parser.add_argument("--splits", nargs="+", default=["validation", "test"], choices=sorted(SPLIT_NAMES))
    parser.add_argument("--source_lang", default="en")
    parser.add_argument("--target_lang", default="de")
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--procedure", default="", help="One paragraph on how and why it was trained so.")
    return parser.parse_args(argv)


def training_summary(run_dir: Path, procedure: str) -> dict:
    state_path = run_dir / "trainer_state.json"
    if not state_path.is_file():
        raise FileNotFoundError(f"{state_path}: not found; is {run_dir} a finished scripts/train.py run?")
    info = read_run_info(run_dir)
    state = json.loads(state_path.read_text())
    if info["segments"][-1].get("minutes") is None:  # a record from before segments kept their minutes
        runtime = next((e["train_runtime"] for e in reversed(state["log_history"]) if "train_runtime" in e), None)
        info["segments"][-1]["minutes"] = runtime / 60 if runtime is not None else None
    return {
        **summarize(info),
        "steps": state["global_step"],
        "epochs": round(state["epoch"], 1),
        "procedure": procedure,
        "log_history": state["log_history"],
    }


def main(argv=None):
    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    shipped = Path(args.shipped) if args.shipped else run_dir / "averaged"
    if not (shipped / "config.json").is_file():
        raise FileNotFoundError(f"{shipped}: no model there; train with --average_last K or pass --shipped.")
    training = training_summary(run_dir, args.procedure)
    candidates = [(shipped, True, f"average of the last checkpoints ({shipped.name})"),
                  (run_dir, False, "final weights, no averaging")]
    evaluations = []
    for folder, averaged, weights in candidates:
        model, tokenizer = load_translator(str(folder))
        for split in args.splits:
            sources, references = multi30k_pairs(split, args.source_lang, args.target_lang)
            for num_beams in (NUM_BEAMS, 1):
                decoding = {"num_beams": num_beams, **({"length_penalty": LENGTH_PENALTY} if num_beams > 1 else {})}
                hypotheses, scores = score_model(model, tokenizer, sources, references, batch_size=args.batch_size,
                                                 **decoding)
                name = f"{split}-{'averaged' if averaged else 'final'}-beam{num_beams}"
                (run_dir / f"{name}.hyp.txt").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
                evaluations.append({"split": split, "split_name": SPLIT_NAMES[split], "sentences": len(sources),
                                    "weights": weights, "averaged": averaged, "num_beams": num_beams,
                                    "scores": scores})
                print(f"{name}: BLEU {scores['bleu']:.2f} | lc-tok {scores['bleu_lowercase_tokenized']:.2f} | "
                      f"chrF {scores['chrf']:.2f} ({scores['translate_seconds']} s)", flush=True)
    results = {
        "source_lang": args.source_lang,
        "target_lang": args.target_lang,
        "example_source": "Two dogs are playing in the snow.",
        "decoding": PAPER_DECODING_TEXT,
        "evaluations": evaluations,
        "training": training,
    }
    (shipped / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {shipped / 'results.json'}")


if __name__ == "__main__":
    run_main(main)
