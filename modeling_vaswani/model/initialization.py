"""Weight initialisation (Hugging Face glue: the paper does not say how its weights start).

Ours: embeddings ~ Normal(0, d_model^-0.5), so that after the √d_model scale of §3.4 each entry has unit
scale; every Linear Xavier-uniform with zero bias; LayerNorm the identity; §3.5's table recomputed (a buffer).
tensor2tensor (the paper's code) and fairseq start the same way: their embeddings likewise, and Xavier-uniform
for the rest (tensor2tensor's "uniform_unit_scaling" setting is variance scaling with fan_avg, uniform), though
over one combined d_model × 3·d_model Q/K/V matrix, whose fan_out gives those entries a smaller variance.
"""

from torch import nn
from transformers import initialization as init

from .embeddings import ScaledEmbedding
from .positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table


def initialize_module(module: nn.Module, config) -> None:
    """One module's own weights (`PreTrainedModel._init_weights` calls it for each)."""
    std = config.init_std if config.init_std is not None else config.d_model ** -0.5
    if isinstance(module, SinusoidalPositionalEncoding):  # §3.5's table is a buffer: recomputed
        init.copy_(module.table, sinusoidal_table(module.table.shape[0], module.d_model))
    elif isinstance(module, (ScaledEmbedding, LearnedPositionalEmbedding)):
        init.normal_(module.weight, mean=0.0, std=std)
    elif isinstance(module, nn.Linear):
        init.xavier_uniform_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)
    elif isinstance(module, nn.LayerNorm):
        init.ones_(module.weight)
        init.zeros_(module.bias)
    elif getattr(module, "final_logits_bias", None) is not None:
        init.zeros_(module.final_logits_bias)
