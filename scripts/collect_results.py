"""Measure what a model card reports and write it to <shipped model>/results.json.

    python scripts/collect_results.py --run_dir outputs/multi30k-en-de

Decodes val and test with the final and the averaged weights (§6.1), greedy, with §6.1's beam 4 and with
--also_beams; scores each with sacreBLEU, measures the loss on the references and adds how the model was
trained (run_info.json, trainer_state.json). scripts/push_to_hub.py renders the card from the file.
"""

import json
import shlex
from pathlib import Path

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli, outputs
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli, outputs


def parse_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__)
    add = parser.add_argument
    add("--run_dir", required=True, help="Output folder of scripts/train.py.")
    add("--shipped", help="The model to ship (default: <run_dir>/averaged).")
    add("--splits", nargs="+", default=["validation", "test"], choices=cli.MULTI30K_SPLITS)
    add("--source_lang", default="en")
    add("--target_lang", default="de")
    add("--batch_size", type=cli.positive_int, default=100)
    add("--procedure", default="", help="One paragraph on how and why it was trained so.")
    add("--started_from", help="The fine-tuned model folder, with a results.json: its training comes first.")
    add("--output_dir", help="Where the translations go (default: ./evaluations/<run folder name>).")
    add("--also_beams", nargs="*", type=cli.positive_int, default=[5],
        help="Beam sizes decoded besides §6.1's 4 and greedy (default: 5; none: --also_beams).")
    add("--speed_from", help="A benchmark's results.json (benchmarks/run.py): its speeds go into the card.")
    add("--threads", type=cli.positive_int, help="CPU threads (default: OMP_NUM_THREADS, else 1 for a model under "
        "20M parameters, else the idle cores).")
    return parser.parse_args(argv)


def earlier_training(model_dir: Path) -> dict:
    """The training record in a model folder's results.json, written by this script."""
    from modeling_vaswani.model.strict_json import read_json

    path = model_dir / "results.json"
    if not path.is_file():
        raise FileNotFoundError(f"--started_from {model_dir}: no results.json there; pass the model folder whose "
                                "card this script wrote, or leave the flag out.")
    training = read_json(path).get("training")
    needed = {"segments": list, "log_history": list, "steps": int, "epochs": (int, float)}
    if not isinstance(training, dict) or not all(isinstance(training.get(k), kind) for k, kind in needed.items()):
        raise ValueError(f"--started_from {path}: no training segments, steps, epochs and curve in it; was it "
                         "written by collect_results.py?")
    return training


def training_summary(run_dir: Path, procedure: str, started_from: dict | None = None) -> dict:
    """The card's training block; with `started_from` (the fine-tuned model's record) that history first,
    this run's steps and epochs going on from where it ended."""
    from modeling_vaswani.model.strict_json import read_json
    from modeling_vaswani.training.run_folder import read_run_info, summarize

    state_path = run_dir / "trainer_state.json"
    if not state_path.is_file():
        raise FileNotFoundError(f"{state_path}: not found; is {run_dir} a finished scripts/train.py run?")
    info, state = read_run_info(run_dir), read_json(state_path)
    steps, epochs, history = state["global_step"], state["epoch"], state["log_history"]
    if info["segments"][-1].get("minutes") is None:  # a record from before segments kept their minutes
        runtime = next((e["train_runtime"] for e in reversed(history) if "train_runtime" in e), None)
        info["segments"][-1]["minutes"] = runtime / 60 if runtime is not None else None
    if started_from is not None:
        earlier_steps, earlier_epochs = started_from["steps"], started_from["epochs"]
        info["segments"] = started_from["segments"] + info["segments"]
        history = started_from["log_history"] + [
            {**entry, "step": entry["step"] + earlier_steps, **({"epoch": entry["epoch"] + earlier_epochs}
                                                                  if "epoch" in entry else {})} for entry in history]
        steps, epochs = steps + earlier_steps, epochs + earlier_epochs
    return {**summarize(info), "steps": steps, "epochs": round(epochs, 1), "procedure": procedure,
            "log_history": history}


def loss_entry(model, tokenizer, split, sources, references, weights: str, averaged: bool, batch_size: int) -> dict:
    """results.json's record of the loss on one split's references, printed too."""
    from modeling_vaswani.training.data import MULTI30K_SPLITS
    from modeling_vaswani.training.loss_report import reference_losses

    measured = reference_losses(model, tokenizer, sources, references, batch_size=batch_size)
    print(f"{split}-{'averaged' if averaged else 'final'}: loss H(q, p) {measured['loss']:.3f} | H(q, p) − H(q) "
          f"{measured['kl_loss']:.3f} | NLL {measured['nll_loss']:.3f} | perplexity {measured['ppl']:.2f} "
          f"({measured['reference_tokens']:,} reference tokens)", flush=True)
    return {"split": split, "split_name": MULTI30K_SPLITS[split], "weights": weights, "averaged": averaged, **measured}


