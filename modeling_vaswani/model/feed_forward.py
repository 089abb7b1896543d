"""§3.3 Position-wise Feed-Forward Networks — Eq. (2).

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2

Every layer of both stacks ends with this two-layer network, applied to each position separately
and identically (different weights in every layer) — two convolutions with kernel size 1. The
inner layer is wider: d_model = 512 → d_ff = 2048 → d_model in the base model. Deviation (opt-in,
`activation_function="swish"`): SiLU, x·σ(x), for the ReLU, as Marian's Opus-MT models use.
"""

import torch
import torch.nn.functional as F
from torch import nn


class PositionwiseFeedForward(nn.Module):
    """Eq. (2). A Linear acts on the last dimension only, so positions never mix here."""

    def __init__(self, d_model: int, d_ff: int, activation_function: str = "relu"):
        super().__init__()
        # Deviation when "swish": SiLU instead of Eq. (2)'s max(0, ·). The config checks the name.
        self.activation = {"relu": torch.relu, "swish": F.silu}[activation_function]
        self.linear_1 = nn.Linear(d_model, d_ff)  # x W_1 + b_1
        self.linear_2 = nn.Linear(d_ff, d_model)  # · W_2 + b_2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, d_model) → (B, L, d_ff) → (B, L, d_model)."""
        return self.linear_2(self.activation(self.linear_1(x)))  # max(0, ·), the ReLU (or SiLU, see above)
