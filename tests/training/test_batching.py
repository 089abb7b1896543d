"""§5.1 batches of similar length under a token budget, for a dataset and, a buffer at a time, for a stream."""

import numpy as np
import pytest
import torch
from datasets import Dataset
from datasets.distributed import split_dataset_by_node

from checks import assert_names
from modeling_vaswani.training.batching import (TokenBudgetBatchSampler, TokenBudgetStream, buffer_seed, is_stream,
                                                padded_tokens, padding_efficiency, token_budget_batches)

BUDGET = 120


def _random_lengths(n=2000, seed=1):
    rng = np.random.default_rng(seed)
    src = rng.integers(1, 60, size=n)
    return src, np.clip(src + rng.integers(-5, 10, size=n), 1, None)


def _flat(batches):
    return sorted(i for b in batches for i in b)


def test_every_index_once_and_budget_respected():
    src, tgt = _random_lengths()
    src[7], tgt[8] = 300, 500  # longer than the budget on one side each
    batches = token_budget_batches(src, tgt, max_tokens=256, seed=3)
    assert _flat(batches) == list(range(len(src)))
    for b in batches:
        assert (len(b) * src[b].max() <= 256 and len(b) * tgt[b].max() <= 256) or len(b) == 1
    assert [7] in batches and [8] in batches  # oversized examples sit alone, not dropped
    source, target = padded_tokens(batches, src, tgt)
    assert source == sum(len(b) * src[b].max() for b in batches)
    assert target == sum(len(b) * tgt[b].max() for b in batches)
    assert padded_tokens([[0, 1], []], [2, 4], [3, 1]) == (8, 6)
    assert padding_efficiency([[0, 1]], [2, 4], [3, 3]) == pytest.approx((2 + 4 + 3 + 3) / (2 * 4 + 2 * 3))


def test_batches_are_greedy_length_sorted_and_seeded():
    src, tgt = _random_lengths()
    batches = token_budget_batches(src, tgt, max_tokens=256, shuffle=False)
    # Unshuffled, batches follow increasing source length and each is full.
    for b, nxt in zip(batches, batches[1:]):
        assert src[b].max() <= src[nxt].min()
        grown = b + nxt[:1]
        assert len(grown) * max(src[grown].max(), tgt[grown].max()) > 256
    a = token_budget_batches(src, tgt, 512, seed=0)
    assert a == token_budget_batches(src, tgt, 512, seed=0) != token_budget_batches(src, tgt, 512, seed=1)
    assert token_budget_batches([], [], 512) == []


@pytest.mark.parametrize("call,words", [
    (lambda: token_budget_batches([1, 2], [1], 10), ["one entry per example", "2 and 1"]),
    (lambda: token_budget_batches([1, 2], [1, 2], 0), ["max_tokens", "0"]),
    (lambda: TokenBudgetStream([], BUDGET, num_replicas=2, rank=2), ["rank=2"]),
    (lambda: TokenBudgetStream([], BUDGET, buffer_size=0), ["shuffle buffer", "0"]),
    (lambda: TokenBudgetStream([], BUDGET).summary(), ["empty"]),
    (lambda: list(TokenBudgetStream([{"translation": {"en": "a"}}], BUDGET)), ["'input_ids'", "['translation']"]),
    (lambda: TokenBudgetStream(split_dataset_by_node(Dataset.from_list([{"a": 1}]).to_iterable_dataset(), rank=0,
                                                     world_size=2), BUDGET), ["already split by process"]),
])
def test_bad_arguments(call, words):
    with pytest.raises(ValueError) as error:
        call()
    assert_names(error, *words)


def test_sampler_set_epoch_and_dataloader():
    src, tgt = _random_lengths(500)
    sampler = TokenBudgetBatchSampler(src, tgt, max_tokens=300, seed=5)  # set_epoch: test_trainer.py
    epoch0 = list(sampler)
    assert list(sampler) == epoch0 and len(sampler) == len(epoch0) and _flat(epoch0) == list(range(500))
    loader = torch.utils.data.DataLoader(list(range(500)), batch_sampler=sampler)
    assert [b.tolist() for b in loader] == epoch0
    assert 0.5 < sampler.padding_efficiency <= 1.0


# Streams ----------------------------------------------------------------------------------------

def _examples(n=237):
    """Example i has id i and random lengths 1–30."""
    src, tgt = _random_lengths(n, seed=0)
    return [{"id": i, "input_ids": [7] * int(s % 30 + 1), "labels": [8] * int(t % 30 + 1)} for i, (s, t) in
            enumerate(zip(src, tgt))]


def _ids(batches):
    return [[example["id"] for example in batch] for batch in batches]


