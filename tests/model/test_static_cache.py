"""A static key/value cache (`cache_implementation="static"`) and torch.compile decode as the dynamic cache does."""

import pytest
import torch
from transformers import CompileConfig
from transformers.cache_utils import DynamicCache, EncoderDecoderCache, StaticCache

EOS = 2
SOURCE = torch.tensor([[5, 6, 7, 8, EOS, 0, 0], [9, 10, 11, 12, 13, 14, EOS]])
SOURCE_MASK = (SOURCE != 0).long()


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("num_beams", [1, 4])
@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
def test_static_cache_generates_the_tokens_of_the_dynamic_cache(make_model, impl, num_beams, positions):
    model = make_model(seed=2, attn_implementation=impl, positional_encoding=positions)
    kwargs = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=num_beams, max_new_tokens=9,
                  output_scores=True, return_dict_in_generate=True)
    dynamic = model.generate(**kwargs)
    static = model.generate(**kwargs, cache_implementation="static")
    assert dynamic.sequences.shape[1] > 3
    assert torch.equal(static.sequences, dynamic.sequences)
    for a, b in zip(static.scores, dynamic.scores):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)


def test_decoding_by_hand_with_a_static_cache_matches_the_full_forward(make_model):
    model = make_model(seed=3)
    static = lambda: EncoderDecoderCache(StaticCache(config=model.config, max_cache_len=10),  # noqa: E731
                                         StaticCache(config=model.config, max_cache_len=SOURCE.shape[1]))
    target = torch.tensor([[1, 5, 6, 7], [1, 9, 10, 11]])
    full = model(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=target, use_cache=False).logits
    encoder_outputs = model.get_encoder()(input_ids=SOURCE, attention_mask=SOURCE_MASK)
    cache = static()
    steps = [model(encoder_outputs=encoder_outputs, attention_mask=SOURCE_MASK, decoder_input_ids=target[:, a:b],
                   cache=cache).logits for a, b in ((0, 2), (2, 3), (3, 4))]  # empty slots: hidden as future
    assert int(cache.get_seq_length()) == 4
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)
    # A 2-D decoder mask over the tokens so far (not the slots) is accepted too.
    for cache in (EncoderDecoderCache(DynamicCache(), DynamicCache()), static()):
        out = model(encoder_outputs=encoder_outputs, attention_mask=SOURCE_MASK, decoder_input_ids=target,
                    decoder_attention_mask=torch.ones_like(target), cache=cache)
        torch.testing.assert_close(out.logits, full, rtol=0, atol=1e-5)


def test_a_shorter_input_does_not_compile_the_decoding_step_again(make_model):
    """Compiled static-cache decoding gives the same tokens, and compiles the step once: the source length
    (of the encoder output, its mask and the encoder–decoder cache) is not taken for a constant."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    model = make_model(seed=2)
    # Dynamo's graphs run as they are ("eager" backend): the count is the point, not the speed.
    compile_config = CompileConfig(fullgraph=True, backend="eager", mode=None)
    compile_config._compile_all_devices = True  # generate() compiles on accelerators only, unless told
    torch._dynamo.reset()
    counters.clear()
    try:
        for source in (SOURCE, SOURCE[:, :5], SOURCE[:, 2:5]):  # 7, then 5 and 3 source tokens
            mask = (source != 0).long()
            kwargs = dict(input_ids=source, attention_mask=mask, num_beams=1, max_new_tokens=5)
            compiled = model.generate(**kwargs, cache_implementation="static", compile_config=compile_config)
            assert torch.equal(compiled, model.generate(**kwargs))
        compiled_graphs = counters["stats"]["unique_graphs"]
    finally:
        torch._dynamo.reset()
    assert compiled_graphs == 1  # compiled at all: transformers reads _can_compile_fullgraph
