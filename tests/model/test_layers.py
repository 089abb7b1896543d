"""The paper's building blocks against their formulas (§3.1–3.5, Eq. (2), §5.4), initialization, and imports."""

import ast
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from modeling_vaswani.model.embeddings import ScaledEmbedding
from modeling_vaswani.model.feed_forward import PositionwiseFeedForward
from modeling_vaswani.model.masking import causal_mask, decoder_self_attention_mask, padding_mask
from modeling_vaswani.model.positional_encoding import (LearnedPositionalEmbedding, SinusoidalPositionalEncoding,
                                                        build_positional_encoding, sinusoidal_table)
from modeling_vaswani.model.sublayer import SublayerConnection

MODEL_DIR = Path(__file__).resolve().parents[2] / "modeling_vaswani" / "model"
PAPER_MODULES = ["positional_encoding", "embeddings", "attention", "masking", "feed_forward", "sublayer", "encoder",
                 "decoder"]


@pytest.mark.parametrize("module", PAPER_MODULES)
def test_paper_module_imports_torch_and_other_paper_modules_only(module):
    absolute, relative = set(), set()  # the modules imported, at any depth of the code
    for node in ast.walk(ast.parse((MODEL_DIR / f"{module}.py").read_text())):
        if isinstance(node, ast.Import):
            absolute.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            (relative if node.level else absolute).add(node.module or "")
    assert {name.split(".")[0] for name in absolute} <= {"math", "torch"}
    assert relative <= set(PAPER_MODULES)


# --- masks ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_padding_mask_is_zero_where_allowed_and_min_where_pad(dtype):
    mask = padding_mask(torch.tensor([[1, 1, 0], [1, 0, 0]]), dtype)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == dtype
    low = torch.finfo(dtype).min
    assert mask[:, 0, 0].tolist() == [[0.0, 0.0, low], [0.0, low, low]]
    assert not torch.isinf(mask).any()  # finite, so a fully hidden row cannot give NaN


def test_causal_and_decoder_masks():
    mask = causal_mask(4, 4, "cpu", torch.float32)
    tril = torch.ones(4, 4, dtype=torch.bool).tril()
    assert mask.shape == (1, 1, 4, 4) and torch.equal(mask[0, 0] == 0, tril)
    assert torch.all(mask[0, 0][~tril] == torch.finfo(torch.float32).min)
    # Two new queries after three cached positions sit at absolute positions 3 and 4; one new query sees all.
    assert (causal_mask(2, 5, "cpu", torch.float32)[0, 0] == 0).tolist() == [[True] * 4 + [False], [True] * 5]
    assert torch.all(causal_mask(1, 7, "cpu", torch.float32) == 0)
    # The decoder's: causal and padding combined; without a padding mask just the causal mask.
    combined = decoder_self_attention_mask(4, 4, torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]), "cpu", torch.float32)
    assert combined.shape == (2, 1, 4, 4) and torch.equal(combined[0, 0] == 0, tril)
    assert torch.equal(combined[1, 0] == 0, tril & torch.tensor([True, True, False, False]))
    torch.testing.assert_close(decoder_self_attention_mask(4, 4, None, "cpu", torch.float32), mask)
    # After cached positions: key 1 is padding, the two new queries sit at positions 3 and 4.
    cached = decoder_self_attention_mask(2, 5, torch.tensor([[1, 0, 1, 1, 1]]), "cpu", torch.float32)
    assert (cached[0, 0] == 0).tolist() == [[True, False, True, True, False], [True, False, True, True, True]]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_fully_padded_row_gives_no_nan(make_model, dtype, impl):
    model = make_model(vocab_size=30, dropout=0.1, attn_implementation=impl).to(dtype).train()  # dropout: training
    input_ids = torch.tensor([[5, 6, 7, 2], [0, 0, 0, 0]])
    attention_mask = torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]])  # the second source is all padding
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=torch.tensor([[8, 9, 2], [4, 2, -100]]),
                decoder_attention_mask=torch.tensor([[1, 1, 1], [0, 0, 0]]))  # and so is its target
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    generated = model.eval().generate(input_ids=input_ids, attention_mask=attention_mask, num_beams=4,
                                      min_new_tokens=4, max_new_tokens=4)
    assert generated.shape == (2, 5)


# --- Eq. (2) and the residual connections --------------------------------------------------------------

