"""Weight initialisation (Hugging Face glue: the paper does not say how its weights start).

Ours: embeddings ~ Normal(0, d_model^-0.5), so that after the √d_model scale of §3.4 each entry
has unit scale; every Linear Xavier-uniform, U(±√(6 / (fan_in + fan_out))), with zero bias;
LayerNorm the identity; the sinusoid table of §3.5 recomputed (it is a buffer, not a weight).

- tensor2tensor (the paper's code): embeddings Normal(0, d_model^-0.5); every other weight from
  its "uniform_unit_scaling" setting (gain 1.0), which despite the name its trainer builds as
  `variance_scaling_initializer(1.0, mode="fan_avg", distribution="uniform")`, i.e.
  Xavier-uniform, not TensorFlow's `uniform_unit_scaling_initializer` (variance 1/fan_in).
  Its attention computes Q, K and V with one d_model × 3·d_model matrix (K, V of
  encoder–decoder attention with one d_model × 2·d_model), whose fan_out gives those entries
  a smaller variance than separate matrices get here.
- fairseq's transformer: embeddings Normal(0, d_model^-0.5); `xavier_uniform_` for every Linear,
  zero biases; its attention likewise projects Q, K, V with one 3·d_model × d_model matrix
  (later versions: three matrices with gain 1/√2, the same variance).
"""

from torch import nn
from transformers import initialization as init

from .embeddings import ScaledEmbedding
from .positional_encoding import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoidal_table


def initialize_module(module: nn.Module, config) -> None:
    """Initialise one module's own weights (`PreTrainedModel._init_weights` calls it for each)."""
    std = config.init_std if config.init_std is not None else config.d_model ** -0.5
    if isinstance(module, SinusoidalPositionalEncoding):
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
