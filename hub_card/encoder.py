"""§3.1 Encoder stack — N identical layers of self-attention and a feed-forward network.

"The encoder is composed of a stack of N = 6 identical layers. Each layer has two sub-layers. The
first is a multi-head self-attention mechanism, and the second is a simple, position-wise fully
connected feed-forward network." Each sub-layer sits inside `SublayerConnection` (residual,
dropout, LayerNorm). Below the first layer: token embeddings × √d_model (§3.4) plus positional
encodings (§3.5), then dropout (§5.4). In encoder self-attention "all of the keys, values and
queries come from the same place"; only padding is masked (§3.2.3).
"""

import torch
from torch import nn

from .attention import MultiHeadAttention
from .feed_forward import PositionwiseFeedForward
from .masking import attention_dtype, padding_mask
from .positional_encoding import build_positional_encoding
from .sublayer import SublayerConnection


class EncoderLayer(nn.Module):
    """One encoder layer: self-attention sub-layer, then feed-forward sub-layer (Figure 1, left)."""

    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(config, layer_idx=layer_idx)
        self.feed_forward = PositionwiseFeedForward(config.d_model, config.d_ff, config.activation_function)
        args = (config.d_model, config.dropout, config.layer_norm_eps, config.norm_first)
        self.self_attn_sublayer = SublayerConnection(*args)
        self.feed_forward_sublayer = SublayerConnection(*args)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, kernel=None):
        weights = {}  # x (B, S, d_model) → (B, S, d_model), and the self-attention weights (or None)

        def self_attention(h):
            out, weights["self"] = self.self_attn(h, attention_mask=mask, kernel=kernel)
            return out

        x = self.self_attn_sublayer(x, self_attention)  # Q = K = V = x
        x = self.feed_forward_sublayer(x, self.feed_forward)
        return x, weights["self"]


class Encoder(nn.Module):
    """Embeddings + positional encoding + dropout, then N `EncoderLayer`s (§3.1)."""

    layer_class = EncoderLayer  # the Hugging Face layer builds a subclass that gradient checkpointing can wrap

    def __init__(self, config, embed_tokens: nn.Module):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.embed_positions = build_positional_encoding(config)  # §3.5
        self.dropout = nn.Dropout(config.dropout)  # §5.4: dropout on embeddings + positional encodings
        self.layers = nn.ModuleList([self.layer_class(config, i) for i in range(config.num_layers)])
        # Deviation (pre-LN only): a final LayerNorm; in the paper's post-LN stack each layer ends with one.
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None

    def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None, kernel=None):
        """Token ids (B, S) (or their embeddings (B, S, d_model)), padding mask (B, S) → z (B, S, d_model),
        the hidden states (each layer's input, then z) and each layer's attention weights."""
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds  # × √d_model (§3.4)
        # §3.5 "add positional encodings" (in the embeddings' dtype); §5.4: "we apply dropout to the sums"
        x = self.dropout(x + self.embed_positions(x.shape[1], dtype=x.dtype))
        # §3.2.3: hide padding; built once, shared by all N layers. (B, 1, 1, S)
        mask = padding_mask(attention_mask, attention_dtype(x)) if attention_mask is not None else None
        hidden, weights = [], []
        for layer in self.layers:
            hidden.append(x)
            x, layer_weights = layer(x, mask, kernel=kernel)
            weights.append(layer_weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, (*hidden, x), tuple(weights)
