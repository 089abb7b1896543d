"""The numbered examples run, print what they show, and draw their picture.

Every `examples/NN_*.py` runs in a process of its own, as `__main__`, with `EXAMPLES_OUTPUT_DIR`
pointing to a fresh folder, and must exit with status 0, print something, and leave a real,
non-empty PNG in that folder.

Importing torch and transformers costs several CPU seconds per process, more than most examples
take themselves, so one runner process (this file, run as a script) imports them once and then
forks one child per example; each child starts from that clean, imported state, runs the script
and exits with its status. Two children run at a time.

Examples 03, 11 and 12 need a trained model. They use the shipped one in hub_card/ when it is there;
otherwise they get `--model` pointing to a tiny model this file trains for a few steps on
Multi30k sentences, which exercises the same code (a poor translation is still a translation).
A missing model must end in a one-line `error:` message, not a traceback.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from modeling_vaswani.training.data import DEFAULT_DATA_DIR, read_lines

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("[0-9][0-9]_*.py"))
NEEDS_MODEL = ("03_", "11_", "12_")
HUB_CARD = REPO / "hub_card"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TIMEOUT = 600  # seconds for all examples together; about half a minute on an idle 2-core CPU
PARALLEL = 2


def _train_tiny_model(folder: Path, tokenizer, make_model) -> Path:
    """The "tiny" preset (2 layers, d_model 32) over the shared test vocabulary, trained for 40 steps on 400 pairs."""
    sources = read_lines(DEFAULT_DATA_DIR / "train.en.gz")[:400]
    targets = read_lines(DEFAULT_DATA_DIR / "train.de.gz")[:400]
    model = make_model(
        preset="tiny", vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.bos_token_id,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    model.train()
    for step in range(40):
        batch = slice(step * 10 % 400, step * 10 % 400 + 10)
        encoded = tokenizer(sources[batch], text_target=targets[batch], return_tensors="pt", padding=True)
        labels = encoded["labels"].masked_fill(encoded["labels"] == tokenizer.pad_token_id, -100)
        loss = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"], labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _run_jobs(jobs: list[dict]) -> None:
    """Runner side: fork one child per job (PARALLEL at a time); write each exit status to its folder."""
    import runpy
    import traceback

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot  # noqa: F401  (imported once here, not in every child)
    import modeling_vaswani.training.trainer  # noqa: F401  (Seq2SeqTrainer and friends, for the training example)

    running = {}
    pending = list(jobs)
    while pending or running:
        while pending and len(running) < PARALLEL:
            job = pending.pop(0)
            out = Path(job["output_dir"])
            out.mkdir(parents=True, exist_ok=True)
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # child: become `python <script> <args>` run from <out>
                code = 1
                try:
                    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
                        os.dup2(os.open(out / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
                    os.environ["EXAMPLES_OUTPUT_DIR"] = str(out)
                    os.chdir(out)
                    sys.argv = [job["script"], *job["args"]]
                    sys.path.insert(0, str(Path(job["script"]).parent))  # as `python <script>` does
                    runpy.run_path(job["script"], run_name="__main__")
                    code = 0
                except SystemExit as exit_:
                    code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                    if not isinstance(exit_.code, (int, type(None))):
                        print(exit_.code, file=sys.stderr)
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            running[pid] = out
        pid, status = os.wait()
        (running.pop(pid) / "exit_status.txt").write_text(str(os.waitstatus_to_exitcode(status)))


@pytest.fixture(scope="module")
def runs(tmp_path_factory, request):
    """Run every example (and example 11 without a model); {name: (exit status, stdout, stderr, folder)}."""
    if (HUB_CARD / "model.safetensors").is_file():
        model_args = []  # the scripts' default: hub_card/
    else:
        folder = tmp_path_factory.mktemp("tiny_model")
        tokenizer, make_model = (request.getfixturevalue(name) for name in ("trained_tokenizer", "make_model"))
        model_args = ["--model", str(_train_tiny_model(folder, tokenizer, make_model))]
    root = tmp_path_factory.mktemp("examples")
    jobs = {script.name: {"script": str(script), "output_dir": str(root / script.stem),
                          "args": model_args if script.name.startswith(NEEDS_MODEL) else []}
            for script in EXAMPLES}
    example_11 = next(s for s in EXAMPLES if s.name.startswith("11_"))
    jobs["missing-model"] = {"script": str(example_11), "output_dir": str(root / "missing-model"),
                             "args": ["--model", str(tmp_path_factory.mktemp("empty_model"))]}
    # Examples 11/12 (slowest with a real model) and 10 (training) first, so the pool ends evenly.
    order = sorted(jobs.values(), key=lambda job: Path(job["script"]).name[:2] not in ("10", "11", "12"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    runner = subprocess.run([sys.executable, __file__, json.dumps(order)], env=env, cwd=root,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert runner.returncode == 0, f"the example runner itself failed:\n{runner.stderr[-4000:]}"
    results = {}
    for name, job in jobs.items():
        out = Path(job["output_dir"])
        status = (out / "exit_status.txt").read_text()
        results[name] = (int(status), (out / "stdout.txt").read_text(), (out / "stderr.txt").read_text(), out)
    return results


def test_the_numbered_examples_are_all_there():
    numbers = [script.name[:2] for script in EXAMPLES]
    assert numbers == [f"{n:02d}" for n in range(1, 14)], numbers


@pytest.mark.slow
@pytest.mark.parametrize("script", [s.name for s in EXAMPLES])
def test_example_runs_and_draws(runs, script):
    status, stdout, stderr, output_dir = runs[script]
    assert status == 0, f"{script} failed with status {status}:\n{stdout[-2000:]}\n{stderr[-4000:]}"
    assert len(stdout.strip().splitlines()) >= 3, f"{script} printed almost nothing:\n{stdout}"
    pictures = sorted(output_dir.glob("*.png"))
    assert pictures, f"{script} wrote no PNG into EXAMPLES_OUTPUT_DIR ({output_dir})"
    for picture in pictures:
        data = picture.read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > 5000, f"{picture.name} is not a real PNG image"


@pytest.mark.slow
def test_model_examples_report_a_missing_model_in_one_line(runs):
    status, _, stderr, output_dir = runs["missing-model"]
    assert status != 0
    assert "Traceback" not in stderr
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no trained model in"), stderr
    assert not list(output_dir.glob("*.png"))


if __name__ == "__main__":
    _run_jobs(json.loads(sys.argv[1]))
