"""The tiny training run the end-to-end tests read, run once."""

import pytest

from training_runs import RUN, STEPS, train


@pytest.fixture(scope="session")
def base_run(tmp_path_factory):
    """40 steps of the tiny preset with a checkpoint every 10 steps and --average_last 2."""
    output = tmp_path_factory.mktemp("base")
    result = train(*RUN, "--max_steps", STEPS, "--average_last", "2", "--output_dir", output)
    return output, result.stderr

