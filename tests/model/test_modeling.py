"""End-to-end tests for modeling_vaswani.model.modeling_vaswani: the whole model of §3 (Figure 1) as a
Hugging Face model — weight sharing (§3.4), Table 3 sizes, the loss (§5.4), generation (§6.1)."""

import json
from contextlib import nullcontext
import pytest
import torch
from safetensors import safe_open
from transformers import AutoModel, AutoModelForSeq2SeqLM
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration, VaswaniModel
from modeling_vaswani.model.label_smoothing import label_smoothed_cross_entropy
from modeling_vaswani.model.generation import MAX_OUTPUT_LENGTH_OFFSET
from modeling_vaswani.model.modeling_vaswani import shift_tokens_right
from modeling_vaswani.model.transformers_compat import CACHE_FIELD

EOS = 2

# A padded batch: sentence 0 is shorter than sentence 1.
SOURCE = torch.tensor([[5, 6, 7, 8, EOS, 0, 0], [9, 10, 11, 12, 13, 14, EOS]])
SOURCE_MASK = (SOURCE != 0).long()


def embedding_weights(model):
    return (model.model.shared.weight, model.model.encoder.embed_tokens.weight,
            model.model.decoder.embed_tokens.weight, model.lm_head.weight)


# ---- §3.4: one weight matrix shared three ways -------------------------------------------------

def test_three_way_sharing_is_one_tensor_and_survives_save_load(tiny_model, tmp_path):
    shared, encoder, decoder, head = embedding_weights(tiny_model)
    assert shared is encoder and shared is decoder and shared is head
    tiny_model.save_pretrained(tmp_path)
    loaded = VaswaniForConditionalGeneration.from_pretrained(tmp_path)
    shared, encoder, decoder, head = embedding_weights(loaded)
    assert shared is encoder and shared is decoder and shared is head
    torch.testing.assert_close(shared, tiny_model.model.shared.weight, rtol=0, atol=0)
    # A gradient step on the loaded model moves all four views together.
    with torch.no_grad():
        head[7].add_(1.0)
    assert torch.equal(encoder[7], head[7]) and torch.equal(decoder[7], head[7])


def test_unshared_embeddings_are_distinct_tensors(make_model):
    model = make_model(share_embeddings=False)
    encoder, decoder, head = (model.model.encoder.embed_tokens.weight, model.model.decoder.embed_tokens.weight,
                              model.lm_head.weight)
    assert not hasattr(model.model, "shared")  # no unused matrix left behind
    assert model.get_input_embeddings().weight is encoder
    assert encoder is not decoder and encoder is not head and decoder is not head
    assert encoder.data_ptr() != decoder.data_ptr() != head.data_ptr()
    assert not torch.equal(encoder, decoder)


def test_embeddings_are_scaled_and_logits_use_the_shared_matrix(tiny_model):
    ids = torch.tensor([[5, 6, EOS]])
    out = tiny_model(input_ids=ids, decoder_input_ids=torch.tensor([[1, 9]]), output_hidden_states=True)
    torch.testing.assert_close(out.logits, out.decoder_hidden_states[-1] @ tiny_model.model.shared.weight.T)


# ---- Table 3: parameter counts --------------------------------------------------------------------

def analytic_count(V, d, d_ff, N, attention_bias=False):
    attention = 4 * (d * d + (d if attention_bias else 0))  # W^Q, W^K, W^V, W^O (h · d_k = d); §3.2.2: no biases
    ffn = d * d_ff + d_ff + d_ff * d + d
    layer_norm = 2 * d
    encoder_layer = attention + ffn + 2 * layer_norm
    decoder_layer = 2 * attention + ffn + 3 * layer_norm
    return V * d + N * encoder_layer + N * decoder_layer  # one shared embedding, no output bias