def test_equation_2_by_hand_at_every_position():
    ffn = PositionwiseFeedForward(2, 3)
    with torch.no_grad():
        ffn.linear_1.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]]))  # W_1ᵀ (d_ff × d_model)
        ffn.linear_1.bias.copy_(torch.tensor([0.0, -1.0, 0.5]))
        ffn.linear_2.weight.copy_(torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.0, 1.0]]))  # W_2ᵀ
        ffn.linear_2.bias.copy_(torch.tensor([0.25, -0.25]))
    x = torch.tensor([[[2.0, 3.0], [-1.0, 0.5]]])
    # Position 0: x W_1 + b_1 = [2, 2, -0.5] → ReLU [2, 2, 0] → [2 + 4 + 0 + 0.25, -2 + 0 + 0 − 0.25]
    # Position 1: x W_1 + b_1 = [-1, -0.5, -1] → ReLU [0, 0, 0] → b_2
    torch.testing.assert_close(ffn(x), torch.tensor([[[6.25, -2.25], [0.25, -0.25]]]))
    torch.manual_seed(0)
    ffn, x = PositionwiseFeedForward(8, 32), torch.randn(2, 7, 8)
    out = ffn(x)
    for b in range(2):
        for t in range(7):
            torch.testing.assert_close(out[b, t], ffn(x[b, t]), rtol=0, atol=1e-6)  # so positions never mix


def test_relu_between_the_layers_swish_as_a_deviation_and_no_other_activation():
    torch.manual_seed(0)
    relu, swish = PositionwiseFeedForward(4, 8), PositionwiseFeedForward(4, 8, activation_function="swish")
    swish.load_state_dict(relu.state_dict())
    x = torch.randn(2, 3, 4)
    hidden = relu.linear_1(x)
    torch.testing.assert_close(swish(x), swish.linear_2(hidden * torch.sigmoid(hidden)))
    torch.testing.assert_close(relu(x), relu.linear_2(hidden.clamp(min=0)))
    with pytest.raises(KeyError, match="gelu"):  # VaswaniConfig refuses it with a message (test_configuration)
        PositionwiseFeedForward(4, 8, activation_function="gelu")


def sublayer(h):
    return torch.tanh(h) * 3.0 + 1.0


def test_post_ln_is_layernorm_of_the_residual_sum_pre_ln_normalizes_the_sublayer_input_only():
    torch.manual_seed(0)
    post = SublayerConnection(8, dropout=0.0, layer_norm_eps=1e-6, norm_first=False)
    with torch.no_grad():
        post.norm.weight.uniform_(0.5, 1.5)
        post.norm.bias.uniform_(-0.5, 0.5)
    x = torch.randn(2, 5, 8)
    s = x + sublayer(x)
    mean, var = s.mean(-1, keepdim=True), s.var(-1, unbiased=False, keepdim=True)
    expected = (s - mean) / torch.sqrt(var + 1e-6) * post.norm.weight + post.norm.bias
    torch.testing.assert_close(post(x, sublayer), expected, rtol=0, atol=1e-5)
    pre, x = SublayerConnection(8, dropout=0.0, layer_norm_eps=1e-6, norm_first=True), x * 10
    out = pre(x, sublayer)
    torch.testing.assert_close(out, x + sublayer(F.layer_norm(x, (8,), pre.norm.weight, pre.norm.bias, 1e-6)),
                               rtol=0, atol=1e-5)
    assert out.std() > 3  # the residual path is not normalized


def test_dropout_hits_the_sublayer_output_not_the_residual_and_only_in_training():
    torch.manual_seed(0)
    block = SublayerConnection(8, dropout=0.5, layer_norm_eps=1e-6, norm_first=True).train()
    x = torch.randn(4, 6, 8)
    added = block(x, lambda h: torch.ones_like(h)) - x
    # Each sub-layer output (1) is dropped to 0 or kept and scaled to 1 / (1 − 0.5) = 2.
    assert set(added.round(decimals=4).unique().tolist()) == {0.0, 2.0}
    torch.testing.assert_close(block.eval()(x, lambda h: torch.ones_like(h)), x + 1)
    post = SublayerConnection(8, dropout=0.5, layer_norm_eps=1e-6, norm_first=False).eval()
    torch.testing.assert_close(post(x, sublayer), F.layer_norm(x + sublayer(x), (8,), eps=1e-6))
    assert not torch.allclose(post.train()(x, sublayer), F.layer_norm(x + sublayer(x), (8,), eps=1e-6))


# --- embeddings and positions ---------------------------------------------------------------------------

