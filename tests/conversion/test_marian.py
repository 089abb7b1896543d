"""conversion/marian*.py on tiny random MarianMTModels set up as Opus-MT's (swish, pad = decoder start = last
id, eos = 0, a logits bias) and a ReLU variant, over sentencepiece models trained here on Multi30k."""

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from transformers import AutoTokenizer, GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.conversion.marian import convert_marian, export_marian, from_marian, marian_order, to_marian
from modeling_vaswani.conversion.marian_config import MarianConversionError, config_from_marian, config_to_marian
from modeling_vaswani.evaluation.translation import load_translator, translate
from modeling_vaswani.model.generation import TRANSFORMERS_BEAM_SEARCH
from modeling_vaswani.model.positional_encoding import sinusoidal_table
from modeling_vaswani.training.data import multi30k_pairs

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

SENTENCES = ["A man is riding a bicycle.", "Two dogs are playing in the snow.",
             "A little girl in a pink dress climbs the stairs.", "People."]

# Sizes of the tiny Marian models; each variant adds its own settings.
TINY_MARIAN = dict(d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=4,
                   decoder_attention_heads=4, max_position_embeddings=128, dropout=0.1, attention_dropout=0.0)
VARIANTS = {
    # Opus-MT: swish, √d_model scale, a trained (non-zero) logits bias; here with a deeper decoder.
    "opus-mt": dict(activation_function="swish", scale_embedding=True, encoder_layers=2, decoder_layers=3,
                    logits_bias_std=0.5),
    # The paper's ReLU, no embedding scale, an all-zero logits bias (ours then adds none).
    "relu": dict(activation_function="relu", scale_embedding=False, encoder_layers=2, decoder_layers=2,
                 logits_bias_std=0.0),
}
TOLERANCE = 1e-5  # max |Δ logit| relative to max |logit|, float32


@pytest.fixture(scope="module")
def marian_tokenizer_dir(tmp_path_factory) -> Path:
    sources, targets = multi30k_pairs("train", max_samples=300)
    folder = tmp_path_factory.mktemp("marian_tokenizer")
    pieces = []
    for name, texts in (("source", sources), ("target", targets)):
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=model, vocab_size=200,
                                       model_type="unigram", character_coverage=1.0, bos_id=-1, eos_id=-1,
                                       minloglevel=2)
        (folder / f"{name}.spm").write_bytes(model.getvalue())
        processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
        pieces += [processor.id_to_piece(i) for i in range(processor.get_piece_size())
                   if not (processor.is_control(i) or processor.is_unknown(i))]
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in pieces:
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)  # Opus-MT: the pad token is the last id
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    tokenizer = MarianTokenizer(str(folder / "source.spm"), str(folder / "target.spm"), str(folder / "vocab.json"),
                                source_lang="en", target_lang="de")
    saved = folder / "saved"
    tokenizer.save_pretrained(saved)
    return saved


@pytest.fixture(scope="module")
def marian_tokenizer(marian_tokenizer_dir):
    return AutoTokenizer.from_pretrained(marian_tokenizer_dir)


def assert_same_state(got, expected) -> None:
    got, expected = got.state_dict(), expected.state_dict()
    assert set(got) == set(expected)
    assert all(torch.equal(got[name], tensor) for name, tensor in expected.items())


def random_marian(tokenizer, variant: str, seed: int = 0) -> MarianMTModel:
    settings = dict(VARIANTS[variant])
    logits_bias_std = settings.pop("logits_bias_std")
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    config = MarianConfig(vocab_size=len(tokenizer), pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=eos,
                          bos_token_id=None, forced_eos_token_id=eos, **TINY_MARIAN, **settings)
    model = MarianMTModel(config).eval()
    generator = torch.Generator().manual_seed(seed)
    noise = lambda shape: torch.randn(shape, generator=generator)  # noqa: E731
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "embed_positions" in name:
                continue  # the fixed sinusoids
            if "layer_norm" in name:
                parameter.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * noise(parameter.shape))
            elif parameter.dim() == 2:
                parameter.copy_(noise(parameter.shape) * parameter.shape[1] ** -0.5)
            else:
                parameter.copy_(0.1 * noise(parameter.shape))
        model.final_logits_bias.copy_(logits_bias_std * noise(model.final_logits_bias.shape))
    # Opus-MT's generation_config.json, with a short length limit.
    model.generation_config = GenerationConfig(
        num_beams=4, max_length=24, bad_words_ids=[[pad]], pad_token_id=pad, decoder_start_token_id=pad,
        eos_token_id=eos, forced_eos_token_id=eos)
    return model


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request, marian_tokenizer):
    marian = random_marian(marian_tokenizer, request.param)
    return request.param, marian, from_marian(marian)


