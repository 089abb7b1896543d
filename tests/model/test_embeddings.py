"""Tests for modeling_vaswani.model.embeddings: learned embeddings scaled by √d_model (§3.4)."""

import math

import torch

from modeling_vaswani.model.embeddings import ScaledEmbedding


def test_lookup_is_scaled_by_sqrt_d_model_unless_switched_off():
    torch.manual_seed(0)
    embedding = ScaledEmbedding(10, 16)
    ids = torch.tensor([[3, 0, 9], [1, 1, 4]])
    out = embedding(ids)
    assert out.shape == (2, 3, 16) and embedding.embed_scale == math.sqrt(16)
    torch.testing.assert_close(out, embedding.weight[ids] * 4.0)  # √16 = 4
    unscaled = ScaledEmbedding(10, 16, scale=False)
    torch.testing.assert_close(unscaled(ids), unscaled.weight[ids])


def test_gradient_reaches_only_used_rows():
    embedding = ScaledEmbedding(6, 4)
    embedding(torch.tensor([[1, 3, 3]])).sum().backward()
    used = embedding.weight.grad.abs().sum(-1) != 0
    assert used.tolist() == [False, True, False, True, False, False]
    # d/dw (√d · w) = √d = 2, once for id 1 and twice for id 3.
    torch.testing.assert_close(embedding.weight.grad[1], torch.full((4,), 2.0))
    torch.testing.assert_close(embedding.weight.grad[3], torch.full((4,), 4.0))