def test_lookup_is_scaled_by_sqrt_d_model_unless_switched_off_and_trains_only_used_rows():
    torch.manual_seed(0)
    embedding = ScaledEmbedding(10, 16)
    ids = torch.tensor([[3, 0, 9], [1, 1, 4]])
    out = embedding(ids)
    assert out.shape == (2, 3, 16) and embedding.embed_scale == math.sqrt(16)
    torch.testing.assert_close(out, embedding.weight[ids] * 4.0)  # √16 = 4
    unscaled = ScaledEmbedding(10, 16, scale=False)
    torch.testing.assert_close(unscaled(ids), unscaled.weight[ids])
    embedding = ScaledEmbedding(6, 4)
    embedding(torch.tensor([[1, 3, 3]])).sum().backward()
    # d/dw (√d · w) = √d = 2, once for id 1 and twice for id 3; the other rows get nothing.
    expected = torch.tensor([[0.0], [2.0], [0.0], [4.0], [0.0], [0.0]]).expand(6, 4)
    torch.testing.assert_close(embedding.weight.grad, expected)


def pe(pos, dim, d_model=8):
    """§3.5 written with the math module: sine on even dimensions, cosine on odd ones."""
    angle = pos / 10000 ** (2 * (dim // 2) / d_model)
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


def test_sinusoids_slice_with_offset_from_a_buffer_that_is_not_saved_and_grows_on_demand():
    module = SinusoidalPositionalEncoding(8, 10)
    assert "table" not in module.state_dict() and list(module.parameters()) == []
    assert dict(module.named_buffers())["table"].shape == (10, 8)
    torch.testing.assert_close(module(4, offset=3), sinusoidal_table(10, 8)[3:7])
    module.extend(25)  # the model's entry (inputs.check_positions) extends it for a longer input
    out = module(5, offset=20)  # positions 20 … 24, beyond the 10 precomputed
    assert module.table.shape[0] >= 25 and "table" not in module.state_dict()
    for row, pos in zip(out, range(20, 25)):
        assert row.tolist() == pytest.approx([pe(pos, dim) for dim in range(8)], abs=1e-6)
    # The grown table agrees with a fresh one at every position, old and new.
    torch.testing.assert_close(module.table, sinusoidal_table(module.table.shape[0], 8))


def test_the_learned_variant_is_a_trainable_table_and_the_builder_knows_these_two_only():  # beyond: test_inputs.py
    module = LearnedPositionalEmbedding(8, 12)
    assert [name for name, _ in module.named_parameters()] == ["weight"]
    torch.testing.assert_close(module(3, offset=2), module.weight[2:5])
    assert module(12).shape == (12, 8)
    config = lambda kind: SimpleNamespace(positional_encoding=kind, d_model=8, max_position_embeddings=4)  # noqa: E731
    assert isinstance(build_positional_encoding(config("sinusoidal")), SinusoidalPositionalEncoding)
    assert isinstance(build_positional_encoding(config("learned")), LearnedPositionalEmbedding)
    with pytest.raises(KeyError, match="rotary"):  # VaswaniConfig refuses it with a message (test_configuration)
        build_positional_encoding(config("rotary"))


# --- initialization --------------------------------------------------------------------------------------

def test_embeddings_have_std_d_model_to_the_minus_half_unless_init_std_says(make_model):
    weight = make_model(d_model=64, num_heads=4, vocab_size=2000).get_input_embeddings().weight
    assert weight.std().item() == pytest.approx(64 ** -0.5, rel=0.05) and weight.mean().abs().item() < 0.01
    weight = make_model(init_std=0.02, vocab_size=2000).get_input_embeddings().weight
    assert weight.std().item() == pytest.approx(0.02, rel=0.05)


def test_linears_are_xavier_uniform_norms_the_identity_sinusoids_recomputed_and_every_bias_zero(make_model):
    model = make_model(attention_bias=True, tie_word_embeddings=False, final_logits_bias=True)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    norms = [m for m in model.modules() if isinstance(m, nn.LayerNorm)]
    tables = [m for m in model.modules() if isinstance(m, SinusoidalPositionalEncoding)]
    assert linears and norms and tables
    for linear in linears:
        fan_out, fan_in = linear.weight.shape
        bound = math.sqrt(6 / (fan_in + fan_out))
        # Uniform on (−bound, bound): the largest entries come close to the bound (a Normal would not stop there).
        assert 0.8 * bound < linear.weight.abs().max().item() <= bound
        assert linear.bias is None or torch.count_nonzero(linear.bias) == 0
    for norm in norms:
        assert torch.equal(norm.weight, torch.ones_like(norm.weight)) and not norm.bias.any()
    for module in tables:  # a buffer: recomputed, not random
        assert torch.allclose(module.table, sinusoidal_table(module.table.shape[0], module.d_model))
    assert model.final_logits_bias is not None and torch.count_nonzero(model.final_logits_bias) == 0
    assert make_model().final_logits_bias is None  # the paper's model has none
