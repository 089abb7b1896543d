"""§3.1 Decoder stack — N identical layers of masked self-attention, encoder–decoder attention and FFN.

"The decoder is also composed of a stack of N = 6 identical layers. In addition to the two
sub-layers in each encoder layer, the decoder inserts a third sub-layer, which performs multi-head
attention over the output of the encoder stack ... We also modify the self-attention sub-layer in
the decoder stack to prevent positions from attending to subsequent positions. This masking,
combined with fact that the output embeddings are offset by one position, ensures that the
predictions for position i can depend only on the known outputs at positions less than i."

In encoder–decoder attention "the queries come from the previous decoder layer, and the memory
keys and values come from the output of the encoder" (§3.2.3).

For generation the decoder keeps a key/value cache (Hugging Face `EncoderDecoderCache`): each new
token attends to the stored keys/values of the tokens before it instead of recomputing them, and
the encoder's keys/values for cross-attention are computed once. This is an implementation
technique, not part of the paper; the outputs are the same as recomputing everything. A static
cache (`cache_implementation="static"`, for torch.compile) allocates its slots up front and
counts its tokens in a tensor; the mask then hides the empty slots as future positions.
"""

import torch
from torch import nn
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPastAndCrossAttentions
from transformers.utils import can_return_tuple

from .attention import MultiHeadAttention
from .feed_forward import PositionwiseFeedForward
from .masking import as_additive, attention_dtype, decoder_self_attention_mask, padding_mask
from .positional_encoding import build_positional_encoding
from .sublayer import SublayerConnection
from .transformers_compat import cache_field


class DecoderLayer(GradientCheckpointingLayer):
    """One decoder layer: masked self-attention, encoder–decoder attention, FFN (Figure 1, right)."""

    def __init__(self, config, layer_idx: int):
        super().__init__()
        self.self_attn = MultiHeadAttention(config, layer_idx=layer_idx)
        self.cross_attn = MultiHeadAttention(config, is_cross_attention=True, layer_idx=layer_idx)
        self.feed_forward = PositionwiseFeedForward(config.d_model, config.d_ff, config.activation_function)
        args = (config.d_model, config.dropout, config.layer_norm_eps, config.norm_first)
        self.self_attn_sublayer = SublayerConnection(*args)
        self.cross_attn_sublayer = SublayerConnection(*args)
        self.feed_forward_sublayer = SublayerConnection(*args)

    def forward(
        self,
        x: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        self_attn_mask: torch.Tensor | None,
        cross_attn_mask: torch.Tensor | None,
        is_causal: bool = False,
        cache=None,
        output_attentions: bool = False,
    ):
        weights = {}  # the attention weights, kept when output_attentions asks for them

        def masked_self_attention(h):
            out, weights["self"] = self.self_attn(
                h, attention_mask=self_attn_mask, cache=cache, is_causal=is_causal, output_attentions=output_attentions
            )
            return out

        def encoder_decoder_attention(h):
            # §3.2.3: queries from the decoder, keys and values from the encoder output.
            out, weights["cross"] = self.cross_attn(
                h, key_value_states=encoder_hidden_states, attention_mask=cross_attn_mask, cache=cache,
                output_attentions=output_attentions,
            )
            return out

        x = self.self_attn_sublayer(x, masked_self_attention)
        x = self.cross_attn_sublayer(x, encoder_decoder_attention)
        x = self.feed_forward_sublayer(x, self.feed_forward)
        return x, weights["self"], weights["cross"]


