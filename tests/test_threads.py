"""threads: the CPU thread count of a process that trains or translates, chosen by one stated rule."""

import pytest
import torch

from modeling_vaswani.threads import SMALL_MODEL_PARAMETERS, choose_threads, idle_cores, use_threads

SMALL, LARGE = SMALL_MODEL_PARAMETERS - 1, SMALL_MODEL_PARAMETERS


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("cores,load", [(2, 0.0), (2, 4.5), (64, 0.0)])
def test_a_small_model_runs_on_one_thread_however_many_cores(cores, load, training):
    assert choose_threads(60_000, env={}, training=training, cores=cores, load=load) == (
        1, "the model has under 20M parameters")
    assert choose_threads(SMALL, env={}, training=training, cores=cores, load=load)[0] == 1


@pytest.mark.parametrize("cores,processes,expected", [(16, 1, 16), (16, 4, 4), (2, 4, 1)])
def test_a_large_model_trains_on_the_cores_shared_among_the_processes(cores, processes, expected):
    env = {"LOCAL_WORLD_SIZE": str(processes)}
    threads, why = choose_threads(LARGE, env=env, training=True, cores=cores, load=40.0)  # the load is not read
    assert threads == expected and f"{cores} cores" in why


@pytest.mark.parametrize("cores,load,expected", [(2, 0.0, 2), (2, 0.6, 1), (2, 4.5, 1), (16, 3.2, 13), (16, 40.0, 1)])
def test_a_large_model_translates_on_the_idle_cores(cores, load, expected):
    threads, why = choose_threads(LARGE, env={"LOCAL_WORLD_SIZE": "4"}, cores=cores, load=load)
    assert threads == expected == idle_cores(cores, load)
    assert f"of {cores}" in why


@pytest.mark.parametrize("training", [True, False])
def test_an_explicit_count_wins_then_omp_num_threads_then_the_rule(training):
    env = {"OMP_NUM_THREADS": "3", "LOCAL_WORLD_SIZE": "2"}
    assert choose_threads(LARGE, requested=5, env=env, training=training) == (5, "--threads")
    assert choose_threads(SMALL, env=env, training=training) == (3, "OMP_NUM_THREADS")
    assert choose_threads(LARGE, env={"OMP_NUM_THREADS": "0"}, training=training, cores=8, load=0.0)[0] == 8  # 0 is no count


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_a_thread_count_that_is_not_positive_is_refused(bad):
    with pytest.raises(ValueError, match="--threads") as error:
        choose_threads(SMALL, requested=bad)
    assert repr(bad) in str(error.value)


def test_use_threads_sets_pytorch_threads_by_the_model_size(tiny_model, torch_threads, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert use_threads(tiny_model) == (1, "the model has under 20M parameters")
    assert torch.get_num_threads() == 1
    assert use_threads(tiny_model, 2, training=True) == (2, "--threads") and torch.get_num_threads() == 2
    assert use_threads(None)[0] == 1 and use_threads(object())[0] == 1  # no parameters(): another engine
    assert use_threads(None, 2) == (2, "--threads")
