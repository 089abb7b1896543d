"""§3.4 Embeddings and Softmax — learned embeddings, scaled by √d_model, one matrix shared three ways.

"We use learned embeddings to convert the input tokens and output tokens to vectors of dimension
d_model. We also use the usual learned linear transformation and softmax function to convert the
decoder output to predicted next-token probabilities. In our model, we share the same weight
matrix between the two embedding layers and the pre-softmax linear transformation ... In the
embedding layers, we multiply those weights by √d_model."

`ScaledEmbedding` is one embedding layer; the three-way sharing is declared in `modeling_vaswani.py`
(`_tied_weights_keys`). It needs one vocabulary for both languages: §5.1's shared BPE vocabulary.
"""

import math

import torch
from torch import nn


class ScaledEmbedding(nn.Embedding):
    """Token ids (B, L) → vectors (B, L, d_model), multiplied by √d_model (§3.4)."""

    def __init__(self, vocab_size: int, d_model: int, scale: bool = True):
        super().__init__(vocab_size, d_model)
        # Why: entries start with std d_model^-0.5 (initialization.py); × √d_model brings them to the scale
        # of the positional encoding. Deviation (opt-in, scale_embedding=False): no scale, as some Marian models.
        self.embed_scale = math.sqrt(d_model) if scale else 1.0

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return super().forward(input_ids) * self.embed_scale  # (B, L) → (B, L, d_model), × √d_model
