"""The tiny training run the end-to-end tests read, run once; a model folder a test may damage."""

import pytest

from checks import copy_folder
from training_runs import RUN, STEPS, train


@pytest.fixture(scope="session")
def base_run(tmp_path_factory):
    """40 steps of the tiny preset with a checkpoint every 10 steps and --average_last 2."""
    output = tmp_path_factory.mktemp("base")
    result = train(*RUN, "--max_steps", STEPS, "--average_last", "2", "--output_dir", output)
    return output, result.stderr


@pytest.fixture
def folder(saved_model_dir, tmp_path):
    """A copy of saved_model_dir of the test's own."""
    return copy_folder(saved_model_dir, tmp_path)
