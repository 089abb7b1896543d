"""Eq. (1) and §3.2.2's multi-head attention, its kernels and its key/value cache."""

import math

import pytest
import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from modeling_vaswani.model.attention import MultiHeadAttention, scaled_dot_product_attention
from modeling_vaswani.model.generation_cache import KeyValueCache
from modeling_vaswani.model.attention_kernels import KERNELS, attention_kernel, fused_attention
from modeling_vaswani.model.masking import causal_mask, padding_mask


def by_hand(Q, K, V):
    """softmax(Q Kᵀ / √d_k) V with plain Python lists (Eq. 1)."""
    d_k = len(K[0])
    out, all_weights = [], []
    for q in Q:
        scores = [sum(a * b for a, b in zip(q, k)) / math.sqrt(d_k) for k in K]
        top = max(scores)
        exps = [math.exp(s - top) for s in scores]
        weights = [e / sum(exps) for e in exps]
        all_weights.append(weights)
        out.append([sum(w * v[j] for w, v in zip(weights, V)) for j in range(len(V[0]))])
    return out, all_weights


Q = [[1.0, 0.0, 2.0, -1.0], [0.5, -1.0, 0.0, 3.0]]
K = [[1.0, 1.0, 0.0, 0.0], [0.0, 2.0, -1.0, 1.0], [-1.0, 0.5, 0.5, 2.0]]
V = [[1.0, 2.0], [3.0, -1.0], [0.0, 4.0]]


def test_equation_1_by_hand():  # the scores divided by √d_k = 2
    expected_out, expected_weights = by_hand(Q, K, V)
    out, weights = scaled_dot_product_attention(torch.tensor(Q), torch.tensor(K), torch.tensor(V))
    assert out.shape == (2, 2) and weights.shape == (2, 3)
    torch.testing.assert_close(out, torch.tensor(expected_out), rtol=0, atol=1e-6)
    torch.testing.assert_close(weights, torch.tensor(expected_weights), rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64])
def test_softmax_runs_in_float32_or_wider(dtype):
    # bf16 scores go through a float32 softmax (weights and gradient as that gives them); float64 stays float64.
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 3, 5, 4, dtype=dtype) * 2 for _ in range(3))
    q.requires_grad_()
    _, weights = scaled_dot_product_attention(q, k, v)
    reference = torch.softmax(q @ k.transpose(-2, -1) / 2, -1, dtype=torch.promote_types(dtype, torch.float32))
    reference = reference.to(dtype)
    assert weights.dtype == dtype and torch.equal(weights, reference)
    upstream = torch.randn_like(reference)
    assert torch.equal(torch.autograd.grad(weights, q, upstream)[0], torch.autograd.grad(reference, q, upstream)[0])


@pytest.mark.parametrize("is_causal", [False, True])
def test_fused_kernel_in_bf16_training_matches_float32(is_causal):
    # bf16 with gradients on CPU takes the written-out formula (PyTorch's bf16 backward is slow there).
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 3, 6, 4, requires_grad=True) for _ in range(3))
    mask = None if is_causal else padding_mask(torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]]), torch.bfloat16)
    low, _ = fused_attention(q.bfloat16(), k.bfloat16(), v.bfloat16(), mask, is_causal=is_causal)
    exact, _ = scaled_dot_product_attention(q, k, v, causal_mask(6, 6, "cpu", torch.float32) if is_causal
                                            else padding_mask(torch.tensor([[1] * 6, [1] * 4 + [0] * 2]), torch.float32))
    assert low.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), exact, rtol=0, atol=3e-2)
    grads = torch.autograd.grad(low.float().sum(), (q, k, v))
    exact_grads = torch.autograd.grad(exact.sum(), (q, k, v))
    for ours, reference in zip(grads, exact_grads):
        torch.testing.assert_close(ours, reference, rtol=0, atol=6e-2)


@pytest.fixture
def make_attention(make_config):
    """One attention sublayer of d_model 16 and 4 heads (the tiny config), seeded, in eval mode."""

    def make(is_cross=False, is_causal=False, **overrides):
        torch.manual_seed(0)
        config = make_config(**overrides)
        return MultiHeadAttention(config, is_cross_attention=is_cross, layer_idx=0, is_causal=is_causal).eval()

    return make


def run_both(module, *args, **kwargs):
    """The module's output with the kernel each attn_implementation chooses (attention_kernels.py)."""
    return [module(*args, kernel=KERNELS.get_interface(impl, None), **kwargs) for impl in ("eager", "sdpa")]


