"""scripts/train.py run in a subprocess on a tiny model: what the end-to-end training tests share."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAIN = str(REPO / "scripts" / "train.py")
# Single-threaded subprocesses: reproducible float sums, and two ranks of torchrun share 2 cores.
# PYTHONPATH: the subprocess imports this checkout's package, whatever copy is installed.
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
       "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
TIMEOUT = 300
# The newest recorded test-set translation benchmark: the model card's speed section comes from one.
RECORDED_BENCHMARK = sorted(REPO.glob("benchmarks/recorded/*-translation/results.json"))[-1]

# A tiny model on 300 pairs (dropout 0, the data order from the seeds): two runs take exactly the same
# steps. Nothing says CPU: the script finds that out (and under torchrun too).
MODEL = ["--preset", "tiny", "--vocab_size", "500"]
# Eager: compiling takes longer than these runs (one test trains compiled, the default on a CPU).
EAGER = ["--torch_compile", "false"]
DATA = MODEL + ["--max_train_samples", "300", "--max_eval_samples", "30", "--max_tokens", "1024",
                "--report_to", "none", "--disable_tqdm", "true", *EAGER]
RUN = DATA + ["--warmup_steps_noam", "30", "--seed", "7", "--data_seed", "7", "--logging_steps", "5",
              "--save_strategy", "steps", "--save_steps", "10", "--eval_strategy", "steps", "--eval_steps", "40"]
# A resumed run is given no model flags: its model comes from the checkpoint.
RESUME = [arg for arg in RUN if arg not in MODEL]
STEPS = 40


def run_script(name, *args, **env):
    script = [name] if name.startswith("-") else [str(REPO / "scripts" / name)]
    try:
        result = subprocess.run([sys.executable, *script, *map(str, args)], cwd=REPO, env={**ENV, **env},
                                capture_output=True, text=True, timeout=2 * TIMEOUT)
    except subprocess.TimeoutExpired as timeout:  # where it stopped: its log so far
        raise AssertionError((name, "timed out", (timeout.stderr or b"").decode(errors="replace")[-4000:])) from None
    assert result.returncode == 0, (name, result.stderr[-4000:])
    return result


def train(*args, **env):
    return run_script("train.py", *args, **env)


def _json(path, default=None):
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return default
