#!/usr/bin/env python
"""Share a trained model on the Hugging Face Hub with a model card rendered from its own results.

    python scripts/push_to_hub.py --model_dir outputs/multi30k-en-de/averaged --repo_id you/vaswani-multi30k-en-de
    python scripts/push_to_hub.py --model_dir outputs/multi30k-en-de/averaged --repo_id you/name --dry_run --output_dir hub_card

The model folder must hold results.json (scripts/collect_results.py writes it). The repository is
first written to --output_dir (a temporary folder if not given) and validated: every file present,
the card's YAML parses and names BLEU and chrF, and the folder loads with trust_remote_code in a
clean process and translates. --dry_run stops there (works offline); otherwise the folder is
uploaded (needs `huggingface-cli login` or --token).
"""

import argparse
import tempfile
from pathlib import Path

from modeling_vaswani.cli import ArgumentParser, run_main
from modeling_vaswani.hub.repository import validate_repository, write_repository


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="Trained model folder with results.json.")
    parser.add_argument("--repo_id", required=True, help="Hub repository, e.g. user/vaswani-multi30k-en-de.")
    parser.add_argument("--output_dir", help="Where to write the repository folder (default: a temporary one).")
    parser.add_argument("--dry_run", action="store_true", help="Write and validate the folder; do not upload.")
    parser.add_argument("--private", action="store_true", help="Create the Hub repository as private.")
    parser.add_argument("--commit_message", default="Upload Transformer (Vaswani et al., 2017) trained with modeling_vaswani")
    parser.add_argument("--token", help="Hub token (default: the stored login).")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if not Path(args.model_dir).is_dir():
        raise FileNotFoundError(f"--model_dir {args.model_dir}: no such folder.")
    if args.repo_id.count("/") > 1 or not args.repo_id.strip("/"):
        raise ValueError(f"--repo_id {args.repo_id!r} is not a Hub repository id (namespace/name).")
    output_dir = Path(args.output_dir) if args.output_dir else Path(tempfile.mkdtemp(prefix="vaswani-hub-"))
    write_repository(args.model_dir, output_dir, args.repo_id)
    outcome = validate_repository(output_dir)
    print(f"{output_dir}: complete and valid; a clean process translated the example as {outcome['pipeline']!r}")
    if args.dry_run:
        print("dry run: nothing uploaded")
        return
    from huggingface_hub import HfApi

    api = HfApi(token=args.token)
    api.create_repo(args.repo_id, private=args.private, exist_ok=True)
    commit = api.upload_folder(folder_path=str(output_dir), repo_id=args.repo_id, commit_message=args.commit_message)
    print(f"pushed to {commit.commit_url}")


if __name__ == "__main__":
    run_main(main)
