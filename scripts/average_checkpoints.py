r"""Average the last checkpoints of a training run into one model (§6.1: the last 5 checkpoints of the
base models, 20 of the big ones, written every 10 minutes: scripts/train.py --save_every_minutes 10).

    python scripts/average_checkpoints.py --run_dir outputs/multi30k-en-de
    python scripts/average_checkpoints.py --checkpoints runs/base/checkpoint-900 runs/base/checkpoint-1000 \
        --output_dir runs/base/averaged

Without --last, a run with fewer than 5 checkpoints has all averaged (with a note); --last K needs K.
"""

import shlex
import sys
from pathlib import Path

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli

BASE_CHECKPOINTS = 5  # §6.1: "averaging the last 5 checkpoints" (base models; the last 20 for big ones)
MORE_CHECKPOINTS = "train longer, or save more often (train.py --save_every_minutes N or --save_strategy steps --save_steps N)"


def build_parser() -> cli.ArgumentParser:
    parser = cli.ArgumentParser(description=__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoints", nargs="+", metavar="DIR", help="checkpoint folders to average")
    source.add_argument("--run_dir", metavar="DIR", help="a Trainer output folder holding checkpoint-<step> folders")
    parser.add_argument("--last", type=cli.positive_int, metavar="K", help=f"with --run_dir: how many of the latest "
                        f"checkpoints (default {BASE_CHECKPOINTS}, or all if fewer; the big models used 20)")
    parser.add_argument("--output_dir", metavar="DIR", help="where to write the averaged model (default with "
                        "--run_dir: <run_dir>/averaged)")
    return parser


def run_checkpoints(run_dir: str, last: int | None) -> list[Path]:
    """The checkpoints of `run_dir` to average: the last `last`, or up to 5 when not given."""
    from modeling_vaswani.training.checkpoint_averaging import complete_checkpoints

    found, incomplete = complete_checkpoints(run_dir)
    names = ", ".join(p.name for p in found) or "none"
    skipped = f"; incomplete, left out: {', '.join(incomplete)}" if incomplete else ""
    if last is not None and len(found) < last:
        fix = f"pass --last {len(found)} to average those, or {MORE_CHECKPOINTS}" if len(found) >= 2 else MORE_CHECKPOINTS
        raise ValueError(f"--last {last}: {run_dir} holds {len(found)} complete checkpoints ({names}{skipped}); {fix}.")
    if len(found) < 2:
        raise ValueError(f"--run_dir {run_dir} holds {len(found)} complete checkpoint(s) ({names}{skipped}), "
                         f"nothing to average; {MORE_CHECKPOINTS}, or evaluate the run's final model: "
                         f"python scripts/evaluate_model.py --model {shlex.quote(str(run_dir))} --split test")
    if last is None and len(found) < BASE_CHECKPOINTS:
        print(f"note: {run_dir} holds {len(found)} complete checkpoints, fewer than the paper's "
              f"{BASE_CHECKPOINTS}; averaging all {len(found)}{skipped}", file=sys.stderr)
    return found[-(last or BASE_CHECKPOINTS):]


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.checkpoints is not None and args.last is not None:
        parser.error("--last only applies with --run_dir")
    if args.output_dir is None and args.run_dir is None:
        parser.error("--output_dir is needed with --checkpoints")
    if args.run_dir is not None:
        checkpoints = run_checkpoints(args.run_dir, args.last)
        output_dir = args.output_dir or str(Path(args.run_dir) / "averaged")
    else:
        checkpoints, output_dir = args.checkpoints, args.output_dir
    from modeling_vaswani.training.checkpoint_averaging import average_checkpoints

    weights = average_checkpoints(checkpoints, output_dir, flag="--output_dir")
    print(f"averaged {len(checkpoints)} checkpoints:\n" + "".join(f"  {path}\n" for path in checkpoints) + f"wrote "
          f"{weights}\nnext: python scripts/evaluate_model.py --model {shlex.quote(str(output_dir))} --split test")


if __name__ == "__main__":
    cli.run_main(main)
