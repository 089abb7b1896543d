"""§5.1 token-budget batches from a stream, formed inside a shuffle buffer.

A corpus read as training goes (WMT 2014 streamed from the Hub, a data file larger than memory)
has no length and no random access, so `batching.TokenBudgetBatchSampler` cannot sort all of it.
`TokenBudgetStream` does the same work one buffer at a time: it reads ``buffer_size`` tokenized
examples, batches them with `batching.token_budget_batches` (sorted by length, each batch within
the same padded-token budget, the batches shuffled), yields those batches, and reads the next
buffer; at the end of the stream the last, shorter buffer is batched the same way. A larger
buffer groups lengths more tightly and mixes the stream more, and holds that many examples in
memory. Deviation: the paper batched its whole corpus at once; inside a buffer, sentences of
similar length are grouped from a window of the corpus only.

Every data-parallel process reads the whole stream in the same order and forms the same batches,
then keeps batches ``rank, rank + P, ...`` of each buffer (`batching.share_of_batches`): the
processes train on different examples and all run the same number of steps, which
DistributedDataParallel needs (a process with one batch more waits forever for a gradient
all-reduce the others never join). The price is that every process reads, and tokenizes if the
tokenization is lazy, the whole stream. DataLoader workers divide it further: a
`datasets.IterableDataset` gives each worker its own shards; any other stream is read whole by
each worker, which keeps every ``num_workers``-th of its process's batches.

Buffer ``k`` of epoch ``e`` is arranged with a seed drawn from (seed, e, k), so the batches are the
same for a seed and change from epoch to epoch; `set_epoch` also reaches the stream underneath (a
shuffled `datasets.IterableDataset` then reshuffles its shards and its own buffer).
"""

from __future__ import annotations

import itertools
from typing import Iterable, Iterator, Optional

import datasets
import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from .batching import (check_max_tokens, data_parallel_place, padded_tokens, padding_efficiency, share_of_batches,
                       token_budget_batches)

DEFAULT_SHUFFLE_BUFFER = 10_000  # examples held at a time: a few megabytes of token ids


def is_stream(dataset) -> bool:
    """Whether ``dataset`` is read in order only (an iterable dataset with no length or random access)."""
    return isinstance(dataset, (IterableDataset, datasets.IterableDataset))


class TokenBudgetStream(IterableDataset):
    """Batches (lists of examples) of a stream of tokenized examples, each within ``max_tokens`` padded tokens a side.

    ``examples`` yields dicts with ``input_ids`` and ``labels`` (a tokenized
    `datasets.IterableDataset`, or any iterable of such dicts). Use it as
    ``DataLoader(stream, batch_size=None, collate_fn=collator)``. ``num_replicas`` and ``rank``
    default to those of ``torch.distributed`` when it is initialised.
    """

    def __init__(
        self,
        examples: Iterable[dict],
        max_tokens: int,
        buffer_size: int = DEFAULT_SHUFFLE_BUFFER,
        seed: int = 0,
        num_replicas: Optional[int] = None,
        rank: Optional[int] = None,
    ):
        check_max_tokens(max_tokens)
        if not isinstance(buffer_size, (int, np.integer)) or isinstance(buffer_size, bool) or buffer_size < 1:
            raise ValueError(f"The shuffle buffer must hold at least one example; got buffer_size={buffer_size!r}.")
        if getattr(examples, "_distributed", None) is not None:
            # split_dataset_by_node gives each process other examples, so the batch lists would differ.
            raise ValueError("The stream is already split by process (split_dataset_by_node); pass the whole "
                             "stream: each process keeps its own share of the batches, and all get as many.")
        self.examples = examples
        self.max_tokens = int(max_tokens)
        self.buffer_size = int(buffer_size)
        self.seed = seed
        self.epoch = 0
        self.num_replicas, self.rank = data_parallel_place(num_replicas, rank)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        if hasattr(self.examples, "set_epoch"):
            self.examples.set_epoch(epoch)

    def buffers(self) -> Iterator[list[dict]]:
        """The stream cut into lists of ``buffer_size`` examples (the last one shorter)."""
        iterator = iter(self.examples)
        while buffer := list(itertools.islice(iterator, self.buffer_size)):
            yield buffer

    def arrange(self, buffer: list[dict], number: int) -> list[list[int]]:
        """All processes' batches of buffer ``number`` of this epoch, as indices into it."""
        src, tgt = example_lengths(buffer)
        return token_budget_batches(src, tgt, self.max_tokens, seed=buffer_seed(self.seed, self.epoch, number))

    def __iter__(self) -> Iterator[list[dict]]:
        worker = get_worker_info()
        # A datasets.IterableDataset already gives each worker shards of its own.
        by_position = worker is not None and worker.num_workers > 1 and not isinstance(self.examples, datasets.IterableDataset)
        for number, buffer in enumerate(self.buffers()):
            batches = share_of_batches(self.arrange(buffer, number), self.num_replicas, self.rank)
            if by_position:
                batches = batches[worker.id :: worker.num_workers]
            for batch in batches:
                yield [buffer[i] for i in batch]

    def summary(self) -> dict:
        """How the budget is spent on the first buffer of the stream (read for that alone): batches, padding."""
        buffer = next(self.buffers(), [])
        if not buffer:
            raise ValueError("The training stream is empty: no examples to batch.")
        src, tgt = example_lengths(buffer)
        batches = self.arrange(buffer, 0)
        source, target = padded_tokens(batches, src, tgt)
        return {
            "shuffle_buffer": self.buffer_size,
            "examples_in_first_buffer": len(buffer),
            "batches_in_first_buffer": len(batches),
            "tokens_per_batch": {"source": round(source / len(batches)), "target": round(target / len(batches))},
            "padding_efficiency": round(padding_efficiency(batches, src, tgt), 3),
        }


def example_lengths(examples: list[dict]) -> tuple[list[int], list[int]]:
    """(source, target) token counts of tokenized examples; a clear error for untokenized ones."""
    try:
        return [len(e["input_ids"]) for e in examples], [len(e["labels"]) for e in examples]
    except (KeyError, TypeError):
        found = sorted(examples[0]) if examples and isinstance(examples[0], dict) else type(examples[0]).__name__
        raise ValueError(f"Token-budget batches need tokenized examples with 'input_ids' and 'labels'; the stream "
                         f"gives {found}. Tokenize it first (dataset.map(...)).") from None


def buffer_seed(seed: int, epoch: int, number: int) -> int:
    """The seed that arranges buffer ``number`` of ``epoch``: the same on every process, new for each buffer and epoch."""
    return int(np.random.SeedSequence([seed & 0xFFFFFFFF, epoch, number]).generate_state(1)[0])

