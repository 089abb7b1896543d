"""§3.1 Decoder stack — N identical layers of masked self-attention, encoder–decoder attention and FFN.

"The decoder is also composed of a stack of N = 6 identical layers. In addition to the two
sub-layers in each encoder layer, the decoder inserts a third sub-layer, which performs multi-head
attention over the output of the encoder stack ... We also modify the self-attention sub-layer in
the decoder stack to prevent positions from attending to subsequent positions. This masking,
combined with fact that the output embeddings are offset by one position, ensures that the
predictions for position i can depend only on the known outputs at positions less than i."
In encoder–decoder attention "the queries come from the previous decoder layer, and the memory
keys and values come from the output of the encoder" (§3.2.3). Generation may pass a key/value
cache (not from the paper; the same outputs as recomputing everything).
"""

from torch import nn

from .attention import MultiHeadAttention
from .feed_forward import PositionwiseFeedForward
from .positional_encoding import build_positional_encoding
from .sublayer import SublayerConnection


class DecoderLayer(nn.Module):
    """One decoder layer: masked self-attention, encoder–decoder attention, FFN (Figure 1, right)."""

    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(config, layer_idx=layer_idx, is_causal=True)
        self.cross_attn = MultiHeadAttention(config, is_cross_attention=True, layer_idx=layer_idx)
        self.feed_forward = PositionwiseFeedForward(config.d_model, config.d_ff, config.activation_function)
        args = (config.d_model, config.dropout, config.layer_norm_eps, config.norm_first)
        self.self_attn_sublayer = SublayerConnection(*args)
        self.cross_attn_sublayer = SublayerConnection(*args)
        self.feed_forward_sublayer = SublayerConnection(*args)

    def forward(self, x, memory, self_attn_mask=None, cross_attn_mask=None, cache=None, kernel=None):
        weights = {}  # x (B, T, d_model), memory z (B, S, d_model) → (B, T, d_model), both attentions' weights

        def masked_self_attention(h):  # no mask given: the causal one (§3.2.3)
            out, weights["self"] = self.self_attn(h, attention_mask=self_attn_mask, cache=cache, kernel=kernel)
            return out

        def encoder_decoder_attention(h):  # §3.2.3: queries from the decoder, keys and values from z
            out, weights["cross"] = self.cross_attn(
                h, memory, attention_mask=cross_attn_mask, cache=cache, kernel=kernel
            )
            return out

        x = self.self_attn_sublayer(x, masked_self_attention)
        x = self.cross_attn_sublayer(x, encoder_decoder_attention)
        x = self.feed_forward_sublayer(x, self.feed_forward)
        return x, weights["self"], weights["cross"]


class Decoder(nn.Module):
    """Target embeddings (shifted right) + positional encoding + dropout, then N `DecoderLayer`s."""

    layer_class = DecoderLayer  # the Hugging Face layer builds a subclass that gradient checkpointing can wrap

    def __init__(self, config, embed_tokens: nn.Module):
        super().__init__()
        self.embed_tokens = embed_tokens
        self.embed_positions = build_positional_encoding(config)  # §3.5
        self.dropout = nn.Dropout(config.dropout)  # §5.4
        self.layers = nn.ModuleList([self.layer_class(config, i) for i in range(config.num_decoder_layers)])
        # Deviation (pre-LN only): a final LayerNorm; in the paper's post-LN stack each layer ends with one.
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None

    def forward(self, input_ids, memory, self_attn_mask=None, cross_attn_mask=None, inputs_embeds=None,
                cache=None, offset=0, kernel=None):
        """Target ids (B, T), z (B, S, d_model), additive masks (masking.py) of target padding (B, 1, T, K) and
        source padding (B, 1, 1, S) → (B, T, d_model), the hidden states and both attentions' weights."""
        x = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds  # × √d_model (§3.4)
        # §3.5 at positions offset … offset+T−1 (offset: tokens decoded before), then §5.4 dropout
        x = self.dropout(x + self.embed_positions(x.shape[1], offset=offset, dtype=x.dtype))
        hidden, weights = [], []
        for layer in self.layers:
            hidden.append(x)
            x, *layer_weights = layer(x, memory, self_attn_mask, cross_attn_mask, cache=cache, kernel=kernel)
            weights.append(layer_weights)  # [self-attention's, encoder–decoder attention's]
        if self.final_norm is not None:
            x = self.final_norm(x)
        self_weights, cross_weights = zip(*weights)
        return x, (*hidden, x), self_weights, cross_weights
