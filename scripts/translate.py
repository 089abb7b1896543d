"""Translate sentences with a trained model (§6.1 decoding: beam 4, α = 0.6, length ≤ input + 50).

    python scripts/translate.py "Two dogs are playing in the snow."
    python scripts/translate.py --file news.en --output news.de --batch_size 32
    cat news.en | python scripts/translate.py --model outputs/multi30k-en-de --num_beams 1
    python scripts/translate.py --engine ctranslate2 --file news.en   # CTranslate2, converted on first use
    python scripts/translate.py --quantize int8 --file news.en        # int8 Linear layers (CPU)

The model defaults to hub_card/, the shipped English→German model. Line i of the output translates line i
of the input (UTF-8). Stopped by Ctrl-C or SIGTERM, --output holds the first lines' translations; failed, the
earlier file stays. Sentences over 512 tokens are cut, with a warning. --dtype, --quantize and --compile
trade exactness for speed (benchmarks/RESULTS.md).
"""

import signal
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli, outputs
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli, outputs


def parse_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__)
    add = parser.add_argument
    add("sentences", nargs="*", help="Sentences to translate (else --file, else stdin).")
    add("--model", help="Model folder or Hub id (default: the shipped model, the repository's hub_card/).")
    add("--file", help="Translate this file, one sentence per line.")
    add("--output", help="Write translations here (default: stdout).")
    add("--batch_size", type=cli.positive_int, default=64)
    add("--num_beams", type=cli.positive_int, help="Beam size (default: the model's, 4 in the paper).")
    add("--max_new_tokens", type=cli.positive_int, help="Length limit (default: input length + 50).")
    add("--device", help="cpu, cuda, cuda:1, mps, ... (default: cuda if available).")
    add("--threads", type=cli.positive_int, help="CPU threads (default: OMP_NUM_THREADS, else 1 for a model under "
        "20M parameters, else the idle cores).")
    add("--quiet", action="store_true", help="No progress bar.")
    cli.add_engine_arguments(parser)
    return parser.parse_args(argv)


@contextmanager
def sigterm_as_interrupt():
    """While inside, SIGTERM (a `kill`, a job scheduler's stop) raises KeyboardInterrupt, as Ctrl-C does."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_deferred():
    """Ctrl-C and SIGTERM wait until the block is done, so a batch is written whole or not at all."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows
        yield
        return
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def main(argv=None):
    args = parse_args(argv)
    if args.sentences and args.file:
        raise ValueError("Give sentences as arguments or --file, not both.")
    if args.file and not Path(args.file).is_file():
        raise FileNotFoundError(f"--file {args.file}: no such file.")
    # Opening what is read for writing would empty it.
    reads = [("--file", args.file), ("--model", args.model), ("--ct2_model", args.ct2_model)]
    outputs.claim(*(("--output", args.output) if args.output else ("standard output", outputs.STDOUT)), reads)
    if args.model is not None:
        cli.require_model("--model", args.model)
    # Only now the package, torch and transformers: --help and the checks above answer at once.
    from modeling_vaswani import shipped_model_path
    from modeling_vaswani.evaluation.progress import count_lines, progress_bar
    from modeling_vaswani.evaluation.translation import as_one_line, load_for_script, translate_batches
    from modeling_vaswani.text_lines import iter_lines
    from modeling_vaswani.model.generation import check_decoding, decoding_settings

    cli.check_engine_arguments(args)
    check_decoding(decoding_settings(vars(args)), "command line", args.batch_size)  # before the model loads
    model, tokenizer, _, _, engine = load_for_script(args, args.model or shipped_model_path(), args.device)
    generate_kwargs = {key: getattr(args, key) for key in ("num_beams", "max_new_tokens") if getattr(args, key)}
    if args.sentences:
        source, name = nullcontext(args.sentences), "arguments"
    elif args.file:
        source, name = open(args.file, "rb"), args.file
    else:
        source, name = nullcontext(sys.stdin.buffer), "<stdin>"
    # A bar for a file or stdin, unless the translations are written to the terminal it would be drawn on.
    bar = None
    if not args.sentences and (args.output or not sys.stdout.isatty()):
        bar = progress_bar((lambda: count_lines(args.file)) if args.file else None, f"translating ({engine})",
                           quiet=args.quiet)
    written = 0
    # --output is written beside it and renamed into place at the end, or when stopped: a failed run leaves
    # the earlier file as it was.
    try:
        with sigterm_as_interrupt(), source as handle, (
                outputs.write_file(args.output, encoding="utf-8", newline="\n", keep_on_interrupt=True)
                if args.output else nullcontext(sys.stdout)) as out:
            for batch in translate_batches(model, tokenizer, handle if args.sentences else iter_lines(handle, name),
                                           batch_size=args.batch_size, **generate_kwargs,
                                           progress=bar.update if bar is not None else None):
                with signals_deferred():  # a signal held here is raised on leaving: count before that
                    out.write("".join(as_one_line(text) + "\n" for text in batch))
                    out.flush()
                    written += len(batch)
    except KeyboardInterrupt:
        if bar is not None:
            bar.close()  # before the message, not drawn over it
        if args.output:
            print(f"stopped: the translations of the first {written} lines are in {args.output}", file=sys.stderr)
        raise
    finally:
        if bar is not None:
            bar.close()


if __name__ == "__main__":
    cli.run_main(main)
