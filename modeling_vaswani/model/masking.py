"""§3.2.3 Masks — which positions attention may look at.

Two kinds of positions must be hidden from attention:
- padding: batches hold sentences of different lengths; the `<pad>` tokens that fill the short
  ones carry no meaning, so no query may attend to them (encoder self-attention and
  encoder–decoder attention);
- the future: "We need to prevent leftward information flow in the decoder to preserve the
  auto-regressive property. We implement this inside of scaled dot-product attention by masking
  out (setting to −∞) all values in the input of the softmax which correspond to illegal
  connections." Position i of the decoder may see positions ≤ i only.

Masks here are *additive*: 0 where attention is allowed and a very negative number where it is
not, added to the scores Q·Kᵀ/√d_k before the softmax.

Deviation: the paper says −∞; we add `torch.finfo(dtype).min`, the most negative finite number.
With −∞ a query whose keys are all hidden (a fully padded row) would give softmax(−∞, …, −∞) = NaN
that spreads through the network; with a finite value its softmax stays finite (close to uniform)
and the result is ignored downstream. Masked keys still receive exactly zero weight, because
exp(finfo.min − max) underflows to 0. In float16 finfo.min is only −65504, and finfo.min plus a
score below about −16 rounds to −∞ again: the written-out attention (attention.py) clamps the sum
back to finfo.min, so a fully padded row stays finite in every precision.

A mask that arrives ready-made (`as_additive`) is Hugging Face glue: with a static cache,
`generate` builds the whole decoder mask itself — boolean, True where attention is allowed — over
every slot of the cache.
"""

import torch


def attention_dtype(hidden_states: torch.Tensor) -> torch.dtype:
    """The dtype the attention scores will have, and so the dtype a mask must be built in.

    Under mixed precision (`torch.autocast`) the Q, K, V projections run in bf16/fp16 while the
    hidden states stay float32; a mask in the scores' dtype keeps the fused kernel on one dtype, and
    its finfo(dtype).min is the most negative number of the precision the softmax input really has.
    """
    device_type = hidden_states.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return hidden_states.dtype


def padding_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, S) 1 = real token, 0 = pad → additive mask (B, 1, 1, S), broadcast over heads and queries."""
    hidden = attention_mask[:, None, None, :] == 0  # (B, 1, 1, S)
    return _to_additive(hidden, dtype)


def causal_mask(query_length: int, key_length: int, device, dtype: torch.dtype) -> torch.Tensor:
    """Additive mask (1, 1, T, T_past+T): query i (at absolute position past+i) sees keys ≤ past+i."""
    return _to_additive(_future_positions(query_length, key_length, device), dtype)


def decoder_self_attention_mask(
    query_length: int,
    key_length: int,
    decoder_attention_mask: torch.Tensor | None,
    device,
    dtype: torch.dtype,
    past=None,
) -> torch.Tensor:
    """Causal ∧ padding for decoder self-attention: (B or 1, 1, T, K), K = T_past+T keys.

    Target padding sits at the end of each sentence, so the causal mask alone already keeps real
    positions from seeing it; the padding mask is combined in only when the caller gives one.
    `past` (an int or a 0-d tensor) is given for a static cache, whose K slots outnumber the
    tokens: the empty slots lie after every query and are hidden as future positions.
    """
    hidden = _future_positions(query_length, key_length, device, past)
    if decoder_attention_mask is not None:
        missing = key_length - decoder_attention_mask.shape[-1]
        if past is not None and missing > 0:  # a static cache's empty slots: hidden above already
            decoder_attention_mask = torch.nn.functional.pad(decoder_attention_mask, (0, missing), value=1)
        if decoder_attention_mask.shape[-1] != key_length:
            raise ValueError(
                f"decoder_attention_mask covers {decoder_attention_mask.shape[-1]} positions but the decoder "
                f"attends over {key_length} (cached + new); pass a mask for the whole target prefix."
            )
        hidden = hidden | (decoder_attention_mask[:, None, None, :] == 0)  # one boolean OR, then one conversion
    return _to_additive(hidden, dtype)


def as_additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A ready-made (B, 1, T, K) mask → additive in `dtype`: a boolean one is True where attention
    is allowed; an additive one is cast, with −∞ (or a value beyond the new dtype's range) clamped
    to finfo(dtype).min."""
    if mask.dtype == torch.bool:
        return _to_additive(~mask, dtype)
    return mask.to(dtype).clamp(min=torch.finfo(dtype).min)


def _future_positions(query_length: int, key_length: int, device, past=None) -> torch.Tensor:
    """Boolean (1, 1, T, K), True where key j lies after query i.

    With a key/value cache (generation) the T new queries come after the `past` cached positions
    (K − T unless given), so query i sits at absolute position past + i and the diagonal shifts by
    that offset.
    """
    if past is None:
        past = key_length - query_length
    query_pos = (torch.arange(query_length, device=device) + past)[:, None]  # (T, 1)
    key_pos = torch.arange(key_length, device=device)[None, :]  # (1, K)
    return (key_pos > query_pos)[None, None]  # §3.2.3: "illegal connections" point to later positions


def _to_additive(hidden: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """True (hidden) → finfo(dtype).min, False → 0, in the dtype of the attention scores."""
    return torch.zeros(hidden.shape, dtype=dtype, device=hidden.device).masked_fill(hidden, torch.finfo(dtype).min)
