"""Share a trained model on the Hugging Face Hub with a model card rendered from its own results.

    python scripts/push_to_hub.py --model_dir outputs/multi30k-en-de/averaged --repo_id you/vaswani-multi30k-en-de
    python scripts/push_to_hub.py --model_dir outputs/multi30k-en-de/averaged --repo_id you/name --dry_run --output_dir /tmp/hub-preview

The model folder must hold results.json (scripts/collect_results.py). The repository is written to
--output_dir and validated: files, shipped code, card metadata, and a clean process that loads it with
trust_remote_code and translates. --dry_run stops there (offline); else it is uploaded (`hf auth login` or
--token); a model that translates the example to an empty line is not. --space also writes, checks and
uploads a Gradio Space running the explorer on the model (the [explorer] extra).
"""

import shlex
import sys
import tempfile
from pathlib import Path

try:  # run as a script (scripts/ first on sys.path): the plumbing alone, so --help answers at once
    from _light_cli import cli, outputs
except ModuleNotFoundError:  # run in-process by another program
    from modeling_vaswani import cli, outputs


def parse_args(argv=None):
    parser = cli.ArgumentParser(description=__doc__)
    parser.add_argument("--model_dir", required=True, help="Trained model folder with results.json.")
    parser.add_argument("--repo_id", required=True, help="Hub repository, e.g. user/vaswani-multi30k-en-de.")
    parser.add_argument("--output_dir", help="Where to write the repository folder (default: a temporary one).")
    parser.add_argument("--dry_run", action="store_true", help="Write and validate the folder; do not upload.")
    parser.add_argument("--private", action="store_true", help="Create the Hub repository as private.")
    parser.add_argument("--commit_message", default="Upload Transformer (Vaswani et al., 2017) trained with modeling_vaswani")
    parser.add_argument("--space", metavar="SPACE_ID", help="Also write (and upload) a Space running the explorer.")
    parser.add_argument("--space_dir", help="Where to write the Space folder (default: a temporary one).")
    parser.add_argument("--token", help="Hub token (default: the stored login, `hf auth login`).")
    return parser.parse_args(argv)


def missing_results(model_dir: Path) -> str:
    """Why `model_dir`, without results.json, cannot be shared yet, and the one command to run next."""
    quoted = shlex.quote(str(model_dir))
    if (model_dir / "trainer_state.json").is_file():  # the training run's own folder
        averaged = model_dir / "averaged"
        if (averaged / "config.json").is_file():
            return (f"--model_dir {model_dir} is a training run; the model to share is {averaged}, which holds no "
                    f"results.json yet; next: python scripts/collect_results.py --run_dir {quoted}")
        return (f"--model_dir {model_dir} is a training run without an averaged model (§6.1) to share; next: "
                f"python scripts/average_checkpoints.py --run_dir {quoted}")
    run, shipped = model_dir.parent, "" if model_dir.name == "averaged" else f" --shipped {quoted}"
    missing = f"{model_dir / 'results.json'}: not found (the scores the model card reports); next: python scripts/"
    if (run / "trainer_state.json").is_file():
        return f"{missing}collect_results.py --run_dir {shlex.quote(str(run))}{shipped}"
    return (f"{missing}collect_results.py --run_dir RUN_DIR --shipped {quoted}, RUN_DIR the output folder of the "
            "scripts/train.py run that made the model")


def main(argv=None):
    args = parse_args(argv)
    model_dir = Path(args.model_dir)
    if not model_dir.is_dir():
        raise FileNotFoundError(f"--model_dir {args.model_dir}: no such folder.")
    if not cli.looks_like_hub_id(args.repo_id):
        raise ValueError(f"--repo_id {args.repo_id!r} is not a Hub repository id (namespace/name).")
    if args.space is not None and not cli.looks_like_hub_id(args.space):
        raise ValueError(f"--space {args.space!r} is not a Hub repository id (namespace/name).")
    if not (model_dir / "results.json").is_file():
        raise FileNotFoundError(missing_results(model_dir))
    reads = [("--model_dir", model_dir)]
    if args.output_dir:
        outputs.claim("--output_dir", args.output_dir, reads, folder=True)
    if args.space_dir:
        outputs.claim("--space_dir", args.space_dir, [*reads, ("--output_dir", args.output_dir)], folder=True)
    # Only now the package, torch and transformers: --help and the checks above answer at once.
    from modeling_vaswani.evaluation.translation import quiet_loading
    from modeling_vaswani.hub.repository import validate_repository, write_repository

    output_dir = Path(args.output_dir) if args.output_dir else Path(tempfile.mkdtemp(prefix="vaswani-hub-"))
    with quiet_loading(), outputs.write_folder(output_dir) as folder:  # no loading and saving bars
        write_repository(model_dir, folder, args.repo_id)
    # An empty translation is refused for an upload; a dry run writes and checks the folder all the same.
    outcome = validate_repository(output_dir, allow_empty=args.dry_run)
    if outcome["pipeline"].strip() and outcome["generate"].strip():
        print(f"{output_dir}: complete and valid; a clean process translated the example as {outcome['pipeline']!r}")
    else:
        print(f"{output_dir}: complete and valid; a clean process loads it")
        print(f"warning: {model_dir} translates the example to an empty line ({outcome['pipeline']!r}), as a briefly "
              "trained model does; an upload refuses it: train longer first", file=sys.stderr)
    if args.space:
        from modeling_vaswani.hub.space import validate_space, write_space

        space_dir = Path(args.space_dir) if args.space_dir else Path(tempfile.mkdtemp(prefix="vaswani-space-"))
        with outputs.write_folder(space_dir) as folder:
            write_space(folder, args.repo_id)
        validate_space(space_dir, output_dir)
        print(f"{space_dir}: a Space whose app.py, in a clean process, builds the explorer on the model")
    if args.dry_run:
        print("dry run: nothing uploaded")
        return
    from huggingface_hub import HfApi

    api = HfApi(token=args.token)
    api.create_repo(args.repo_id, private=args.private, exist_ok=True)
    commit = api.upload_folder(folder_path=str(output_dir), repo_id=args.repo_id, commit_message=args.commit_message)
    print(f"pushed to {commit.commit_url}")
    if args.space:
        api.create_repo(args.space, repo_type="space", space_sdk="gradio", private=args.private, exist_ok=True)
        commit = api.upload_folder(folder_path=str(space_dir), repo_id=args.space, repo_type="space",
                                   commit_message=f"The Transformer explorer on {args.repo_id}")
        print(f"pushed the Space to {commit.commit_url}")


if __name__ == "__main__":
    cli.run_main(main)
