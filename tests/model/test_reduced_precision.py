"""Half and mixed precision: bfloat16 / float16 end to end, and bf16 autocast, finite throughout."""

import json
from pathlib import Path

import pytest
import torch

from checks import EOS, SOURCE, SOURCE_MASK, TARGET
from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.model.attention import scaled_dot_product_attention
from modeling_vaswani.model.masking import padding_mask
from modeling_vaswani.training.optimization import create_adam

HALF = [torch.bfloat16, torch.float16]
BF16 = torch.bfloat16
LABELS = torch.tensor([[5, 6, 7, 8, EOS], [9, 10, 11, EOS, -100]])
# Largest |logit| difference from float32 seen on the tiny models (about 0.02 bf16, 0.003 fp16), with room.
TOLERANCE = {torch.bfloat16: 0.1, torch.float16: 0.02}
HUB_CARD = Path(__file__).resolve().parents[2] / "hub_card"
MIXED = dict(preset="tiny", vocab_size=60, dropout=0.1)  # with dropout: the training steps use it


@pytest.fixture(scope="module")
def saved(tmp_path_factory, make_model):
    model = make_model()
    path = tmp_path_factory.mktemp("half") / "tiny"
    model.save_pretrained(path)
    return path, model


def check_training_step(model, dtype):
    model.train()
    out = model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=LABELS)
    assert out.logits.dtype == dtype and torch.isfinite(out.loss)
    out.loss.backward()
    before = model.lm_head.weight.detach().clone()
    assert all(p.grad.dtype == dtype and torch.isfinite(p.grad).all() for p in model.parameters())
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    assert not torch.equal(before, model.lm_head.weight)
    model.eval()


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_a_model_loaded_in_half_precision_runs_forward_generate_and_a_training_step(saved, tmp_path, dtype, impl):
    path, reference = saved
    model = VaswaniForConditionalGeneration.from_pretrained(path, dtype=dtype, attn_implementation=impl)
    assert all(p.dtype == dtype for p in model.parameters())
    # Loading leaves the sinusoid table (a buffer) in float32: the hidden states show it is cast where added.
    assert model.model.encoder.embed_positions.table.dtype == torch.float32
    inputs = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET, output_hidden_states=True)
    out = model(**inputs)
    assert all(h.dtype == dtype for h in out.encoder_hidden_states + out.decoder_hidden_states + (out.logits,))
    assert (out.logits.float() - reference(**inputs).logits).abs().max() < TOLERANCE[dtype]
    # Saved in half precision, config.json says so and dtype="auto" loads it so.
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["dtype"] == str(dtype).removeprefix("torch.")
    again = VaswaniForConditionalGeneration.from_pretrained(tmp_path, dtype="auto", attn_implementation=impl)
    assert again.dtype == dtype and torch.equal(again(**inputs).logits, out.logits)
    for num_beams in (1, 4):
        generated = model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=num_beams, max_new_tokens=6)
        assert generated.shape[0] == 2 and generated.min() >= 0 and generated.max() < 40
    check_training_step(model, dtype)


@pytest.mark.parametrize("dtype", HALF)
def test_an_input_longer_than_max_position_embeddings_in_half_precision(make_model, dtype):
    reference = make_model(seed=1, max_position_embeddings=8)
    model = make_model(seed=1, max_position_embeddings=8).to(dtype)
    table = model.model.encoder.embed_positions
    assert table.table.dtype == dtype and table.table.shape[0] == 8
    source, target = torch.randint(4, 40, (2, 13)), torch.randint(4, 40, (2, 11))
    logits = model(input_ids=source, decoder_input_ids=target).logits
    assert logits.dtype == dtype and table.table.shape[0] >= 13 and table.table.dtype == dtype  # regrown, same dtype
    assert (logits.float() - reference(input_ids=source, decoder_input_ids=target).logits).abs().max() < 2 * TOLERANCE[dtype]
    # Generation past the table's end, one position at a time from the cache.
    assert model.generate(input_ids=source, num_beams=1, max_new_tokens=12, suppress_tokens=[EOS]).shape == (2, 13)


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_float16_attention_keeps_a_fully_masked_row_finite_in_a_model_with_a_sentence_of_padding_only(make_model,
                                                                                                       impl):
    torch.manual_seed(0)  # Eq. (1) written out, alone
    query = torch.full((1, 1, 3, 8), 4.0, dtype=torch.float16)
    key, value = -query, torch.randn(1, 1, 3, 8, dtype=torch.float16)
    scores = query @ key.transpose(-2, -1) / 8 ** 0.5  # −45 everywhere
    mask = padding_mask(torch.tensor([[0, 0, 0]]), torch.float16)
    assert torch.isinf(scores + mask).all()  # finfo(fp16).min + such a score: −∞ without the clamp
    output, weights = scaled_dot_product_attention(query, key, value, mask)
    assert torch.isfinite(output).all() and torch.isfinite(weights).all()
    torch.testing.assert_close(weights.float().sum(-1), torch.ones(1, 1, 3), rtol=0, atol=1e-3)
    # Rows with a visible key still give every hidden key exactly zero weight.
    _, weights = scaled_dot_product_attention(query, key, value, padding_mask(torch.tensor([[1, 0, 0]]), torch.float16))
    assert torch.equal(weights[..., 1:], torch.zeros_like(weights[..., 1:]))
    model = make_model(seed=2, attn_implementation=impl).to(torch.float16)
    with torch.no_grad():  # large weights: scores far below −16, where finfo.min + score overflowed
        for module in model.modules():
            if hasattr(module, "q_proj"):
                module.q_proj.weight.mul_(20)
                module.k_proj.weight.mul_(-20)
    mask = SOURCE_MASK.clone()
    mask[0] = 0  # the model's entry refuses such a mask; the stacks below it must still stay finite
    encoder = model.get_encoder()(input_ids=SOURCE, attention_mask=mask, output_attentions=impl == "eager")
    decoder = model.get_decoder()(input_ids=TARGET, encoder_hidden_states=encoder.last_hidden_state,
                                  encoder_attention_mask=mask)
    assert torch.isfinite(encoder.last_hidden_state).all() and torch.isfinite(decoder.last_hidden_state).all()


