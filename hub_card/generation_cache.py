"""Hugging Face layer: transformers' key/value cache behind the one call attention.py makes. generate hands
the model an `EncoderDecoderCache`: decoder self-attention appends every step's keys and values; encoder–
decoder attention projects the encoder output (which does not change while decoding) at the first step.
"""

import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache


def new_cache(config) -> EncoderDecoderCache:
    """An empty dynamic cache, returned by a forward call asked to cache (transformers' models do so)."""
    return EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))


class KeyValueCache:
    """`update(source, attention)` → the keys and values `attention` attends to, (B, h, K, d); it takes the
    source, not keys and values, so that encoder–decoder attention projects it at the first step only."""

    def __init__(self, cache: EncoderDecoderCache):
        self.cache = cache

    def update(self, source: torch.Tensor, attention) -> tuple[torch.Tensor, torch.Tensor]:
        index = attention.layer_idx
        if not attention.is_cross_attention:
            # Past keys/values plus this step's: (B, h, T_past+T, d)
            return self.cache.self_attention_cache.update(*attention.keys_values(source), index)
        cross = self.cache.cross_attention_cache
        if self.cache.is_updated.get(index):  # the encoder output's projections, made at the first step
            return cross.layers[index].keys, cross.layers[index].values
        key, value = cross.update(*attention.keys_values(source), index)
        self.cache.is_updated[index] = True
        source_length_varies(cross.layers[index].keys, cross.layers[index].values, dim=2)
        return key, value


def source_length_varies(*tensors: torch.Tensor, dim: int = 1) -> None:
    """Tell torch.compile that the source length (dimension `dim`) of these tensors varies: taken for a constant
    in generate(cache_implementation="static"), it would make every input of another length compile the
    decoding step again. Marked where they are made, in the first step (which generate runs uncompiled)."""
    if not torch.compiler.is_compiling():
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor):
                torch._dynamo.maybe_mark_dynamic(tensor, dim)
