"""§3.1 Encoder stack — N identical layers of self-attention and a feed-forward network.

"The encoder is composed of a stack of N = 6 identical layers. Each layer has two sub-layers. The
first is a multi-head self-attention mechanism, and the second is a simple, position-wise fully
connected feed-forward network." Each sub-layer sits inside `SublayerConnection` (residual,
dropout, LayerNorm). Below the first layer: token embeddings × √d_model (§3.4) plus positional
encodings (§3.5), then dropout (§5.4: "we apply dropout to the sums of the embeddings and the
positional encodings in both the encoder and decoder stacks").

In encoder self-attention "all of the keys, values and queries come from the same place, the output
of the previous layer in the encoder"; only padding is masked (§3.2.3).

The paper's post-LN stack has no LayerNorm after its last layer (each layer already ends with
one); in the pre-LN deviation a final LayerNorm is added.
"""

import torch
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import can_return_tuple

from .attention import MultiHeadAttention
from .feed_forward import PositionwiseFeedForward
from .masking import attention_dtype, padding_mask
from .positional_encoding import build_positional_encoding
from .sublayer import SublayerConnection


class EncoderLayer(GradientCheckpointingLayer):
    """One encoder layer: self-attention sub-layer, then feed-forward sub-layer (Figure 1, left)."""

    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(config, layer_idx=layer_idx)
        self.feed_forward = PositionwiseFeedForward(config.d_model, config.d_ff, config.activation_function)
        args = (config.d_model, config.dropout, config.layer_norm_eps, config.norm_first)
        self.self_attn_sublayer = SublayerConnection(*args)
        self.feed_forward_sublayer = SublayerConnection(*args)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None, output_attentions: bool = False):
        weights = {}  # the attention weights, kept when output_attentions asks for them

        def self_attention(h):
            out, weights["self"] = self.self_attn(h, attention_mask=attention_mask, output_attentions=output_attentions)
            return out

        x = self.self_attn_sublayer(x, self_attention)  # Q = K = V = x
        x = self.feed_forward_sublayer(x, self.feed_forward)
        return x, weights["self"]


class Encoder(nn.Module):
    """Embeddings + positional encoding + dropout, then N `EncoderLayer`s (§3.1)."""

    def __init__(self, config, embed_tokens: nn.Module):
        super().__init__()
        self.config = config
        self.embed_tokens = embed_tokens
        self.embed_positions = build_positional_encoding(
            config.positional_encoding, config.d_model, config.max_position_embeddings
        )
        self.dropout = nn.Dropout(config.dropout)  # §5.4: dropout on embeddings + positional encodings
        self.layers = nn.ModuleList([EncoderLayer(config, i) for i in range(config.num_layers)])
        # Deviation (pre-LN only): a final LayerNorm; the paper's post-LN stack has none.
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None

    @can_return_tuple  # return_dict=False: a tuple of the fields that are set, as in transformers' models
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        if inputs_embeds is None:
            if input_ids is None:
                raise ValueError("The encoder needs input_ids or inputs_embeds.")
            inputs_embeds = self.embed_tokens(input_ids)  # × √d_model inside (§3.4)
        batch, length, _ = inputs_embeds.shape
        if attention_mask is not None and tuple(attention_mask.shape) != (batch, length):
            raise ValueError(
                f"attention_mask has shape {tuple(attention_mask.shape)} but input_ids has {(batch, length)}; "
                "pass one 0/1 entry per input token."
            )
        # §3.5: "add positional encodings" (in the embeddings' dtype, so bf16/fp16 stays bf16/fp16)
        x = self.dropout(inputs_embeds + self.embed_positions(length, dtype=inputs_embeds.dtype))
        # Built once, shared by all N layers (§3.2.3: hide padding).
        mask = padding_mask(attention_mask, attention_dtype(x)) if attention_mask is not None else None

        all_hidden = [] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        for layer in self.layers:
            if output_hidden_states:
                all_hidden.append(x)
            x, weights = layer(x, mask, output_attentions=bool(output_attentions))
            if output_attentions:
                all_attentions.append(weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if output_hidden_states:
            all_hidden.append(x)
        return BaseModelOutput(
            last_hidden_state=x,
            hidden_states=tuple(all_hidden) if output_hidden_states else None,
            attentions=tuple(all_attentions) if output_attentions else None,
        )