# ---- bf16 autocast ------------------------------------------------------------------------------

def mixed_batch():
    torch.manual_seed(1)
    input_ids, labels = torch.randint(4, 60, (3, 7)), torch.randint(4, 60, (3, 5))
    attention_mask = torch.ones_like(input_ids)
    input_ids[0, 3:], attention_mask[0, 3:], labels[2, 2:] = 0, 0, -100
    return input_ids, attention_mask, labels


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_bf16_autocast_training_steps_and_generation_stay_finite(make_model, impl):
    """Finite under bf16 autocast; the masks take the scores' dtype (bf16 inside autocast, float32 outside)."""
    model = make_model(**MIXED, attn_implementation=impl).train()
    optimizer = create_adam(model.parameters(), lr=1e-3)
    input_ids, attention_mask, labels = mixed_batch()
    masks = []  # of encoder self-attention and encoder–decoder attention, first layer
    for attention in (model.model.encoder.layers[0].self_attn, model.model.decoder.layers[0].cross_attn):
        attention.register_forward_pre_hook(lambda _, args, kwargs: masks.append(kwargs["attention_mask"]),
                                            with_kwargs=True)
    before = model.model.shared.weight.detach().clone()
    for _ in range(3):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=BF16):
            out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        assert out.logits.dtype == BF16 and torch.isfinite(out.loss)  # the projections really ran in bf16
        out.loss.backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
        optimizer.step()
    assert not torch.equal(before, model.model.shared.weight)
    model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    for mask, dtype in zip(masks[:2] + masks[-2:], (BF16, BF16, torch.float32, torch.float32)):
        assert mask.dtype == dtype
        assert mask[0, 0, 0, 3:].eq(torch.finfo(dtype).min).all() and mask[0, 0, 0, :3].eq(0).all()
    model.eval()
    for num_beams in (1, 4):
        with torch.autocast("cpu", dtype=BF16):
            out = model.generate(input_ids=input_ids, attention_mask=attention_mask, num_beams=num_beams,
                                 min_new_tokens=5, max_new_tokens=5, output_scores=True, return_dict_in_generate=True)
        assert out.sequences.shape == (3, 6) and ((out.sequences >= 0) & (out.sequences < 60)).all()
        assert not any(torch.isnan(step).any() for step in out.scores)  # −inf is allowed (</s> too early), NaN not
        assert num_beams == 1 or torch.isfinite(out.sequences_scores).all()


@pytest.mark.slow
@pytest.mark.parametrize("dtype", HALF)
def test_the_shipped_model_in_half_precision(dtype):
    """Close to float32; greedy translations equal float32's except at near-ties within half precision's error."""
    from modeling_vaswani.tokenizer_loading import load_tokenizer

    pinned = json.loads((HUB_CARD.parent / "tests/repository/data/hub_card_pins.json").read_text(encoding="utf-8"))
    tokenizer = load_tokenizer(HUB_CARD)
    reference = VaswaniForConditionalGeneration.from_pretrained(HUB_CARD).eval()
    model = VaswaniForConditionalGeneration.from_pretrained(HUB_CARD, dtype=dtype).eval()
    sources = [pin["source"] for pin in pinned]
    batch = tokenizer(sources, return_tensors="pt", padding=True)
    decoder_input_ids = torch.tensor([[1] + tokenizer(pinned[0]["greedy"])["input_ids"][:-1]] * len(sources))
    with torch.no_grad():
        expected = reference(**batch, decoder_input_ids=decoder_input_ids).logits
        got = model(**batch, decoder_input_ids=decoder_input_ids).logits
    logit_error = (got.float() - expected).abs().max().item()
    assert got.dtype == dtype and logit_error < 0.3 * (1 if dtype == BF16 else 0.2), logit_error
    equal = 0
    for source in sources:
        encoded = tokenizer([source], return_tensors="pt")
        full = reference.generate(**encoded, num_beams=1, output_scores=True, return_dict_in_generate=True)
        a, b = full.sequences[0].tolist(), model.generate(**encoded, num_beams=1)[0].tolist()
        if a == b:
            equal += 1
            continue
        step = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        log_probs = torch.log_softmax(full.scores[step - 1][0], dim=-1)
        gap = (log_probs[a[step]] - log_probs[b[step]]).item()
        assert 0 <= gap < logit_error, (source, tokenizer.decode(a), tokenizer.decode(b), gap)
    assert equal >= 3
    check_training_step(model, dtype)
