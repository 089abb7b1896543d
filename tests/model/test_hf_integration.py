"""The model inside transformers: Auto classes, tuple outputs, shared and untied matrices, pipeline, Trainer."""

import json

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModel, AutoModelForSeq2SeqLM, pipeline
from transformers.modeling_outputs import Seq2SeqLMOutput, Seq2SeqModelOutput

from checks import SOURCE, SOURCE_MASK, TARGET
from modeling_vaswani import VaswaniForConditionalGeneration, VaswaniModel
from modeling_vaswani.model.pipeline_vaswani import VaswaniTranslationPipeline

INPUTS = dict(input_ids=SOURCE, attention_mask=SOURCE_MASK, decoder_input_ids=TARGET)


def test_auto_classes_load_save_load_round_trip(make_model, make_config, tmp_path):
    assert type(AutoModelForSeq2SeqLM.from_config(make_config())) is VaswaniForConditionalGeneration
    assert type(AutoModel.from_config(make_config())) is VaswaniModel
    full = make_model(seed=4)
    full.save_pretrained(tmp_path / "full")
    assert type(AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "full")) is VaswaniForConditionalGeneration
    base = AutoModel.from_pretrained(tmp_path / "full")
    assert type(base) is VaswaniModel and base.shared.weight is base.encoder.embed_tokens.weight
    base.save_pretrained(tmp_path / "base")  # a base model has no generation_config of its own
    again = AutoModel.from_pretrained(tmp_path / "base")
    for key, tensor in full.model.state_dict().items():
        assert torch.equal(again.state_dict()[key], tensor), key
    assert torch.equal(again(**INPUTS).last_hidden_state, full.model(**INPUTS).last_hidden_state)
    # A folder of the base model loads as the full model: the projection is the shared matrix.
    head = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "base")
    assert torch.equal(head(**INPUTS).logits, full(**INPUTS).logits)
    for folder in ("full", "base"):  # either names both model classes and the pipeline, for trust_remote_code
        config = json.loads((tmp_path / folder / "config.json").read_text())
        assert config["auto_map"] == {
            "AutoConfig": "configuration_vaswani.VaswaniConfig",
            "AutoModel": "modeling_vaswani.VaswaniModel",
            "AutoModelForSeq2SeqLM": "modeling_vaswani.VaswaniForConditionalGeneration",
        }
        assert config["custom_pipelines"] == {"translation": {
            "impl": "pipeline_vaswani.VaswaniTranslationPipeline", "pt": ["AutoModelForSeq2SeqLM"], "type": "text"}}


def test_return_dict_false_gives_the_output_as_a_tuple(make_model):
    model = make_model()
    inputs = dict(INPUTS, use_cache=False, output_hidden_states=True)
    for module, kind in ((model, Seq2SeqLMOutput), (model.model, Seq2SeqModelOutput)):
        as_object = module(**inputs)
        as_tuple = module(**inputs, return_dict=False)
        assert isinstance(as_object, kind) and type(as_tuple) is tuple
        torch.testing.assert_close(as_tuple, as_object.to_tuple(), rtol=0, atol=0)  # nested: the same lengths too
    encoder = model.get_encoder()
    hidden = encoder(input_ids=SOURCE, attention_mask=SOURCE_MASK, return_dict=False)
    assert type(hidden) is tuple and len(hidden) == 1
    decoded = model.get_decoder()(input_ids=TARGET, encoder_hidden_states=hidden[0],
                                  encoder_attention_mask=SOURCE_MASK, return_dict=False)
    assert type(decoded) is tuple and torch.equal(decoded[0], model.model(**inputs).last_hidden_state)
    model.config.return_dict = False  # applies to calls that do not say; generate asks for objects itself
    assert type(model(**inputs)) is tuple
    assert model.generate(input_ids=SOURCE, attention_mask=SOURCE_MASK, num_beams=1, max_new_tokens=3).shape == (2, 4)


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
    assert shared_groups(model) == expected and hasattr(model.model, "shared") is share  # no unused matrix
    assert model.get_input_embeddings() is (model.model.shared if share else model.model.encoder.embed_tokens)
    if not tie:  # a projection of its own starts from its own values
        assert not torch.equal(model.lm_head.weight, model.get_input_embeddings().weight)
    model.save_pretrained(tmp_path)
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        assert ("lm_head.weight" in f.keys()) is not tie
        assert not any("table" in key for key in f.keys())  # §3.5's formula is not a weight
    loaded = VaswaniForConditionalGeneration.from_pretrained(tmp_path)
    assert shared_groups(loaded) == expected
    assert (loaded.config.share_embeddings, loaded.config.tie_word_embeddings) == (share, tie)
    for key, tensor in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], tensor), key
    assert torch.equal(loaded(**INPUTS).logits, model(**INPUTS).logits)


