"""A static key/value cache and torch.compile decode as the dynamic cache does."""

import pytest
import torch
from transformers import CompileConfig

from checks import SOURCE, SOURCE_MASK


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


def test_a_shorter_input_does_not_compile_the_decoding_step_again(make_model):
    """Compiled static-cache decoding gives the same tokens and compiles once across source lengths."""
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
