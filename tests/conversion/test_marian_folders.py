"""Marian model folders through convert_marian.py and export_marian.py, our tools, and remote code."""

import json

import pytest
from transformers import AutoTokenizer, MarianMTModel, MarianTokenizer

from checks import copy_folder, run_without_package
from marian_models import SENTENCES, assert_same_state, random_marian
from modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.conversion.marian import MarianConversionError, convert_marian
from modeling_vaswani.evaluation.translation import load_translator, translate

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")


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
                                                                repo_root, tmp_path):
    model, tokenizer = load_translator(str(converted_folder), device="cpu")
    assert isinstance(model, VaswaniForConditionalGeneration) and isinstance(tokenizer, MarianTokenizer)
    marian = MarianMTModel.from_pretrained(marian_folder).eval()
    marian_tokenizer = AutoTokenizer.from_pretrained(marian_folder)
    expected = translate(marian, marian_tokenizer, SENTENCES, max_new_tokens=12)
    assert translate(model, tokenizer, SENTENCES, max_new_tokens=12) == expected
    assert any(expected)
    load_module(repo_root / "scripts" / "evaluate_model.py").main(
        ["--model", str(converted_folder), "--split", "validation", "--max_samples", "4", "--num_beams", "1",
         "--max_new_tokens", "8", "--output_dir", str(tmp_path), "--name", "val"])
    scores = json.loads((tmp_path / "val.scores.json").read_text())
    assert scores["sentences"] == 4 and "bleu" in scores
    assert len((tmp_path / "val.hyp.txt").read_text(encoding="utf-8").splitlines()) == 4


def test_a_tokenizer_with_separate_vocabularies_is_refused(marian_folder, marian_tokenizer_dir, tmp_path):
    folder, output = copy_folder(marian_folder, tmp_path, "separate"), tmp_path / "converted"
    files = [str(marian_tokenizer_dir / name) for name in ("source.spm", "target.spm", "vocab.json")]
    MarianTokenizer(*files, target_vocab_file=files[2], separate_vocabs=True).save_pretrained(folder)
    with pytest.raises(MarianConversionError, match="separate_vocabs"):
        convert_marian(folder, output)
    assert not output.exists()


def test_exported_folder_is_a_marian_model_that_comes_back_bit_for_bit(saved_model_dir, load_module, repo_root,
                                                                        tmp_path):
    exported, back = tmp_path / "marian", tmp_path / "back"
    with pytest.warns(UserWarning, match="layer_norm_eps=1e-06"):
        load_module(repo_root / "scripts" / "export_marian.py").main(
            ["--model", str(saved_model_dir), "--output_dir", str(exported)])
    assert json.loads((exported / "config.json").read_text())["model_type"] == "marian"
    assert not list(exported.glob("*.py"))  # transformers' own class, no remote code
    # Logits and outputs of an exported model: tests/conversion/test_marian.py.
    _, info = MarianMTModel.from_pretrained(exported, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert AutoTokenizer.from_pretrained(exported)(SENTENCES)["input_ids"]
    convert_marian(exported, back)
    assert_same_state(VaswaniForConditionalGeneration.from_pretrained(back),
                      VaswaniForConditionalGeneration.from_pretrained(saved_model_dir))
    assert json.loads((back / "generation_config.json").read_text()) == json.loads(
        (saved_model_dir / "generation_config.json").read_text())


# Run where the package cannot be imported (checks.run_without_package), from a copy of the folder.
CHILD = f"""
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

folder = sys.argv[1]
model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True).eval()
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
inputs = tokenizer({SENTENCES!r}, return_tensors="pt", padding=True)
generated = model.generate(**inputs, num_beams=4, max_new_tokens=8)
translator = pipeline("translation", model=folder, trust_remote_code=True)
report = dict(model_module=type(model).__module__, tokenizer_class=type(tokenizer).__name__,
              generated=generated.tolist(), pipeline_class=type(translator).__name__,
              result=translator({SENTENCES[0]!r}, num_beams=1, max_new_tokens=8))
"""


@pytest.mark.slow
def test_converted_folder_loads_with_remote_code_without_the_package(converted_folder, marian_folder, tmp_path):
    folder = copy_folder(converted_folder, tmp_path)
    marian = MarianMTModel.from_pretrained(marian_folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(marian_folder)
    inputs = tokenizer(SENTENCES, return_tensors="pt", padding=True)
    expected = marian.generate(**inputs, num_beams=4, max_new_tokens=8)
    report = run_without_package(CHILD, folder, tmp_path, cwd=folder)
    assert report["model_module"].startswith("transformers_modules.")
    assert (report["tokenizer_class"], report["pipeline_class"]) == ("MarianTokenizer", "VaswaniTranslationPipeline")
    assert report["generated"] == expected.tolist()
    expected_text = tokenizer.decode(marian.generate(**tokenizer([SENTENCES[0]], return_tensors="pt"), num_beams=1,
                                                     max_new_tokens=8)[0], skip_special_tokens=True).strip()
    assert report["result"] == [{"translation_text": expected_text}]
