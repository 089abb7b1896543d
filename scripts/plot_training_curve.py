#!/usr/bin/env python
"""Draw a training run's curve: training loss and validation BLEU against the step.

    python scripts/plot_training_curve.py --run_dir outputs/multi30k-en-de --output docs/images/training_curve.png

Reads the Trainer's trainer_state.json (its log_history) from the run folder.
"""

from pathlib import Path

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli, outputs
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli, outputs


def parse_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__)
    parser.add_argument("--run_dir", required=True, help="Output folder of scripts/train.py.")
    parser.add_argument("--output", required=True, help="PNG to write.")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    state_path = Path(args.run_dir) / "trainer_state.json"
    if not state_path.is_file():
        raise FileNotFoundError(f"{state_path}: not found; is {args.run_dir} a scripts/train.py run?")
    outputs.claim("--output", args.output, [("--run_dir", state_path)])
    from modeling_vaswani.model.strict_json import read_json

    state = read_json(state_path)
    history = state["log_history"]
    train = [(e["step"], e["loss"]) for e in history if "loss" in e]
    bleu = [(e["step"], e["eval_bleu"]) for e in history if "eval_bleu" in e]
    if not train:
        steps, every = state.get("global_step", 0), state.get("logging_steps")
        took = f"the run took {steps} steps and logged the loss every {every}" if every else f"the run took {steps} steps"
        raise ValueError(f"{state_path} logs no training loss ({took}); train with --logging_steps N, "
                         f"N at most {max(1, steps)}, to draw a curve.")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, loss_axis = plt.subplots(figsize=(8, 4.5))
    loss_axis.plot(*zip(*train), color="tab:blue", label="training loss (label-smoothed, §5.4)")
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("training loss", color="tab:blue")
    if bleu:
        bleu_axis = loss_axis.twinx()
        bleu_axis.plot(*zip(*bleu), "o-", color="tab:red", label="val BLEU (greedy, cased sacreBLEU)")
        bleu_axis.set_ylabel("val BLEU", color="tab:red")
        for step, value in bleu[-1:]:
            bleu_axis.annotate(f"{value:.1f}", (step, value), textcoords="offset points", xytext=(-10, 8))
    figure.legend(loc="center right", bbox_to_anchor=(0.88, 0.55), fontsize=8)
    loss_axis.set_title(f"Training run {Path(args.run_dir).name}")
    figure.tight_layout()
    with outputs.write_file(args.output, "wb") as handle:  # a file object: the format is named, not guessed
        figure.savefig(handle, dpi=110, format=Path(args.output).suffix.lstrip(".") or "png")
    print(f"wrote {args.output}: {len(train)} loss points, {len(bleu)} BLEU points")


if __name__ == "__main__":
    cli.run_main(main)
