"""§3.5 Positional Encoding — telling the model where each token sits.

The model has no recurrence and no convolution, so it must be told the order of the sequence.
The paper adds a fixed signal of sines and cosines to the embeddings at the bottom of both stacks:

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Even dimensions carry the sine and odd dimensions the cosine of the same frequency (interleaved,
exactly as written; fairseq, Marian and tensor2tensor concatenate all sines then all cosines).
The wavelengths grow geometrically from 2π to 10000·2π; for any offset k, PE(pos + k) is a linear
function of PE(pos), which the authors hoped makes relative positions easy to attend to.

Table 3, row (E), replaces the sinusoids by learned position embeddings with nearly identical
results; `LearnedPositionalEmbedding` is that variant.
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
    """Fixed sinusoids (§3.5), held in a buffer that is not saved and grows on demand.

    "We chose the sinusoidal version because it may allow the model to extrapolate to sequence
    lengths longer than the ones encountered during training" — so a longer input simply extends
    the table instead of failing.
    """

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        self.d_model = d_model
        # persistent=False: a formula, not a weight — it stays out of checkpoints.
        self.register_buffer("table", sinusoidal_table(max_positions, d_model), persistent=False)

    def forward(self, length: int, offset=0, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Encodings of positions offset … offset+length−1, shape (length, d_model), in `dtype`.

        Pass the dtype of the embeddings they are added to: the table stays in the precision it was
        built in (float32, or the model's after `model.to(dtype)`), and a float32 table added to
        bf16/fp16 embeddings would turn every activation after it into float32. `offset` is an
        int, or a 0-d tensor where a static cache counts its tokens (see `positions_from`).
        """
        if not isinstance(offset, torch.Tensor):
            self._grow(offset + length)
            rows = self.table[offset:offset + length]  # a slice: exported graphs keep it symbolic
        else:
            if not torch.compiler.is_compiling():  # compiled code cannot read the count back
                self._grow(int(offset) + length)
            rows = self.table[positions_from(offset, length, self.table.device)]
        return rows if dtype is None else rows.to(dtype)

    def _grow(self, needed: int) -> None:
        if needed > self.table.shape[0]:
            # Grow by doubling so repeated long inputs do not rebuild the table each call; the new
            # table keeps the old one's device and dtype.
            size = max(needed, 2 * self.table.shape[0])
            self.table = sinusoidal_table(size, self.d_model, dtype=self.table.dtype).to(self.table.device)


class LearnedPositionalEmbedding(nn.Embedding):
    """Table 3 row (E): "learned positional embeddings instead of sinusoids".

    A learned table cannot extrapolate: positions beyond `max_positions` are an error.
    """

    def __init__(self, d_model: int, max_positions: int):
        super().__init__(max_positions, d_model)

    def forward(self, length: int, offset=0, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Embeddings of positions offset … offset+length−1, shape (length, d_model), in `dtype`
        (`offset` as for `SinusoidalPositionalEncoding.forward`)."""
        counted = isinstance(offset, torch.Tensor)
        last = None if counted and torch.compiler.is_compiling() else int(offset) + length - 1
        if last is not None and last >= self.num_embeddings:
            raise ValueError(
                f"Sequence position {last} is beyond max_position_embeddings="
                f"{self.num_embeddings} of the learned positional embeddings (Table 3 row E cannot "
                "extrapolate). Shorten the input or use positional_encoding='sinusoidal'."
            )
        if counted:
            rows = self.weight[positions_from(offset, length, self.weight.device)]
        else:
            rows = self.weight[offset:offset + length]
        return rows if dtype is None else rows.to(dtype)


def positions_from(offset: torch.Tensor, length: int, device) -> torch.Tensor:
    """The positions offset … offset+length−1 as an index tensor.

    A static cache (Hugging Face glue for compiled generation) counts the tokens it holds in a
    0-d tensor; indexing by offset + arange keeps the shape fixed and the count a tensor, so a
    compiled decoding step neither depends on the count's value nor reads it back.
    """
    return offset.to(device) + torch.arange(length, device=device)


def build_positional_encoding(kind: str, d_model: int, max_positions: int) -> nn.Module:
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, max_positions)
    if kind == "learned":
        return LearnedPositionalEmbedding(d_model, max_positions)
    raise ValueError(f"positional_encoding must be 'sinusoidal' or 'learned', got {kind!r}.")

