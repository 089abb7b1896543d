"""Tests for modeling_vaswani.training.stream_batching: §5.1 token-budget batches formed inside a shuffle buffer."""

import numpy as np
import pytest
import torch
from datasets import Dataset
from datasets.distributed import split_dataset_by_node

from checks import assert_names
from modeling_vaswani.training.batching import token_budget_batches
from modeling_vaswani.training.stream_batching import TokenBudgetStream, buffer_seed, is_stream

BUDGET = 120


def _examples(n=237, seed=0):
    """Example i has id i (so batches tell which examples they hold) and random lengths 1–30."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        src = int(rng.integers(1, 31))
        rows.append({"id": i, "input_ids": [7] * src, "labels": [8] * max(1, src + int(rng.integers(-3, 4)))})
    return rows


def _ids(batches):
    return [[example["id"] for example in batch] for batch in batches]


def _flat(batches):
    return sorted(i for batch in _ids(batches) for i in batch)


def test_every_example_once_per_epoch_within_the_budget():
    examples = _examples()
    stream = TokenBudgetStream(examples, BUDGET, buffer_size=50, seed=1)
    batches = list(stream)
    assert _flat(batches) == list(range(len(examples)))  # 4 full buffers and a remainder of 37
    for batch in batches:
        n = len(batch)
        longest_src = max(len(e["input_ids"]) for e in batch)
        longest_tgt = max(len(e["labels"]) for e in batch)
        assert n * longest_src <= BUDGET and n * longest_tgt <= BUDGET
        # Batches are cut inside one buffer: all their examples were read together.
        assert len({e["id"] // 50 for e in batch}) == 1
    assert len(batches) > len(examples) // 50  # several batches per buffer, not one


def test_a_buffer_is_batched_by_the_map_style_rule():
    """A buffer holding the whole stream gives exactly `token_budget_batches` of it, with that buffer's seed."""
    examples = _examples(80)
    src = [len(e["input_ids"]) for e in examples]
    tgt = [len(e["labels"]) for e in examples]
    expected = token_budget_batches(src, tgt, BUDGET, seed=buffer_seed(5, 0, 0))
    assert _ids(TokenBudgetStream(examples, BUDGET, buffer_size=1000, seed=5)) == expected


def test_deterministic_for_a_seed_new_for_another_seed_and_each_epoch():
    examples = _examples()

    def epoch(seed, number):
        stream = TokenBudgetStream(examples, BUDGET, buffer_size=60, seed=seed)
        stream.set_epoch(number)
        return _ids(stream)

    first = epoch(3, 0)
    assert epoch(3, 0) == first
    assert epoch(4, 0) != first
    second = epoch(3, 1)
    assert second != first and sorted(i for b in second for i in b) == list(range(len(examples)))


@pytest.mark.parametrize("n,even", [(237, False), (64, True)])
def test_two_ranks_get_different_examples_as_many_batches_and_everything_together(n, even):
    # With even=True every example has 10 tokens a side and a buffer of 16 makes 4 batches of 4:
    # the two ranks' shares are exactly disjoint. Otherwise a buffer with an odd number of batches
    # gives one rank a repeated batch, so that both run as many steps.
    examples = [{"id": i, "input_ids": [7] * 10, "labels": [8] * 10} for i in range(n)] if even else _examples(n)
    buffer_size, budget = (16, 40) if even else (50, BUDGET)
    ranks = [_ids(TokenBudgetStream(examples, budget, buffer_size=buffer_size, seed=2, num_replicas=2, rank=r))
             for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1])
    seen = [{i for batch in share for i in batch} for share in ranks]
    assert seen[0] | seen[1] == set(range(n))
    everything = TokenBudgetStream(examples, budget, buffer_size=buffer_size, seed=2)
    buffers = (n + buffer_size - 1) // buffer_size
    if even:
        assert not seen[0] & seen[1]
        assert sorted(ranks[0] + ranks[1]) == sorted(_ids(everything))
    else:
        assert len(ranks[0]) + len(ranks[1]) - len(list(everything)) <= buffers  # one padding batch a buffer at most
        repeated = [b for b in ranks[0] + ranks[1] if (ranks[0] + ranks[1]).count(b) > 1]
        assert seen[0] & seen[1] == {i for b in repeated for i in b}


def test_dataloader_workers_share_the_batches_of_a_plain_stream():
    examples = _examples(150)
    stream = TokenBudgetStream(examples, BUDGET, buffer_size=40, seed=0)
    loader = torch.utils.data.DataLoader(stream, batch_size=None, collate_fn=_ids_of, num_workers=2)
    batches = list(loader)
    assert sorted(i for b in batches for i in b) == list(range(150))
    assert sorted(batches) == sorted(_ids(stream))


def test_dataloader_workers_over_a_sharded_datasets_stream():
    examples = _examples(150)
    data = Dataset.from_list(examples).to_iterable_dataset(num_shards=2)
    stream = TokenBudgetStream(data, BUDGET, buffer_size=40, seed=0)
    loader = torch.utils.data.DataLoader(stream, batch_size=None, collate_fn=_ids_of, num_workers=2)
    assert sorted(i for b in loader for i in b) == list(range(150))  # each worker read its own shard


def _ids_of(batch):
    return [example["id"] for example in batch]


def test_set_epoch_reaches_a_shuffled_datasets_stream():
    data = Dataset.from_list(_examples(60)).to_iterable_dataset(num_shards=3).shuffle(seed=0, buffer_size=10)
    stream = TokenBudgetStream(data, BUDGET, buffer_size=1000, seed=0)
    assert is_stream(data) and is_stream(stream) and not is_stream(Dataset.from_list(_examples(3)))
    stream.set_epoch(2)
    assert data.epoch == 2


def test_summary_of_the_first_buffer():
    summary = TokenBudgetStream(_examples(), BUDGET, buffer_size=100).summary()
    assert summary["shuffle_buffer"] == summary["examples_in_first_buffer"] == 100
    assert 0 < summary["tokens_per_batch"]["source"] <= BUDGET and 0.5 < summary["padding_efficiency"] <= 1


def test_bad_streams_and_settings():
    with pytest.raises(ValueError) as error:
        list(TokenBudgetStream([{"translation": {"en": "a", "de": "b"}}], BUDGET))
    assert_names(error, "'input_ids'", "'labels'", "['translation']")
    with pytest.raises(ValueError, match="shuffle buffer"):
        TokenBudgetStream(_examples(3), BUDGET, buffer_size=0)
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBudgetStream(_examples(3), 0)
    with pytest.raises(ValueError, match="empty"):
        TokenBudgetStream([], BUDGET).summary()
    split = split_dataset_by_node(Dataset.from_list(_examples(10)).to_iterable_dataset(), rank=0, world_size=2)
    with pytest.raises(ValueError, match="already split by process"):
        TokenBudgetStream(split, BUDGET)
