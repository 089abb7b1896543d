"""Hugging Face layer: the paper's stacks (encoder.py, decoder.py) as transformers calls them: output
classes, the attention kernel of the call, layers that gradient checkpointing can wrap, and in the decoder
the generation cache (generation_cache.py) and its masks. `generate` calls the encoder on its own, so its
inputs are checked here.
"""

import torch
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutput, BaseModelOutputWithPastAndCrossAttentions
from transformers.utils import can_return_tuple

from .decoder import Decoder, DecoderLayer
from .encoder import Encoder, EncoderLayer
from .generation_cache import KeyValueCache
from .inputs import check_inputs, check_positions
from .attention_kernels import attention_kernel
from .masking import attention_dtype, decoder_self_attention_mask, padding_mask, to_additive
from .rowwise_activation import RowwiseActivation


class VaswaniEncoderLayer(GradientCheckpointingLayer, EncoderLayer):
    def __init__(self, config, layer_idx: int):
        super().__init__(config, layer_idx)
        self.feed_forward.activation = RowwiseActivation(self.feed_forward.activation)  # torch.compile's speed


class VaswaniDecoderLayer(GradientCheckpointingLayer, DecoderLayer):
    def __init__(self, config, layer_idx: int):
        super().__init__(config, layer_idx)
        self.feed_forward.activation = RowwiseActivation(self.feed_forward.activation)  # torch.compile's speed


class VaswaniEncoder(Encoder):
    """The encoder of §3.1 called as transformers calls an encoder; returns a `BaseModelOutput`."""

    layer_class = VaswaniEncoderLayer

    def __init__(self, config, embed_tokens):
        super().__init__(config, embed_tokens)
        self.config = config  # attn_implementation, read at every call (attention_kernels.py)

    @can_return_tuple  # return_dict=False: a tuple of the fields that are set, as in transformers' models
    def forward(self, input_ids=None, attention_mask=None, inputs_embeds=None, output_attentions=None,
                output_hidden_states=None, **kwargs) -> BaseModelOutput:
        check_inputs("", input_ids, inputs_embeds, attention_mask, self.embed_tokens.num_embeddings)
        check_positions(self.embed_positions, (input_ids if input_ids is not None else inputs_embeds).shape[1])
        kernel = attention_kernel(self.config, bool(output_attentions))
        z, hidden, weights = super().forward(input_ids, attention_mask, inputs_embeds, kernel=kernel)
        return BaseModelOutput(
            last_hidden_state=z,
            hidden_states=hidden if output_hidden_states else None,
            attentions=weights if output_attentions else None,
        )


class VaswaniDecoder(Decoder):
    """The decoder of §3.1 called as transformers calls a decoder, with a generation cache."""

    layer_class = VaswaniDecoderLayer

    def __init__(self, config, embed_tokens):
        super().__init__(config, embed_tokens)
        self.config = config  # attn_implementation, read at every call (attention_kernels.py)

    @can_return_tuple  # return_dict=False: a tuple of the fields that are set, as in transformers' models
    def forward(self, input_ids=None, encoder_hidden_states=None, encoder_attention_mask=None,
                decoder_attention_mask=None, inputs_embeds=None, cache=None, output_attentions=False,
                output_hidden_states=False, **kwargs) -> BaseModelOutputWithPastAndCrossAttentions:
        if encoder_hidden_states is None:
            raise ValueError("The decoder needs encoder_hidden_states, the encoder's output z (§3).")
        if input_ids is None and inputs_embeds is None:
            raise ValueError("The decoder needs decoder_input_ids (or labels to derive them from).")
        length = (input_ids if input_ids is not None else inputs_embeds).shape[1]
        past = cache.get_seq_length() if cache is not None else 0  # an int, or a 0-d tensor for a static cache
        if isinstance(past, int) or not torch.compiler.is_compiling():  # compiled code cannot read a count back
            check_positions(self.embed_positions, int(past) + length)
        reference = inputs_embeds if inputs_embeds is not None else self.embed_tokens.weight
        dtype, device = attention_dtype(reference), reference.device
        self_attn_mask = self_attention_mask(length, past, cache, decoder_attention_mask, device, dtype)
        x, hidden, self_weights, cross_weights = super().forward(
            input_ids, encoder_hidden_states, self_attn_mask, cross_attention_mask(encoder_attention_mask, dtype),
            inputs_embeds, cache=KeyValueCache(cache) if cache is not None else None, offset=past,
            kernel=attention_kernel(self.config, bool(output_attentions)),
        )
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=x,
            hidden_states=hidden if output_hidden_states else None,
            attentions=self_weights if output_attentions else None,
            cross_attentions=cross_weights if output_attentions else None,
            cache=cache,
        )


def self_attention_mask(length, past, cache, decoder_attention_mask, device, dtype):
    """The decoder self-attention mask, built once per call for all layers: None where attention.py's causal
    flag is the whole mask (no padding and nothing cached, or one new token); a (B, 1, T, K) one as it is."""
    if decoder_attention_mask is not None and decoder_attention_mask.dim() == 4:
        return as_additive(decoder_attention_mask, dtype)
    if cache is not None and cache.is_compileable:  # a static cache: every slot is a key, filled or not
        return static_cache_mask(length, past, cache.get_mask_sizes(length, 0)[0], decoder_attention_mask, device,
                                 dtype)
    if decoder_attention_mask is None and (past == 0 or length == 1):
        return None
    return decoder_self_attention_mask(length, past + length, decoder_attention_mask, device, dtype)


def static_cache_mask(length, past, key_length, decoder_attention_mask, device, dtype):
    """(B or 1, 1, T, K) over a static cache's K slots: the T new tokens come after the `past` (a 0-d
    tensor) filled ones; the empty slots after them are hidden like future positions."""
    query_pos = (past + torch.arange(length, device=device))[:, None]  # (T, 1)
    hidden = (torch.arange(key_length, device=device)[None, :] > query_pos)[None, None]  # (1, 1, T, K)
    if decoder_attention_mask is not None:
        missing = key_length - decoder_attention_mask.shape[-1]  # a mask over the tokens, not the slots
        padded = torch.nn.functional.pad(decoder_attention_mask, (0, max(missing, 0)), value=1)
        if padded.shape[-1] != key_length:
            raise ValueError(f"decoder_attention_mask covers {decoder_attention_mask.shape[-1]} positions but the "
                             f"decoder attends over {key_length} (cached + new).")
        hidden = hidden | (padded[:, None, None, :] == 0)
    return to_additive(hidden, dtype)


def cross_attention_mask(encoder_attention_mask, dtype):
    """(B, 1, 1, S) from the source padding mask (B, S); a 4-D one is ready-made (beam search builds it once)."""
    if encoder_attention_mask is None:
        return None
    if encoder_attention_mask.dim() == 4:
        return encoder_attention_mask if encoder_attention_mask.dtype == dtype else as_additive(encoder_attention_mask,
                                                                                                dtype)
    return padding_mask(encoder_attention_mask, dtype)


def as_additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A ready-made (B, 1, T, K) mask (boolean: True = attend) → additive in `dtype`, clamped to finfo.min."""
    if mask.dtype == torch.bool:
        return to_additive(~mask, dtype)
    return mask.to(dtype).clamp(min=torch.finfo(dtype).min)
