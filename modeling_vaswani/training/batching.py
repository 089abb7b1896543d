"""§5.1 "Sentence pairs were batched together by approximate sequence length", each batch sized by tokens,
not sentences. As in fairseq the budget counts *padded* tokens: a batch of n pairs costs n × longest source and
n × longest target, both within max_tokens; an example over the budget on its own forms a batch by itself.

`TokenBudgetBatchSampler` serves a map-style dataset; `TokenBudgetStream` a stream, which cannot be sorted
whole: it batches one shuffle buffer at a time by the same rule (deviation: lengths are grouped within a
buffer only). With P data-parallel processes, rank r keeps batches r, r + P, ... (`share_of_batches`), every
process as many: under DistributedDataParallel one batch more would wait forever for an all-reduce.
"""

from __future__ import annotations

import itertools
import math
from typing import Iterable, Iterator, Sequence

import datasets
import numpy as np
from torch.utils.data import IterableDataset, Sampler, get_worker_info

DEFAULT_SHUFFLE_BUFFER = 10_000  # examples held at a time: a few megabytes of token ids


def token_budget_batches(src_lengths: Sequence[int], tgt_lengths: Sequence[int], max_tokens: int, seed: int = 0,
                         shuffle: bool = True) -> list[list[int]]:
    """Every index once, in batches of similar length of at most `max_tokens` padded tokens a side; ties in length
    broken at random (from `seed`); `shuffle` shuffles the order of the batches."""
    src, tgt = _check_lengths(src_lengths, tgt_lengths)
    _check_positive(max_tokens, "max_tokens")
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(len(src)), tgt, src))  # by source length, then target length, then chance
    batches: list[list[int]] = []
    batch: list[int] = []
    longest_src = longest_tgt = 0
    for index in order.tolist():
        new_src, new_tgt = max(longest_src, int(src[index])), max(longest_tgt, int(tgt[index]))
        if batch and (len(batch) + 1) * max(new_src, new_tgt) > max_tokens:
            batches.append(batch)
            batch, new_src, new_tgt = [], int(src[index]), int(tgt[index])
        batch.append(index)  # an empty batch always takes the example: one over the budget sits alone
        longest_src, longest_tgt = new_src, new_tgt
    if batch:
        batches.append(batch)
    return [batches[i] for i in rng.permutation(len(batches))] if shuffle else batches


def padded_tokens(batches: Sequence[Sequence[int]], src_lengths, tgt_lengths) -> tuple[int, int]:
    """(source, target) tokens of all the batches, each padded to its longest sentence: what the budget counts."""
    src, tgt = _check_lengths(src_lengths, tgt_lengths)
    sides = [(len(b) * int(src[list(b)].max()), len(b) * int(tgt[list(b)].max())) for b in batches if len(b)]
    return sum(s for s, _ in sides), sum(t for _, t in sides)


def padding_efficiency(batches: Sequence[Sequence[int]], src_lengths, tgt_lengths) -> float:
    """Real tokens / tokens after padding, both sides together (1.0 = no padding)."""
    src, tgt = _check_lengths(src_lengths, tgt_lengths)
    real = sum(int(src[list(b)].sum()) + int(tgt[list(b)].sum()) for b in batches if len(b))
    return real / sum(padded_tokens(batches, src, tgt))


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """`token_budget_batches` as a batch sampler; `set_epoch(e)` re-arranges (seed + e), as DistributedSampler.
    It gives every process's batches: accelerate shares them out."""

    def __init__(self, src_lengths, tgt_lengths, max_tokens: int, shuffle: bool = True, seed: int = 0):
        self.src_lengths, self.tgt_lengths = _check_lengths(src_lengths, tgt_lengths)
        if len(self.src_lengths) == 0:
            raise ValueError("Cannot batch an empty dataset: no lengths were given.")
        self.max_tokens, self.shuffle, self.seed, self.epoch = max_tokens, shuffle, seed, 0
        self._cache: tuple[int, list[list[int]]] | None = None
        self._all_batches()  # refuses a bad max_tokens now rather than at the first epoch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _all_batches(self) -> list[list[int]]:
        if self._cache is None or self._cache[0] != self.epoch:
            self._cache = (self.epoch, token_budget_batches(self.src_lengths, self.tgt_lengths, self.max_tokens,
                                                            seed=self.seed + self.epoch, shuffle=self.shuffle))
        return self._cache[1]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._all_batches())

    def __len__(self) -> int:
        return len(self._all_batches())

    @property
    def padding_efficiency(self) -> float:
        return padding_efficiency(self._all_batches(), self.src_lengths, self.tgt_lengths)


def is_stream(dataset) -> bool:
    """Whether `dataset` is read in order only (no length, no random access)."""
    return isinstance(dataset, (IterableDataset, datasets.IterableDataset))


