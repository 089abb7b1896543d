"""Each numbered example exits 0, prints and leaves a real PNG (one runner process forks one child each)."""

import json
import multiprocessing
import os
import runpy
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("[0-9][0-9]_*.py"))


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
            print(exit_.code, file=sys.stderr)  # as Python does
        return exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every example, and 11 given an empty folder as its model: {name: (exit status, stdout, stderr, folder)}."""
    root = tmp_path_factory.mktemp("examples")
    jobs = {s.name: {"script": str(s), "output_dir": str(root / s.stem), "args": []} for s in EXAMPLES}
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
    assert [line for line in stderr.splitlines() if line.strip()][0].startswith("error: no trained model in"), stderr
    assert len(stderr.strip().splitlines()) == 1 and not list(output_dir.glob("*.png"))


if __name__ == "__main__":  # the runner: import once, then one fresh child per example (maxtasksperchild=1)
    import matplotlib.pyplot  # noqa: F401  (MPLBACKEND=Agg)
    import modeling_vaswani.training.trainer  # noqa: F401  (Seq2SeqTrainer and friends)

    with multiprocessing.get_context("fork").Pool(2, maxtasksperchild=1) as pool:
        print(json.dumps(pool.map(_run, json.loads(sys.argv[1]), chunksize=1)))