def main(argv=None):
    args = parse_args(argv)
    run_dir = Path(args.run_dir)
    shipped = Path(args.shipped) if args.shipped else run_dir / "averaged"
    if not (shipped / "config.json").is_file():
        raise FileNotFoundError(f"{shipped}: no model there; train with --average_last K or pass --shipped.")
    reads = [("--run_dir", run_dir), ("--shipped", shipped), ("--started_from", args.started_from),
             ("--speed_from", args.speed_from)]
    out_dir = outputs.claim("--output_dir", args.output_dir or Path("evaluations") / run_dir.resolve().name, reads,
                            folder=True, results=True)
    outputs.claim("--shipped", shipped / "results.json", reads[2:])  # by design; only these reads could be it
    speed_path = Path(args.speed_from) if args.speed_from else None
    if speed_path is not None and not speed_path.is_file():
        raise FileNotFoundError(f"--speed_from {speed_path}: no such file; pass a benchmark's results.json, e.g. "
                                "benchmarks/recorded/<date>-translation/results.json.")
    started_from = earlier_training(Path(args.started_from)) if args.started_from else None
    # Only now the package, torch and transformers: --help, a wrong flag and the checks above answer at once.
    from modeling_vaswani.evaluation.scoring import score_model
    from modeling_vaswani.evaluation.translation import as_one_line, load_translator
    from modeling_vaswani.hub.model_card import speed_from_benchmark
    from modeling_vaswani.model.generation import LENGTH_PENALTY, NUM_BEAMS, PAPER_DECODING_TEXT
    from modeling_vaswani.model.strict_json import read_json
    from modeling_vaswani.threads import use_threads
    from modeling_vaswani.training.data import MULTI30K_SPLITS, multi30k_pairs

    speed = speed_from_benchmark(read_json(speed_path), str(speed_path)) if speed_path is not None else None
    training = training_summary(run_dir, args.procedure, started_from)
    evaluations, losses = [], []
    for folder, averaged, weights in [(shipped, True, f"average of the last checkpoints ({shipped.name})"),
                                      (run_dir, False, "final weights, no averaging")]:
        model, tokenizer = load_translator(str(folder))
        threads, _ = use_threads(model, args.threads)
        for split in args.splits:
            sources, references = multi30k_pairs(split, args.source_lang, args.target_lang)
            losses.append(loss_entry(model, tokenizer, split, sources, references, weights, averaged, args.batch_size))
            for num_beams in dict.fromkeys([NUM_BEAMS, *args.also_beams, 1]):
                hypotheses, scores = score_model(model, tokenizer, sources, references, batch_size=args.batch_size,
                                                 num_beams=num_beams, **({"length_penalty": LENGTH_PENALTY}
                                                                         if num_beams > 1 else {}))
                name = f"{split}-{'averaged' if averaged else 'final'}-beam{num_beams}"
                with outputs.write_file(out_dir / f"{name}.hyp.txt", encoding="utf-8") as handle:
                    handle.write("".join(as_one_line(h) + "\n" for h in hypotheses))
                evaluations.append({"split": split, "split_name": MULTI30K_SPLITS[split], "sentences": len(sources),
                                    "weights": weights, "averaged": averaged, "num_beams": num_beams, "scores": scores})
                print(f"{name}: BLEU {scores['bleu']:.2f} | lc-tok {scores['bleu_lowercase_tokenized']:.2f} | "
                      f"chrF {scores['chrf']:.2f} ({scores['translate_seconds']} s, {threads} thread"
                      f"{'s' * (threads != 1)})", flush=True)
    results = {"source_lang": args.source_lang, "target_lang": args.target_lang,
               "example_source": "Two dogs are playing in the snow.", "decoding": PAPER_DECODING_TEXT,
               "evaluations": evaluations, "training": training, "losses": losses, **({"speed": speed} if speed else {})}
    # results.json ships with the model (push_to_hub.py renders the card from it): written whole or not at all.
    with outputs.write_file(shipped / "results.json", encoding="utf-8") as handle:
        handle.write(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {shipped / 'results.json'}; translations in {out_dir}\nnext: python scripts/push_to_hub.py "
          f"--model_dir {shlex.quote(str(shipped))} --repo_id {shlex.quote('you/' + run_dir.resolve().name)} --dry_run")


if __name__ == "__main__":
    cli.run_main(main)
