"""§3.2 Attention — Eq. (1) scaled dot-product attention and §3.2.2 multi-head attention.

§3.2.1, Eq. (1):  Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V
  Each query is compared with every key by a dot product; the products are divided by √d_k
  because for large d_k they grow large in magnitude (variance d_k for unit-variance inputs) and
  push the softmax into regions with tiny gradients; the softmax weights then average the values.

§3.2.2:  MultiHead(Q, K, V) = Concat(head_1, …, head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
  h heads attend in parallel in different "representation subspaces"; base uses h = 8 and
  d_k = d_v = d_model / h = 64, so the total cost is close to one head of full width.

§3.2.3 names three uses, all `MultiHeadAttention`: encoder self-attention, masked decoder
self-attention, and encoder–decoder attention. Shapes: B batch, T queries, K keys, h heads.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from .masking import causal_mask


def scaled_dot_product_attention(query, key, value, mask=None, dropout_p=0.0, training=False, is_causal=False):
    """Eq. (1), written out. query (…, T, d_k), key (…, K, d_k), value (…, K, d_v); mask additive (…, T, K),
    or is_causal for §3.2.3's mask of later positions. Returns the output (…, T, d_v) and the weights (…, T, K)."""
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])  # Q Kᵀ / √d_k, (…, T, K)
    if is_causal:  # §3.2.3: "masking out ... all values in the input of the softmax" of later positions
        mask = causal_mask(query.shape[-2], key.shape[-2], query.device, scores.dtype)  # (1, 1, T, K)
    if mask is not None:
        # Hidden keys get finfo.min (masking.py); in float16 the sum can round to −∞ (NaN if all): clamp.
        scores = (scores + mask).clamp(min=torch.finfo(scores.dtype).min)
    # Each query's weights over the keys sum to 1. Computed in float32 at least: in bf16 the same weights, a
    # gradient nearer the exact one, and 3× faster than torch's bf16 CPU kernel (benchmarks/RESULTS.md).
    weights = torch.softmax(scores, dim=-1, dtype=torch.promote_types(scores.dtype, torch.float32))
    weights = weights.to(scores.dtype)
    if dropout_p > 0.0 and training:
        # Deviation: attention-weight dropout is not named for translation (§6.3 uses it for parsing).
        weights = F.dropout(weights, p=dropout_p)
    return weights @ value, weights  # (…, T, d_v)


class MultiHeadAttention(nn.Module):
    """§3.2.2. W_i^Q, W_i^K (d_model × d_k) and W_i^V (d_model × d_v) of all h heads are stored side by
    side as one Linear each, then split into heads by a reshape; W^O maps h·d_v back to d_model."""

    def __init__(self, config, is_cross_attention: bool = False, layer_idx: int | None = None, is_causal=False):
        super().__init__()
        self.num_heads, self.d_k, self.d_v = config.num_heads, config.d_k, config.d_v
        self.is_cross_attention, self.layer_idx = is_cross_attention, layer_idx
        self.is_causal = is_causal  # decoder self-attention: no query sees a later position (§3.2.3)
        self.attention_dropout = config.attention_dropout
        bias = config.attention_bias  # §3.2.2: matrices, no biases, unless attention_bias (a deviation)
        self.q_proj = nn.Linear(config.d_model, self.num_heads * self.d_k, bias=bias)  # W^Q for all heads
        self.k_proj = nn.Linear(config.d_model, self.num_heads * self.d_k, bias=bias)  # W^K
        self.v_proj = nn.Linear(config.d_model, self.num_heads * self.d_v, bias=bias)  # W^V
        self.out_proj = nn.Linear(self.num_heads * self.d_v, config.d_model, bias=bias)  # W^O

    def _split_heads(self, x: torch.Tensor, head_size: int) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, head_size).transpose(1, 2)  # (B, L, h·d) → (B, h, L, d)

    def keys_values(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, K, d_model) → keys (B, h, K, d_k), values (B, h, K, d_v)."""
        return self._split_heads(self.k_proj(source), self.d_k), self._split_heads(self.v_proj(source), self.d_v)

    def project(self, x, key_value_states=None, cache=None):
        """Q W^Q of x (B, T, d_model) → (B, h, T, d_k); K W^K and V W^V of key_value_states (encoder–decoder
        attention: the encoder output (B, K, d_model)) or of x itself → (B, h, K, d_k), (B, h, K, d_v). A method
        of its own so that the trainer can take the three as one product (training/fast_modules.py)."""
        query = self._split_heads(self.q_proj(x), self.d_k)
        source = x if key_value_states is None else key_value_states
        # Hook for generation: a key/value cache (generation_cache.py) adds the earlier steps' keys/values.
        key, value = self.keys_values(source) if cache is None else cache.update(source, self)
        return query, key, value

    def forward(self, x, key_value_states=None, attention_mask=None, cache=None, kernel=None):
        """x (B, T, d_model) gives the queries, key_value_states (encoder–decoder attention: the encoder
        output (B, K, d_model)) or x itself the keys and values. → (B, T, d_model), weights (B, h, T, K) or None."""
        batch, length, _ = x.shape
        query, key, value = self.project(x, key_value_states, cache)  # (B, h, T, d_k), (B, h, K, d_k), (B, h, K, d_v)
        # Without a mask, decoder self-attention hides later positions (one new query has none).
        is_causal = self.is_causal and attention_mask is None and bool(length > 1)
        attend = kernel or scaled_dot_product_attention  # hook: Eq. (1) or a fused kernel (attention_kernels.py)
        output, weights = attend(query, key, value, attention_mask, self.attention_dropout, self.training, is_causal)
        # Concat(head_1, …, head_h): (B, h, T, d_v) → (B, T, h·d_v)
        output = output.transpose(1, 2).reshape(batch, length, self.num_heads * self.d_v)
        return self.out_proj(output), weights  # · W^O
