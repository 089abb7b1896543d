"""The model's speed properties the benchmarks rely on (benchmarks/RESULTS.md, "The fast path"): fused SDPA,
masks built once, cross-attention K/V once per generate, no needless copies, one graph for torch.compile."""

import sys
from unittest import mock

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.model import encoder as encoder_module
from modeling_vaswani.model import stacks as decoder_masks_module  # the decoder's masks are built there
from modeling_vaswani.model.attention import MultiHeadAttention
from modeling_vaswani.model.attention_kernels import fused_attention


def test_training_uses_the_fused_kernel_and_builds_each_mask_once(monkeypatch, make_config, padded_batch):
    def counting(module, name):
        spy = mock.MagicMock(wraps=getattr(module, name))
        monkeypatch.setattr(module, name, spy)
        return spy

    model = VaswaniForConditionalGeneration(make_config("tiny", vocab_size=60, num_decoder_layers=3)).train()
    sdpa = counting(torch.nn.functional, "scaled_dot_product_attention")
    eager = counting(sys.modules["modeling_vaswani.model.attention"], "scaled_dot_product_attention")
    masks = [counting(encoder_module, "padding_mask"), counting(decoder_masks_module, "padding_mask"),
             counting(decoder_masks_module, "decoder_self_attention_mask")]
    model(**padded_batch).loss.backward()
    assert sdpa.call_count == 2 + 2 * 3 and not eager.called  # every attention through SDPA
    assert sum(1 for call in sdpa.call_args_list if call.kwargs.get("is_causal")) == 3  # the kernel's causal mode
    assert [m.call_count for m in masks] == [1, 1, 0]  # shared by all layers


def test_cross_attention_projects_the_encoder_output_once_per_generate(make_config, padded_batch):
    model, calls = VaswaniForConditionalGeneration(make_config("tiny", vocab_size=60)).eval(), []
    for layer in model.model.decoder.layers:
        for projection in (layer.cross_attn.k_proj, layer.cross_attn.v_proj):
            projection.register_forward_hook(lambda *_: calls.append(1))
    out = model.generate(input_ids=padded_batch["input_ids"], attention_mask=padded_batch["attention_mask"],
                         num_beams=4, min_new_tokens=6, max_new_tokens=6)
    assert out.shape[1] == 7  # six steps were decoded ...
    assert len(calls) == 2 * len(model.model.decoder.layers)  # ... yet K and V of the encoder were made once


def test_training_forward_is_one_graph_for_torch_compile(make_config, padded_batch):
    """--torch_compile gets the whole forward + loss as one graph, with the trainer's faster modules: no value is
    read back into Python, even with symbolic lengths (batches of several lengths compile once more, then no longer;
    fixed ones break no sooner)."""
    import torch._dynamo

    from modeling_vaswani.training.fast_modules import use_fast_modules

    config = make_config("tiny", vocab_size=60, dropout=0.1)
    model, batch = VaswaniForConditionalGeneration(config).train(), padded_batch
    use_fast_modules(model)
    for name in ("input_ids", "attention_mask", "labels"):
        torch._dynamo.mark_dynamic(batch[name], 1)
    try:
        explanation = torch._dynamo.explain(lambda **kw: model(**kw).loss)(**batch)
    finally:
        torch._dynamo.reset()
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons


@pytest.mark.parametrize("by_layer", [False, True])
def test_a_compiled_training_step_gives_eager_s_loss_and_gradients(by_layer, make_config, padded_batch):
    """torch.compile's step (forward, §5.4 loss, backward) computes what eager does, to float32 rounding: the
    whole model compiled, or its layers as train.py --torch_compile does (with the loss of chunked_loss.py and
    the faster modules of fast_modules.py)."""
    import copy

    import torch._dynamo

    from modeling_vaswani.training.chunked_loss import training_loss
    from modeling_vaswani.training.fast_modules import use_fast_modules
    from modeling_vaswani.training.trainer import compile_layers

    eager = VaswaniForConditionalGeneration(make_config("tiny", vocab_size=60)).train()  # no dropout
    compiled, batch = copy.deepcopy(eager), padded_batch
    if by_layer:
        use_fast_modules(compiled)
        compile_layers(compiled)
    step = training_loss if by_layer else (lambda model, batch: model(**batch).loss)
    try:
        losses = [step(model, batch) for model in (eager, compiled if by_layer else torch.compile(compiled))]
        for loss in losses:
            loss.backward()
    finally:
        torch._dynamo.reset()
        torch._inductor.config.fallback_random = False
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(eager.named_parameters(), compiled.parameters()):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_attention_makes_at_most_one_copy(cross, make_config):
    """Splitting heads is a view; only merging them back (Concat) may need one copy."""
    copies = []

    class CopyCounter(TorchDispatchMode):
        def __torch_dispatch__(self, func, _types, args=(), kwargs=None):
            if str(func) in ("aten.clone.default", "aten.copy_.default", "aten._to_copy.default",
                             "aten.contiguous.default"):
                copies.append(str(func))
            return func(*args, **(kwargs or {}))

    attention = MultiHeadAttention(make_config("tiny"), is_cross_attention=cross, layer_idx=0, is_causal=not cross)
    x, encoded = torch.randn(2, 5, 32), torch.randn(2, 7, 32)
    with torch.no_grad(), CopyCounter():
        attention(x, key_value_states=encoded if cross else None, kernel=fused_attention)
    assert len(copies) <= 1, copies
