"""§5 in Hugging Face's `Seq2SeqTrainer`: §5.1 token-budget batches (batching.py), §5.3 Adam and Eq. (3)
(optimization.py), §5.4 the model's own label-smoothed loss (the Trainer's `label_smoothing_factor`, which
smooths differently, must stay 0), §6.1 BLEU of generated translations; logs carry the losses others report.
"""

import copy
import functools
import logging
import math
import os
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import torch
from accelerate.data_loader import prepare_data_loader
from accelerate.utils import DynamoBackend
from torch.utils.data import DataLoader
from transformers import Seq2SeqTrainer, TrainerCallback

from ..evaluation.scoring import compute_bleu
from ..model.label_smoothing import comparable_losses
from ..model.strict_json import read_json
from .allocator import keep_freed_memory, keep_kernels
from .batching import DEFAULT_SHUFFLE_BUFFER, TokenBudgetBatchSampler, TokenBudgetStream, is_stream, padded_tokens
from .chunked_loss import chunk_rows, fast_path_applies, training_loss
from .cpu_products import onednn_pays
from .fast_modules import use_fast_modules
from .loss_report import LossSums
from .optimization import WARMUP_STEPS, create_adam, get_noam_schedule

logger = logging.getLogger(__name__)


class LogLastStep(TrainerCallback):
    """Logs the loss at the step training ends on (the last one, or where a time budget stopped it)."""

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_training_stop:
            control.should_log = True
        return control


def compile_layers(model, **compile_kwargs) -> None:
    """--torch_compile: each encoder and decoder layer compiled in place (evaluation runs them eagerly), not
    the whole model, whose compiled form returns the (B, T, V) logits (filling their zero gradient every step)
    and takes the loss through them; the loss stays chunked_loss.py's. Measured: benchmarks/RESULTS.md."""
    import torch._inductor.config

    # Random numbers other than fast_modules.py's dropout masks (an opaque op) from ATen: inductor's own CPU
    # generator, element by element, cost a compiled step about a tenth more than eager (the same distribution).
    torch._inductor.config.fallback_random = True
    for layer in [*model.model.encoder.layers, *model.model.decoder.layers]:
        layer.compile(**compile_kwargs)


def refusing_pickles(load):
    """`load(trainer, checkpoint, ...)` where a state file with pickled objects other than tensors ends resuming in
    one line naming the checkpoint."""

    @functools.wraps(load)
    def refusing(self, checkpoint, *args, **kwargs):
        try:
            return load(self, checkpoint, *args, **kwargs)
        except Exception as error:
            if type(error).__name__ != "UnpicklingError":  # by name: the package imports no pickle module
                raise
            raise ValueError(f"{checkpoint}: a saved training state (.pt/.pth) holds pickled objects other than "
                             "tensors and numbers, which are never loaded (unpickling can run arbitrary code); resume "
                             "from a checkpoint of a run you trust, or start the run again.") from None

    return refusing


class VaswaniTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` with the paper's batching, optimizer, schedule and loss. max_tokens: §5.1's budget per
    optimizer step and side, all processes and accumulated batches together (None: the Trainer's fixed batches);
    noam_scale: a factor on Eq. (3); shuffle_buffer: examples batched at a time from a streamed training set."""

    def __init__(self, *args, max_tokens: int | None = None, noam_scale: float = 1.0,
                 warmup_steps: int | None = None, shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER, **kwargs):
        super().__init__(*args, **kwargs)
        if self.args.label_smoothing_factor:
            raise ValueError("VaswaniTrainer uses the model's §5.4 label smoothing (config.label_smoothing); set "
                             "label_smoothing_factor=0 and pass the smoothing rate to the model config instead.")
        if max_tokens is not None and max_tokens <= 0:
            raise ValueError(f"max_tokens must be a positive number of tokens per batch, got {max_tokens}.")
        self.max_tokens, self.shuffle_buffer, self.noam_scale = max_tokens, shuffle_buffer, noam_scale
        self.warmup_steps = warmup_steps if warmup_steps is not None else WARMUP_STEPS
        self._evaluated = {}  # (step, metric prefix) -> metrics, see `evaluate`
        self._checkpointed_step = None
        self.add_callback(LogLastStep)  # after the others, which may end training at this step
        use_fast_modules(self.model)
        # Whether malloc keeps the memory a step frees (glibc, on a CPU): the run's log says so.
        self.keeps_freed_memory = self.args.device.type == "cpu" and keep_freed_memory()
        # oneDNN's bf16 kernels kept, one a shape (allocator.py); scripts/train.py sets it earlier, before its probe.
        self.kept_kernels = keep_kernels() if self.args.device.type == "cpu" else None
        if self.args.torch_compile:
            plugin = self.accelerator.state.dynamo_plugin
            compile_layers(self.model, **plugin.to_kwargs())
            plugin.backend = DynamoBackend.NO  # done: accelerate would compile the whole model on top

    # §5.3 -------------------------------------------------------------------------------------
    def create_optimizer(self, model=None):
        if self.optimizer is None:
            params = [p for p in (model or self.model).parameters() if p.requires_grad]
            self.optimizer = create_adam(params, weight_decay=self.args.weight_decay)
        return self.optimizer

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        if self.lr_scheduler is None:
            self.lr_scheduler = get_noam_schedule(optimizer or self.optimizer, self.model.config.d_model,
                                                  self.warmup_steps, scale=self.noam_scale)
        return self.lr_scheduler

    # §5.1: the budget is the whole step's, as in the paper (25,000 tokens over 8 GPUs): under P processes and G
    # accumulation steps each batch holds at most max_tokens / (P·G); the processes change the speed, not the training.
    @property
    def batches_per_step(self) -> int:
        return self.args.world_size * self.args.gradient_accumulation_steps

    @property
    def max_tokens_per_batch(self) -> int | None:
        return None if self.max_tokens is None else max(1, self.max_tokens // self.batches_per_step)

    def _data_seed(self) -> int:  # as for the Trainer's own samplers: --data_seed, else --seed
        return self.args.data_seed if self.args.data_seed is not None else self.args.seed

    def get_train_dataloader(self) -> DataLoader:
        if self.max_tokens is None:
            return super().get_train_dataloader()
        if is_stream(self.train_dataset):
            return self._stream_dataloader()
        dataset = self._remove_unused_columns(self.train_dataset, description="training")
        sampler = self._token_budget_sampler(dataset)
        # One sampler makes every process's batches; accelerate gives each process its share, and the Trainer
        # calls sampler.set_epoch every epoch.
        loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=self.data_collator,
                            num_workers=self.args.dataloader_num_workers, pin_memory=self.args.dataloader_pin_memory)
        prepared = self.accelerator.prepare(loader)
        # Several processes: accelerate's BatchSamplerShard has no set_epoch, and a resumed run would repeat
        # epoch 0's arrangement. Let the shard pass set_epoch on.
        shard = getattr(prepared, "batch_sampler", None)
        wraps_sampler = shard is not sampler and getattr(shard, "batch_sampler", None) is sampler
        if wraps_sampler and not hasattr(shard, "set_epoch"):
            shard.set_epoch = sampler.set_epoch
        return prepared

    def _token_budget_stream(self, dataset) -> TokenBudgetStream:
        return TokenBudgetStream(dataset, self.max_tokens_per_batch, buffer_size=self.shuffle_buffer,
                                 seed=self._data_seed(), num_replicas=self.args.world_size,
                                 rank=self.args.process_index)

    def _stream_dataloader(self) -> DataLoader:
        collator = self._get_collator_with_removed_columns(self.data_collator, description="training")
        args, accelerator = self.args, self.accelerator
        loader = DataLoader(self._token_budget_stream(self.train_dataset), batch_size=None,  # items are whole batches
                            collate_fn=collator, num_workers=args.dataloader_num_workers,
                            pin_memory=args.dataloader_pin_memory,
                            persistent_workers=args.dataloader_persistent_workers,
                            prefetch_factor=args.dataloader_prefetch_factor)
        # Each process has its own share already; prepared for all, accelerate would dispatch batches
        # from process 0 (failing on different paddings) or shard again. So: as for one process.
        prepared = prepare_data_loader(loader, accelerator.device, num_processes=1, process_index=0,
                                       split_batches=False, put_on_device=accelerator.device_placement,
                                       rng_types=None, dispatch_batches=False, non_blocking=accelerator.non_blocking,
                                       use_stateful_dataloader=accelerator.use_stateful_dataloader)
        accelerator._dataloaders.append(prepared)  # as accelerator.prepare does, for save_state
        return prepared

    def _token_budget_sampler(self, dataset) -> TokenBudgetBatchSampler:
        src, tgt = [len(ids) for ids in dataset["input_ids"]], [len(ids) for ids in dataset["labels"]]
        return TokenBudgetBatchSampler(src, tgt, self.max_tokens_per_batch, seed=self._data_seed())

    def describe_step(self) -> str:
        """The training step as this trainer takes it, for the run's log."""
        masks = "from random integers" if self.args.device.type == "cpu" else "from torch's bernoulli_"
        rest = f"fused Adam; dropout masks {masks}, Q, K and V in one product (fast_modules.py)"
        rest += "; each layer compiled (torch.compile; --torch_compile false: eager)" if self.args.torch_compile else ""
        if self.args.device.type == "cpu":
            probe = onednn_pays(self.model.config.d_model, self.model.config.d_ff)  # use_fast_modules measured it
            rates = " against ".join(f"{name} {rate} GFLOP/s" for name, rate in probe["gflops"].items())
            measured = f" (measured: {rates})" if rates else ""
            library = "oneDNN" if probe["onednn"] else "torch.mm"
            rest += f"; float32 products through {library}{measured} (cpu_products.py)"
        if self.keeps_freed_memory:
            rest += "; freed memory kept by malloc (allocator.py)"
        if self.kept_kernels:
            rest += f"; oneDNN keeps {self.kept_kernels:,} kernels (allocator.py)"
        if self.args.world_size > 1:
            return (f"the model's forward with its (B, T, V) logits (data-parallel: DDP runs the model's own forward); "
                    f"{rest}")
        return (f"projection and §5.4 loss in chunks of {chunk_rows(self.model.config.vocab_size)} positions, "
                f"no (B, T, V) float32 logits (chunked_loss.py); {rest}")

    def batching_summary(self) -> dict:
        """How the budget is spent in the first epoch (of a stream: its first buffer), for the run record;
        tokens_per_step: mean padded tokens per optimizer step a side (what --max_tokens bounds)."""
        budget = {"max_tokens_per_step": self.max_tokens, "processes": self.args.world_size,
                  "gradient_accumulation_steps": self.args.gradient_accumulation_steps,
                  "max_tokens_per_batch": self.max_tokens_per_batch}
        if is_stream(self.train_dataset):
            first = self._token_budget_stream(self.train_dataset).summary()
            per_batch = first.pop("tokens_per_batch")
            return {**budget, **first,
                    "tokens_per_step": {side: count * self.batches_per_step for side, count in per_batch.items()}}
        sampler = self._token_budget_sampler(self._remove_unused_columns(self.train_dataset))
        batches = list(sampler)
        per_process = math.ceil(len(batches) / self.args.world_size)
        steps = math.ceil(per_process / self.args.gradient_accumulation_steps)
        source, target = padded_tokens(batches, sampler.src_lengths, sampler.tgt_lengths)
        return {**budget, "batches_per_epoch": len(batches), "batches_per_process": per_process,
                "steps_per_epoch": steps,
                "tokens_per_step": {"source": round(source / steps), "target": round(target / steps)},
                "padding_efficiency": round(sampler.padding_efficiency, 3)}

    # §6.1 evaluation -------------------------------------------------------------------------
    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        # The parent fills generate's fallbacks (max_length 20, ...) into the model's generation config,
        # which later checkpoints would save as if chosen: it is put back.
        kept = copy.deepcopy(self.model.generation_config)
        try:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys, **gen_kwargs)
        finally:
            self.model.generation_config = kept

    # §5.4's loss, faster ---------------------------------------------------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        # A training step of one process takes the loss without the (B, T, V) logits (chunked_loss.py);
        # evaluation and data-parallel or compiled wrappers run the model's forward.
        if return_outputs or not model.training or self.accelerator.num_processes > 1 \
                or not fast_path_applies(model, inputs):
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        with self.accelerator.autocast():  # --bf16: accelerate's autocast wraps model.forward, not used here
            return training_loss(model, inputs, num_items_in_batch)

    # Work done once per step ------------------------------------------------------------------
    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval", **gen_kwargs):
        # A second call at one step (same prefix, default set, no generation settings) returns the first's
        # metrics: the weights have not changed.
        key = (self.state.global_step, metric_key_prefix)
        if eval_dataset is None and not gen_kwargs and key in self._evaluated:
            if self.is_world_process_zero():
                logger.info("step %d was evaluated already; its metrics are reused", self.state.global_step)
            return dict(self._evaluated[key])
        metrics = super().evaluate(eval_dataset=eval_dataset, ignore_keys=ignore_keys,
                                   metric_key_prefix=metric_key_prefix, **gen_kwargs)
        if eval_dataset is None and not gen_kwargs:
            self._evaluated[key] = dict(metrics)
        return metrics

    def evaluation_loop(self, dataloader, description, prediction_loss_only=None, ignore_keys=None,
                        metric_key_prefix="eval"):
        # The Trainer's loss (a mean of per-batch means) replaced by the four of `comparable_losses`, read off
        # the logits of its own teacher-forced passes.
        sums = LossSums(self.model.config.label_smoothing, self.model.config.vocab_size)
        eager = torch.compiler.set_stance("force_eager") if self.args.torch_compile else nullcontext()
        with sums.watching(self.model), eager:  # compile_layers compiled for training's shapes only
            output = super().evaluation_loop(dataloader, description, prediction_loss_only=prediction_loss_only,
                                             ignore_keys=ignore_keys, metric_key_prefix=metric_key_prefix)
        sums.sum_over_processes(self.accelerator)
        output.metrics.update(sums.metrics(metric_key_prefix))
        return output

    def log(self, logs, start_time=None):
        if "loss" in logs:  # a training entry: H(q, p) of the steps since the last one
            logs.update(comparable_losses(logs["loss"], self.model.config.label_smoothing, self.model.config.vocab_size))
        super().log(logs, start_time)

    def _save_checkpoint(self, model, trial):
        if self._checkpointed_step == self.state.global_step:
            return  # this step is saved already (a time budget's stop at the end of an epoch, say)
        super()._save_checkpoint(model, trial)
        self._checkpointed_step = self.state.global_step

    def _load_best_model(self):
        super()._load_best_model()
        self._evaluated.clear()  # other weights at the same step

    def _issue_warnings_after_load(self, load_result):
        # A checkpoint holds tied weights (§3.4) once, under their source; the Trainer would call their other
        # names missing on every resume. Only keys that are not tied are worth a warning.
        tied = self.model.all_tied_weights_keys
        load_result.missing_keys[:] = [key for key in load_result.missing_keys if key not in tied]
        super()._issue_warnings_after_load(load_result)

    # Resuming reads the optimizer, scheduler, scaler and RNG state with torch.load(weights_only=True),
    # which refuses other pickled objects and then advises weights_only=False, i.e. running them.
    _load_from_checkpoint = refusing_pickles(Seq2SeqTrainer._load_from_checkpoint)
    _load_optimizer_and_scheduler = refusing_pickles(Seq2SeqTrainer._load_optimizer_and_scheduler)
    _load_scaler = refusing_pickles(Seq2SeqTrainer._load_scaler)
    _load_rng_state = refusing_pickles(Seq2SeqTrainer._load_rng_state)

    def train(self, *args, **kwargs):
        checkpoint = kwargs.get("resume_from_checkpoint", args[0] if args else None)
        if isinstance(checkpoint, (str, os.PathLike)) and (Path(checkpoint) / "trainer_state.json").is_file():
            read_json(Path(checkpoint) / "trainer_state.json")  # the package's strict reader before transformers'
        self._evaluated.clear()
        self._checkpointed_step = None
        return super().train(*args, **kwargs)


def bleu_metrics_fn(tokenizer):
    """`compute_metrics` for `predict_with_generate`: decode, then cased sacreBLEU and friends (§6.1)."""

    def compute_metrics(eval_prediction):
        predictions, labels = eval_prediction.predictions, eval_prediction.label_ids
        if isinstance(predictions, tuple):
            predictions = predictions[0]
        # Padding is -100 in labels (and in predictions gathered across batches); decode needs ids.
        predictions = np.where(predictions < 0, tokenizer.pad_token_id, predictions)
        labels = np.where(labels < 0, tokenizer.pad_token_id, labels)
        hypotheses = [t.strip() for t in tokenizer.batch_decode(predictions, skip_special_tokens=True)]
        references = [t.strip() for t in tokenizer.batch_decode(labels, skip_special_tokens=True)]
        scores = compute_bleu(hypotheses, references)
        return {**{name: scores[name] for name in ("bleu", "bleu_lowercase_tokenized", "chrf")},
                "gen_len": float(np.mean([np.count_nonzero(p != tokenizer.pad_token_id) for p in predictions]))}

    return compute_metrics