KEEP = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])


@pytest.mark.parametrize("kind", ["padded", "causal", "causal-implicit", "cross"])
def test_eager_and_sdpa_agree(make_attention, kind):
    """Eq. (1) written out ("eager") and the fused kernel ("sdpa") agree, masked or not."""
    module = make_attention(is_cross=kind == "cross", is_causal=kind == "causal-implicit")
    x = torch.randn(2, 3 if kind == "cross" else 6, 16)
    masks = {"padded": padding_mask(KEEP, x.dtype), "causal": causal_mask(6, 6, "cpu", x.dtype),
             "causal-implicit": None, "cross": padding_mask(KEEP, x.dtype)}
    memory = dict(key_value_states=torch.randn(2, 6, 16)) if kind == "cross" else {}
    (eager, weights), (fused, no_weights) = run_both(module, x, attention_mask=masks[kind], **memory)
    assert eager.shape == fused.shape == x.shape and no_weights is None
    assert weights.shape == (2, 4, x.shape[1], 6)
    torch.testing.assert_close(fused, eager, rtol=0, atol=1e-5)
    if kind.startswith("causal"):
        assert torch.all(weights.triu(diagonal=1) == 0)  # no query looks ahead
    else:
        assert torch.all(weights[1, :, :, 3:] == 0)  # no query looks at padding


def test_output_attentions_forces_eager_weights_and_sdpa_is_this_models_own(make_config):
    """"sdpa" is fused_attention in this model's interface only; output_attentions takes Eq. (1) written out."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    assert KERNELS["sdpa"] is fused_attention and ALL_ATTENTION_FUNCTIONS["sdpa"] is not fused_attention
    assert KERNELS.get_interface("eager", scaled_dot_product_attention) is scaled_dot_product_attention
    config = make_config()
    config._attn_implementation = "sdpa"
    assert attention_kernel(config, output_attentions=False) is fused_attention
    assert attention_kernel(config, output_attentions=True) is scaled_dot_product_attention


@pytest.mark.parametrize("attention_bias", [False, True])
def test_multi_head_is_concat_of_heads_times_w_o(make_attention, attention_bias):
    """§3.2.2 by hand: Concat(head_1..h) · W^O; biases only with attention_bias (a deviation)."""
    module = make_attention(d_k=3, d_v=5, attention_bias=attention_bias)  # head sizes ≠ d_model / h
    projections = (module.q_proj, module.k_proj, module.v_proj, module.out_proj)
    assert all((p.bias is not None) == attention_bias for p in projections)
    assert [tuple(p.weight.shape) for p in projections] == [(12, 16), (12, 16), (20, 16), (16, 20)]
    x = torch.randn(2, 4, 16)
    assert module._split_heads(module.v_proj(x), 5).shape == (2, 4, 4, 5)  # (B, h, T, d_v)

    def project(linear, i, size):  # x W_i (+ b_i): head i's rows of the projection
        rows = slice(size * i, size * (i + 1))
        return x @ linear.weight[rows].T + (linear.bias[rows] if attention_bias else 0)

    heads = [torch.softmax(project(module.q_proj, i, 3) @ project(module.k_proj, i, 3).transpose(1, 2) / math.sqrt(3),
                           dim=-1) @ project(module.v_proj, i, 5) for i in range(4)]
    torch.testing.assert_close(module(x)[0], module.out_proj(torch.cat(heads, dim=-1)), rtol=0, atol=1e-5)


def test_cross_attention_reuses_cached_keys_and_values(make_attention):
    module = make_attention(is_cross=True)
    x, memory = torch.randn(1, 1, 16), torch.randn(1, 6, 16)
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    first, _ = module(x, key_value_states=memory, cache=KeyValueCache(cache))
    assert cache.is_updated[0] and cache.cross_attention_cache.layers[0].keys.shape == (1, 4, 6, 4)
    # A second step with a different memory still attends to the cached projections.
    second, _ = module(x, key_value_states=torch.zeros_like(memory), cache=KeyValueCache(cache))
    torch.testing.assert_close(second, first, rtol=0, atol=0)
    uncached, _ = module(x, key_value_states=torch.zeros_like(memory))
    assert not torch.allclose(uncached, first)
    assert cache.self_attention_cache.get_seq_length() == 0  # cross-attention never writes there