@pytest.mark.parametrize("preset, paper_count, d, d_ff", [("base", 65e6, 512, 2048), ("big", 213e6, 1024, 4096)])
def test_parameter_counts_match_table_3(preset, paper_count, d, d_ff):
    with torch.device("meta"):  # sizes only, no memory, no initialisation cost
        model = VaswaniForConditionalGeneration(VaswaniConfig.from_preset(preset, vocab_size=37000))
    assert model.lm_head.weight is model.model.shared.weight
    assert model.config.attention_bias is False  # §3.2.2's projections are matrices
    count = sum(p.numel() for p in model.parameters())
    assert count == analytic_count(37000, d, d_ff, 6)
    assert abs(count - paper_count) / paper_count < 0.04
    # The deviation adds 4·d_model per attention (3 attentions per layer pair): a rounding error here.
    with torch.device("meta"):
        biased = VaswaniForConditionalGeneration(VaswaniConfig.from_preset(preset, vocab_size=37000,
                                                                          attention_bias=True))
    assert sum(p.numel() for p in biased.parameters()) == analytic_count(37000, d, d_ff, 6, attention_bias=True)


# ---- §5.4 loss and teacher forcing ----------------------------------------------------------------

def test_prepare_decoder_input_ids_from_labels(tiny_model):
    labels = torch.tensor([[5, 6, EOS, -100, -100], [7, 8, 9, 10, EOS]])
    expected = torch.tensor([[1, 5, 6, EOS, 0], [1, 7, 8, 9, 10]])
    assert torch.equal(tiny_model.prepare_decoder_input_ids_from_labels(labels), expected)
    assert torch.equal(shift_tokens_right(labels, 0, 1), expected)


def test_loss_is_label_smoothed_and_ignores_padding(tiny_model):
    labels = torch.tensor([[5, 6, EOS, -100], [7, 8, 9, EOS]])
    out = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels)
    assert out.logits.shape == (2, 4, 40)
    expected = label_smoothed_cross_entropy(out.logits, labels, 0.1)
    torch.testing.assert_close(out.loss, expected)
    # Labels → decoder inputs inside the model equals passing them explicitly.
    explicit = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels,
                          decoder_input_ids=tiny_model.prepare_decoder_input_ids_from_labels(labels))
    torch.testing.assert_close(explicit.loss, out.loss)
    # What the ignored position would predict does not matter.
    other = labels.clone()
    other[0, 3] = 11
    assert not torch.allclose(tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=other).loss, out.loss)
    # Gradient accumulation: the Trainer passes the token count of the whole accumulated batch.
    summed = label_smoothed_cross_entropy(out.logits, labels, 0.1, reduction="sum")
    scaled = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels, num_items_in_batch=20)
    torch.testing.assert_close(scaled.loss, summed / 20)


def test_loss_uses_config_label_smoothing(make_model):
    model = make_model(label_smoothing=0.0)
    labels = torch.tensor([[5, 6, EOS]])
    out = model(input_ids=SOURCE[:1], labels=labels)
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(out.logits[0], labels[0]))


# ---- §6.1 generation ----------------------------------------------------------------------------

def test_generation_config_is_the_papers(tiny_model, tmp_path, make_model):
    for config in (tiny_model.generation_config, make_model().generation_config):
        assert config.num_beams == 4 and config.length_penalty == 0.6 and config.use_cache is True
        assert (config.eos_token_id, config.pad_token_id, config.decoder_start_token_id) == (EOS, 0, 1)
    tiny_model.config.use_cache = False  # what the Trainer writes into config.json
    try:
        tiny_model.save_pretrained(tmp_path)
    finally:
        tiny_model.config.use_cache = True
    loaded = VaswaniForConditionalGeneration.from_pretrained(tmp_path)
    assert loaded.generation_config.num_beams == 4 and loaded.generation_config.length_penalty == 0.6
    assert loaded.generation_config.use_cache is True


