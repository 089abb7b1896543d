"""CTranslate2 conversion and engine on tiny models (the paper's, every mapped option): our numbers in float32."""

import importlib.util
import json
import sys

import pytest
import torch

from checks import assert_error_line, assert_names
from marian_models import SENTENCES
from modeling_vaswani.conversion.ctranslate2 import (CTranslate2ConversionError, CTranslate2NotInstalledError,
                                                     check_convertible, convert_ctranslate2, import_ctranslate2)
from modeling_vaswani.evaluation.translation import translate
from modeling_vaswani.model.generation import TRANSFORMERS_BEAM_SEARCH

requires_ctranslate2 = pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None,
                                          reason="needs ctranslate2 (pip install ctranslate2)")
# The engine says once that CTranslate2's beam search is transformers' rule, not the GNMT one our
# generation config names; the tests compare with ours decoding by that rule.
pytestmark = pytest.mark.filterwarnings("ignore:This model decodes with:UserWarning")

TARGETS = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee.",
           "Ein kleines Mädchen in einem rosa Kleid steigt die Treppe hinauf.", "Leute."]
VARIANTS = {
    "paper": {},
    "options": dict(norm_first=True, positional_encoding="learned", activation_function="swish",
                    scale_embedding=False, attention_bias=True, final_logits_bias=True, layer_norm_eps=1e-5,
                    share_embeddings=False, tie_word_embeddings=True),  # each stack its own embedding
}


@pytest.fixture(scope="module", params=list(VARIANTS))
def saved_pair(request, tmp_path_factory, make_model, trained_tokenizer):
    pytest.importorskip("ctranslate2")
    model = make_model(seed=1, vocab_size=len(trained_tokenizer), **VARIANTS[request.param])
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():  # biases start at zero: give them values, so that mapping them matters
        for name, tensor in model.named_parameters():
            if name.endswith("_proj.bias"):
                tensor.normal_(0.0, 0.5, generator=generator)
        if model.final_logits_bias is not None:
            model.final_logits_bias.normal_(0.0, 0.5, generator=generator)
    folder = tmp_path_factory.mktemp(f"ct2-{request.param}")
    model.save_pretrained(folder / "ours")
    trained_tokenizer.save_pretrained(folder / "ours")
    convert_ctranslate2(folder / "ours", folder / "ct2")
    return model.eval(), trained_tokenizer, folder / "ct2"


def load_engine(folder, threads=1):
    from modeling_vaswani.evaluation.ctranslate2_engine import load_ctranslate2_translator

    return load_ctranslate2_translator(folder, device="cpu", threads=threads)


@requires_ctranslate2
def test_token_log_probabilities_equal_ours(saved_pair):
    model, tokenizer, folder = saved_pair
    engine, _ = load_engine(folder)
    sources = [tokenizer.convert_ids_to_tokens(ids) for ids in tokenizer(SENTENCES)["input_ids"]]
    target_ids = tokenizer(TARGETS, add_special_tokens=False)["input_ids"]
    results = engine.translator.score_batch(sources, [tokenizer.convert_ids_to_tokens(ids) for ids in target_ids])
    for sentence, ids, result in zip(SENTENCES, target_ids, results):
        encoded = tokenizer([sentence], return_tensors="pt")
        decoder_input_ids = torch.tensor([[model.config.decoder_start_token_id] + ids])
        with torch.no_grad():
            logits = model(**encoded, decoder_input_ids=decoder_input_ids).logits[0]
        expected = ids + [model.config.eos_token_id]  # CTranslate2 scores </s> too
        ours = torch.log_softmax(logits, dim=-1)[torch.arange(len(expected)), torch.tensor(expected)]
        assert result.tokens == tokenizer.convert_ids_to_tokens(expected)
        torch.testing.assert_close(torch.tensor(result.log_probs), ours, atol=1e-4, rtol=0)


@requires_ctranslate2
@pytest.mark.parametrize("num_beams", [1, 4])
def test_greedy_and_beam_outputs_equal_ours(saved_pair, num_beams):
    model, tokenizer, folder = saved_pair
    engine, _ = load_engine(folder)
    encoded = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        ours = model.generate(**encoded, num_beams=num_beams, **TRANSFORMERS_BEAM_SEARCH)
    theirs = engine.generate(**encoded, num_beams=num_beams)
    eos = model.config.eos_token_id
    until_eos = lambda rows: [row[:row.index(eos) + 1] if eos in row else row for row in rows.tolist()]  # noqa: E731
    assert until_eos(theirs) == until_eos(ours)
    # The whole pipeline (sorting, batching, detokenizing) gives our strings too.
    assert translate(engine, tokenizer, SENTENCES, batch_size=3, num_beams=num_beams) == translate(
        model, tokenizer, SENTENCES, batch_size=3, num_beams=num_beams, **TRANSFORMERS_BEAM_SEARCH)


