"""§5.3 — the optimizer and the learning-rate schedule of Eq. (3).

The paper trains with Adam using β1 = 0.9, β2 = 0.98 and ε = 10^-9, and does not keep the
learning rate fixed. For the first `warmup_steps` updates the rate grows linearly with the
step number; after that it shrinks in proportion to the inverse square root of the step
number. Both pieces are scaled by d_model^-0.5, so wider models take smaller steps:

    lrate = d_model^-0.5 · min(step_num^-0.5, step_num · warmup_steps^-1.5)        (3)

The two pieces meet at step_num = warmup_steps, where the rate peaks at
(d_model · warmup_steps)^-0.5; the paper uses warmup_steps = 4000.

`noam_lr` is Eq. (3) as a pure function, `create_adam` builds the paper's Adam, and
`get_noam_schedule` wraps Eq. (3) in a PyTorch `LambdaLR` so that it can drive any optimizer
(for instance through the `optimizers=(optimizer, scheduler)` argument of the Hugging Face
`Trainer`). The extra `scale` factor is not in the paper (the paper's value is 1.0); it is
there for experiments that need a larger or smaller peak.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

# §5.3: "We used the Adam optimizer with β1 = 0.9, β2 = 0.98 and ε = 10^-9."
ADAM_BETAS = (0.9, 0.98)
ADAM_EPS = 1e-9
# §5.3: "We used warmup_steps = 4000."
WARMUP_STEPS = 4000
# Eq. (3)'s warmup_steps for each model preset: the paper's 4000 for its two rows of Table 3;
# ours for the small models, which train for far fewer steps.
PRESET_WARMUP_STEPS = {"base": WARMUP_STEPS, "big": WARMUP_STEPS, "small": 1000, "tiny": 100}


def _check_positive_int(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")


def _check_scale(scale) -> None:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number (1.0 is the paper's schedule), got {scale!r}.")


def noam_lr(step: int, d_model: int, warmup_steps: int = WARMUP_STEPS, scale: float = 1.0) -> float:
    """Learning rate of Eq. (3) at update number `step` (counting from 1).

    `scale` multiplies the whole schedule; the paper's value is 1.0.

    Raises:
        ValueError: if `step` is below 1 (Eq. (3) is undefined at step 0), or if `d_model`,
            `warmup_steps` or `scale` is not positive.
    """
    if isinstance(step, bool) or not isinstance(step, int):
        raise ValueError(f"step must be an integer counting updates from 1, got {step!r}.")
    if step < 1:
        raise ValueError(
            f"step must be >= 1 (Eq. (3) has step_num^-0.5, undefined at 0), got {step}; "
            "the first update is step 1."
        )
    _check_positive_int("d_model", d_model)
    _check_positive_int("warmup_steps", warmup_steps)
    _check_scale(scale)
    # Eq. (3): linear warm-up, then inverse-square-root decay; both scaled by d_model^-0.5.
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def create_adam(params: Iterable, lr: float = 1.0, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam with the hyper-parameters of §5.3 (β1 = 0.9, β2 = 0.98, ε = 1e-9).

    `lr` is a base rate: under `get_noam_schedule` it is divided out, so its value does not
    change the rates Eq. (3) produces. The default 1.0 makes that plain. The paper uses no
    weight decay; `weight_decay` is offered for experiments and defaults to 0.

    Not from the paper: where PyTorch has it (float parameters on a CPU or GPU), the update runs
    fused, one kernel over all parameters instead of a dozen element-wise passes over each; the
    same arithmetic, and a sixth of a small model's CPU training step otherwise.
    """
    if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr must be a positive finite number, got {lr!r}.")
    if not isinstance(weight_decay, (int, float)) or isinstance(weight_decay, bool) or weight_decay < 0:
        raise ValueError(f"weight_decay must be a number >= 0 (the paper uses 0), got {weight_decay!r}.")
    params = list(params)
    return torch.optim.Adam(params, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=weight_decay,
                            fused=_can_fuse(params) or None)


def _can_fuse(params: list) -> bool:
    tensors = [p for group in params for p in (group["params"] if isinstance(group, dict) else [group])]
    return bool(tensors) and all(p.dtype.is_floating_point and p.device.type in ("cpu", "cuda") for p in tensors)


class _NoamFactor:
    """Multiplier that `LambdaLR` applies to one parameter group's base learning rate.

    A callable object (rather than a closure) so that `LambdaLR.state_dict()` can save it and
    a resumed run restores the same schedule.
    """

    def __init__(self, base_lr: float, d_model: int, warmup_steps: int, scale: float):
        self.base_lr = base_lr
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, completed_steps: int) -> float:
        # LambdaLR passes the number of optimizer steps already taken, starting at 0, and the
        # rate it returns is used by the *next* update. Eq. (3) is undefined at step_num 0 and
        # the paper's first update is step_num 1, so the next update is step_num = k + 1.
        rate = noam_lr(completed_steps + 1, self.d_model, self.warmup_steps, self.scale)
        # LambdaLR multiplies by the group's base lr; divide it out so the rate is Eq. (3) itself.
        return rate / self.base_lr


def get_noam_schedule(
    optimizer: torch.optim.Optimizer,
    d_model: int,
    warmup_steps: int = WARMUP_STEPS,
    scale: float = 1.0,
    last_epoch: int = -1,
) -> torch.optim.lr_scheduler.LambdaLR:
    """A `LambdaLR` that sets every parameter group's learning rate to Eq. (3).

    After k completed `optimizer.step()` / `scheduler.step()` pairs, each group's learning
    rate is exactly `noam_lr(k + 1, d_model, warmup_steps, scale)`, whatever base `lr` the
    optimizer was built with. Call `scheduler.step()` once after every `optimizer.step()`.

    Raises:
        ValueError: if a parameter group has a base learning rate that is not positive (it
            could not be divided out), or if `d_model`, `warmup_steps` or `scale` is not
            positive.
    """
    _check_positive_int("d_model", d_model)
    _check_positive_int("warmup_steps", warmup_steps)
    _check_scale(scale)
    factors = []
    for index, group in enumerate(optimizer.param_groups):
        # LambdaLR multiplies by the group's "initial_lr" whenever the group has one (the lr when a
        # schedule first drove it: an optimizer restored from a checkpoint carries it, with "lr" then
        # the rate of the last step), and by "lr" otherwise; divide by the same number.
        base_lr = float(group.get("initial_lr", group["lr"]))
        if not (math.isfinite(base_lr) and base_lr > 0):
            raise ValueError(
                f"parameter group {index} has learning rate {base_lr!r}; the schedule divides it out, "
                "so it must be positive (build the optimizer with lr=1.0)."
            )
        factors.append(_NoamFactor(base_lr, d_model, warmup_steps, float(scale)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=factors, last_epoch=last_epoch)
