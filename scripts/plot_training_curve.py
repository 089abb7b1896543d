"""Draw a training run's curve: training loss and validation BLEU against the step; or, with
--time_to_quality, the validation BLEU of several runs against wall-clock minutes.

    python scripts/plot_training_curve.py --run_dir outputs/multi30k-en-de --output docs/images/training_curve.png
    python scripts/plot_training_curve.py --time_to_quality outputs/multi30k-en-de old/results.json \
        --labels "this run" "the last one" --output docs/images/time_to_quality.png

Reads the Trainer's trainer_state.json (its log_history) from a run folder, or a model's results.json.
"""

from pathlib import Path

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli, outputs
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli, outputs


def parse_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__)
    runs = parser.add_mutually_exclusive_group(required=True)
    runs.add_argument("--run_dir", help="Output folder of scripts/train.py.")
    runs.add_argument("--time_to_quality", nargs="+", metavar="RUN",
                      help="Run folders or results.json files: their val BLEU against wall-clock minutes.")
    parser.add_argument("--labels", nargs="+", help="One label for each --time_to_quality run.")
    parser.add_argument("--output", required=True, help="PNG to write.")
    args = parser.parse_args(argv)
    if args.labels and len(args.labels) != len(args.time_to_quality or []):
        parser.error(f"--labels gives {len(args.labels)} labels for {len(args.time_to_quality or [])} runs")
    return args


def bleu_by_minute(source: Path) -> list[tuple[float, float]]:
    """(minutes, val BLEU) of each evaluation: the minutes each entry logged ("run_minutes"), else the
    step at the run's mean rate (its minutes over its steps)."""
    from modeling_vaswani.model.strict_json import read_json
    from modeling_vaswani.training.run_folder import read_run_info, summarize

    if source.is_dir():
        state = read_json(source / "trainer_state.json")
        history, steps, minutes = state["log_history"], state["global_step"], summarize(read_run_info(source))["minutes"]
    else:
        training = read_json(source)["training"]
        history, steps, minutes = training["log_history"], training["steps"], training["minutes"]
    return [(e.get("run_minutes", e["step"] * minutes / steps), e["eval_bleu"]) for e in history if "eval_bleu" in e]


def save(figure, output: str) -> None:
    figure.tight_layout()
    with outputs.write_file(output, "wb") as handle:  # a file object: the format is named, not guessed
        figure.savefig(handle, dpi=110, format=Path(output).suffix.lstrip(".") or "png")


def plot_time_to_quality(args) -> None:
    sources = [Path(run) for run in args.time_to_quality]
    outputs.claim("--output", args.output, [("--time_to_quality", source) for source in sources])
    curves = [bleu_by_minute(source) for source in sources]
    from matplotlib.figure import Figure  # no pyplot: no display, no backend to choose

    figure = Figure(figsize=(8, 4.5))
    axis = figure.subplots()
    for curve, label in zip(curves, args.labels or [source.name for source in sources]):
        axis.plot(*zip(*curve), "o-", label=label)
    axis.set(xlabel="wall-clock minutes of training (evaluations included)",
             ylabel="val BLEU (greedy, cased sacreBLEU)")
    axis.legend()
    axis.grid(alpha=0.3)
    save(figure, args.output)
    print(f"wrote {args.output}: {sum(map(len, curves))} BLEU points from {len(curves)} runs")


def main(argv=None):
    args = parse_args(argv)
    if args.time_to_quality:
        return plot_time_to_quality(args)
    state_path = Path(args.run_dir) / "trainer_state.json"
    if not state_path.is_file():
        raise FileNotFoundError(f"{state_path}: not found; is {args.run_dir} a scripts/train.py run?")
    outputs.claim("--output", args.output, [("--run_dir", state_path)])
    from modeling_vaswani.model.strict_json import read_json

    state = read_json(state_path)
    train = [(e["step"], e["loss"]) for e in state["log_history"] if "loss" in e]
    bleu = [(e["step"], e["eval_bleu"]) for e in state["log_history"] if "eval_bleu" in e]
    if not train:
        steps, every = state.get("global_step", 0), state.get("logging_steps")
        took = f"the run took {steps} steps and logged the loss every {every}" if every else f"the run took {steps} steps"
        raise ValueError(f"{state_path} logs no training loss ({took}); train with --logging_steps N, "
                         f"N at most {max(1, steps)}, to draw a curve.")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8, 4.5))
    loss_axis = figure.subplots()
    loss_axis.plot(*zip(*train), color="tab:blue", label="training loss (label-smoothed, §5.4)")
    loss_axis.set(xlabel="step", title=f"Training run {Path(args.run_dir).name}")
    loss_axis.set_ylabel("training loss", color="tab:blue")
    if bleu:
        bleu_axis = loss_axis.twinx()
        bleu_axis.plot(*zip(*bleu), "o-", color="tab:red", label="val BLEU (greedy, cased sacreBLEU)")
        bleu_axis.set_ylabel("val BLEU", color="tab:red")
        bleu_axis.annotate(f"{bleu[-1][1]:.1f}", bleu[-1], textcoords="offset points", xytext=(-10, 8))
    figure.legend(loc="center right", bbox_to_anchor=(0.88, 0.55), fontsize=8)
    save(figure, args.output)
    print(f"wrote {args.output}: {len(train)} loss points, {len(bleu)} BLEU points")


if __name__ == "__main__":
    cli.run_main(main)
