"""§3.1 + §5.4 — the residual connection around every sub-layer.

"We employ a residual connection around each of the two sub-layers, followed by layer
normalization. That is, the output of each sub-layer is LayerNorm(x + Sublayer(x))" (§3.1), and
"we apply dropout to the output of each sub-layer, before it is added to the sub-layer input and
normalized" (§5.4). Together, post-LN (the paper): x ← LayerNorm(x + Dropout(Sublayer(x))).

Deviation (opt-in, `norm_first=True`): pre-LN, x ← x + Dropout(Sublayer(LayerNorm(x))), easier to
train deep or without warm-up (later work); the stacks then add one final LayerNorm.
"""

import torch
from torch import nn


class SublayerConnection(nn.Module):
    """Wraps one sub-layer: residual, dropout and layer normalization."""

    def __init__(self, d_model: int, dropout: float, layer_norm_eps: float, norm_first: bool):
        super().__init__()
        self.norm = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)  # §5.4 residual dropout, P_drop
        self.norm_first = norm_first

    def forward(self, x: torch.Tensor, sublayer) -> torch.Tensor:  # sublayer: (B, L, d_model) → (B, L, d_model)
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))  # Deviation: pre-LN
        return self.norm(x + self.dropout(sublayer(x)))  # §3.1: LayerNorm(x + Sublayer(x))
