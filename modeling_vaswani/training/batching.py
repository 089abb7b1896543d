"""Batching by approximate length under a token budget (§5.1 "Training Data and Batching").

The paper batches sentence pairs of similar length together and sizes each batch by tokens, not
sentences: every training batch held roughly 25,000 source tokens and 25,000 target tokens.
Grouping similar lengths wastes little compute on padding, and a token budget keeps the work per
step about constant whether the sentences are short or long.

``token_budget_batches`` sorts the examples by (source length, target length), walks through them
in that order and closes a batch as soon as one more sentence would exceed the budget, then
shuffles the order of the batches (not their contents) so training does not see lengths in a
rising sequence. As in fairseq, the budget counts *padded* tokens: a batch of ``n`` pairs costs
``n × longest source`` on the encoder side and ``n × longest target`` on the decoder side, and both
must stay within ``max_tokens``. That is the memory a batch really takes.

An example longer than ``max_tokens`` on its own is never dropped: it forms a batch by itself
(which then exceeds the budget). Truncate or filter long sentences beforehand if that matters.

``TokenBudgetBatchSampler`` puts this behind the ``torch.utils.data.Sampler`` interface (use it as
``DataLoader(..., batch_sampler=sampler)``), with per-epoch reshuffling and sharding over
data-parallel ranks. A stream, which cannot be sorted whole, is batched the same way one shuffle
buffer at a time (``stream_batching.TokenBudgetStream``).
"""

from __future__ import annotations

import math
from typing import Iterator, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Sampler


def token_budget_batches(
    src_lengths: Sequence[int],
    tgt_lengths: Sequence[int],
    max_tokens: int,
    seed: int = 0,
    shuffle: bool = True,
) -> list[list[int]]:
    """Group example indices into batches of similar length holding at most ``max_tokens`` padded tokens per side.

    Every index appears exactly once. Examples with equal lengths are ordered at random (from
    ``seed``) so that which of them share a batch changes with the seed; with ``shuffle=True`` the
    order of the batches is shuffled too.
    """
    src, tgt = _check_lengths(src_lengths, tgt_lengths)
    check_max_tokens(max_tokens)
    rng = np.random.default_rng(seed)
    # §5.1: "batched together by approximate sequence length". lexsort uses the last key first:
    # source length, then target length, then a random number to break ties.
    order = np.lexsort((rng.random(len(src)), tgt, src))

    batches: list[list[int]] = []
    batch: list[int] = []
    longest_src = longest_tgt = 0
    for index in order.tolist():
        new_src = max(longest_src, int(src[index]))
        new_tgt = max(longest_tgt, int(tgt[index]))
        size = len(batch) + 1
        # §5.1: about max_tokens source tokens and max_tokens target tokens per batch (padded).
        if batch and (size * new_src > max_tokens or size * new_tgt > max_tokens):
            batches.append(batch)
            batch, new_src, new_tgt = [], int(src[index]), int(tgt[index])
        # An empty batch always takes the example, so one longer than max_tokens sits alone.
        batch.append(index)
        longest_src, longest_tgt = new_src, new_tgt
    if batch:
        batches.append(batch)

    if shuffle:
        permutation = rng.permutation(len(batches))
        batches = [batches[i] for i in permutation]
    return batches


def check_max_tokens(max_tokens) -> None:
    """A token budget must be a positive whole number."""
    if not isinstance(max_tokens, (int, np.integer)) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}.")


def padding_efficiency(
    batches: Sequence[Sequence[int]], src_lengths: Sequence[int], tgt_lengths: Sequence[int]
) -> float:
    """Real tokens / tokens after padding each batch to its longest sentence, both sides together (1.0 = no padding)."""
    src, tgt = _check_lengths(src_lengths, tgt_lengths)
    real = padded = 0
    for batch in batches:
        if len(batch) == 0:
            continue
        idx = np.asarray(batch, dtype=np.int64)
        s, t = src[idx], tgt[idx]
        real += int(s.sum()) + int(t.sum())
        padded += len(idx) * (int(s.max()) + int(t.max()))
    if padded == 0:
        raise ValueError("No tokens in the batches: padding efficiency is undefined.")
    return real / padded


def padded_tokens(
    batches: Sequence[Sequence[int]], src_lengths: Sequence[int], tgt_lengths: Sequence[int]
) -> tuple[int, int]:
    """(source, target): the tokens of all the batches once each is padded to its longest sentence.

    That is what the budget of ``token_budget_batches`` counts, summed over the batches.
    """
    src, tgt = _check_lengths(src_lengths, tgt_lengths)
    source = target = 0
    for batch in batches:
        if len(batch):
            idx = np.asarray(batch, dtype=np.int64)
            source += len(idx) * int(src[idx].max())
            target += len(idx) * int(tgt[idx].max())
    return source, target


