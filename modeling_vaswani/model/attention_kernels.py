"""Hugging Face layer: the kernels that compute Eq. (1), by transformers' `attn_implementation` name: "eager"
is attention.py's formula written out (which also returns the weights), "sdpa" PyTorch's fused kernel. They
take Eq. (1)'s arguments, not transformers' `(module, query, …)`: an interface of this model's own.
"""

import torch
import torch.nn.functional as F
from transformers.modeling_utils import AttentionInterface

from .attention import scaled_dot_product_attention


def fused_attention(query, key, value, mask=None, dropout_p=0.0, training=False, is_causal=False):
    """Eq. (1) through PyTorch's fused kernel (the same numbers within float rounding); no weights."""
    if query.device.type == "cpu" and query.dtype == torch.bfloat16 and torch.is_grad_enabled():
        # PyTorch's CPU kernel differentiates bf16 about 7× slower than float32 (22 against 3 ms in a
        # small-preset step), while bf16 matrix products are fast there: the formula written out.
        return scaled_dot_product_attention(query, key, value, mask, dropout_p, training, is_causal)[0], None
    # Under torch.compile with a dynamic length the causal flag is symbolic, which the kernel refuses (a
    # graph break at every layer); branching on it makes it a plain bool, guarded on the length.
    is_causal = True if is_causal else False
    output = F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, dropout_p=dropout_p if training else 0.0, is_causal=is_causal
    )
    return output, None


KERNELS = AttentionInterface()  # "eager" is the default passed to get_interface: Eq. (1) written out
KERNELS["sdpa"] = fused_attention


def attention_kernel(config, output_attentions: bool):
    """The kernel for one forward call: the written-out formula for "eager" and whenever the
    attention weights are asked for (a fused kernel does not return them)."""
    if output_attentions:
        return scaled_dot_product_attention
    return KERNELS.get_interface(config._attn_implementation, scaled_dot_product_attention)
