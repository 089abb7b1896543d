"""§5 written out: the training loop, by hand, to read beside the paper. `VaswaniTrainer` runs the same
procedure with what a long run needs (checkpoints, resuming, evaluation, processes, mixed precision) and, on
the same model and batches, ends on the same weights to float tolerance (tests/training/test_paper_loop.py).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Sequence

from ..model.label_smoothing import comparable_losses, label_smoothed_cross_entropy
from .batching import TokenBudgetBatchSampler
from .checkpoint_averaging import average_state_dicts
from .optimization import WARMUP_STEPS, create_adam, get_noam_schedule


def train(
    model,
    dataset: Sequence[dict],
    collate: Callable[[list[dict]], dict],
    max_tokens: int,
    steps: int,
    warmup_steps: int = WARMUP_STEPS,
    seed: int = 0,
    log_every: int = 10,
    average_last: int = 0,
    checkpoint_every: int = 10,
) -> list[dict]:
    """Train `model` in place for `steps` updates on `dataset` ("input_ids", "labels" ending in </s>), collated by
    `collate` (labels padded with -100); with `average_last` k, end on the mean of the last k copies taken every
    `checkpoint_every` steps. A log entry every `log_every` steps: step, mean loss and kl_loss, learning_rate."""
    # §5.1: sentence pairs batched by approximate length, max_tokens padded tokens a side.
    sampler = TokenBudgetBatchSampler([len(example["input_ids"]) for example in dataset],
                                      [len(example["labels"]) for example in dataset],
                                      max_tokens, shuffle=True, seed=seed)
    # §5.3: Adam (β1 = 0.9, β2 = 0.98, ε = 1e-9); Eq. (3) sets its rate before every update.
    optimizer = create_adam(model.parameters())
    schedule = get_noam_schedule(optimizer, model.config.d_model, warmup_steps)
    epsilon = model.config.label_smoothing  # §5.4: ε_ls
    checkpoints = deque(maxlen=average_last)  # §6.1: the last `average_last` copies of the weights
    log, losses = [], []

    model.train()  # dropout on (§5.4)
    step, epoch = 0, 0
    while step < steps:
        sampler.set_epoch(epoch)  # a new arrangement of the batches every epoch
        for indices in sampler:
            batch = collate([dataset[i] for i in indices])
            labels = batch["labels"]  # (B, T), -100 at padding
            # Figure 1: the decoder reads the target shifted right by one (<s> first), so position i
            # predicts token i having seen only the tokens before it (with the causal mask of §3.2.3).
            decoder_input_ids = model.prepare_decoder_input_ids_from_labels(labels)
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                           decoder_input_ids=decoder_input_ids).logits  # (B, T, V)
            # §5.4: H(q, p) against the smoothed target, averaged over the batch's target tokens.
            loss = label_smoothed_cross_entropy(logits, labels, epsilon)
            loss.backward()
            rate = optimizer.param_groups[0]["lr"]  # Eq. (3) at step_num = step + 1
            optimizer.step()  # Adam, at that rate
            schedule.step()  # Eq. (3) for the next update
            optimizer.zero_grad()
            step += 1

            losses.append(loss.item())
            if step % log_every == 0 or step == steps:
                mean = sum(losses) / len(losses)
                log.append({"step": step, **comparable_losses(mean, epsilon, model.config.vocab_size),
                            "learning_rate": rate})
                losses = []
            if average_last and step % checkpoint_every == 0:
                checkpoints.append({name: tensor.detach().clone() for name, tensor in model.state_dict().items()})
            if step == steps:
                break
        epoch += 1

    if checkpoints:
        model.load_state_dict(average_state_dicts(checkpoints))  # §6.1: one model, the mean of the last checkpoints
    return log
