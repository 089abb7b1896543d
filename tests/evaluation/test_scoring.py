"""The BLEU metric of §6.1: cased sacreBLEU, lowercased BLEU, the paper's tokenized BLEU, chrF."""

from pathlib import Path

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from checks import assert_names
from modeling_vaswani.evaluation.scoring import METRIC_PATH, compute_bleu, load_bleu_metric

SCORES = ("bleu", "bleu_lowercase_tokenized", "bleu_paper_tokenized", "chrf")


def test_known_examples_match_sacrebleu_and_the_lowercased_score():
    sentence = ["Ein Mann fährt mit dem Fahrrad durch die Stadt ."]
    result = compute_bleu(sentence, sentence)
    assert [result[name] for name in SCORES] == pytest.approx([100.0] * 4)
    result = compute_bleu(["a b c d e"], [["x y z w v", "a b c d e"]])  # several references per segment
    assert result["bleu"] == pytest.approx(100.0) and result["signature"].startswith("nrefs:2|")
    predictions = ["The cat is on the mat.", "Two dogs play in the snow, happily."]
    references = ["The cat sits on the mat.", "Two dogs are playing in the snow."]
    result = compute_bleu(predictions, references)
    expected = sacrebleu.corpus_bleu(predictions, [references])  # sacrebleu's own arithmetic is its tests' job
    assert result["bleu"] == pytest.approx(expected.score) and result["precisions"] == pytest.approx(expected.precisions)
    assert [result[key] for key in ("counts", "bp", "sys_len", "ref_len")] == [
        expected.counts, pytest.approx(expected.bp), expected.sys_len, expected.ref_len]
    assert result["chrf"] == pytest.approx(sacrebleu.corpus_chrf(predictions, [references]).score)
    # Lowercased BLEU, the signatures, chrF.
    result = compute_bleu(["The Cat sat on The Mat today ."], ["the cat sat on the mat today ."])
    assert result["bleu_lowercase_tokenized"] == pytest.approx(100.0) and result["bleu"] < 60.0
    assert "case:mixed" in result["signature"] and "tok:13a" in result["signature"]
    assert "case:lc" in result["signature_lowercase_tokenized"] and "nc:6" in result["chrf_signature"]
    assert 0.0 < compute_bleu(["a small test sentence here"], ["a small test sentence there"])["chrf"] < 100.0


def test_paper_tokenized_bleu_splits_compounds_as_the_papers_script_and_is_cased(load_module):
    metric = load_module(Path(METRIC_PATH) / "vaswani_bleu.py", "vaswani_bleu_under_test")
    assert metric.split_compounds("a well-known man") == "a well ##AT##-##AT## known man"
    # The Perl substitution does not overlap matches: only the first hyphen of a-b-c splits.
    assert metric.split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
    # 13a separates punctuation first; a spaced hyphen is not a compound.
    assert metric.paper_tokenize("a well-known man, 3 - 4 times.") == "a well ##AT##-##AT## known man , 3 - 4 times ."
    result = compute_bleu(["The well-made car drove down the long and empty street at night ."],
                          ["The well-known car drove down the long and empty street at night ."])
    expected = BLEU(tokenize="none").corpus_score(
        ["The well ##AT##-##AT## made car drove down the long and empty street at night ."],
        [["The well ##AT##-##AT## known car drove down the long and empty street at night ."]])
    assert result["bleu_paper_tokenized"] == pytest.approx(expected.score)
    assert result["bleu_paper_tokenized"] != pytest.approx(result["bleu"])  # one wrong token became two right, one wrong
    assert "pretok:13a+compound-split" in result["signature_paper_tokenized"]
    assert compute_bleu(["the car ."], ["The car ."])["bleu_paper_tokenized"] < 100.0


def test_bad_inputs_are_rejected_and_the_metric_loads_without_network(no_network):
    with pytest.raises(ValueError) as error:
        compute_bleu(["a", "b"], ["a"])
    assert_names(error, "2 predictions", "1 references")
    with pytest.raises(ValueError, match="lists of strings"):
        compute_bleu("a b", "a b")
    metric = load_bleu_metric(keep_in_memory=True)
    assert metric.compute(predictions=["a b c d"], references=["a b c d"])["bleu"] == pytest.approx(100.0)
    assert no_network == []
