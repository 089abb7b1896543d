"""§5.1 in the Trainer: about `max_tokens` source and target tokens per optimizer step, sentences grouped by length.

`TokenBudgetLoading` (mixed into `trainer.VaswaniTrainer` before `Seq2SeqTrainer`) builds the
training DataLoader from `batching.TokenBudgetBatchSampler`, or `batching.TokenBudgetStream` for a
stream. The budget is the whole step's, as in the paper (25,000 tokens over 8 GPUs): under P
processes and G accumulation steps each batch holds at most max_tokens / (P·G), so the number of
processes changes the speed, not the training. Without `max_tokens` the Trainer's own loader runs.
"""

import math

from accelerate.data_loader import prepare_data_loader
from torch.utils.data import DataLoader

from .batching import TokenBudgetBatchSampler, TokenBudgetStream, is_stream, padded_tokens


class TokenBudgetLoading:
    """The Trainer's training batches within a token budget; needs `max_tokens` and `shuffle_buffer` set."""

    max_tokens: int | None
    shuffle_buffer: int

    @property
    def batches_per_step(self) -> int:
        """One per process and accumulation step."""
        return self.args.world_size * self.args.gradient_accumulation_steps

    @property
    def max_tokens_per_batch(self) -> int | None:
        """Each batch's share of the step's token budget (None without one)."""
        return None if self.max_tokens is None else max(1, self.max_tokens // self.batches_per_step)

    def _data_seed(self) -> int:
        # As for the Trainer's own samplers, --data_seed (when given) fixes the data order apart from --seed.
        return self.args.data_seed if self.args.data_seed is not None else self.args.seed

    def get_train_dataloader(self) -> DataLoader:
        if self.max_tokens is None:
            return super().get_train_dataloader()
        if is_stream(self.train_dataset):
            return self.stream_dataloader()
        dataset = self._remove_unused_columns(self.train_dataset, description="training")
        sampler = self.token_budget_sampler(dataset)
        # One process sees the whole batch list; accelerate gives each data-parallel process its
        # own share of the batches (and the Trainer calls sampler.set_epoch every epoch).
        loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=self.data_collator,
                            num_workers=self.args.dataloader_num_workers, pin_memory=self.args.dataloader_pin_memory)
        prepared = self.accelerator.prepare(loader)
        # Several processes: accelerate wraps the sampler in a BatchSamplerShard without set_epoch, and
        # a resumed run would repeat epoch 0's arrangement. Let the shard pass set_epoch on.
        shard = getattr(prepared, "batch_sampler", None)
        wraps_sampler = shard is not sampler and getattr(shard, "batch_sampler", None) is sampler
        if wraps_sampler and not hasattr(shard, "set_epoch"):
            shard.set_epoch = sampler.set_epoch
        return prepared

    def token_budget_stream(self, dataset) -> TokenBudgetStream:
        """This process's batches of a streamed training set, each within `max_tokens_per_batch`."""
        return TokenBudgetStream(dataset, self.max_tokens_per_batch, buffer_size=self.shuffle_buffer,
                                 seed=self._data_seed(), num_replicas=self.args.world_size,
                                 rank=self.args.process_index)

    def stream_dataloader(self) -> DataLoader:
        """The training DataLoader of a streamed dataset: one `TokenBudgetStream` batch per item."""
        collator = self._get_collator_with_removed_columns(self.data_collator, description="training")
        args = self.args
        loader = DataLoader(self.token_budget_stream(self.train_dataset), batch_size=None,  # items are whole batches
                            collate_fn=collator, num_workers=args.dataloader_num_workers,
                            pin_memory=args.dataloader_pin_memory,
                            persistent_workers=args.dataloader_persistent_workers,
                            prefetch_factor=args.dataloader_prefetch_factor)
        # Each process has its own share already; prepared for all, accelerate would dispatch batches
        # from process 0 (failing on different paddings) or shard again. So: as for one process.
        accelerator = self.accelerator
        prepared = prepare_data_loader(loader, accelerator.device, num_processes=1, process_index=0,
                                       split_batches=False, put_on_device=accelerator.device_placement,
                                       rng_types=None, dispatch_batches=False, non_blocking=accelerator.non_blocking,
                                       use_stateful_dataloader=accelerator.use_stateful_dataloader)
        accelerator._dataloaders.append(prepared)  # as accelerator.prepare does, for save_state
        return prepared

    def token_budget_sampler(self, dataset) -> TokenBudgetBatchSampler:
        """All processes' batches of one epoch, each within `max_tokens_per_batch`."""
        src, tgt = [len(ids) for ids in dataset["input_ids"]], [len(ids) for ids in dataset["labels"]]
        return TokenBudgetBatchSampler(src, tgt, self.max_tokens_per_batch, shuffle=True, seed=self._data_seed(),
                                       num_replicas=1, rank=0)

    def batching_summary(self, dataset=None) -> dict:
        """How the §5.1 budget is spent in the first epoch (of a stream: its first shuffle buffer), for the run record.

        tokens_per_step: mean padded tokens per optimizer step a side (what --max_tokens bounds).
        """
        if self.max_tokens is None:
            raise ValueError("batching_summary needs a token budget (max_tokens).")
        dataset = dataset if dataset is not None else self.train_dataset
        budget = {"max_tokens_per_step": self.max_tokens, "processes": self.args.world_size,
                  "gradient_accumulation_steps": self.args.gradient_accumulation_steps,
                  "max_tokens_per_batch": self.max_tokens_per_batch}
        if is_stream(dataset):
            first = self.token_budget_stream(dataset).summary()
            per_batch = first.pop("tokens_per_batch")
            return {**budget, **first,
                    "tokens_per_step": {side: count * self.batches_per_step for side, count in per_batch.items()}}
        sampler = self.token_budget_sampler(self._remove_unused_columns(dataset))
        batches = list(sampler)
        per_process = math.ceil(len(batches) / self.args.world_size)
        steps = math.ceil(per_process / self.args.gradient_accumulation_steps)
        source, target = padded_tokens(batches, sampler.src_lengths, sampler.tgt_lengths)
        return {**budget, "batches_per_epoch": len(batches), "batches_per_process": per_process,
                "steps_per_epoch": steps,
                "tokens_per_step": {"source": round(source / steps), "target": round(target / steps)},
                "padding_efficiency": round(sampler.padding_efficiency, 3)}