def test_saved_generation_config_lists_only_what_was_set(tiny_model, tmp_path):
    """generate()'s fallbacks written into the config (as Trainer evaluation once did) are not saved as choices."""
    generation_config = tiny_model.generation_config
    generation_config.update(**generation_config._get_default_generation_params(), defaults_only=True)
    del tiny_model.generation_config.max_output_length_offset  # as in files saved before the entry existed
    assert tiny_model.generation_config.max_length == 20 and tiny_model.generation_config.top_k == 50
    tiny_model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "generation_config.json").read_text())
    saved.pop("transformers_version")
    assert saved == {"num_beams": 4, "length_penalty": 0.6, "early_stopping": True, "use_cache": True,
                     "max_output_length_offset": 50, "length_penalty_formula": "gnmt", "beam_termination": "bound",
                     "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": EOS, "decoder_start_token_id": 1}
    loaded = VaswaniForConditionalGeneration.from_pretrained(tmp_path)
    assert loaded.generation_config.max_length is None and loaded.generation_config.num_beams == 4
    # An explicit choice that differs from the fallback is kept.
    tiny_model.generation_config.no_repeat_ngram_size = 3
    try:
        tiny_model.save_pretrained(tmp_path)
    finally:
        tiny_model.generation_config.no_repeat_ngram_size = None
    assert json.loads((tmp_path / "generation_config.json").read_text())["no_repeat_ngram_size"] == 3


@pytest.mark.parametrize("num_beams", [1, 4])
def test_cached_and_uncached_generation_agree(tiny_model, num_beams):
    kwargs = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=num_beams, do_sample=False,
                  max_new_tokens=12)
    cached = tiny_model.generate(**kwargs, use_cache=True)
    uncached = tiny_model.generate(**kwargs, use_cache=False)
    assert cached.shape[1] > 2
    assert torch.equal(cached, uncached)


def test_sentence_alone_and_in_padded_batch_decode_identically(tiny_model):
    kwargs = dict(num_beams=1, do_sample=False, max_new_tokens=10, output_logits=True, return_dict_in_generate=True)
    alone = tiny_model.generate(input_ids=SOURCE[:1, :5], **kwargs)
    batch = tiny_model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, **kwargs)
    n = alone.sequences.shape[1]
    assert n > 2
    assert torch.equal(batch.sequences[0, :n], alone.sequences[0])
    for step_alone, step_batch in zip(alone.logits, batch.logits):
        torch.testing.assert_close(step_batch[0], step_alone[0], rtol=0, atol=1e-5)
    beams = dict(num_beams=4, max_new_tokens=10)
    beam_alone = tiny_model.generate(input_ids=SOURCE[:1, :5], **beams)
    beam_batch = tiny_model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, **beams)
    m = beam_alone.shape[1]
    assert torch.equal(beam_batch[0, :m], beam_alone[0])
    assert torch.all(beam_batch[0, m:] == 0)


def test_default_length_limit_is_input_length_plus_50(tiny_model):
    source = SOURCE[:1, :5]
    # suppress_tokens keeps the untrained model from ever ending early, so the limit is what stops it.
    out = tiny_model.generate(input_ids=source, num_beams=1, suppress_tokens=[EOS])
    assert MAX_OUTPUT_LENGTH_OFFSET == 50
    assert out.shape == (1, 1 + 5 + 50)
    assert EOS not in out
    # The padded length of the batch sets the limit for the batch.
    out = tiny_model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=1, suppress_tokens=[EOS])
    assert out.shape == (2, 1 + 7 + 50)
    # An explicit limit wins.
    assert tiny_model.generate(input_ids=source, num_beams=1, suppress_tokens=[EOS], max_new_tokens=3).shape == (1, 4)
    assert tiny_model.generate(input_ids=source, num_beams=1, suppress_tokens=[EOS], max_length=9).shape == (1, 9)
    # Checkpoints saved during Trainer evaluation by earlier versions carry generate's fallback
    # max_length of 20: that is still no chosen limit, and input length + 50 applies.
    tiny_model.generation_config.max_length = 20
    try:
        assert tiny_model.generate(input_ids=source, num_beams=1, suppress_tokens=[EOS]).shape == (1, 1 + 5 + 50)
    finally:
        tiny_model.generation_config.max_length = None
    # The offset is the generation config's (saved in generation_config.json); one without it gets 50.
    assert tiny_model.generation_config.max_output_length_offset == 50
    tiny_model.generation_config.max_output_length_offset = 10
    try:
        assert tiny_model.generate(input_ids=source, num_beams=1, suppress_tokens=[EOS]).shape == (1, 1 + 5 + 10)
        del tiny_model.generation_config.max_output_length_offset
        assert tiny_model.generate(input_ids=source, num_beams=1, suppress_tokens=[EOS]).shape == (1, 1 + 5 + 50)
    finally:
        tiny_model.generation_config.max_output_length_offset = 50


