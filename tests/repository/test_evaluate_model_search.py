"""scripts/evaluate_model.py --beam_search: §6.1's search or transformers' own, one flag apart."""

import json

import pytest

from modeling_vaswani.evaluation.translation import load_translator, translate
from modeling_vaswani.model.generation import TRANSFORMERS_BEAM_SEARCH

SOURCES = ["A dog runs.", "Two men are talking in the street.", "A girl."]


@pytest.fixture
def evaluate(tmp_path, repo_root, load_module, saved_model_dir):
    text = tmp_path / "test.en"
    text.write_text("".join(line + "\n" for line in SOURCES), encoding="utf-8")
    script = load_module(repo_root / "scripts" / "evaluate_model.py")

    def run(*flags):
        script.main(["--model", str(saved_model_dir), "--source_file", str(text), "--reference_file", str(text),
                     "--max_new_tokens", "6", "--output_dir", str(tmp_path / "out"), "--quiet", *flags])
        return tmp_path / "out"

    return run


def test_each_search_gets_its_own_files_and_says_which_it_was(evaluate, saved_model_dir):
    out = evaluate("--beam_search", "transformers")
    evaluate("--beam_search", "paper")
    evaluate("--beam_search", "paper", "--num_beams", "1")  # greedy search takes the flag, without a length penalty
    assert "length_penalty" not in json.loads((out / "custom-beam1-paper-search.scores.json").read_text())
    transformers = json.loads((out / "custom-beam4-transformers-search.scores.json").read_text())
    paper = json.loads((out / "custom-beam4-paper-search.scores.json").read_text())
    assert (transformers["beam_search"], paper["beam_search"]) == ("transformers", "paper")
    model, tokenizer = load_translator(saved_model_dir)
    expected = translate(model, tokenizer, SOURCES, max_new_tokens=6, **TRANSFORMERS_BEAM_SEARCH)
    assert (out / "custom-beam4-transformers-search.hyp.txt").read_text(encoding="utf-8").splitlines() == expected


def test_ctranslate2_refuses_the_torch_searches_in_one_line(evaluate):
    with pytest.raises(ValueError, match="CTranslate2 has its own"):
        evaluate("--beam_search", "paper", "--engine", "ctranslate2")
