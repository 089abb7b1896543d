"""Tests for modeling_vaswani.model.positional_encoding: the sinusoids of §3.5 and the learned variant (Table 3 E)."""

import math
from types import SimpleNamespace

import pytest
import torch

from modeling_vaswani.model.positional_encoding import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEncoding,
    build_positional_encoding,
    sinusoidal_table,
)

D = 8


def pe(pos, dim, d_model=D):
    """§3.5 written with the math module: sine on even dimensions, cosine on odd ones."""
    i = dim // 2
    angle = pos / 10000 ** (2 * i / d_model)
    return math.sin(angle) if dim % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize("d_model", [6, 7, 8, 16])
def test_every_entry_matches_the_formula(d_model):
    """Interleaved (dimensions 2i and 2i+1 share a frequency), not concatenated; an odd d_model ends with a sine."""
    table = sinusoidal_table(40, d_model, dtype=torch.float64)
    assert table.shape == (40, d_model)
    assert table[0].tolist() == [0.0, 1.0] * (d_model // 2) + [0.0] * (d_model % 2)
    for pos in range(40):
        for dim in range(d_model):
            assert table[pos, dim].item() == pytest.approx(pe(pos, dim, d_model), abs=1e-12)


def test_forward_slices_with_offset_from_a_buffer_that_is_not_saved_and_grows_on_demand():
    module = SinusoidalPositionalEncoding(D, 10)
    assert "table" not in module.state_dict() and list(module.parameters()) == []
    assert dict(module.named_buffers())["table"].shape == (10, D)
    torch.testing.assert_close(module(4, offset=3), sinusoidal_table(10, D)[3:7])
    module.extend(25)  # the model's entry (inputs.check_positions) extends it for a longer input
    out = module(5, offset=20)  # positions 20 … 24, beyond the 10 precomputed
    assert module.table.shape[0] >= 25 and "table" not in module.state_dict()
    for row, pos in zip(out, range(20, 25)):
        assert row.tolist() == pytest.approx([pe(pos, dim) for dim in range(D)], abs=1e-6)
    # The grown table agrees with a fresh one at every position, old and new.
    torch.testing.assert_close(module.table, sinusoidal_table(module.table.shape[0], D))


def test_learned_variant_is_a_trainable_table():  # refused beyond its end: test_inputs.py
    module = LearnedPositionalEmbedding(D, 12)
    assert [name for name, _ in module.named_parameters()] == ["weight"]
    torch.testing.assert_close(module(3, offset=2), module.weight[2:5])
    assert module(12).shape == (12, D)


def test_builder():
    def config(kind):
        return SimpleNamespace(positional_encoding=kind, d_model=D, max_position_embeddings=4)

    assert isinstance(build_positional_encoding(config("sinusoidal")), SinusoidalPositionalEncoding)
    assert isinstance(build_positional_encoding(config("learned")), LearnedPositionalEmbedding)
    with pytest.raises(ValueError, match="positional_encoding"):
        build_positional_encoding(config("rotary"))