def test_sampling_runs_and_is_reproducible_with_a_seed(tiny_model):
    kwargs = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, do_sample=True, num_beams=1, max_new_tokens=8)
    torch.manual_seed(0)
    first = tiny_model.generate(**kwargs, top_k=5)
    torch.manual_seed(0)
    again = tiny_model.generate(**kwargs, top_k=5)
    torch.manual_seed(1)
    other = tiny_model.generate(**kwargs, top_k=5)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    # top_k = 1 leaves a single candidate: sampling then is greedy search.
    greedy = tiny_model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=1, max_new_tokens=8)
    assert torch.equal(tiny_model.generate(**kwargs, top_k=1), greedy)


@pytest.mark.parametrize("part", ["VaswaniForConditionalGeneration", "VaswaniModel"])
def test_forward_accepts_cache_under_both_names(tiny_model, part):
    # transformers 5.24 hands the cache over as cache=, earlier 5.x as past_key_values=.
    module = tiny_model if part == "VaswaniForConditionalGeneration" else tiny_model.model
    result = (lambda out: out.logits) if module is tiny_model else (lambda out: out.last_hidden_state)
    decoder_ids = torch.tensor([[1, 5, 6, 7], [1, 9, 10, 11]])
    full = result(module(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=decoder_ids, use_cache=False))
    encoder_outputs = tiny_model.get_encoder()(input_ids=SOURCE, attention_mask=SOURCE_MASK)
    for name in ("cache", "past_key_values"):
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
        steps = []
        for t in range(4):
            # The old name still works; where transformers says `cache`, it warns as transformers' models do.
            legacy = name == "past_key_values" and CACHE_FIELD == "cache"
            with pytest.warns(FutureWarning, match="`past_key_values` is deprecated") if legacy else nullcontext():
                out = module(encoder_outputs=encoder_outputs, attention_mask=SOURCE_MASK,
                             decoder_input_ids=decoder_ids[:, t:t + 1], use_cache=True, **{name: cache})
            steps.append(result(out))
        assert cache.get_seq_length() == 4, name
        torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)
        returned = out.cache if "cache" in out else out.past_key_values
        assert returned is cache


# ---- outputs, training helpers, serialization -----------------------------------------------------

