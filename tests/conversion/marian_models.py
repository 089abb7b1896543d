"""Tiny random MarianMTModels set up as Opus-MT's, and a ReLU variant, for the Marian conversion tests."""

import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel

SENTENCES = ["A man is riding a bicycle.", "Two dogs are playing in the snow.",
             "A little girl in a pink dress climbs the stairs.", "People."]

# Sizes of the tiny Marian models; each variant adds its own settings.
TINY_MARIAN = dict(d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=4,
                   decoder_attention_heads=4, max_position_embeddings=128, dropout=0.1, attention_dropout=0.0)
VARIANTS = {
    # Opus-MT: swish, √d_model scale, a trained (non-zero) logits bias; here with a deeper decoder.
    "opus-mt": dict(activation_function="swish", scale_embedding=True, encoder_layers=2, decoder_layers=3,
                    logits_bias_std=0.5),
    # The paper's ReLU, no embedding scale, an all-zero logits bias (ours then adds none).
    "relu": dict(activation_function="relu", scale_embedding=False, encoder_layers=2, decoder_layers=2,
                 logits_bias_std=0.0),
}
TOLERANCE = 1e-5  # max |Δ logit| relative to max |logit|, float32


def assert_same_state(got, expected) -> None:
    got, expected = got.state_dict(), expected.state_dict()
    assert set(got) == set(expected)
    assert all(torch.equal(got[name], tensor) for name, tensor in expected.items())


def random_marian(tokenizer, variant: str, seed: int = 0) -> MarianMTModel:
    settings = dict(VARIANTS[variant])
    logits_bias_std = settings.pop("logits_bias_std")
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    config = MarianConfig(vocab_size=len(tokenizer), pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=eos,
                          bos_token_id=None, forced_eos_token_id=eos, **TINY_MARIAN, **settings)
    model = MarianMTModel(config).eval()
    generator = torch.Generator().manual_seed(seed)
    noise = lambda shape: torch.randn(shape, generator=generator)  # noqa: E731
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" in name:
                continue  # the fixed sinusoids
            if "layer_norm" in name:
                parameter.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * noise(parameter.shape))
            elif parameter.dim() == 2:
                parameter.copy_(noise(parameter.shape) * parameter.shape[1] ** -0.5)
            else:
                parameter.copy_(0.1 * noise(parameter.shape))
        model.final_logits_bias.copy_(logits_bias_std * noise(model.final_logits_bias.shape))
    # Opus-MT's generation_config.json, with a short length limit.
    model.generation_config = GenerationConfig(
        num_beams=4, max_length=24, bad_words_ids=[[pad]], pad_token_id=pad, decoder_start_token_id=pad,
        eos_token_id=eos, forced_eos_token_id=eos)
    return model
