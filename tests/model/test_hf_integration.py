"""The model behaves like a model inside transformers: AutoModel round trips, `auto_map`, a cache
returned by forward, tuple outputs, `get_encoder(modality)`, untied projections, the pipeline
registry. Hugging Face glue, not from the paper; the paper's own sharing (§3.4) is the default."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModel, AutoModelForSeq2SeqLM, pipeline
from transformers.cache_utils import EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput

from modeling_vaswani import VaswaniConfig, VaswaniForConditionalGeneration, VaswaniModel
from modeling_vaswani.model.pipeline_vaswani import VaswaniTranslationPipeline
from modeling_vaswani.model.transformers_compat import cache_field

EOS = 2
SOURCE = torch.tensor([[5, 6, 7, 8, EOS, 0, 0], [9, 10, 11, 12, 13, 14, EOS]])
SOURCE_MASK = (SOURCE != 0).long()
TARGET = torch.tensor([[1, 5, 6, 7, 8], [1, 9, 10, 11, 12]])


def tensors_equal(a, b):
    return torch.equal(a, b) if isinstance(a, torch.Tensor) else all(tensors_equal(x, y) for x, y in zip(a, b))


# ---- AutoModel: load → save → load, and auto_map ------------------------------------------------

def test_automodel_load_save_load_round_trip(make_model, tmp_path):
    full = make_model(seed=4)
    full.save_pretrained(tmp_path / "full")
    base = AutoModel.from_pretrained(tmp_path / "full")
    assert type(base) is VaswaniModel and base.shared.weight is base.encoder.embed_tokens.weight
    base.save_pretrained(tmp_path / "base")  # a base model has no generation_config of its own
    again = AutoModel.from_pretrained(tmp_path / "base")
    for key, tensor in full.model.state_dict().items():
        assert torch.equal(again.state_dict()[key], tensor), key
    inputs = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET)
    assert torch.equal(again(**inputs).last_hidden_state, full.model(**inputs).last_hidden_state)
    # A folder of the base model loads as the full model: the projection is the shared matrix.
    head = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "base")
    assert torch.equal(head(**inputs).logits, full(**inputs).logits)


@pytest.mark.parametrize("saved", ["VaswaniForConditionalGeneration", "VaswaniModel"])
def test_auto_map_names_both_model_classes(make_model, tmp_path, saved):
    model = make_model()
    (model if saved == "VaswaniForConditionalGeneration" else model.model).save_pretrained(tmp_path)
    auto_map = json.loads((tmp_path / "config.json").read_text())["auto_map"]
    assert auto_map == {
        "AutoConfig": "configuration_vaswani.VaswaniConfig",
        "AutoModel": "modeling_vaswani.VaswaniModel",
        "AutoModelForSeq2SeqLM": "modeling_vaswani.VaswaniForConditionalGeneration",
    }


CLEAN_AUTOMODEL = """
import json, sys
sys.modules["modeling_vaswani"] = None
import torch
from transformers import AutoModel
model = AutoModel.from_pretrained(".", trust_remote_code=True).eval()
ids = torch.tensor([[5, 6, 7, 8, 2]])
out = model(input_ids=ids, decoder_input_ids=torch.tensor([[1, 5, 6]]))
print(json.dumps({"class": type(model).__name__, "module": type(model).__module__,
                  "hidden": out.last_hidden_state.tolist(),
                  "imported": [n for n, m in sys.modules.items() if n.startswith("modeling_vaswani") and m]}))
