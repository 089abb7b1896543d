"""§5 Training, wired into Hugging Face's `Seq2SeqTrainer`: §5.1 token-budget batches
(budget_loading.py), §5.3 Adam and Eq. (3) (optimization.py), §5.4 the model's own label-smoothed loss
(so the Trainer's `label_smoothing_factor`, which smooths differently, must stay 0), §6.1 BLEU of
generated translations. Logs carry the losses others report (label_smoothing.comparable_losses,
loss_report.LossSums). The paper clips no gradients: pass max_grad_norm=0 (scripts/train.py does).
A step is never evaluated or checkpointed twice, and the last step's loss is always logged.
"""

import copy
import logging
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from transformers import Seq2SeqTrainer, TrainerCallback

from ..model.label_smoothing import comparable_losses
from ..model.strict_json import read_json
from .budget_loading import TokenBudgetLoading
from .chunked_loss import fast_path_applies, training_loss
from .loss_report import LossSums
from .optimization import WARMUP_STEPS, create_adam, get_noam_schedule
from .batching import DEFAULT_SHUFFLE_BUFFER
from ..evaluation.scoring import compute_bleu


logger = logging.getLogger(__name__)


class LogLastStep(TrainerCallback):
    """Logs the loss at the step training ends on (the last one, or where a time budget stopped it)."""

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_training_stop:
            control.should_log = True
        return control


class VaswaniTrainer(TokenBudgetLoading, Seq2SeqTrainer):
    """`Seq2SeqTrainer` with the paper's batching, optimizer, schedule and loss.

    max_tokens: tokens per optimizer step and side, all processes and accumulated batches together
    (§5.1: 25,000; None: the Trainer's fixed batch size); noam_scale: a factor on Eq. (3);
    warmup_steps: Eq. (3)'s (default 4000); shuffle_buffer: examples sorted into batches at a time
    from a streamed training set.
    """

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

    # §5.3 -------------------------------------------------------------------------------------
    def create_optimizer(self, model=None):
        if self.optimizer is None:
            model = model if model is not None else self.model
            params = [p for p in model.parameters() if p.requires_grad]
            self.optimizer = create_adam(params, weight_decay=self.args.weight_decay)
        return self.optimizer

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        if self.lr_scheduler is None:
            optimizer = optimizer if optimizer is not None else self.optimizer
            self.lr_scheduler = get_noam_schedule(optimizer, self.model.config.d_model, self.warmup_steps,
                                                  scale=self.noam_scale)
        return self.lr_scheduler

    # §6.1 evaluation -------------------------------------------------------------------------
    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None, **gen_kwargs):
        """The parent's, but the parent fills generate's fallbacks (max_length 20, ...) into the model's
        generation config, which later checkpoints would save as if chosen: it is put back."""
        kept = copy.deepcopy(self.model.generation_config)
        try:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys, **gen_kwargs)
        finally:
            self.model.generation_config = kept

    # §5.4's loss, faster ---------------------------------------------------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        """The model's loss; a training step of one process takes it without the (B, T, V) logits
        (chunked_loss.py); evaluation and data-parallel or compiled wrappers run the model's forward."""
        if return_outputs or not model.training or self.accelerator.num_processes > 1 \
                or not fast_path_applies(model, inputs):
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        with self.accelerator.autocast():  # --bf16: accelerate's autocast wraps model.forward, not used here
            return training_loss(model, inputs, num_items_in_batch)

    # Work done once per step ------------------------------------------------------------------
    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval", **gen_kwargs):
        """The parent's, but a second call at one step (same prefix, default set, no generation settings)
        returns the first's metrics: the weights have not changed."""
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
        """The Trainer's loop; its loss replaced by the four of `comparable_losses`, read off the logits of
        its own teacher-forced passes (the Trainer's loss is a mean of per-batch means)."""
        sums = LossSums(self.model.config.label_smoothing, self.model.config.vocab_size)
        with sums.watching(self.model):
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

    # Resuming reads the optimizer, scheduler, scaler and RNG state with torch.load(weights_only=True),
    # which refuses other pickled objects and then advises weights_only=False, i.e. running them.
    def _load_from_checkpoint(self, checkpoint, model=None):
        with refused_pickles(checkpoint):
            super()._load_from_checkpoint(checkpoint, model)

    def _load_optimizer_and_scheduler(self, checkpoint):
        with refused_pickles(checkpoint):
            super()._load_optimizer_and_scheduler(checkpoint)

    def _load_scaler(self, checkpoint):
        with refused_pickles(checkpoint):
            super()._load_scaler(checkpoint)

    def _load_rng_state(self, checkpoint):
        with refused_pickles(checkpoint):
            super()._load_rng_state(checkpoint)

    def train(self, *args, **kwargs):
        checkpoint = kwargs.get("resume_from_checkpoint", args[0] if args else None)
        if isinstance(checkpoint, (str, os.PathLike)) and (Path(checkpoint) / "trainer_state.json").is_file():
            read_json(Path(checkpoint) / "trainer_state.json")  # the package's strict reader before transformers'
        self._evaluated.clear()
        self._checkpointed_step = None
        return super().train(*args, **kwargs)


@contextmanager
def refused_pickles(checkpoint):
    """A state file with pickled objects other than tensors ends resuming in one line naming the checkpoint."""
    try:
        yield
    except Exception as error:
        if type(error).__name__ != "UnpicklingError":  # by name: the package imports no pickle module
            raise
        raise ValueError(f"{checkpoint}: a saved training state (.pt/.pth) holds pickled objects other than tensors "
                         "and numbers, which are never loaded (unpickling can run arbitrary code); resume from a "
                         "checkpoint of a run you trust, or start the run again.") from None


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
