"""§3.2 Attention — Eq. (1) scaled dot-product attention and §3.2.2 multi-head attention.

§3.2.1, Eq. (1):  Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V
  Each query is compared with every key by a dot product; the products are divided by √d_k
  because for large d_k they grow large in magnitude (variance d_k for unit-variance inputs) and
  push the softmax into regions with tiny gradients; the softmax weights then average the values.

§3.2.2:  MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
  h heads attend in parallel in different d_k-dimensional projections ("representation
  subspaces"); base uses h = 8 and d_k = d_v = d_model / h = 64, so the total cost is close to one
  head of full width.

§3.2.3 names three uses, all served by `MultiHeadAttention`: encoder self-attention, masked
decoder self-attention, and encoder–decoder ("cross") attention whose queries come from the
decoder and keys/values from the encoder output.

Shape legend used in comments: B batch, S source length, T target length (new queries),
K key length, h heads, d_k / d_v per-head sizes.

Two implementations of Eq. (1) give the same numbers (within float rounding):
- "eager": `scaled_dot_product_attention` below, the formula written out, which can also return
  the attention weights (for `output_attentions` and for teaching);
- "sdpa": `torch.nn.functional.scaled_dot_product_attention`, the same formula in a fused kernel.
The Hugging Face `attn_implementation` setting chooses between them.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .masking import causal_mask


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    training: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. (1), written out. query (…, T, d_k), key (…, K, d_k), value (…, K, d_v); mask additive (…, T, K).

    Returns the output (…, T, d_v) and the attention weights (…, T, K).
    """
    d_k = query.shape[-1]
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)  # Q Kᵀ / √d_k, (…, T, K)
    if mask is not None:
        scores = scores + mask  # §3.2.3: hidden positions get a very negative score (see masking.py)
        # In float16 finfo.min plus a score below about −16 rounds to −∞, and a row of −∞ (all keys
        # hidden) would give NaN: back to the most negative finite number (masking.py).
        scores = scores.clamp(min=torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)  # each query's weights over the keys sum to 1
    if dropout_p > 0.0 and training:
        # Deviation: attention-weight dropout is not named for translation (§6.3 uses it for parsing).
        weights = F.dropout(weights, p=dropout_p)
    return weights @ value, weights  # (…, T, d_v)


def sdpa_attention(query, key, value, mask=None, dropout_p=0.0, training=False, is_causal=False):
    """Eq. (1) through PyTorch's fused kernel; no weights are returned."""
    if query.device.type == "cpu" and query.dtype == torch.bfloat16 and torch.is_grad_enabled():
        # Not from the paper: PyTorch's CPU kernel differentiates bf16 about 7× slower than float32
        # (its backward took 22 ms against 3 ms in a small-preset step on AVX512-BF16), while bf16
        # matrix products are fast there. So bf16 training on CPU takes the formula written out.
        if is_causal:  # §3.2.3: no attending to later positions, (1, 1, T, K)
            mask = causal_mask(query.shape[-2], key.shape[-2], query.device, query.dtype)
        return scaled_dot_product_attention(query, key, value, mask, dropout_p, training)[0], None
    output = F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout_p if training else 0.0, is_causal=is_causal
    )
    return output, None


class MultiHeadAttention(nn.Module):
    """§3.2.2 multi-head attention with an optional key/value cache for generation.

    W_i^Q, W_i^K (d_model × d_k) and W_i^V (d_model × d_v) for all h heads are stored side by side
    as one Linear each, then split into heads by a reshape; W^O maps h·d_v back to d_model.
    """

    def __init__(self, config, is_cross_attention: bool = False, layer_idx: int | None = None):
        super().__init__()
        self.config = config
        self.num_heads = config.num_heads
        self.d_k = config.d_k
        self.d_v = config.d_v
        self.is_cross_attention = is_cross_attention
        self.layer_idx = layer_idx
        self.attention_dropout = config.attention_dropout
        # §3.2.2: the projections are matrices (no biases) unless config.attention_bias (a deviation).
        bias = config.attention_bias
        self.q_proj = nn.Linear(config.d_model, self.num_heads * self.d_k, bias=bias)  # W^Q for all heads
        self.k_proj = nn.Linear(config.d_model, self.num_heads * self.d_k, bias=bias)  # W^K
        self.v_proj = nn.Linear(config.d_model, self.num_heads * self.d_v, bias=bias)  # W^V
        self.out_proj = nn.Linear(self.num_heads * self.d_v, config.d_model, bias=bias)  # W^O

    def _split_heads(self, x: torch.Tensor, head_size: int) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, head_size).transpose(1, 2)  # (B, L, h·d) → (B, h, L, d)

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache=None,
        is_causal: bool = False,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """hidden_states (B, T, d_model) give the queries; keys/values come from key_value_states
        (cross-attention: the encoder output, (B, S, d_model)) or from hidden_states (self-attention).

        `cache` is a Hugging Face `EncoderDecoderCache`: self-attention appends this step's keys and
        values to it; cross-attention computes the encoder's keys and values once and reuses them.
        """
        batch, length, _ = hidden_states.shape
        query = self._split_heads(self.q_proj(hidden_states), self.d_k)  # (B, h, T, d_k)

        if self.is_cross_attention:
            cross_cache = cache.cross_attention_cache if cache is not None else None
            if cache is not None and cache.is_updated.get(self.layer_idx):
                # The encoder output does not change during generation: reuse its projections.
                key = cross_cache.layers[self.layer_idx].keys
                value = cross_cache.layers[self.layer_idx].values
            else:
                key = self._split_heads(self.k_proj(key_value_states), self.d_k)  # (B, h, S, d_k)
                value = self._split_heads(self.v_proj(key_value_states), self.d_v)  # (B, h, S, d_v)
                if cache is not None:
                    key, value = cross_cache.update(key, value, self.layer_idx)
                    cache.is_updated[self.layer_idx] = True
        else:
            key = self._split_heads(self.k_proj(hidden_states), self.d_k)  # (B, h, T, d_k)
            value = self._split_heads(self.v_proj(hidden_states), self.d_v)  # (B, h, T, d_v)
            if cache is not None:
                # Past keys/values plus this step's: (B, h, T_past+T, d)
                key, value = cache.self_attention_cache.update(key, value, self.layer_idx)

        dropout_p = self.attention_dropout if self.training else 0.0
        if output_attentions or self.config._attn_implementation == "eager":
            if is_causal and attention_mask is None:
                raise ValueError("The eager path needs an explicit causal mask; pass attention_mask.")
            output, weights = scaled_dot_product_attention(query, key, value, attention_mask, dropout_p, self.training)
        else:
            output, weights = sdpa_attention(
                query, key, value, None if is_causal else attention_mask, dropout_p, self.training, is_causal
            )
        # Concat(head_1, …, head_h): (B, h, T, d_v) → (B, T, h·d_v)
        output = output.transpose(1, 2).reshape(batch, length, self.num_heads * self.d_v)
        return self.out_proj(output), weights  # · W^O
