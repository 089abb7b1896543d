"""The whole model of §3 (Figure 1): the shared matrix (§3.4), Table 3 sizes, the loss (§5.4), generation (§6.1)."""

import json
from contextlib import nullcontext

import pytest
import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache, StaticCache

from checks import EOS, SOURCE, SOURCE_MASK, TARGET
from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration
from modeling_vaswani.model.generation import MAX_OUTPUT_LENGTH_OFFSET
from modeling_vaswani.model.label_smoothing import label_smoothed_cross_entropy


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
        biased = VaswaniForConditionalGeneration(VaswaniConfig.from_preset(preset, vocab_size=37000,
                                                                          attention_bias=True))  # a deviation
    count = sum(p.numel() for p in model.parameters())
    assert count == analytic_count(37000, d, d_ff, 6) and abs(count - paper_count) / paper_count < 0.04
    assert sum(p.numel() for p in biased.parameters()) == analytic_count(37000, d, d_ff, 6, attention_bias=True)


def test_loss_is_label_smoothed_and_ignores_padding(tiny_model, make_model):
    labels = torch.tensor([[5, 6, EOS, -100], [7, 8, 9, EOS]])
    shifted = torch.tensor([[1, 5, 6, EOS], [1, 7, 8, 9]])  # "shifted right" (Figure 1), -100 as padding
    assert torch.equal(tiny_model.prepare_decoder_input_ids_from_labels(labels), shifted)
    out = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels, use_cache=True)
    torch.testing.assert_close(out.loss, label_smoothed_cross_entropy(out.logits, labels, 0.1))
    assert out.cache is None  # decoder inputs made from labels: training, no cache even when asked for
    explicit = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels, decoder_input_ids=shifted)
    torch.testing.assert_close(explicit.loss, out.loss)
    # What the ignored position would predict does not matter.
    other = labels.clone()
    other[0, 3] = 11
    assert not torch.allclose(tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=other).loss, out.loss)
    # Gradient accumulation: the Trainer passes the token count of the whole accumulated batch.
    summed = label_smoothed_cross_entropy(out.logits, labels, 0.1, reduction="sum")
    scaled = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels, num_items_in_batch=20)
    torch.testing.assert_close(scaled.loss, summed / 20)
    out = make_model(label_smoothing=0.0)(input_ids=SOURCE[:1], labels=labels[1:])  # ε from the config
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(out.logits[0], labels[1]))


def test_generation_config_is_the_papers_and_saved_with_only_what_was_set(tiny_model, tmp_path):
    """generate()'s fallbacks are not saved as choices; §6.1's settings survive config.json's use_cache=False."""
    config = tiny_model.generation_config
    assert config.num_beams == 4 and config.length_penalty == 0.6 and config.use_cache is True
    assert (config.eos_token_id, config.pad_token_id, config.decoder_start_token_id) == (EOS, 0, 1)
    config.update(**config._get_default_generation_params(), defaults_only=True)
    del config.max_output_length_offset  # as in files saved before the entry existed
    tiny_model.config.use_cache = False
    tiny_model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "generation_config.json").read_text())
    saved.pop("transformers_version")
    assert saved == {"num_beams": 4, "length_penalty": 0.6, "early_stopping": True, "use_cache": True,
                     "max_output_length_offset": 50, "length_penalty_formula": "gnmt", "beam_termination": "bound",
                     "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": EOS, "decoder_start_token_id": 1}
    loaded = VaswaniForConditionalGeneration.from_pretrained(tmp_path).generation_config
    assert loaded.max_length is None and loaded.num_beams == 4 and loaded.use_cache is True
    tiny_model.generation_config.no_repeat_ngram_size = 3  # a choice that differs from the fallback is kept
    tiny_model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "generation_config.json").read_text())["no_repeat_ngram_size"] == 3


def test_default_length_limit_is_input_length_plus_50(tiny_model):
    # suppress_tokens keeps the untrained model from ever ending early, so the limit is what stops it.
    def length(source=SOURCE[:1, :5], **kwargs):
        out = tiny_model.generate(input_ids=source, num_beams=1, suppress_tokens=[EOS], **kwargs)
        assert EOS not in out
        return out.shape[1]

    assert MAX_OUTPUT_LENGTH_OFFSET == 50 and length() == 1 + 5 + 50
    assert length(SOURCE, attention_mask=SOURCE_MASK) == 1 + 7 + 50  # the batch's padded length sets the limit
    assert length(max_new_tokens=3) == 4 and length(max_length=9) == 9  # an explicit limit wins
    # Checkpoints saved by Trainer evaluation in earlier versions carry generate's fallback max_length of 20:
    # no chosen limit. The offset is the generation config's; one without it gets 50.
    config = tiny_model.generation_config
    config.max_length, config.max_output_length_offset = 20, 10
    assert length() == 1 + 5 + 10
    del config.max_output_length_offset
    assert length() == 1 + 5 + 50


