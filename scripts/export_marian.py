"""Take a model of this package out as a Marian folder (MarianMTModel), for tools that know Marian only.

    python scripts/export_marian.py --model hub_card --output_dir hub_card-marian

It loads with `MarianMTModel.from_pretrained`, with our tokenizer and decoding settings. Marian ignores our
layer_norm_eps (it uses 1e-5; ours 1e-6), so logits differ slightly (a warning says so). Settings Marian
cannot represent end it with one line naming the setting.
"""

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli


def parse_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True, help="A folder or Hub id of one of our models.")
    parser.add_argument("--output_dir", required=True, help="Folder to write the Marian model to.")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    cli.require_model("--model", args.model)
    from modeling_vaswani.conversion.marian import export_marian  # the package, torch and transformers: only now

    output = export_marian(args.model, args.output_dir, flag="--output_dir")
    print(f"exported {args.model} → {output} (MarianMTModel)")


if __name__ == "__main__":
    cli.run_main(main)