def default_batches(n: int, batch_size: int, seed: int = 0) -> list[list[int]]:
    """Shuffled indices cut into fixed-size batches, as a random sampler with a fixed batch size gives.

    The baseline against which length-aware batching is measured.
    """
    if n < 0 or batch_size < 1:
        raise ValueError(f"Need n >= 0 and batch_size >= 1, got n={n}, batch_size={batch_size}.")
    indices = np.random.default_rng(seed).permutation(n).tolist()
    return [indices[i : i + batch_size] for i in range(0, n, batch_size)]


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Yields lists of indices from ``token_budget_batches``; pass it as ``DataLoader(batch_sampler=...)``.

    Call ``set_epoch(epoch)`` before each epoch to get a new arrangement (seed + epoch), as with
    ``DistributedSampler``.

    With several data-parallel processes (``num_replicas > 1``; read from ``torch.distributed`` when
    it is initialised), rank ``r`` takes batches ``r, r + num_replicas, ...`` (``share_of_batches``):
    every process gets as many, at the cost of a few batches seen twice per epoch.
    """

    def __init__(
        self,
        src_lengths: Sequence[int],
        tgt_lengths: Sequence[int],
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: Optional[int] = None,
        rank: Optional[int] = None,
    ):
        self.src_lengths, self.tgt_lengths = _check_lengths(src_lengths, tgt_lengths)
        if len(self.src_lengths) == 0:
            raise ValueError("Cannot batch an empty dataset: no lengths were given.")
        self.max_tokens = max_tokens
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.num_replicas, self.rank = data_parallel_place(num_replicas, rank)
        self._cache: tuple[int, list[list[int]]] | None = None
        self._all_batches()  # validates max_tokens now rather than at the first epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _all_batches(self) -> list[list[int]]:
        if self._cache is None or self._cache[0] != self.epoch:
            batches = token_budget_batches(
                self.src_lengths, self.tgt_lengths, self.max_tokens, seed=self.seed + self.epoch, shuffle=self.shuffle
            )
            self._cache = (self.epoch, batches)
        return self._cache[1]

    def _rank_batches(self) -> list[list[int]]:
        return share_of_batches(self._all_batches(), self.num_replicas, self.rank)

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._rank_batches())

    def __len__(self) -> int:
        return len(self._rank_batches())

    @property
    def padding_efficiency(self) -> float:
        """Padding efficiency of this epoch's batches (all ranks together)."""
        return padding_efficiency(self._all_batches(), self.src_lengths, self.tgt_lengths)


def data_parallel_place(num_replicas: Optional[int] = None, rank: Optional[int] = None) -> tuple[int, int]:
    """(number of data-parallel processes, this one's rank): as given, else from ``torch.distributed`` when
    it is initialised, else (1, 0)."""
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if num_replicas is None:
        num_replicas = torch.distributed.get_world_size() if distributed else 1
    if rank is None:
        rank = torch.distributed.get_rank() if distributed else 0
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise ValueError(
            f"Need num_replicas >= 1 and 0 <= rank < num_replicas; got num_replicas={num_replicas}, rank={rank}."
        )
    return num_replicas, rank


def share_of_batches(batches: Sequence[Sequence[int]], num_replicas: int, rank: int) -> list:
    """Batches ``rank, rank + num_replicas, ...`` of ``batches``, every process getting as many.

    The list is first padded by repeating batches from its start until its length divides evenly:
    under DistributedDataParallel every process must run the same number of steps, or the ones with
    more batches wait forever for a gradient all-reduce the others never join.
    """
    batches = list(batches)
    if num_replicas == 1 or not batches:
        return batches
    total = math.ceil(len(batches) / num_replicas) * num_replicas
    padded = [batches[i % len(batches)] for i in range(total)]
    return padded[rank::num_replicas]


def _check_lengths(src_lengths: Sequence[int], tgt_lengths: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    src = np.asarray(src_lengths, dtype=np.int64).reshape(-1)
    tgt = np.asarray(tgt_lengths, dtype=np.int64).reshape(-1)
    if len(src) != len(tgt):
        raise ValueError(
            f"src_lengths and tgt_lengths must have one entry per example; got {len(src)} and {len(tgt)}."
        )
    if len(src) and (src.min() < 0 or tgt.min() < 0):
        raise ValueError("Sequence lengths must be non-negative.")
    return src, tgt
