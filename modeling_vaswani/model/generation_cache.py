"""Hugging Face layer: transformers' key/value cache behind the one call attention.py makes.

During generation `GenerationMixin.generate` hands the model an `EncoderDecoderCache` of two caches:
one for decoder self-attention, to which every step appends its keys and values, and one for
encoder–decoder attention, which holds the encoder output's keys and values from the first step on
(the encoder output does not change while decoding, so its projections are made once).
"""

import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache


def new_cache(config) -> EncoderDecoderCache:
    """An empty dynamic cache, returned by a forward call asked to cache (transformers' models do so)."""
    return EncoderDecoderCache(DynamicCache(config=config), DynamicCache(config=config))


class KeyValueCache:
    """`update(source, attention)` → the keys and values `attention` attends to, (B, h, K, d).

    It takes the source and the attention module rather than finished keys and values, so that
    encoder–decoder attention projects the encoder output at the first step only.
    """

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
    """Tell torch.compile that the source length (dimension `dim`) of these tensors varies.

    `generate(cache_implementation="static")` compiles the decoding step, which reads the encoder
    output, the source mask and the encoder–decoder cache (one slot per source token). Taken for
    constants, their source length would make every input of another length compile the step again.
    Marked where they are made, in the first step (which generate runs uncompiled).
    """
    if not torch.compiler.is_compiling():
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor):
                torch._dynamo.maybe_mark_dynamic(tensor, dim)
