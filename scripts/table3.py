#!/usr/bin/env python
"""Table 3 in miniature: the paper's variations on the base model, re-trained on Multi30k.

Each row of Table 3, scaled to the first edition's size (docs/table3.md), is trained by scripts/train.py in a
process of its own for the same budget and scored by dev perplexity and BLEU; the table, beside the paper's
numbers, a JSON and a figure go into --output. The same command again skips the finished rows and retries
the failed ones.

    python scripts/table3.py --list                                   # the rows, without running them
    python scripts/table3.py --minutes 5 --seeds 2                    # every row, 5 minutes each
    python scripts/table3.py --minutes 5 --rows A,B                   # the base and rows (A) and (B)
    python scripts/table3.py --steps 20 --base tiny --max_train_samples 200 --max_eval_samples 20 \\
        --vocab_size 500 --output /tmp/table3 --runs_dir /tmp/table3-runs   # a quick try
"""

import argparse
import shlex
import sys
from dataclasses import asdict, fields
from pathlib import Path

# The study lives in the repository's benchmarks/, not in the installed package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:  # run as a script (scripts/ on sys.path): the command line alone, so --help answers at once
    from _light_cli import cli, outputs
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli, outputs
from benchmarks.table3 import rows as table_rows  # these two import only the standard library
from benchmarks.table3 import runs as table_runs


def positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return value


def build_parser():
    parser = cli.ArgumentParser(description=__doc__, allow_abbrev=False)
    add = parser.add_argument_group("what runs").add_argument
    add("--rows", metavar="LIST", help="Row groups (A, B, C, D, E) or rows (A1, C4, ...), comma-separated "
        "(default: all of them).")
    add("--no_base", action="store_true", help="Leave the base row out (it is the reference of every change).")
    add("--seeds", metavar="K", type=cli.positive_int, default=1,
        help="Train the base K times, with seeds --seed, --seed + 1, ..., to measure run-to-run noise.")
    add("--list", action="store_true", help="Print the rows (the scaled sizes) and exit.")
    add = parser.add_argument_group("the budget of every row (give one)").add_argument
    add("--minutes", metavar="MIN", type=positive_float,
        help="Wall-clock minutes per row: scripts/train.py --max_train_minutes (loading and saving included).")
    add("--steps", metavar="N", type=cli.positive_int, help="Optimizer steps per row: scripts/train.py --max_steps.")
    add = parser.add_argument_group("how").add_argument
    add("--threads", metavar="N", type=cli.positive_int, default=1, help="CPU threads per row.")
    add("--jobs", metavar="N", type=cli.positive_int, default=1,
        help="Rows trained at the same time (each with --threads threads).")
    add("--base", choices=sorted(table_rows.BASES), default=table_rows.DEFAULT_BASE,
        help="multi30k: the first edition's size (N 4, d_model 128, d_ff 512, h 4); tiny: for tests.")
    add("--seed", metavar="N", type=int, default=42, help="Seeds every row's initial weights and dropout.")
    add("--data_seed", metavar="N", type=int, default=42, help="Seeds the data order, the same for every row.")
    add("--max_tokens", metavar="N", type=cli.positive_int, default=2048, help="§5.1 tokens per step.")
    add("--warmup_steps", metavar="N", type=cli.positive_int, default=300,
        help="Eq. (3) warmup_steps, the same for every row (300: about the steps of a 4-minute base row on one core).")
    add("--vocab_size", metavar="N", type=cli.positive_int, default=8000, help="The shared BPE vocabulary (§5.1).")
    add("--max_train_samples", metavar="N", type=cli.positive_int, help="Train on the first N pairs only.")
    add("--max_eval_samples", metavar="N", type=cli.positive_int, help="Score the first N dev pairs only.")
    add("--num_beams", metavar="N", type=cli.positive_int, default=4,
        help="Beam size for dev BLEU (Table 3: §6.1's beam search; 1 = greedy, faster).")
    add("--source_lang", default="en", help="Translate from this language.")
    add("--target_lang", default="de", help="... into this one.")
    add("--output", metavar="DIR", default="docs/table3",
        help="Where the table (README.md), results.json, the figure and the rows' result files go.")
    add("--runs_dir", metavar="DIR", default="outputs/table3", help="Where each row's model and log go.")
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    all_rows = table_rows.table3_rows(args.base, seed=args.seed, base_seeds=args.seeds)
    try:
        rows = table_rows.select_rows(all_rows, args.rows, include_base=not args.no_base)
    except ValueError as error:
        parser.error(cli.one_line(error).removesuffix("."))
    if args.list:
        print("row      N  d_model  d_ff  h   d_k  d_v  P_drop  ε_ls  positions   changed from the base")
        for row in rows:
            c, note = row.config, f"  ({row.note})" if row.note else ""
            print(f"{row.id:<8} {c['num_layers']:<2} {c['d_model']:<8} {c['d_ff']:<5} {c['num_heads']:<3} "
                  f"{c['d_k']:<4} {c['d_v']:<4} {c['dropout']:<7} {c['label_smoothing']:<5} "
                  f"{c['positional_encoding']:<11} {', '.join(f'{k} {v}' for k, v in row.changes.items()) or '-'}{note}")
        return
    settings = table_runs.TableSettings(**{f.name: getattr(args, f.name) for f in fields(table_runs.TableSettings)})
    # Both folders are added to run after run (finished rows are skipped): claimed, not replaced.
    outputs.claim("--output", args.output, [("--runs_dir", args.runs_dir)], folder=True)
    outputs.claim("--runs_dir", args.runs_dir, [("--output", args.output)], folder=True)
    command = "python scripts/table3.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    output = Path(args.output)
    outcome = table_runs.TableRun(settings, output, Path(args.runs_dir), threads=args.threads, jobs=args.jobs,
                                  command=command, log=lambda line: print(line, flush=True)).run(rows)

    from benchmarks.table3.report import write_report
    from modeling_vaswani.machine import describe_machine

    machine = {**describe_machine(), "torch_threads": args.threads}  # each row's threads, not this process's
    plural = lambda n: "s" * (n > 1)  # noqa: E731
    hardware = machine.get("gpu") or (
        f"CPU: {machine['cpu']} ({machine['cpu_cores']} cores), {args.threads} thread{plural(args.threads)} per row, "
        f"{args.jobs} row{plural(args.jobs)} at a time, bf16: {machine['cpu_bf16']}")
    write_report(output, all_rows, settings=asdict(settings), budget=settings.budget(), command=command,
                 machine=machine, hardware=hardware, results=list(table_runs.read_results(output).values()),
                 failures=table_runs.read_results(output, failed=True))
    print(f"{len(outcome['done'])} rows trained, {len(outcome['skipped'])} already done, "
          f"{len(outcome['failed'])} failed; the table: {output / 'README.md'}")
    if outcome["failed"]:
        print(f"error: {len(outcome['failed'])} row(s) failed ({', '.join(outcome['failed'])}); see "
              f"{output / 'README.md'}, and run the same command again to retry them", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    cli.run_main(main)
