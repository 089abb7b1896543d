"""What the benchmark tests share: the recorded runs (`recorded_folder` runs a test once per folder), a padded
batch of the tiny preset's vocabulary, and a command run from the repository root as a user runs it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from checks import CHILD_ENV

ROOT = Path(__file__).resolve().parents[2]
# Every results.json the repository keeps: the last full run's and each recorded one.
RECORDED = [ROOT / "benchmarks", *sorted((ROOT / "benchmarks" / "recorded").iterdir())]


def pytest_generate_tests(metafunc):
    if "recorded_folder" in metafunc.fixturenames:
        metafunc.parametrize("recorded_folder", RECORDED, ids=[folder.name for folder in RECORDED])


@pytest.fixture(scope="session")
def recorded_runs() -> list[dict]:
    return [json.loads((folder / "results.json").read_text()) for folder in RECORDED]


@pytest.fixture
def padded_batch():
    """Three pairs of ids below 60 (make_config("tiny", vocab_size=60)): one padded source, one short target."""
    torch.manual_seed(0)
    input_ids, labels = torch.randint(4, 60, (3, 7)), torch.randint(4, 60, (3, 5))
    attention_mask = torch.ones_like(input_ids)
    input_ids[0, 4:], attention_mask[0, 4:], labels[1, 3:] = 0, 0, -100
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


@pytest.fixture(scope="session")
def run_command():
    """run_command(*args, command=(python,), cwd=ROOT, env=offline and one thread): fails on a non-zero exit."""
    def run(*args, command=(sys.executable,), cwd=ROOT, env=CHILD_ENV):
        done = subprocess.run([*command, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        return done
    return run
