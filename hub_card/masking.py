"""§3.2.3 Masks — which positions attention may look at.

Two kinds of positions must be hidden from attention:
- padding: the `<pad>` tokens that fill the shorter sentences of a batch carry no meaning; no
  query may attend to them (encoder self-attention and encoder–decoder attention);
- the future: "We need to prevent leftward information flow in the decoder to preserve the
  auto-regressive property. We implement this inside of scaled dot-product attention by masking
  out (setting to −∞) all values in the input of the softmax which correspond to illegal
  connections." Position i of the decoder may see positions ≤ i only.

Masks here are *additive*: 0 where attention is allowed and a very negative number where it is
not, added to the scores Q·Kᵀ/√d_k before the softmax.

Deviation: the paper says −∞; we add `torch.finfo(dtype).min`. With −∞ a fully padded row would
give softmax(−∞, …, −∞) = NaN and spread it; a finite value keeps that row finite (its result is
ignored), and masked keys still get exactly zero weight: exp(finfo.min − max) underflows to 0.
"""

import torch


def attention_dtype(hidden_states: torch.Tensor) -> torch.dtype:
    """The dtype of the attention scores, and so of a mask: under `torch.autocast` Q, K, V are
    bf16/fp16 while the hidden states stay float32, and finfo.min must be that of the scores."""
    device_type = hidden_states.device.type
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else hidden_states.dtype


def padding_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, S) 1 = real token, 0 = pad → additive mask (B, 1, 1, S), broadcast over heads and queries."""
    return to_additive(attention_mask[:, None, None, :] == 0, dtype)


def causal_mask(query_length: int, key_length: int, device, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask (1, 1, T, K): with K − T keys cached before them (generation), query i sits at
    position K − T + i and sees the keys up to there."""
    query_pos = (torch.arange(query_length, device=device) + key_length - query_length)[:, None]  # (T, 1)
    key_pos = torch.arange(key_length, device=device)[None, :]  # (1, K)
    return to_additive((key_pos > query_pos)[None, None], dtype)  # "illegal connections" point to later positions


def decoder_self_attention_mask(query_length, key_length, decoder_attention_mask, device, dtype) -> torch.Tensor:
    """Causal ∧ padding (B, K) for decoder self-attention: (B or 1, 1, T, K), K = cached + new keys.
    (Target padding sits at the end of each sentence: the causal mask alone keeps real positions from it.)"""
    mask = causal_mask(query_length, key_length, device, dtype)
    if decoder_attention_mask is None:
        return mask
    return mask.masked_fill(decoder_attention_mask[:, None, None, :] == 0, torch.finfo(dtype).min)


def to_additive(hidden: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """True (hidden) → finfo(dtype).min, False → 0, in the dtype of the attention scores."""
    return torch.zeros(hidden.shape, dtype=dtype, device=hidden.device).masked_fill(hidden, torch.finfo(dtype).min)