class TokenBudgetStream(IterableDataset):
    """Batches (lists of examples with input_ids and labels) of a stream, one shuffle buffer at a time, for
    `DataLoader(stream, batch_size=None, collate_fn=collator)`. Every process reads the whole stream and keeps its
    share. DataLoader workers: a `datasets.IterableDataset` gives each its own shards; any other stream is read whole
    by each, keeping every num_workers-th batch. `set_epoch` reaches the stream underneath too."""

    def __init__(self, examples: Iterable[dict], max_tokens: int, buffer_size: int = DEFAULT_SHUFFLE_BUFFER,
                 seed: int = 0, num_replicas: int = 1, rank: int = 0):
        _check_positive(max_tokens, "max_tokens")
        _check_positive(buffer_size, "buffer_size (the examples a shuffle buffer holds)")
        if getattr(examples, "_distributed", None) is not None:
            # split_dataset_by_node gives each process other examples, so the batch lists would differ.
            raise ValueError("The stream is already split by process (split_dataset_by_node); pass the whole "
                             "stream: each process keeps its own share of the batches, and all get as many.")
        if num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"Need 0 <= rank < num_replicas; got num_replicas={num_replicas}, rank={rank}.")
        self.examples, self.max_tokens, self.buffer_size = examples, int(max_tokens), int(buffer_size)
        self.seed, self.epoch, self.num_replicas, self.rank = seed, 0, num_replicas, rank

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        if hasattr(self.examples, "set_epoch"):
            self.examples.set_epoch(epoch)

    def buffers(self) -> Iterator[list[dict]]:
        iterator = iter(self.examples)
        while buffer := list(itertools.islice(iterator, self.buffer_size)):
            yield buffer

    def arrange(self, buffer: list[dict], number: int) -> list[list[int]]:
        """All processes' batches of buffer `number` of this epoch, as indices into it."""
        return token_budget_batches(*example_lengths(buffer), self.max_tokens,
                                    seed=buffer_seed(self.seed, self.epoch, number))

    def __iter__(self) -> Iterator[list[dict]]:
        worker = get_worker_info()
        by_position = (worker is not None and worker.num_workers > 1
                       and not isinstance(self.examples, datasets.IterableDataset))
        for number, buffer in enumerate(self.buffers()):
            batches = share_of_batches(self.arrange(buffer, number), self.num_replicas, self.rank)
            for batch in batches[worker.id :: worker.num_workers] if by_position else batches:
                yield [buffer[i] for i in batch]

    def summary(self) -> dict:
        """How the budget is spent on the first buffer (read for that alone)."""
        buffer = next(self.buffers(), [])
        if not buffer:
            raise ValueError("The training stream is empty: no examples to batch.")
        src, tgt = example_lengths(buffer)
        batches = self.arrange(buffer, 0)
        source, target = padded_tokens(batches, src, tgt)
        return {"shuffle_buffer": self.buffer_size, "examples_in_first_buffer": len(buffer),
                "batches_in_first_buffer": len(batches),
                "tokens_per_batch": {"source": round(source / len(batches)), "target": round(target / len(batches))},
                "padding_efficiency": round(padding_efficiency(batches, src, tgt), 3)}


def example_lengths(examples: list[dict]) -> tuple[list[int], list[int]]:
    try:
        return [len(e["input_ids"]) for e in examples], [len(e["labels"]) for e in examples]
    except (KeyError, TypeError):
        found = sorted(examples[0]) if isinstance(examples[0], dict) else type(examples[0]).__name__
        raise ValueError(f"Token-budget batches need tokenized examples with 'input_ids' and 'labels'; the stream "
                         f"gives {found}. Tokenize it first (dataset.map(...)).") from None


def buffer_seed(seed: int, epoch: int, number: int) -> int:
    """The same on every process, new for each buffer and epoch."""
    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, epoch, number]).generate_state(1)[0])


def share_of_batches(batches: Sequence[Sequence[int]], num_replicas: int, rank: int) -> list:
    """Batches rank, rank + num_replicas, ..., the list first padded from its start to divide evenly."""
    batches = list(batches)
    if num_replicas == 1 or not batches:
        return batches
    total = math.ceil(len(batches) / num_replicas) * num_replicas
    return [batches[i % len(batches)] for i in range(total)][rank::num_replicas]


def _check_positive(value, name: str) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")


def _check_lengths(src_lengths, tgt_lengths) -> tuple[np.ndarray, np.ndarray]:
    src = np.asarray(src_lengths, dtype=np.int64).reshape(-1)
    tgt = np.asarray(tgt_lengths, dtype=np.int64).reshape(-1)
    if len(src) != len(tgt):
        raise ValueError(f"src_lengths and tgt_lengths must have one entry per example; got {len(src)} and {len(tgt)}.")
    return src, tgt