def test_a_tied_checkpoint_loads_untied_with_the_trained_projection(make_model, tmp_path):
    tied = make_model(seed=7)
    tied.save_pretrained(tmp_path)
    untied, info = VaswaniForConditionalGeneration.from_pretrained(
        tmp_path, tie_word_embeddings=False, output_loading_info=True)
    assert not info["missing_keys"]
    assert untied.lm_head.weight is not untied.model.shared.weight
    assert torch.equal(untied.lm_head.weight, tied.lm_head.weight)
    assert torch.equal(untied(**INPUTS).logits, tied(**INPUTS).logits)
    untied.save_pretrained(tmp_path / "untied")
    assert shared_groups(VaswaniForConditionalGeneration.from_pretrained(tmp_path / "untied")) == [
        ["model.decoder.embed_tokens.weight", "model.encoder.embed_tokens.weight", "model.shared.weight"]]


@pytest.mark.parametrize("field", ["tie_word_embeddings", "share_embeddings"])
def test_a_config_changed_after_building_is_refused_before_anything_is_written(make_model, tmp_path, field):
    make_model().save_pretrained(tmp_path / "earlier")
    model = make_model(seed=1)
    setattr(model.config, field, False)
    for folder in (tmp_path / "out", tmp_path / "earlier"):
        with pytest.raises(ValueError, match=field):
            model.save_pretrained(folder)
    assert not (tmp_path / "out").exists()  # and the earlier model is kept whole
    assert VaswaniForConditionalGeneration.from_pretrained(tmp_path / "earlier").config.tie_word_embeddings


def test_translation_pipeline_from_a_model_object(translation_model, tokenizer):
    translator = pipeline("translation", model=translation_model, tokenizer=tokenizer)
    assert type(translator) is VaswaniTranslationPipeline
    result = translator("A man is riding a bicycle.", num_beams=1, max_new_tokens=5)
    ids = translation_model.generate(**tokenizer(["A man is riding a bicycle."], return_tensors="pt"),
                                     num_beams=1, max_new_tokens=5)
    assert result == [{"translation_text": tokenizer.decode(ids[0], skip_special_tokens=True).strip()}]
    # A line that shows nothing (invisible characters alone) gets an empty translation.
    texts = ["", "\u200b", "\ufeff \u2060", "\u00a0\t", "A dog."]
    results = translator(texts, num_beams=1, max_new_tokens=3)
    assert results[:4] == [[{"translation_text": ""}]] * 4 and results[4][0].keys() == {"translation_text"}


def test_trainer_predictions_leave_the_returned_cache_out(make_model, tmp_path):
    from transformers import Trainer, TrainingArguments

    model = make_model()
    trainer = Trainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True))
    inputs = dict(INPUTS, use_cache=True)
    assert model(**inputs).cache is not None  # the forward returns one
    loss, logits, labels = trainer.prediction_step(model, inputs, prediction_loss_only=False)
    assert loss is None and labels is None
    # (logits, encoder_last_hidden_state), as for transformers' seq2seq models: tensors only, no Cache.
    assert all(isinstance(t, torch.Tensor) for t in logits) and logits[0].shape == (2, 5, 40)