@pytest.fixture(scope="module")
def batch(marian_tokenizer):
    return marian_tokenizer(SENTENCES, return_tensors="pt", padding=True)


def decoder_inputs(model, batch_size=len(SENTENCES), length=9, seed=1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size - 1, (batch_size, length), generator=generator)
    ids[:, 0] = model.config.decoder_start_token_id
    return ids


def relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / a.abs().max()).item()


@pytest.mark.parametrize("d_model", [32, 15])
def test_the_permutation_maps_our_sinusoids_onto_marians(d_model):
    ours = sinusoidal_table(64, d_model)
    theirs = MarianSinusoidalPositionalEmbedding(64, d_model).create_weight()
    torch.testing.assert_close(ours[:, marian_order(d_model)], theirs, rtol=0, atol=1e-6)
    assert sorted(marian_order(d_model).tolist()) == list(range(d_model))


def test_the_marian_options_of_our_config_are_off_by_default_and_checked(make_config):
    config = make_config()
    assert config.activation_function == "relu" and config.final_logits_bias is False  # the paper's model
    assert VaswaniForConditionalGeneration(config).final_logits_bias is None
    with pytest.raises(ValueError, match="activation_function"):
        make_config(activation_function="gelu")
    with pytest.raises(ValueError, match="final_logits_bias"):
        make_config(final_logits_bias="yes")


def test_marian_settings_become_our_options(pair, marian_tokenizer):
    variant, marian, ours = pair
    config = ours.config
    assert config.activation_function == {"opus-mt": "swish", "relu": "relu"}[variant]
    assert config.final_logits_bias is (variant == "opus-mt")
    assert config.layer_norm_eps == 1e-5  # transformers' MarianMTModel: nn.LayerNorm's default
    assert config.attention_bias  # Marian's projections have (here random, non-zero) biases
    assert config.scale_embedding is (variant == "opus-mt")
    assert (config.num_layers, config.num_decoder_layers) == (marian.config.encoder_layers, marian.config.decoder_layers)
    assert config.pad_token_id == config.decoder_start_token_id == len(marian_tokenizer) - 1
    assert (config.eos_token_id, config.bos_token_id) == (0, None)
    assert ours.generation_config.to_dict() == marian.generation_config.to_dict()


def test_logits_equal_marians(pair, batch):
    _, marian, ours = pair
    decoder_input_ids = decoder_inputs(marian)
    with torch.no_grad():
        expected = marian(**batch, decoder_input_ids=decoder_input_ids).logits
        got = ours(**batch, decoder_input_ids=decoder_input_ids).logits
    assert got.shape == expected.shape
    assert relative_difference(expected, got) < TOLERANCE


@pytest.mark.parametrize("settings", [dict(num_beams=1, max_new_tokens=16), dict(num_beams=4, max_new_tokens=16),
                                      {}])  # {}: Marian's own settings, beam 4, max_length 24, no <pad>
def test_greedy_and_beam_outputs_equal_marians(pair, batch, settings):
    _, marian, ours = pair
    assert torch.equal(ours.generate(**batch, **settings), marian.generate(**batch, **settings))


def test_ours_to_marian_to_ours_is_bit_for_bit(pair, batch):
    _, marian, ours = pair
    back = to_marian(ours)
    assert_same_state(back, marian)
    again = from_marian(back)
    assert_same_state(again, ours)
    assert again.config.to_diff_dict() == ours.config.to_diff_dict()


