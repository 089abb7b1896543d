"""Average the last checkpoints of a training run into one model (§6.1).

The paper evaluates a single model whose weights are the average of the last 5 checkpoints
(base models) or the last 20 (big models). This command does that for checkpoints written by
the Hugging Face `Trainer`:

    python scripts/average_checkpoints.py --run_dir runs/base --last 5 --output_dir runs/base/averaged
    python scripts/average_checkpoints.py --checkpoints runs/base/checkpoint-900 runs/base/checkpoint-1000 \
        --output_dir runs/base/averaged

The output folder loads with `from_pretrained`.
"""

import argparse
import sys

from modeling_vaswani.training.checkpoint_averaging import (
    BASE_CHECKPOINTS,
    average_checkpoints,
    find_checkpoints,
)


class _OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser that reports a bad flag in one line instead of the usage block."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineErrorParser(
        description="Average the weights of several checkpoints into one model (§6.1 of the paper)."
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoints", nargs="+", metavar="DIR", help="checkpoint folders to average")
    source.add_argument("--run_dir", metavar="DIR", help="a Trainer output folder holding checkpoint-<step> folders")
    parser.add_argument(
        "--last",
        type=_positive_int,
        default=None,
        metavar="K",
        help=f"with --run_dir: how many of the latest checkpoints to average (default {BASE_CHECKPOINTS}, "
        "the paper's base models; the big models used 20)",
    )
    parser.add_argument("--output_dir", required=True, metavar="DIR", help="folder to write the averaged model to")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.checkpoints is not None and args.last is not None:
        parser.error("--last only applies with --run_dir")
    try:
        if args.run_dir is not None:
            checkpoints = find_checkpoints(args.run_dir, args.last or BASE_CHECKPOINTS)
        else:
            checkpoints = args.checkpoints
        weights = average_checkpoints(checkpoints, args.output_dir)
    except (ValueError, FileNotFoundError, NotADirectoryError, PermissionError) as error:
        message = str(error).replace("\n", " ")  # one line, whatever the library said
        print(f"error: {message}", file=sys.stderr)
        return 1
    print(f"averaged {len(checkpoints)} checkpoints:")
    for path in checkpoints:
        print(f"  {path}")
    print(f"wrote {weights}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