def test_attentions_and_hidden_states(tiny_model):
    assert tiny_model.config._attn_implementation == "sdpa"
    decoder_ids = torch.tensor([[1, 5, 6], [1, 9, 10]])
    plain = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=decoder_ids)
    assert plain.encoder_attentions is None and plain.decoder_hidden_states is None
    out = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=decoder_ids,
                     output_attentions=True, output_hidden_states=True)
    B, S, T, h, d = 2, 7, 3, 4, 16
    assert len(out.encoder_attentions) == 2 and all(a.shape == (B, h, S, S) for a in out.encoder_attentions)
    assert len(out.decoder_attentions) == 2 and all(a.shape == (B, h, T, T) for a in out.decoder_attentions)
    assert len(out.cross_attentions) == 2 and all(a.shape == (B, h, T, S) for a in out.cross_attentions)
    assert len(out.encoder_hidden_states) == 3 and all(x.shape == (B, S, d) for x in out.encoder_hidden_states)
    assert len(out.decoder_hidden_states) == 3 and all(x.shape == (B, T, d) for x in out.decoder_hidden_states)
    # The eager path computed them: real weights, padding and the future get none.
    for a in out.encoder_attentions + out.decoder_attentions + out.cross_attentions:
        torch.testing.assert_close(a.sum(-1), torch.ones(a.shape[:-1]))
    assert torch.all(out.cross_attentions[0][0, :, :, 5:] == 0)
    assert torch.all(out.decoder_attentions[1].triu(diagonal=1) == 0)
    torch.testing.assert_close(out.logits, plain.logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(out.encoder_hidden_states[-1], out.encoder_last_hidden_state)


def loss_and_grads(model, labels):
    model.zero_grad()
    loss = model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


# The Trainer calls activation_checkpointing_enable; gradient_checkpointing_enable is its older name.
@pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")
@pytest.mark.parametrize("method", ["gradient_checkpointing_enable", "activation_checkpointing_enable"])
def test_gradient_checkpointing_gives_the_same_loss_and_gradients(method, make_model):
    model = make_model().train()
    labels = torch.tensor([[5, 6, EOS, -100], [7, 8, 9, EOS]])
    loss, grads = loss_and_grads(model, labels)
    getattr(model, method)()
    layers = list(model.model.encoder.layers) + list(model.model.decoder.layers)
    calls = []
    for layer in layers:
        assert layer.gradient_checkpointing
        inner = layer._gradient_checkpointing_func
        layer._gradient_checkpointing_func = lambda *a, _inner=inner, **k: calls.append(1) or _inner(*a, **k)
    checkpointed_loss, checkpointed_grads = loss_and_grads(model, labels)
    assert len(calls) == len(layers)  # every layer really went through the checkpoint
    torch.testing.assert_close(checkpointed_loss, loss, rtol=0, atol=1e-6)
    assert checkpointed_grads.keys() == grads.keys()
    for name in grads:
        torch.testing.assert_close(checkpointed_grads[name], grads[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize(
    "overrides", [{}, dict(share_embeddings=False, positional_encoding="learned", norm_first=True)]
)
def test_save_load_round_trip_is_bit_exact(tmp_path, overrides, make_model):
    model = make_model(seed=3, **overrides)
    model.save_pretrained(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert not any("table" in key for key in f.keys())  # §3.5's formula is not a weight
    loaded = VaswaniForConditionalGeneration.from_pretrained(tmp_path).eval()
    want, got = model.state_dict(), loaded.state_dict()
    assert want.keys() == got.keys()
    for key in want:
        assert torch.equal(want[key], got[key]), key
    decoder_ids = torch.tensor([[1, 5, 6], [1, 9, 10]])
    a = model(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=decoder_ids).logits
    b = loaded(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=decoder_ids).logits
    assert torch.equal(a, b)
    assert loaded.config.to_diff_dict().keys() >= {"d_model", "num_heads"}
    assert all(getattr(loaded.config, k) == v for k, v in overrides.items())


def test_auto_classes_resolve_ours(tmp_path, make_model, tiny_config):
    assert type(AutoModelForSeq2SeqLM.from_config(tiny_config)) is VaswaniForConditionalGeneration
    base = AutoModel.from_config(tiny_config)
    assert type(base) is VaswaniModel
    out = base(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=torch.tensor([[1, 5], [1, 6]]))
    assert out.last_hidden_state.shape == (2, 2, 16) and out.encoder_last_hidden_state.shape == (2, 7, 16)
    make_model().save_pretrained(tmp_path)
    assert type(AutoModelForSeq2SeqLM.from_pretrained(tmp_path)) is VaswaniForConditionalGeneration
    assert type(AutoModel.from_pretrained(tmp_path)) is VaswaniModel

