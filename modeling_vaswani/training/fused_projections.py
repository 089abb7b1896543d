"""§3.2.2's projections as the trainer computes them (speed, not the paper): W^Q, W^K and W^V (W^K and W^V in
encoder–decoder attention) concatenated at each call, so a layer's projections are one matrix product forward and
one each way backward; the parameters stay three. In bf16 on a CPU with AMX, where small products are slow, the
shipped-shape step runs ×1.05; in float32 it is even (benchmarks/RESULTS.md). Generation keeps the model's own."""

import torch
import torch.nn.functional as F
from torch import nn

from ..model.attention import MultiHeadAttention


def _joint_linear(x: torch.Tensor, layers: tuple[nn.Linear, ...]) -> tuple[torch.Tensor, ...]:
    """Each layer's x Wᵀ + b, through one product with the weights stacked: (…, d_model) → one (…, out) per layer."""
    bias = None if layers[0].bias is None else torch.cat([layer.bias for layer in layers])
    joint = F.linear(x, torch.cat([layer.weight for layer in layers]), bias)  # (…, Σ out)
    return joint.split([layer.out_features for layer in layers], dim=-1)


class FusedProjectionAttention(MultiHeadAttention):
    def project(self, x, key_value_states=None, cache=None):
        if cache is not None:
            return super().project(x, key_value_states, cache)
        if key_value_states is None:  # self-attention: Q, K and V all from x
            query, key, value = _joint_linear(x, (self.q_proj, self.k_proj, self.v_proj))
        else:  # encoder–decoder attention: K and V from the encoder output
            query = self.q_proj(x)
            key, value = _joint_linear(key_value_states, (self.k_proj, self.v_proj))
        return self._split_heads(query, self.d_k), self._split_heads(key, self.d_k), self._split_heads(value, self.d_v)


def use_fused_projections(model: nn.Module) -> int:
    """Each `MultiHeadAttention` of `model` computes as a `FusedProjectionAttention` (no parameters change); how many."""
    changed = 0
    for module in model.modules():
        if type(module) is MultiHeadAttention:
            module.__class__ = FusedProjectionAttention
            changed += 1
    return changed