"""


@pytest.mark.slow
def test_automodel_with_remote_code_where_the_package_is_absent(make_model, tmp_path, repo_root):
    model = make_model(seed=5)
    model.save_pretrained(tmp_path / "saved")
    folder = shutil.copytree(tmp_path / "saved", tmp_path / "copy")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    # -I: isolated mode, neither the working directory nor PYTHONPATH is on sys.path.
    done = subprocess.run([sys.executable, "-I", "-c", CLEAN_AUTOMODEL], cwd=folder, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["class"] == "VaswaniModel" and report["module"].startswith("transformers_modules.")
    assert report["imported"] == [] and str(repo_root) not in done.stdout
    expected = model.model(input_ids=torch.tensor([[5, 6, 7, 8, 2]]), decoder_input_ids=torch.tensor([[1, 5, 6]]))
    torch.testing.assert_close(torch.tensor(report["hidden"]), expected.last_hidden_state, rtol=0, atol=1e-6)


# ---- forward(use_cache=True) returns a cache to continue from -----------------------------------

@pytest.mark.parametrize("part", ["VaswaniForConditionalGeneration", "VaswaniModel"])
def test_forward_creates_a_cache_and_continues_from_it_by_hand(make_model, part):
    model = make_model()
    module = model if part == "VaswaniForConditionalGeneration" else model.model
    result = (lambda out: out.logits) if module is model else (lambda out: out.last_hidden_state)
    full = result(module(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET, use_cache=False))
    first = module(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET[:, :2], use_cache=True)
    assert isinstance(first.cache, EncoderDecoderCache) and first.cache.get_seq_length() == 2
    steps, cache = [result(first)], first.cache
    encoder_outputs = BaseModelOutput(last_hidden_state=first.encoder_last_hidden_state)
    for t in range(2, TARGET.shape[1]):
        out = module(encoder_outputs=encoder_outputs, attention_mask=SOURCE_MASK,
                     decoder_input_ids=TARGET[:, t:t + 1], cache=cache, use_cache=True)
        assert out.cache is cache
        steps.append(result(out))
    assert cache.get_seq_length() == TARGET.shape[1]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=0, atol=1e-5)


def test_greedy_generate_continues_from_the_cache_it_returned(make_model):
    """Four tokens in one call equal three, then one more from the returned cache and sequences (with
    their full-length decoder mask, which is how generate tells the cached prefix from the new tokens)."""
    model = make_model()
    settings = dict(num_beams=1, do_sample=False, eos_token_id=-1, use_cache=True, return_dict_in_generate=True,
                    output_scores=True)
    whole = model.generate(SOURCE, attention_mask=SOURCE_MASK, max_new_tokens=4, **settings)
    first = model.generate(SOURCE, attention_mask=SOURCE_MASK, max_new_tokens=3, **settings)
    more = model.generate(SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=first.sequences,
                          decoder_attention_mask=torch.ones_like(first.sequences), **cache_field(first.past_key_values),
                          max_new_tokens=1, **settings)
    assert torch.equal(more.sequences, whole.sequences)
    torch.testing.assert_close(torch.stack(first.scores + more.scores), torch.stack(whole.scores), rtol=0, atol=1e-5)
    for ours, theirs in zip(more.past_key_values.self_attention_cache.layers,
                            whole.past_key_values.self_attention_cache.layers):
        torch.testing.assert_close(ours.keys, theirs.keys, rtol=0, atol=1e-5)


def test_no_cache_without_use_cache_or_with_labels(make_model):
    model = make_model()
    assert model(input_ids=SOURCE, decoder_input_ids=TARGET, use_cache=False).cache is None
    labels = TARGET[:, 1:]
    assert model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=labels, use_cache=True).cache is None


# ---- return_dict=False: tuples, as transformers' models return them ------------------------------

def test_return_dict_false_gives_the_output_as_a_tuple(make_model):
    model = make_model()
    inputs = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET, use_cache=False,
                  output_hidden_states=True)
    for module, kind in ((model, Seq2SeqLMOutput), (model.model, Seq2SeqModelOutput)):
        as_object = module(**inputs)
        as_tuple = module(**inputs, return_dict=False)
        assert isinstance(as_object, kind) and type(as_tuple) is tuple
        assert len(as_tuple) == len(as_object.to_tuple()) and tensors_equal(as_tuple, as_object.to_tuple())
    with_loss = model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=TARGET[:, 1:], return_dict=False)
    assert with_loss[0].dim() == 0 and with_loss[1].shape == (2, 4, 40)  # (loss, logits, ...)
    encoder = model.get_encoder()
    hidden = encoder(input_ids=SOURCE, attention_mask=SOURCE_MASK, return_dict=False)
    assert type(hidden) is tuple and len(hidden) == 1
    decoded = model.get_decoder()(input_ids=TARGET, encoder_hidden_states=hidden[0],
                                  encoder_attention_mask=SOURCE_MASK, return_dict=False)
    assert type(decoded) is tuple and torch.equal(decoded[0], model.model(**inputs).last_hidden_state)


def test_config_return_dict_false_applies_to_calls_that_do_not_say(make_model):
    model = make_model()
    model.config.return_dict = False
    out = model(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET, use_cache=False)
    assert type(out) is tuple and out[0].shape == (2, 5, 40)
    generated = model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=1, max_new_tokens=3)
    assert generated.shape == (2, 4)  # generate asks for objects itself


# ---- get_encoder(modality) ------------------------------------------------------------------------

def test_get_encoder_takes_the_modality_argument(make_model):
    from transformers.exporters.utils import is_multimodal

    model = make_model()
    for module in (model, model.model):
        assert module.get_encoder() is model.model.encoder
        assert module.get_encoder(modality=None) is model.model.encoder
        assert module.get_encoder(modality="image") is module  # transformers' "no such encoder"
        assert module.get_encoder(modality="audio") is module
    assert not is_multimodal(model)  # transformers' export helpers ask for image and audio encoders


# ---- untying the projection (Deviation from §3.4) --------------------------------------------------

def shared_groups(model):
    groups = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(parameter), set()).add(name)
    return sorted(sorted(group) for group in groups.values() if len(group) > 1)


@pytest.mark.parametrize("share, tie, expected", [
    (True, True, [["lm_head.weight", "model.decoder.embed_tokens.weight", "model.encoder.embed_tokens.weight",
                   "model.shared.weight"]]),
    (True, False, [["model.decoder.embed_tokens.weight", "model.encoder.embed_tokens.weight", "model.shared.weight"]]),
    (False, True, [["lm_head.weight", "model.decoder.embed_tokens.weight"]]),
    (False, False, []),
])
def test_sharing_follows_share_embeddings_and_tie_word_embeddings_through_save_and_load(
        make_model, tmp_path, share, tie, expected):
    model = make_model(seed=6, share_embeddings=share, tie_word_embeddings=tie)
    assert shared_groups(model) == expected
    if not tie:  # a projection of its own starts from its own values
        assert not torch.equal(model.lm_head.weight, model.get_input_embeddings().weight)
    model.save_pretrained(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert ("lm_head.weight" in f.keys()) is not tie
    loaded = VaswaniForConditionalGeneration.from_pretrained(tmp_path)
    assert shared_groups(loaded) == expected
    assert (loaded.config.share_embeddings, loaded.config.tie_word_embeddings) == (share, tie)
    for key, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], tensor), key
    inputs = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET)
    assert torch.equal(loaded(**inputs).logits, model(**inputs).logits)


def test_an_untied_projection_trains_apart_from_the_embeddings(make_model):
    model = make_model(tie_word_embeddings=False).train()
    embedding, head = model.model.shared.weight.detach().clone(), model.lm_head.weight.detach().clone()
    model(input_ids=SOURCE, attention_mask=SOURCE_MASK, labels=TARGET[:, 1:]).loss.backward()
    with torch.no_grad():
        model.lm_head.weight -= 0.1 * model.lm_head.weight.grad
    assert not torch.equal(model.lm_head.weight, head) and torch.equal(model.model.shared.weight, embedding)


def test_a_tied_checkpoint_loads_untied_with_the_trained_projection(make_model, tmp_path):
    tied = make_model(seed=7)
    tied.save_pretrained(tmp_path)
    untied, info = VaswaniForConditionalGeneration.from_pretrained(
        tmp_path, tie_word_embeddings=False, output_loading_info=True)
    assert info["missing_keys"] == [] or not info["missing_keys"]
    assert untied.lm_head.weight is not untied.model.shared.weight
    assert torch.equal(untied.lm_head.weight, tied.lm_head.weight)
    inputs = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET)
    assert torch.equal(untied(**inputs).logits, tied(**inputs).logits)
    untied.save_pretrained(tmp_path / "untied")
    assert shared_groups(VaswaniForConditionalGeneration.from_pretrained(tmp_path / "untied")) == [
        ["model.decoder.embed_tokens.weight", "model.encoder.embed_tokens.weight", "model.shared.weight"]]


@pytest.mark.parametrize("field, value", [("tie_word_embeddings", False), ("share_embeddings", False)])
def test_a_config_changed_after_building_is_refused_before_anything_is_written(make_model, tmp_path, field, value):
    model = make_model()
    setattr(model.config, field, value)
    with pytest.raises(ValueError, match="changed after the model was built") as refused:
        model.save_pretrained(tmp_path / "out")
    assert field in str(refused.value)
    assert not (tmp_path / "out").exists()


def test_an_earlier_model_in_the_folder_is_kept_when_the_save_is_refused(make_model, tmp_path):
    make_model().save_pretrained(tmp_path)
    model = make_model(seed=1)
    model.config.tie_word_embeddings = False
    with pytest.raises(ValueError):
        model.save_pretrained(tmp_path)
    assert VaswaniForConditionalGeneration.from_pretrained(tmp_path).config.tie_word_embeddings


# ---- pipeline() from a model object ---------------------------------------------------------------

def test_translation_pipeline_from_a_model_object(translation_model, tokenizer):
    translator = pipeline("translation", model=translation_model, tokenizer=tokenizer)
    assert type(translator) is VaswaniTranslationPipeline
    result = translator("A man is riding a bicycle.", num_beams=1, max_new_tokens=5)
    ids = translation_model.generate(**tokenizer(["A man is riding a bicycle."], return_tensors="pt"),
                                     num_beams=1, max_new_tokens=5)
    assert result == [{"translation_text": tokenizer.decode(ids[0], skip_special_tokens=True).strip()}]
    assert translator(["A dog.", "Two dogs."], num_beams=1, max_new_tokens=3)[1][0].keys() == {"translation_text"}


@pytest.mark.parametrize("text", ["", "\u200b", "\ufeff \u2060", "\u00a0\t"])
def test_translation_pipeline_gives_a_line_that_shows_nothing_an_empty_translation(translation_model, tokenizer, text):
    translator = pipeline("translation", model=translation_model, tokenizer=tokenizer)
    assert translator([text, "A dog."], num_beams=1, max_new_tokens=3)[0] == [{"translation_text": ""}]


def test_translation_pipeline_from_a_folder_with_remote_code(saved_model_dir):
    translator = pipeline("translation", model=str(saved_model_dir), trust_remote_code=True, dtype=torch.bfloat16)
    assert translator.model.dtype == torch.bfloat16
    assert list(translator("A man is riding a bicycle.", num_beams=1, max_new_tokens=4)[0]) == ["translation_text"]


def test_trainer_predictions_leave_the_returned_cache_out(make_model, tmp_path):
    from transformers import Trainer, TrainingArguments

    model = make_model()
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True))
    inputs = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET, use_cache=True)
    assert model(**inputs).cache is not None  # the forward returns one
    loss, logits, labels = trainer.prediction_step(model, inputs, prediction_loss_only=False)
    assert loss is None and labels is None
    # (logits, encoder_last_hidden_state), as for transformers' seq2seq models: tensors only, no Cache.
    assert all(isinstance(t, torch.Tensor) for t in logits) and logits[0].shape == (2, 5, 40)
