"""Watch a trained model translate, in the browser: BPE pieces, §6.1's beam search step by step,
Eq. (1)'s attention weights, §3.5's positional encoding and §3.2.3's masks.

    python scripts/explore.py                       # the shipped model (hub_card/), http://127.0.0.1:7860
    python scripts/explore.py --model outputs/multi30k-en-de --port 8000

Serves on 127.0.0.1 unless --host says otherwise. Needs pip install -e ".[explorer]".
"""

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli


def parse_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__)
    parser.add_argument("--model", help="Model folder or Hub id (default: the shipped model, the repository's hub_card/).")
    parser.add_argument("--host", default="127.0.0.1", help="Address to serve on (default: this machine only).")
    parser.add_argument("--port", type=cli.positive_int, default=7860)
    parser.add_argument("--device", help="cpu, cuda, ... (default: cuda if available).")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.model is not None:
        cli.require_model("--model", args.model)
    try:
        import gradio  # noqa: F401
    except ModuleNotFoundError:
        raise SystemExit('The explorer needs gradio: pip install -e ".[explorer]"') from None
    from modeling_vaswani import shipped_model_path
    from modeling_vaswani.evaluation.translation import load_translator
    from modeling_vaswani.explorer.app import build_app
    from modeling_vaswani.threads import use_threads

    model, tokenizer = load_translator(args.model or shipped_model_path(), args.device)
    use_threads(model)
    # One sentence at a time: the CPU is shared, and the model is not thread-safe to switch.
    build_app(model, tokenizer).queue(default_concurrency_limit=1).launch(
        server_name=args.host, server_port=args.port, show_error=False, share=False)


if __name__ == "__main__":
    cli.run_main(main)
