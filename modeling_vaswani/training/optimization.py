"""§5.3: Adam (β1 = 0.9, β2 = 0.98, ε = 10^-9) and the learning rate of Eq. (3):

    lrate = d_model^-0.5 · min(step_num^-0.5, step_num · warmup_steps^-1.5)        (3)

linear for the first warmup_steps updates, then decaying as step_num^-0.5; the rate peaks at warmup_steps
(the paper: 4000) at (d_model · warmup_steps)^-0.5. `scale` (not in the paper) raises or lowers it all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch

ADAM_BETAS, ADAM_EPS = (0.9, 0.98), 1e-9  # §5.3: "β1 = 0.9, β2 = 0.98 and ε = 10^-9"
WARMUP_STEPS = 4000  # §5.3: "We used warmup_steps = 4000."
# Eq. (3)'s warmup_steps for each model preset: the paper's 4000 for its two rows of Table 3;
# ours for the small models, which train for far fewer steps.
PRESET_WARMUP_STEPS = {"base": WARMUP_STEPS, "big": WARMUP_STEPS, "small": 1000, "tiny": 100}


def _check_schedule(d_model, warmup_steps, scale) -> None:
    for name, value in (("d_model", d_model), ("warmup_steps", warmup_steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"scale must be a positive finite number (1.0 is the paper's schedule), got {scale!r}.")


def noam_lr(step: int, d_model: int, warmup_steps: int = WARMUP_STEPS, scale: float = 1.0) -> float:
    """Learning rate of Eq. (3) at update number `step` (counting from 1), times `scale`."""
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(f"step must be an integer >= 1 (Eq. (3) has step_num^-0.5, undefined at 0), got {step!r}; "
                         "the first update is step 1.")
    _check_schedule(d_model, warmup_steps, scale)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def create_adam(params: Iterable, lr: float = 1.0, weight_decay: float = 0.0) -> torch.optim.Adam:
    """Adam with §5.3's β1, β2, ε (torch checks `lr` and `weight_decay`; the paper has no weight decay). `lr` is
    divided out by `get_noam_schedule`. Fused where PyTorch can (float parameters on CPU or GPU): the same
    arithmetic in one kernel, where a dozen element-wise passes took a sixth of a small model's CPU step."""
    params = list(params)
    tensors = [p for group in params for p in (group["params"] if isinstance(group, dict) else [group])]
    fused = bool(tensors) and all(p.dtype.is_floating_point and p.device.type in ("cpu", "cuda") for p in tensors)
    return torch.optim.Adam(params, lr=lr, betas=ADAM_BETAS, eps=ADAM_EPS, weight_decay=weight_decay,
                            fused=fused or None)


class _NoamFactor:
    """LambdaLR's multiplier of one group's base rate; an object, not a closure, so state_dict() saves it."""

    def __init__(self, base_lr: float, d_model: int, warmup_steps: int, scale: float):
        self.base_lr, self.d_model, self.warmup_steps, self.scale = base_lr, d_model, warmup_steps, scale

    def __call__(self, completed_steps: int) -> float:
        # LambdaLR passes the k updates taken and its rate drives the next, the paper's step_num k + 1;
        # it multiplies by the group's base lr, divided out here so the rate is Eq. (3) itself.
        return noam_lr(completed_steps + 1, self.d_model, self.warmup_steps, self.scale) / self.base_lr


def get_noam_schedule(optimizer: torch.optim.Optimizer, d_model: int, warmup_steps: int = WARMUP_STEPS,
                      scale: float = 1.0, last_epoch: int = -1) -> torch.optim.lr_scheduler.LambdaLR:
    """A `LambdaLR` after whose k-th step() every group's rate is noam_lr(k + 1, ...), whatever base `lr`."""
    _check_schedule(d_model, warmup_steps, scale)
    # LambdaLR multiplies by "initial_lr" where a group has one (a restored optimizer's, whose "lr" is then the
    # last step's rate), else by "lr"; divide by the same number (so build the optimizer with lr=1.0).
    factors = [_NoamFactor(float(group.get("initial_lr", group["lr"])), d_model, warmup_steps, float(scale))
               for group in optimizer.param_groups]
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=factors, last_epoch=last_epoch)