@pytest.mark.parametrize("name", ["cache", "past_key_values", None, "static"])
@pytest.mark.parametrize("part", ["VaswaniForConditionalGeneration", "VaswaniModel"])
def test_decoding_step_by_step_from_a_cache_equals_the_full_pass(tiny_model, part, name):
    """Via cache=, past_key_values= (warns), one forward returned (None), or a static one."""
    module = tiny_model if part == "VaswaniForConditionalGeneration" else tiny_model.model
    result = (lambda out: out.logits) if module is tiny_model else (lambda out: out.last_hidden_state)
    full = result(module(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET, use_cache=False))
    encoder_outputs = tiny_model.get_encoder()(input_ids=SOURCE, attention_mask=SOURCE_MASK)

    def new_cache():
        if name == "static":
            return EncoderDecoderCache(StaticCache(config=tiny_model.config, max_cache_len=10),
                                       StaticCache(config=tiny_model.config, max_cache_len=SOURCE.shape[1]))
        return EncoderDecoderCache(DynamicCache(), DynamicCache())

    cache, steps, start = new_cache(), [], 0
    if name is None:
        first = module(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET[:, :2], use_cache=True)
        assert isinstance(first.cache, EncoderDecoderCache) and first.cache.get_seq_length() == 2
        cache, steps, start = first.cache, [result(first)], 2
    for a, b in [(a, b) for a, b in ((0, 2), (2, 3), (3, 4), (4, 5)) if a >= start]:
        with pytest.warns(FutureWarning, match="past_key_values") if name == "past_key_values" else nullcontext():
            out = module(encoder_outputs=encoder_outputs, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET[:, a:b],
                         use_cache=True, **{"past_key_values" if name == "past_key_values" else "cache": cache})
        assert out.cache is cache
        steps.append(result(out))
    assert int(cache.get_seq_length()) == TARGET.shape[1]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)
    # A 2-D decoder mask over the tokens so far (not a static cache's slots) is accepted too.
    out = module(encoder_outputs=encoder_outputs, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET,
                 decoder_attention_mask=torch.ones_like(TARGET), cache=new_cache())
    torch.testing.assert_close(result(out), full, rtol=0, atol=1e-5)


def test_attentions_hidden_states_and_cache_only_when_asked_for(tiny_model):
    assert tiny_model.config._attn_implementation == "sdpa"
    decoder_ids = torch.tensor([[1, 5, 6], [1, 9, 10]])
    plain = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=decoder_ids, use_cache=False)
    assert plain.encoder_attentions is None and plain.decoder_hidden_states is None and plain.cache is None
    out = tiny_model(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=decoder_ids,
                     output_attentions=True, output_hidden_states=True)
    B, S, T, h, d = 2, 7, 3, 4, 16
    for tensors, shape in ((out.encoder_attentions, (B, h, S, S)), (out.decoder_attentions, (B, h, T, T)),
                           (out.cross_attentions, (B, h, T, S)), (out.encoder_hidden_states[1:], (B, S, d)),
                           (out.decoder_hidden_states[1:], (B, T, d))):
        assert [t.shape for t in tensors] == [shape] * 2
    # The eager path computed them: real weights, padding and the future get none.
    for a in out.encoder_attentions + out.decoder_attentions + out.cross_attentions:
        torch.testing.assert_close(a.sum(-1), torch.ones(a.shape[:-1]))
    assert torch.all(out.cross_attentions[0][0, :, :, 5:] == 0)
    assert torch.all(out.decoder_attentions[1].triu(diagonal=1) == 0)
    torch.testing.assert_close(out.logits, plain.logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(out.encoder_hidden_states[-1], out.encoder_last_hidden_state)
    # The logits are the last decoder state times the shared matrix (§3.4).
    torch.testing.assert_close(out.logits, out.decoder_hidden_states[-1] @ tiny_model.model.shared.weight.T)


def loss_and_grads(model, labels):
    model.zero_grad()
    loss = model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_gradient_checkpointing_gives_the_same_loss_and_gradients(make_model):
    model = make_model().train()
    labels = torch.tensor([[5, 6, EOS, -100], [7, 8, 9, EOS]])
    loss, grads = loss_and_grads(model, labels)
    model.activation_checkpointing_enable()  # as the Trainer calls it
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
