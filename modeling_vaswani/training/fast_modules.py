"""The model's modules as the trainer computes them (speed, not the paper): `use_fast_modules` gives each plain
module of three kinds a subclass that computes the same function faster; no parameter changes, and checkpoints save
as before. The figures are in benchmarks/RESULTS.md.

- §5.4's dropout on a CPU: the same mask, each element kept with probability 1 − P_drop and scaled by
  1/(1 − P_drop), drawn as 15-bit random integers compared with P_drop · 2¹⁵ (P_drop exact to 2⁻¹⁶) instead of
  torch's `bernoulli_`, which costs twice as much on a CPU. Other devices keep torch's dropout.
- §3.2.2's projections: W^Q, W^K and W^V (W^K and W^V in encoder–decoder attention) concatenated at each call,
  so a layer's projections are one matrix product forward and one each way backward. In bf16 on a CPU with AMX,
  where small products are slow, the shipped-shape step runs ×1.06; in float32 it is even.
- Every Linear's float32 product (and the joint one above) through oneDNN where that is faster (cpu_products.py;
  `use_fast_modules` has it time both libraries at the model's widths).
"""

import torch
from torch import nn

from ..model.attention import MultiHeadAttention
from .cpu_products import linear, onednn_pays


def _keep_mask(x: torch.Tensor, p: float) -> torch.Tensor:
    """Dropout's 0/1 mask in x's dtype, each element kept with probability 1 − p (p exact to 2⁻¹⁶)."""
    # torch's CPU generator draws 32 bits a number on one thread: each 31-bit draw gives two elements their
    # 15 bits (its low and high halves), half the draws of one per element.
    halves = torch.empty((x.numel() + 1) // 2, dtype=torch.int32).random_().view(torch.int16)[: x.numel()]
    bits = halves.bitwise_and_(0x7FFF).view(x.shape)  # uniform on [0, 2¹⁵)
    # Written straight in x's dtype (a bool mask cast after costs a pass more).
    return torch.ge(bits, round(p * 2**15), out=torch.empty(x.shape, dtype=x.dtype))


# Under torch.compile the mask is one opaque call: Dynamo refuses `random_`, and inductor's loops over 16-bit
# integers are not vectorised (a compiled step with them ran slower than eager). Eager calls `_keep_mask` itself,
# without the custom op's dispatch (about 50 µs a call).
_keep_mask_op = torch.library.custom_op("modeling_vaswani::keep_mask", _keep_mask, mutates_args=(),
                                        tags=(torch.Tag.nondeterministic_seeded,))
_keep_mask_op.register_fake(lambda x, p: torch.empty_like(x))


class IntegerMaskDropout(nn.Dropout):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or not 0.0 < self.p < 1.0 or x.device.type != "cpu" or self.inplace:
            return super().forward(x)
        keep = (_keep_mask_op if torch.compiler.is_compiling() else _keep_mask)(x.detach(), self.p)
        # A product with the mask, as nn.Dropout's (a NaN stays NaN), then the scale in float32 (also for bf16):
        # torch.where costs a third more of a forward and backward pass.
        return (x * keep).mul_(1.0 / (1.0 - self.p))


def _joint_linear(x: torch.Tensor, layers: tuple[nn.Linear, ...]) -> tuple[torch.Tensor, ...]:
    """Each layer's x Wᵀ + b, through one product with the weights stacked: (…, d_model) → one (…, out) per layer."""
    bias = None if layers[0].bias is None else torch.cat([layer.bias for layer in layers])
    joint = linear(x, torch.cat([layer.weight for layer in layers]), bias)  # (…, Σ out)
    return joint.split([layer.out_features for layer in layers], dim=-1)


class FusedProjectionAttention(MultiHeadAttention):
    def project(self, x, key_value_states=None, cache=None):
        if cache is not None:  # generation: the model's own
            return super().project(x, key_value_states, cache)
        if key_value_states is None:  # self-attention: Q, K and V all from x
            query, key, value = _joint_linear(x, (self.q_proj, self.k_proj, self.v_proj))
        else:  # encoder–decoder attention: K and V from the encoder output
            query = self.q_proj(x)
            key, value = _joint_linear(key_value_states, (self.k_proj, self.v_proj))
        return self._split_heads(query, self.d_k), self._split_heads(key, self.d_k), self._split_heads(value, self.d_v)


class ProbedLinear(nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias)


FAST = {nn.Dropout: IntegerMaskDropout, MultiHeadAttention: FusedProjectionAttention, nn.Linear: ProbedLinear}


def use_fast_modules(model: nn.Module) -> int:
    """Each plain `nn.Dropout`, `MultiHeadAttention` and `nn.Linear` of `model` computes as its subclass above; how
    many. A Vaswani model's widths choose its float32 products' library (cpu_products.py)."""
    if hasattr(config := getattr(model, "config", None), "d_ff"):
        onednn_pays(config.d_model, config.d_ff)
    changed = 0
    for module in model.modules():
        if (fast := FAST.get(type(module))) is not None:
            module.__class__ = fast
            changed += 1
    return changed
