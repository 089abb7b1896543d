"""§3.5 Positional Encoding — telling the model where each token sits.

The model has no recurrence and no convolution, so it must be told the order of the sequence.
The paper adds a fixed signal of sines and cosines to the embeddings at the bottom of both stacks:

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Even dimensions carry the sine and odd dimensions the cosine of the same frequency (interleaved,
exactly as written; fairseq, Marian and tensor2tensor concatenate all sines then all cosines).
The wavelengths grow geometrically from 2π to 10000·2π; for any offset k, PE(pos + k) is a linear
function of PE(pos), which the authors hoped makes relative positions easy to attend to. Table 3,
row (E), learns the positions instead, with nearly identical results (`LearnedPositionalEmbedding`).
"""

import torch
from torch import nn


def sinusoidal_table(num_positions: int, d_model: int, dtype=torch.float32) -> torch.Tensor:
    """The (num_positions, d_model) matrix PE of §3.5, sines on even and cosines on odd columns."""
    position = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1)  # (P, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i = 0, 2, 4, ...
    angle = position / torch.pow(10000.0, two_i / d_model)  # pos / 10000^(2i/d_model), (P, ceil(d/2))
    table = torch.zeros(num_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)  # PE(pos, 2i)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # PE(pos, 2i+1)
    return table.to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoids (§3.5) in a buffer that is not saved: "We chose the sinusoidal version because it
    may allow the model to extrapolate to sequence lengths longer than the ones encountered during training"."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        self.d_model = d_model  # the table: a formula, not a weight, so not saved (persistent=False)
        self.register_buffer("table", sinusoidal_table(max_positions, d_model), persistent=False)

    def forward(self, length: int, offset=0, dtype=None) -> torch.Tensor:
        return table_rows(self.table, length, offset, dtype)

    def extend(self, num_positions: int) -> None:
        """Positions 0 … num_positions−1: a longer input than any before extends the table (extrapolation)."""
        if num_positions > self.table.shape[0]:
            size = max(num_positions, 2 * self.table.shape[0])  # doubling: not rebuilt at every longer input
            self.table = sinusoidal_table(size, self.d_model, dtype=self.table.dtype).to(self.table.device)


class LearnedPositionalEmbedding(nn.Embedding):
    """Table 3 row (E): "learned positional embeddings instead of sinusoids"."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__(max_positions, d_model)

    def forward(self, length: int, offset=0, dtype=None) -> torch.Tensor:
        return table_rows(self.weight, length, offset, dtype)  # it cannot extrapolate: no row beyond max_positions


def table_rows(table: torch.Tensor, length: int, offset, dtype: torch.dtype | None) -> torch.Tensor:
    """Rows offset … offset+length−1 (offset: earlier tokens, an int or a 0-d tensor), (length, d_model), in
    the embeddings' dtype: a float32 table added to bf16/fp16 embeddings would make every activation float32."""
    rows = table[offset + torch.arange(length, device=table.device)]  # (length, d_model)
    return rows if dtype is None else rows.to(dtype)


def build_positional_encoding(config) -> nn.Module:
    # VaswaniConfig refuses any other name, with a message
    classes = {"sinusoidal": SinusoidalPositionalEncoding, "learned": LearnedPositionalEmbedding}
    return classes[config.positional_encoding](config.d_model, config.max_position_embeddings)