@requires_ctranslate2
def test_decoding_settings_map_to_translate_batch_and_threads_follow_the_package_rule(saved_pair, monkeypatch):
    model, _, folder = saved_pair
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    engine, _ = load_engine(folder, threads=None)
    assert (engine.threads, engine.threads_chosen_by) == (1, "the model has under 20M parameters")
    assert load_engine(folder, threads=2)[0].threads == 2
    assert json.loads((folder / "conversion.json").read_text())["num_parameters"] == model.num_parameters()
    options = engine.settings(input_length=7)
    assert options["beam_size"] == 4 and options["length_penalty"] == 0.6
    assert options["max_decoding_length"] == 7 + 50
    assert options["return_end_token"] and options["min_decoding_length"] == 0  # |Y| counts </s>, as ours
    assert engine.settings(7, num_beams=1, length_penalty=1.0, max_new_tokens=9) == {
        **options, "beam_size": 1, "length_penalty": 1.0, "max_decoding_length": 9}
    with pytest.raises(ValueError, match="do_sample"):
        engine.generate(torch.tensor([[5, 2]]), do_sample=True)


@requires_ctranslate2
def test_int8_conversion_translates_and_the_translate_script_runs_a_conversion(saved_model_dir, tmp_path, repo_root,
                                                                               load_module, capsys):
    int8 = convert_ctranslate2(saved_model_dir, tmp_path / "int8", quantization="int8")
    float32 = convert_ctranslate2(saved_model_dir, tmp_path / "float32")
    assert (int8 / "model.bin").stat().st_size < (float32 / "model.bin").stat().st_size
    engine, tokenizer = load_engine(int8)
    outputs = translate(engine, tokenizer, SENTENCES + [""], num_beams=2, max_new_tokens=8)
    assert len(outputs) == len(SENTENCES) + 1 and all(isinstance(text, str) for text in outputs)
    assert outputs[-1] == ""  # blank lines stay blank, without decoding
    script = load_module(repo_root / "scripts" / "translate.py")
    script.main(["--model", str(saved_model_dir), "--num_beams", "1", *SENTENCES[:2]])
    ours = capsys.readouterr().out
    script.main(["--model", str(saved_model_dir), "--engine", "ctranslate2", "--ct2_model", str(float32),
                 "--num_beams", "1", *SENTENCES[:2]])
    assert capsys.readouterr().out == ours


@requires_ctranslate2
def test_refusals(make_config, saved_model_dir, tmp_path):
    with pytest.raises(CTranslate2ConversionError, match="d_k=8"):
        check_convertible(make_config(d_k=8))
    with pytest.raises(ValueError) as error:
        convert_ctranslate2(saved_model_dir, tmp_path / "out", quantization="int3")
    assert_names(error, "int3")  # (an output folder already there: outputs.claim, tests/test_outputs.py)
    with pytest.raises(FileNotFoundError) as error:
        load_engine(saved_model_dir)
    assert_names(error, saved_model_dir)


@requires_ctranslate2
def test_on_the_fly_conversion_is_cached(folder, tmp_path):
    from modeling_vaswani.evaluation.ctranslate2_engine import cached_ctranslate2_model

    first = cached_ctranslate2_model(str(folder), cache_dir=tmp_path / "cache")
    written = (first / "model.bin").stat().st_mtime_ns
    assert cached_ctranslate2_model(str(folder), cache_dir=tmp_path / "cache") == first
    assert (first / "model.bin").stat().st_mtime_ns == written  # not converted again
    (folder / "generation_config.json").write_text((folder / "generation_config.json").read_text() + "\n")
    assert cached_ctranslate2_model(str(folder), cache_dir=tmp_path / "cache") != first  # the model changed
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")] == []  # no leftovers


def test_missing_ctranslate2_is_one_line_naming_pip_install(monkeypatch, tmp_path, repo_root, load_module, capsys):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` now raises ImportError
    with pytest.raises(CTranslate2NotInstalledError, match="pip install ctranslate2"):
        import_ctranslate2()
    with pytest.raises(ImportError, match="pip install ctranslate2"):  # before anything is read
        convert_ctranslate2(tmp_path / "no-such-model", tmp_path / "out")
    script = load_module(repo_root / "scripts" / "convert_ctranslate2.py")
    with pytest.raises(SystemExit) as exit_info:
        script.cli.run_main(lambda: script.main(["--model", str(repo_root / "hub_card"), "--output_dir",
                                                 str(tmp_path / "out")]))
    assert_error_line(exit_info.value.code, capsys.readouterr().err, "CTranslate2 is not", alone=True)
