"""benchmarks/harness.py: the Marian twin does our computation, with the same number of trainable weights."""

import pytest
import torch

from benchmarks import harness
from benchmarks.harness import MARIAN, OURS


def test_marian_twin_does_the_same_computation(make_config):
    config = make_config("tiny", vocab_size=60, num_decoder_layers=3, attention_bias=True)  # as the benchmark's
    twin = harness.marian_twin_config(config)
    assert (twin.d_model, twin.encoder_ffn_dim, twin.encoder_attention_heads) == (32, 64, 4)
    assert (twin.encoder_layers, twin.decoder_layers) == (2, 3)
    assert twin.activation_function == "relu" and twin.scale_embedding and twin.tie_word_embeddings
    counts = harness.parameter_counts(harness.build_pair(config, torch.device("cpu")))
    assert counts[OURS]["trainable"] == counts[MARIAN]["trainable"] and counts["trainable_difference_percent"] == 0.0


def test_marian_twin_refuses_projections_without_bias(make_config):
    with pytest.raises(ValueError) as err:
        harness.marian_twin_config(make_config("tiny", attention_bias=False))
    assert "attention_bias" in str(err.value)