class Decoder(nn.Module):
    """Target embeddings (shifted right) + positional encoding + dropout, then N `DecoderLayer`s."""

    def __init__(self, config, embed_tokens: nn.Module):
        super().__init__()
        self.config = config
        self.embed_tokens = embed_tokens
        self.embed_positions = build_positional_encoding(
            config.positional_encoding, config.d_model, config.max_position_embeddings
        )
        self.dropout = nn.Dropout(config.dropout)  # §5.4
        self.layers = nn.ModuleList([DecoderLayer(config, i) for i in range(config.num_decoder_layers)])
        # Deviation (pre-LN only): a final LayerNorm; the paper's post-LN stack has none.
        self.final_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps) if config.norm_first else None

    @can_return_tuple  # return_dict=False: a tuple of the fields that are set, as in transformers' models
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        cache=None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        **kwargs,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        if encoder_hidden_states is None:
            raise ValueError("The decoder needs encoder_hidden_states, the encoder's output z (§3).")
        if inputs_embeds is None:
            if input_ids is None:
                raise ValueError("The decoder needs decoder_input_ids (or labels to derive them from).")
            inputs_embeds = self.embed_tokens(input_ids)  # × √d_model inside (§3.4)
        length = inputs_embeds.shape[1]
        # Tokens already decoded: an int, or a 0-d tensor for a static cache.
        past = cache.get_seq_length() if cache is not None else 0
        # Positions past … past+T−1, in the embeddings' dtype (bf16/fp16 stays bf16/fp16).
        x = self.dropout(inputs_embeds + self.embed_positions(length, offset=past, dtype=inputs_embeds.dtype))

        self_attn_mask, is_causal = self._self_attention_mask(
            length, past, cache, decoder_attention_mask, x, output_attentions
        )
        if encoder_attention_mask is not None and encoder_attention_mask.dim() == 4:
            # Ready-made (B, 1, 1, S): beam search builds the additive mask once for all of its steps.
            dtype = attention_dtype(x)
            cross_attn_mask = (encoder_attention_mask if encoder_attention_mask.dtype == dtype
                               else as_additive(encoder_attention_mask, dtype))
        else:
            cross_attn_mask = (
                padding_mask(encoder_attention_mask, attention_dtype(x)) if encoder_attention_mask is not None else None
            )

        all_hidden = [] if output_hidden_states else None
        self_attentions = [] if output_attentions else None
        cross_attentions = [] if output_attentions else None
        for layer in self.layers:
            if output_hidden_states:
                all_hidden.append(x)
            x, self_weights, cross_weights = layer(
                x, encoder_hidden_states, self_attn_mask, cross_attn_mask, is_causal=is_causal, cache=cache,
                output_attentions=output_attentions,
            )
            if output_attentions:
                self_attentions.append(self_weights)
                cross_attentions.append(cross_weights)
        if self.final_norm is not None:
            x = self.final_norm(x)
        if output_hidden_states:
            all_hidden.append(x)
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=x,
            hidden_states=tuple(all_hidden) if output_hidden_states else None,
            attentions=tuple(self_attentions) if output_attentions else None,
            cross_attentions=tuple(cross_attentions) if output_attentions else None,
            **cache_field(cache),
        )

    def _self_attention_mask(self, length, past, cache, decoder_attention_mask, x, output_attentions):
        """The causal (∧ padding) mask, built once per forward call and shared by all layers.

        Returns (mask, is_causal). Two cases need no mask tensor: one new token with a cache (it
        may see every earlier token), and the fused kernel's built-in causal mode in training.
        A (B, 1, T, K) decoder_attention_mask is taken as the whole mask (generate() passes one
        with a static cache).
        """
        if decoder_attention_mask is not None and decoder_attention_mask.dim() == 4:
            return as_additive(decoder_attention_mask, attention_dtype(x)), False
        # A static cache returns all of its slots as keys, filled or not.
        static = cache is not None and cache.is_compileable
        if decoder_attention_mask is None and not static:
            if length == 1:
                return None, False
            if past == 0 and not output_attentions and self.config._attn_implementation != "eager":
                return None, True
        key_length = cache.get_mask_sizes(length, 0)[0] if static else past + length
        mask = decoder_self_attention_mask(
            length, key_length, decoder_attention_mask, x.device, attention_dtype(x), past=past if static else None
        )
        return mask, False
