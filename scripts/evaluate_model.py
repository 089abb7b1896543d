"""Translate a test set with a saved model and score it (§6.1: beam 4, α = 0.6, length ≤ input + 50).

    python scripts/evaluate_model.py --split test              # the shipped model, hub_card/
    python scripts/evaluate_model.py --model outputs/multi30k-en-de --split validation --num_beams 1
    python scripts/evaluate_model.py --model my-model --source_file test.en --reference_file test.de
    python scripts/evaluate_model.py --model hub_card --engine ctranslate2 --ct2_compute_type int8
    python scripts/evaluate_model.py --quantize int8          # int8 Linear layers, BLEU beside the exact float32

Writes <output_dir>/<name>.hyp.txt (one translation per line) and <name>.scores.json (cased sacreBLEU with
its signature, lowercased tokenized BLEU, the paper's tokenized BLEU, chrF, and the CPU threads used).
"""

import json
from pathlib import Path

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli, outputs
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli, outputs


def parse_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__)
    add = parser.add_argument
    add("--model", help="Model folder or Hub id (default: the shipped model, the repository's hub_card/).")
    add("--split", default="test", choices=cli.MULTI30K_SPLITS, help="Multi30k split (test: flickr 2016).")
    add("--source_lang", default="en")
    add("--target_lang", default="de")
    add("--source_file", help="Score on these local sources instead of Multi30k ...")
    add("--reference_file", help="... against these references.")
    add("--max_samples", type=cli.positive_int, help="Only the first N sentences.")
    # Unset, the decoding flags take the model's own generation config: §6.1's settings (model/generation.py).
    add("--num_beams", type=cli.positive_int, help="Beam size (default: the model's; §6.1's beam 4).")
    add("--length_penalty", type=float, help="Length penalty α (default: the model's; §6.1's 0.6; greedy has none).")
    add("--beam_search", choices=["paper", "transformers"], help="paper: §6.1's GNMT length penalty and stopping "
        "rule; transformers: its own (|Y|^α, early_stopping) (default: the model's generation config's).")
    add("--max_new_tokens", type=cli.positive_int, help="Length limit (default: the model's; §6.1's input + 50).")
    add("--batch_size", type=cli.positive_int, default=64)
    add("--output_dir", help="Where to write results (default: ./evaluations/<model name>); never a model folder.")
    add("--name", help="File name stem (default: <split>-beam<N>, + -ctranslate2[-<compute type>], -int8, -bfloat16, "
        "-float32-compiled, -<search>-search as chosen).")
    add("--threads", type=cli.positive_int, help="CPU threads (default: OMP_NUM_THREADS, else 1 for a model under "
        "20M parameters, else the idle cores).")
    add("--quiet", action="store_true", help="No progress bar.")
    cli.add_engine_arguments(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if (args.source_file is None) != (args.reference_file is None):
        raise ValueError("--source_file and --reference_file go together.")
    if args.model is not None:
        cli.require_model("--model", args.model)
    # Only now the package, torch and transformers: --help and the checks above answer at once.
    from modeling_vaswani import shipped_model_path
    from modeling_vaswani.evaluation.fast_path import FastPath
    from modeling_vaswani.evaluation.progress import progress_bar
    from modeling_vaswani.evaluation.scoring import score_model
    from modeling_vaswani.evaluation.translation import as_one_line, load_for_script
    from modeling_vaswani.model.generation import (PAPER_SEARCH, TRANSFORMERS_BEAM_SEARCH, check_decoding,
                                                   decoding_settings)
    from modeling_vaswani.text_lines import read_lines
    from modeling_vaswani.training.data import multi30k_pairs

    args.model = args.model or shipped_model_path()
    # Never a model folder (results would mix with, and could overwrite, its files), nor one holding what is read.
    local = Path(args.model)
    reads = [("--model", args.model), ("--ct2_model", args.ct2_model), ("--source_file", args.source_file),
             ("--reference_file", args.reference_file)]
    out_dir = outputs.claim("--output_dir", args.output_dir or Path("evaluations") / (
        local.resolve().name if local.is_dir() else args.model.replace("/", "--")), reads, folder=True, results=True)
    cli.check_engine_arguments(args)
    check_decoding(decoding_settings(vars(args)), "command line", args.batch_size)  # before the model loads
    ct2 = args.engine == "ctranslate2"
    if args.beam_search is not None and ct2:
        raise ValueError("--beam_search chooses between the torch engine's searches; CTranslate2 has its own. "
                         "Leave out --beam_search or --engine ctranslate2.")
    fast_path = FastPath(args.dtype, args.quantize, args.compile)  # the torch engine's; exact float32 by default
    if args.source_file:
        sources, references = read_lines(args.source_file), read_lines(args.reference_file)
        if len(sources) != len(references):
            raise ValueError(f"{args.source_file} has {len(sources)} lines but {args.reference_file} "
                             f"has {len(references)}; they must be parallel.")
        sources, references = sources[:args.max_samples], references[:args.max_samples]
    else:
        sources, references = multi30k_pairs(args.split, args.source_lang, args.target_lang, args.max_samples)
    model, tokenizer, threads, threads_chosen_by, engine = load_for_script(args, args.model)
    generate_kwargs = {key: getattr(args, key) for key in ("num_beams", "length_penalty", "max_new_tokens")
                       if getattr(args, key) is not None}
    generate_kwargs.update({"paper": PAPER_SEARCH, "transformers": TRANSFORMERS_BEAM_SEARCH}.get(args.beam_search, {}))
    if generate_kwargs.get("num_beams") == 1:
        for key in ("length_penalty", "length_penalty_formula", "beam_termination"):
            generate_kwargs.pop(key, None)  # greedy search has no length penalty and no beams to stop
    num_beams = args.num_beams or model.generation_config.num_beams

    bar = progress_bar(len(sources), f"translating ({engine})", quiet=args.quiet)
    try:
        hypotheses, scores = score_model(model, tokenizer, sources, references, batch_size=args.batch_size,
                                         progress=bar.update if bar is not None else None, **generate_kwargs)
    finally:
        if bar is not None:
            bar.close()
    scores.update(model=str(args.model), engine=args.engine, split=args.source_file or args.split,
                  precision=args.ct2_compute_type if ct2 else fast_path.describe(),
                  source_lang=args.source_lang, target_lang=args.target_lang)
    if threads is not None:
        scores.update(threads=threads, threads_chosen_by=threads_chosen_by)
    scores.setdefault("num_beams", num_beams)
    if args.beam_search:
        scores.update(beam_search=args.beam_search)
    name = args.name or "-".join(filter(None, [
        "custom" if args.source_file else args.split, f"beam{num_beams}", ct2 and "ctranslate2",
        ct2 and args.ct2_compute_type != "default" and args.ct2_compute_type,
        not ct2 and not fast_path.is_default and fast_path.describe().replace(", ", "-"),
        args.beam_search and f"{args.beam_search}-search"]))
    with outputs.write_file(out_dir / f"{name}.hyp.txt", encoding="utf-8") as handle:
        handle.write("".join(as_one_line(h) + "\n" for h in hypotheses))
    with outputs.write_file(out_dir / f"{name}.scores.json", encoding="utf-8") as handle:
        handle.write(json.dumps(scores, indent=2, ensure_ascii=False) + "\n")
    print(f"BLEU {scores['bleu']:.2f} ({scores['signature']}) | lowercased tokenized BLEU "
          f"{scores['bleu_lowercase_tokenized']:.2f} | paper tokenized BLEU {scores['bleu_paper_tokenized']:.2f} "
          f"| chrF {scores['chrf']:.2f} | {len(sources)} sentences in {scores['translate_seconds']:.1f} s ({engine}) "
          f"→ {out_dir / name}.*")


if __name__ == "__main__":
    cli.run_main(main)
