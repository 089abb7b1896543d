"""Bring in a Marian model (MarianMTModel, e.g. an Opus-MT model) as a model of this package.

    python scripts/convert_marian.py --model Helsinki-NLP/opus-mt-en-de --output_dir opus-mt-en-de-vaswani

Our model with Marian's tokenizer (needs sentencepiece) and decoding settings; logits equal Marian's to float
rounding. A setting ours cannot represent ends it with one line naming it.
"""

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli


def parse_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="A MarianMTModel folder or Hub id.")
    parser.add_argument("--output_dir", required=True, help="Folder to write the converted model to.")
    parser.add_argument("--revision", help="Hub revision (branch, tag or commit) of --model.")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    cli.require_model("--model", args.model)
    from modeling_vaswani.conversion.marian import convert_marian  # the package, torch and transformers: only now

    output = convert_marian(args.model, args.output_dir, **({"revision": args.revision} if args.revision else {}),
                            flag="--output_dir")
    print(f"converted {args.model} → {output}")


if __name__ == "__main__":
    cli.run_main(main)
