"""threads: the CPU thread count of a training process, chosen by a stated rule."""

import pytest
import torch

from modeling_vaswani.training.threads import SMALL_MODEL_PARAMETERS, choose_threads, default_threads, use_threads


def test_a_small_model_trains_on_one_thread_a_large_one_on_the_cores_it_has():
    assert default_threads(60_000, cores=16)[0] == 1
    assert default_threads(SMALL_MODEL_PARAMETERS - 1, cores=16)[0] == 1
    assert default_threads(SMALL_MODEL_PARAMETERS, cores=16)[0] == 16
    assert default_threads(60_000_000, processes=4, cores=16)[0] == 4  # shared among the processes
    assert default_threads(60_000_000, processes=4, cores=2)[0] == 1
    threads, why = default_threads(60_000, cores=2)
    assert "under 20M parameters" in why


def test_an_explicit_count_wins_then_omp_num_threads_then_the_rule():
    env = {"OMP_NUM_THREADS": "3", "LOCAL_WORLD_SIZE": "2"}
    assert choose_threads(60_000_000, requested=5, env=env) == (5, "--threads")
    assert choose_threads(60_000_000, env=env) == (3, "OMP_NUM_THREADS")
    assert choose_threads(60_000, env={}) == (1, default_threads(60_000)[1])
    with pytest.raises(ValueError, match="--threads"):
        choose_threads(60_000, requested=0)


def test_use_threads_sets_torchs_count():
    before = torch.get_num_threads()
    try:
        use_threads(1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
