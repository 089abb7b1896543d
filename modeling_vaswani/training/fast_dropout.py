"""§5.4's dropout as the trainer computes it on a CPU (speed, not the paper): the same mask, each element kept with
probability 1 − P_drop and scaled by 1/(1 − P_drop), drawn as 15-bit random integers compared with P_drop · 2¹⁵
(P_drop exact to 2⁻¹⁶) instead of torch's `bernoulli_`, which costs twice as much on a CPU (the figures are in
benchmarks/RESULTS.md). Other devices keep torch's dropout."""

import torch
from torch import nn


class IntegerMaskDropout(nn.Dropout):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or not 0.0 < self.p < 1.0 or x.device.type != "cpu" or self.inplace:
            return super().forward(x)
        # torch's CPU generator draws 32 bits a number on one thread: each 31-bit draw gives two elements their
        # 15 bits (its low and high halves), half the draws of one per element.
        halves = torch.empty((x.numel() + 1) // 2, dtype=torch.int32).random_().view(torch.int16)[: x.numel()]
        bits = halves.bitwise_and_(0x7FFF).view(x.shape)  # uniform on [0, 2¹⁵)
        # The 0/1 mask written straight in x's dtype (a bool mask cast after costs a pass more).
        keep = torch.ge(bits, round(self.p * 2**15), out=torch.empty(x.shape, dtype=x.dtype))
        # A product with the mask, as nn.Dropout's (a NaN stays NaN), then the scale in float32 (also for bf16):
        # torch.where costs a third more of a forward and backward pass.
        return (x * keep).mul_(1.0 / (1.0 - self.p))


def use_integer_mask_dropout(model: nn.Module) -> int:
    """Each plain `nn.Dropout` of `model` computes as an `IntegerMaskDropout` (no parameters change); how many."""
    changed = 0
    for module in model.modules():
        if type(module) is nn.Dropout:
            module.__class__ = IntegerMaskDropout
            changed += 1
    return changed