def test_a_stream_gives_every_example_once_within_the_budget_inside_its_buffer_by_the_map_style_rule():
    examples = _examples()
    batches = list(TokenBudgetStream(examples, BUDGET, buffer_size=50, seed=1))
    assert _flat(_ids(batches)) == list(range(len(examples)))  # 4 full buffers and a remainder of 37
    for batch in batches:
        assert len(batch) * max(max(len(e["input_ids"]), len(e["labels"])) for e in batch) <= BUDGET
        assert len({e["id"] // 50 for e in batch}) == 1  # cut inside one buffer
    assert len(batches) > len(examples) // 50
    # A buffer holding the whole stream gives exactly the map-style batches, with that buffer's seed.
    few = examples[:80]
    expected = token_budget_batches([len(e["input_ids"]) for e in few], [len(e["labels"]) for e in few], BUDGET,
                                    seed=buffer_seed(5, 0, 0))
    assert _ids(TokenBudgetStream(few, BUDGET, buffer_size=1000, seed=5)) == expected
    # The same for a seed, new for another seed and for each epoch.
    stream = TokenBudgetStream(examples, BUDGET, buffer_size=50, seed=1)
    stream.set_epoch(1)
    assert _ids(stream) != _ids(batches) and _flat(_ids(stream)) == list(range(len(examples)))
    assert _ids(TokenBudgetStream(examples, BUDGET, buffer_size=50, seed=1)) == _ids(batches)
    assert _ids(TokenBudgetStream(examples, BUDGET, buffer_size=50, seed=2)) != _ids(batches)


@pytest.mark.parametrize("n,even", [(237, False), (64, True)])
def test_two_ranks_of_a_stream_get_different_examples_and_as_many_batches(n, even):
    # even: 10 tokens a side everywhere, a buffer of 16 makes 4 batches of 4, the shares are disjoint.
    # Otherwise a buffer with an odd number of batches gives one rank a repeated batch.
    examples = [{"id": i, "input_ids": [7] * 10, "labels": [8] * 10} for i in range(n)] if even else _examples(n)
    buffer_size, budget = (16, 40) if even else (50, BUDGET)
    ranks = [_ids(TokenBudgetStream(examples, budget, buffer_size=buffer_size, seed=2, num_replicas=2, rank=r))
             for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1])
    seen = [{i for batch in share for i in batch} for share in ranks]
    assert seen[0] | seen[1] == set(range(n))
    everything = _ids(TokenBudgetStream(examples, budget, buffer_size=buffer_size, seed=2))
    if even:
        assert not seen[0] & seen[1] and sorted(ranks[0] + ranks[1]) == sorted(everything)
    else:
        assert len(ranks[0]) + len(ranks[1]) - len(everything) <= -(-n // buffer_size)  # a padding batch a buffer
        repeated = [b for b in ranks[0] + ranks[1] if (ranks[0] + ranks[1]).count(b) > 1]
        assert seen[0] & seen[1] == {i for b in repeated for i in b}


def _ids_of(batch):
    return [example["id"] for example in batch]


@pytest.mark.parametrize("sharded", [False, True], ids=["plain", "datasets-shards"])
def test_dataloader_workers_share_the_batches_of_a_stream(sharded):
    examples = _examples(150)
    data = Dataset.from_list(examples).to_iterable_dataset(num_shards=2) if sharded else examples
    stream = TokenBudgetStream(data, BUDGET, buffer_size=40, seed=0)
    batches = list(torch.utils.data.DataLoader(stream, batch_size=None, collate_fn=_ids_of, num_workers=2))
    assert _flat(batches) == list(range(150))  # a datasets stream: each worker read its own shard
    if not sharded:
        assert sorted(batches) == sorted(_ids(stream))


def test_set_epoch_reaches_a_shuffled_datasets_stream():  # the summary: test_trainer.py
    data = Dataset.from_list(_examples(60)).to_iterable_dataset(num_shards=3).shuffle(seed=0, buffer_size=10)
    stream = TokenBudgetStream(data, BUDGET, buffer_size=1000, seed=0)
    assert is_stream(data) and is_stream(stream) and not is_stream(Dataset.from_list(_examples(3)))
    stream.set_epoch(2)
    assert data.epoch == 2


@pytest.mark.slow
def test_multi30k_padding_efficiency():
    """On real Multi30k en→de BPE lengths, length-aware batching wastes far less than random batching."""
    from modeling_vaswani.training.data import load_multi30k
    from modeling_vaswani.training.tokenization import train_tokenizer_for_dataset

    train = load_multi30k("en", "de")["train"]
    tok = train_tokenizer_for_dataset(train, "en", "de", vocab_size=8000)
    pairs = train["translation"]
    src = [len(e.ids) for e in tok.backend_tokenizer.encode_batch([p["en"] for p in pairs])]
    tgt = [len(e.ids) for e in tok.backend_tokenizer.encode_batch([p["de"] for p in pairs])]
    assert len(src) == 29000 and tgt[0] == len(tok(pairs[0]["de"])["input_ids"])
    budget = token_budget_batches(src, tgt, max_tokens=4096, seed=0)
    size, shuffled = round(len(src) / len(budget)), np.random.default_rng(0).permutation(len(src)).tolist()
    baseline = [shuffled[i : i + size] for i in range(0, len(src), size)]  # random batches of as many sentences
    eff_budget, eff_default = padding_efficiency(budget, src, tgt), padding_efficiency(baseline, src, tgt)
    assert eff_budget >= 0.9 and eff_budget > eff_default + 0.2
