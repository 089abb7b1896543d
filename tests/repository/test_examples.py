"""Each numbered example, run as `__main__` with `EXAMPLES_OUTPUT_DIR` a fresh folder, exits 0, prints and
leaves a real PNG there. One runner process (this file as a script) imports torch once, which costs more than
most examples, and forks a child per example. 03, 11 and 12 read hub_card/'s model, or else a tiny one
trained here; a missing model must end in one `error:` line."""

import json
import multiprocessing
import os
import runpy
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch

from modeling_vaswani.training.data import DEFAULT_DATA_DIR, read_lines

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("[0-9][0-9]_*.py"))
NEEDS_MODEL = ("03_", "11_", "12_")


def _train_tiny_model(folder: Path, tokenizer, make_model) -> Path:
    """The "tiny" preset over the shared test vocabulary, trained for 40 steps of 10 pairs."""
    sources, targets = (read_lines(DEFAULT_DATA_DIR / f"train.{lang}.gz")[:400] for lang in ("en", "de"))
    model = make_model(preset="tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                       decoder_start_token_id=tokenizer.bos_token_id).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    for at in range(0, 400, 10):
        encoded = tokenizer(sources[at:at + 10], text_target=targets[at:at + 10], return_tensors="pt", padding=True)
        labels = encoded["labels"].masked_fill(encoded["labels"] == tokenizer.pad_token_id, -100)
        model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _run(job: dict) -> int:
    """In a child of the runner: `python <script> <args>` run from its output folder; its exit status."""
    out = Path(job["output_dir"])
    out.mkdir(parents=True, exist_ok=True)
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        os.dup2(os.open(out / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
    os.environ["EXAMPLES_OUTPUT_DIR"] = str(out)
    os.chdir(out)
    sys.argv, sys.path[0] = [job["script"], *job["args"]], str(Path(job["script"]).parent)  # as `python <script>`
    try:
        runpy.run_path(job["script"], run_name="__main__")
        return 0
    except SystemExit as exit_:
        if not isinstance(exit_.code, (int, type(None))):
            print(exit_.code, file=sys.stderr)
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, request):
    """Every example, and 11 without a model: {name: (exit status, stdout, stderr, folder)}."""
    model_args = []  # the scripts' default: hub_card/
    if not (REPO / "hub_card" / "model.safetensors").is_file():
        tokenizer, make_model = (request.getfixturevalue(name) for name in ("trained_tokenizer", "make_model"))
        model_args = ["--model", str(_train_tiny_model(tmp_path_factory.mktemp("tiny_model"), tokenizer, make_model))]
    root = tmp_path_factory.mktemp("examples")
    jobs = {s.name: {"script": str(s), "output_dir": str(root / s.stem),
                     "args": model_args if s.name.startswith(NEEDS_MODEL) else []} for s in EXAMPLES}
    jobs["missing-model"] = {**jobs[next(s.name for s in EXAMPLES if s.name.startswith("11_"))],
                             "output_dir": str(root / "missing-model"),
                             "args": ["--model", str(tmp_path_factory.mktemp("empty_model"))]}
    # The slowest (10 trains, 11 and 12 decode) first, so that the two workers end together.
    names = sorted(jobs, key=lambda name: name[:2] not in ("10", "11", "12"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    runner = subprocess.run([sys.executable, __file__, json.dumps([jobs[n] for n in names])], env=env, cwd=root,
                            capture_output=True, text=True, timeout=600)
    assert runner.returncode == 0, f"the example runner itself failed:\n{runner.stderr[-4000:]}"
    statuses = dict(zip(names, json.loads(runner.stdout.splitlines()[-1])))
    return {name: (statuses[name], *(Path(job["output_dir"], f).read_text() for f in ("stdout.txt", "stderr.txt")),
                   Path(job["output_dir"])) for name, job in jobs.items()}


def test_the_numbered_examples_are_all_there():
    assert [script.name[:2] for script in EXAMPLES] == [f"{n:02d}" for n in range(1, 14)]


@pytest.mark.slow
@pytest.mark.parametrize("script", [s.name for s in EXAMPLES])
def test_example_runs_and_draws(runs, script):
    status, stdout, stderr, output_dir = runs[script]
    assert status == 0, f"{script} failed with status {status}:\n{stdout[-2000:]}\n{stderr[-4000:]}"
    assert len(stdout.strip().splitlines()) >= 3, f"{script} printed almost nothing:\n{stdout}"
    pictures = list(output_dir.glob("*.png"))
    assert pictures and all(p.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and p.stat().st_size > 5000
                            for p in pictures), f"{script} left no real PNG in EXAMPLES_OUTPUT_DIR: {pictures}"


@pytest.mark.slow
def test_model_examples_report_a_missing_model_in_one_line(runs):
    status, _, stderr, output_dir = runs["missing-model"]
    assert status != 0 and "Traceback" not in stderr, stderr
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no trained model in"), stderr
    assert not list(output_dir.glob("*.png"))


if __name__ == "__main__":  # the runner: import once, then one fresh child per example (maxtasksperchild=1)
    import matplotlib.pyplot  # noqa: F401  (MPLBACKEND=Agg)
    import modeling_vaswani.training.trainer  # noqa: F401  (Seq2SeqTrainer and friends)

    with multiprocessing.get_context("fork").Pool(2, maxtasksperchild=1) as pool:
        print(json.dumps(pool.map(_run, json.loads(sys.argv[1]), chunksize=1)))
