"""Tests for modeling_vaswani.training.batching: §5.1 batches of similar length under a token budget."""

import numpy as np
import pytest
import torch

from modeling_vaswani.training.batching import (
    TokenBudgetBatchSampler,
    default_batches,
    padded_tokens,
    padding_efficiency,
    token_budget_batches,
)


def _random_lengths(n=2000, seed=1):
    rng = np.random.default_rng(seed)
    src = rng.integers(1, 60, size=n)
    tgt = np.clip(src + rng.integers(-5, 10, size=n), 1, None)
    return src, tgt


def _flat(batches):
    return sorted(i for b in batches for i in b)


def test_every_index_once_and_budget_respected():
    src, tgt = _random_lengths()
    src[7], tgt[8] = 300, 500  # longer than the budget on one side each
    batches = token_budget_batches(src, tgt, max_tokens=256, seed=3)
    assert _flat(batches) == list(range(len(src)))
    for b in batches:
        n = len(b)
        fits = n * src[b].max() <= 256 and n * tgt[b].max() <= 256
        assert fits or n == 1, (b, src[b], tgt[b])
    assert [7] in batches and [8] in batches  # oversized examples sit alone, not dropped


def test_batches_are_greedy_and_length_sorted():
    src, tgt = _random_lengths()
    batches = token_budget_batches(src, tgt, max_tokens=256, shuffle=False)
    # Unshuffled, batches follow increasing source length and each is full: one more
    # example (the first of the next batch) would have broken the budget.
    for b, nxt in zip(batches, batches[1:]):
        assert src[b].max() <= src[nxt].min()
        grown = b + nxt[:1]
        assert len(grown) * src[grown].max() > 256 or len(grown) * tgt[grown].max() > 256


def test_seeded_shuffle_and_empty_input():
    src, tgt = _random_lengths()
    a = token_budget_batches(src, tgt, 512, seed=0)
    assert a == token_budget_batches(src, tgt, 512, seed=0)
    assert a != token_budget_batches(src, tgt, 512, seed=1)
    assert token_budget_batches([], [], 512) == []


def test_bad_arguments():
    with pytest.raises(ValueError, match="one entry per example"):
        token_budget_batches([1, 2], [1], 10)
    with pytest.raises(ValueError, match="max_tokens"):
        token_budget_batches([1, 2], [1, 2], 0)
    with pytest.raises(ValueError, match="rank"):
        TokenBudgetBatchSampler([1, 2], [1, 2], 10, num_replicas=2, rank=2)


def test_sampler_set_epoch_and_dataloader():
    src, tgt = _random_lengths(500)
    sampler = TokenBudgetBatchSampler(src, tgt, max_tokens=300, seed=5)
    epoch0 = list(sampler)
    assert list(sampler) == epoch0 and len(sampler) == len(epoch0)
    sampler.set_epoch(1)
    epoch1 = list(sampler)
    assert epoch1 != epoch0 and _flat(epoch1) == list(range(500))
    loader = torch.utils.data.DataLoader(list(range(500)), batch_sampler=sampler)
    assert [b.tolist() for b in loader] == epoch1
    assert 0.5 < sampler.padding_efficiency <= 1.0


@pytest.mark.parametrize("n", [500, 7])
def test_ddp_shares_cover_everything_with_equal_lengths(n):
    src, tgt = _random_lengths(n)
    shards = [TokenBudgetBatchSampler(src, tgt, 300, seed=2, num_replicas=2, rank=r) for r in (0, 1)]
    for s in shards:
        s.set_epoch(4)
    full = token_budget_batches(src, tgt, 300, seed=6)
    lists = [list(s) for s in shards]
    assert len(lists[0]) == len(lists[1]) == len(shards[0]) == len(shards[1]) == -(-len(full) // 2)
    # Rank 0 takes the even batches, rank 1 the odd ones (padded with the first batch if odd).
    assert lists[0] == full[0::2]
    assert lists[1] == (full + full[:1])[1::2][: len(lists[0])]
    union = {i for lst in lists for b in lst for i in b}
    assert union == set(range(n))


def test_default_batches():
    batches = default_batches(10, 4, seed=0)
    assert [len(b) for b in batches] == [4, 4, 2] and _flat(batches) == list(range(10))
    assert batches != default_batches(10, 4, seed=1)


def test_padding_efficiency_value():
    assert padding_efficiency([[0, 1]], [2, 4], [3, 3]) == pytest.approx((2 + 4 + 3 + 3) / (2 * 4 + 2 * 3))


def test_padded_tokens_are_what_the_budget_counts():
    src, tgt = _random_lengths()
    batches = token_budget_batches(src, tgt, max_tokens=256, seed=0)
    source, target = padded_tokens(batches, src, tgt)
    assert source == sum(len(b) * src[b].max() for b in batches) <= 256 * len(batches)
    assert target == sum(len(b) * tgt[b].max() for b in batches) <= 256 * len(batches)
    assert padded_tokens([[0, 1], []], [2, 4], [3, 1]) == (8, 6)


@pytest.mark.slow
def test_multi30k_padding_efficiency():
    """On real Multi30k en→de BPE lengths, length-aware batching wastes far less than random batching."""
    from modeling_vaswani.training.data import load_multi30k
    from modeling_vaswani.training.tokenization import train_tokenizer_for_dataset

    train = load_multi30k("en", "de")["train"]
    tok = train_tokenizer_for_dataset(train, "en", "de", vocab_size=8000)
    pairs = train["translation"]
    # Lengths as the model sees them (with </s>), via the raw tokenizer for speed.
    src = [len(e.ids) for e in tok.backend_tokenizer.encode_batch([p["en"] for p in pairs])]
    tgt = [len(e.ids) for e in tok.backend_tokenizer.encode_batch([p["de"] for p in pairs])]
    assert len(src) == 29000 and tgt[0] == len(tok(pairs[0]["de"])["input_ids"])

    budget = token_budget_batches(src, tgt, max_tokens=4096, seed=0)
    sentences_per_batch = round(len(src) / len(budget))
    baseline = default_batches(len(src), sentences_per_batch, seed=0)
    eff_budget = padding_efficiency(budget, src, tgt)
    eff_default = padding_efficiency(baseline, src, tgt)
    print(
        f"\nMulti30k train, BPE 8000: token budget 4096 -> {len(budget)} batches, "
        f"{sentences_per_batch} sentences/batch on average, padding efficiency {eff_budget:.3f}; "
        f"random batches of {sentences_per_batch}: {eff_default:.3f}"
    )
    assert eff_budget >= 0.9
    assert eff_budget > eff_default + 0.2