@pytest.mark.parametrize("layer_norm_eps", [1e-5, 1e-6])
def test_our_model_exports_and_comes_back_bit_for_bit(make_model, layer_norm_eps):
    ours = make_model(layer_norm_eps=layer_norm_eps)  # the paper's settings: ReLU, no logits bias, <s> starts
    marian = to_marian(ours)
    assert marian.config.activation_function == "relu" and marian.config.layer_norm_eps == layer_norm_eps
    assert not marian.final_logits_bias.any() and not marian.model.encoder.layers[0].self_attn.q_proj.bias.any()
    inputs = torch.tensor([[5, 6, 7, 8, 2], [9, 10, 2, 0, 0]])
    attention_mask = (inputs != 0).long()
    decoder_input_ids = decoder_inputs(ours, batch_size=2)
    with torch.no_grad():
        expected = ours(input_ids=inputs, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
        got = marian(input_ids=inputs, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids).logits
    # transformers' Marian normalises with ε = 1e-5 whatever the config says: exact to rounding only then.
    assert relative_difference(expected, got) < (TOLERANCE if layer_norm_eps == 1e-5 else 1e-4)
    for num_beams in (1, 4):
        settings = dict(num_beams=num_beams, max_new_tokens=10)
        # transformers' Marian decodes with transformers' beam search, ours too when told so.
        assert torch.equal(ours.generate(input_ids=inputs, attention_mask=attention_mask, **settings,
                                         **TRANSFORMERS_BEAM_SEARCH),
                           marian.generate(input_ids=inputs, attention_mask=attention_mask, **settings))
    again = from_marian(marian)
    assert_same_state(again, ours)
    assert again.config.to_diff_dict() == ours.config.to_diff_dict()


REFUSAL_BASE = dict(vocab_size=40, pad_token_id=39, decoder_start_token_id=39, eos_token_id=0, encoder_layers=1,
                    decoder_layers=1, activation_function="swish", **TINY_MARIAN)


MARIAN_REFUSED = [dict(share_encoder_decoder_embeddings=False), dict(decoder_vocab_size=50),
                  dict(tie_word_embeddings=False), dict(normalize_embedding=True), dict(normalize_before=True),
                  dict(add_final_layer_norm=True), dict(static_position_embeddings=False),
                  dict(activation_function="gelu"), dict(decoder_ffn_dim=128), dict(decoder_attention_heads=8)]
OURS_REFUSED = [dict(norm_first=True), dict(positional_encoding="learned"), dict(share_embeddings=False),
                dict(tie_word_embeddings=False), dict(d_k=8)]


@pytest.mark.parametrize("side, overrides", [("marian", o) for o in MARIAN_REFUSED] + [("ours", o) for o in OURS_REFUSED])
def test_settings_the_other_side_cannot_represent_are_refused_by_name(make_config, side, overrides):
    if side == "marian":
        config_from_marian(MarianConfig(**REFUSAL_BASE))  # converts without the override
        convert, config = config_from_marian, MarianConfig(**{**REFUSAL_BASE, **overrides})
    else:
        convert, config = config_to_marian, make_config(**overrides)
    with pytest.raises(MarianConversionError) as refused:
        convert(config)
    assert next(iter(overrides)) in str(refused.value) and "\n" not in str(refused.value)


@pytest.fixture(scope="module")
def marian_folder(tmp_path_factory, marian_tokenizer):
    folder = tmp_path_factory.mktemp("marian") / "opus-mt-tiny"
    random_marian(marian_tokenizer, "opus-mt").save_pretrained(folder)
    marian_tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def converted_folder(tmp_path_factory, marian_folder, load_module, repo_root):
    output = tmp_path_factory.mktemp("converted") / "vaswani"
    load_module(repo_root / "scripts" / "convert_marian.py").main(
        ["--model", str(marian_folder), "--output_dir", str(output)])
    return output


def test_converted_folder_translates_like_marian_with_our_tools(converted_folder, marian_folder, load_module,
                                                                repo_root, capsys, tmp_path):
    model, tokenizer = load_translator(str(converted_folder), device="cpu")
    assert isinstance(model, VaswaniForConditionalGeneration) and isinstance(tokenizer, MarianTokenizer)
    marian = MarianMTModel.from_pretrained(marian_folder).eval()
    marian_tokenizer = AutoTokenizer.from_pretrained(marian_folder)
    expected = translate(marian, marian_tokenizer, SENTENCES, max_new_tokens=12)
    assert translate(model, tokenizer, SENTENCES, max_new_tokens=12) == expected
    assert any(expected)

    load_module(repo_root / "scripts" / "translate.py").main(
        ["--model", str(converted_folder), "--device", "cpu", "--max_new_tokens", "12", *SENTENCES])
    assert capsys.readouterr().out.splitlines() == expected

    load_module(repo_root / "scripts" / "evaluate_model.py").main(
        ["--model", str(converted_folder), "--split", "validation", "--max_samples", "4", "--num_beams", "1",
         "--max_new_tokens", "8", "--output_dir", str(tmp_path), "--name", "val"])
    scores = json.loads((tmp_path / "val.scores.json").read_text())
    assert scores["sentences"] == 4 and "bleu" in scores
    assert len((tmp_path / "val.hyp.txt").read_text(encoding="utf-8").splitlines()) == 4


def test_exported_folder_is_a_marian_model_that_comes_back_bit_for_bit(saved_model_dir, load_module, repo_root,
                                                                        tmp_path):
    exported, back = tmp_path / "marian", tmp_path / "back"
    with pytest.warns(UserWarning, match="layer_norm_eps=1e-06"):
        load_module(repo_root / "scripts" / "export_marian.py").main(
            ["--model", str(saved_model_dir), "--output_dir", str(exported)])
    assert json.loads((exported / "config.json").read_text())["model_type"] == "marian"
    assert not list(exported.glob("*.py"))  # transformers' own class, no remote code
    marian, info = MarianMTModel.from_pretrained(exported, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    tokenizer = AutoTokenizer.from_pretrained(exported)
    ours = VaswaniForConditionalGeneration.from_pretrained(saved_model_dir).eval()
    inputs = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    settings = dict(num_beams=4, max_new_tokens=8)
    assert torch.equal(marian.eval().generate(**inputs, **settings),
                       ours.generate(**inputs, **settings, **TRANSFORMERS_BEAM_SEARCH))

    convert_marian(exported, back)
    assert_same_state(VaswaniForConditionalGeneration.from_pretrained(back),
                      VaswaniForConditionalGeneration.from_pretrained(saved_model_dir))
    assert json.loads((back / "generation_config.json").read_text()) == json.loads(
        (saved_model_dir / "generation_config.json").read_text())


@pytest.mark.parametrize("convert, source, names", [(convert_marian, "saved_model_dir", "not a Marian one"),
                                                     (export_marian, "marian_folder", "not one of ours")])
def test_a_folder_of_another_model_type_is_refused(request, tmp_path, convert, source, names):
    with pytest.raises(MarianConversionError, match=names):
        convert(request.getfixturevalue(source), tmp_path / "out")


# Runs where `import modeling_vaswani` fails, from a copy of the folder, as on a user's machine.
CHILD = f"""
import sys; sys.modules['modeling_vaswani'] = None
import json
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

folder = sys.argv[1]
model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
inputs = tokenizer({SENTENCES!r}, return_tensors="pt", padding=True)
generated = model.generate(**inputs, num_beams=4, max_new_tokens=8)
translator = pipeline("translation", model=folder, trust_remote_code=True)
print(json.dumps(dict(model_module=type(model).__module__, tokenizer_class=type(tokenizer).__name__,
    generated=generated.tolist(), pipeline_class=type(translator).__name__,
    result=translator({SENTENCES[0]!r}, num_beams=1, max_new_tokens=8),
    imported=[name for name, module in sys.modules.items() if name.startswith("modeling_vaswani") and module])))
"""


@pytest.mark.slow
def test_converted_folder_loads_with_remote_code_without_the_package(converted_folder, marian_folder, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(converted_folder, folder)
    marian = MarianMTModel.from_pretrained(marian_folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(marian_folder)
    inputs = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    expected = marian.generate(**inputs, num_beams=4, max_new_tokens=8)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules"), "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    completed = subprocess.run([sys.executable, "-c", CHILD, str(folder)], cwd=folder, env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["model_module"].startswith("transformers_modules.") and report["imported"] == []
    assert (report["tokenizer_class"], report["pipeline_class"]) == ("MarianTokenizer", "VaswaniTranslationPipeline")
    assert report["generated"] == expected.tolist()
    expected_text = tokenizer.decode(marian.generate(**tokenizer([SENTENCES[0]], return_tensors="pt"), num_beams=1,
                                                     max_new_tokens=8)[0], skip_special_tokens=True).strip()
    assert report["result"] == [{"translation_text": expected_text}]
