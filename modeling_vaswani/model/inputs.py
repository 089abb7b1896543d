"""Checks on the tensors handed to the model (Hugging Face glue, not from the paper).

A malformed batch is rejected at the model's entry, where the message can name the argument,
instead of failing deep inside attention with a shape error about some intermediate tensor.
"""

import torch


def check_batch(tensor, name: str, is_ids: bool = True) -> None:
    """Raise ValueError unless `tensor` is a non-empty (batch, length) id tensor (or embeddings)."""
    if tensor is None:
        raise ValueError("Pass input_ids (B, S) or inputs_embeds (B, S, d_model) for the encoder.")
    if is_ids and tensor.dim() != 2:
        raise ValueError(
            f"{name} must have shape (batch, length), got {tuple(tensor.shape)}; "
            "for one sentence add a batch dimension, e.g. ids[None]."
        )
    if is_ids and (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool):
        raise ValueError(f"{name} must hold integer token ids, got dtype {tensor.dtype}; use torch.long.")
    if tensor.shape[0] == 0:
        raise ValueError(f"{name} holds an empty batch (0 sentences); pass at least one sentence.")
    if tensor.dim() > 1 and tensor.shape[1] == 0:
        raise ValueError(f"{name} has sequences of length 0; every sequence needs at least one token (e.g. </s>).")
