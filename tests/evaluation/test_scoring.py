"""The BLEU metric of §6.1: cased sacreBLEU, lowercased BLEU, the paper's tokenized BLEU, chrF."""

import socket
from pathlib import Path

import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from checks import assert_names
from modeling_vaswani.evaluation.scoring import METRIC_PATH, compute_bleu, load_bleu_metric


@pytest.fixture(scope="module")
def metric_module(load_module):
    return load_module(Path(METRIC_PATH) / "vaswani_bleu.py", "vaswani_bleu_under_test")


def test_identical_hypothesis_and_reference_score_100():
    sentence = ["Ein Mann fährt mit dem Fahrrad durch die Stadt ."]
    result = compute_bleu(sentence, sentence)
    assert result["bleu"] == pytest.approx(100.0)
    assert result["bleu_lowercase_tokenized"] == pytest.approx(100.0)
    assert result["bleu_paper_tokenized"] == pytest.approx(100.0)
    assert result["chrf"] == pytest.approx(100.0)


def test_known_example_matches_sacrebleu():
    # Precisions 4/5, 3/4, 2/3, 1/2 and no brevity penalty: BLEU = 100 * 0.2 ** 0.25.
    result = compute_bleu(["a b c d e"], ["a b c d f"])
    assert result["bleu"] == pytest.approx(100 * 0.2**0.25, rel=1e-9)
    assert result["counts"] == [4, 3, 2, 1]
    assert result["bp"] == 1.0 and result["sys_len"] == 5 and result["ref_len"] == 5

    predictions = ["The cat is on the mat.", "Two dogs play in the snow, happily."]
    references = ["The cat sits on the mat.", "Two dogs are playing in the snow."]
    result = compute_bleu(predictions, references)
    assert result["bleu"] == pytest.approx(sacrebleu.corpus_bleu(predictions, [references]).score)
    assert result["chrf"] == pytest.approx(sacrebleu.corpus_chrf(predictions, [references]).score)
    assert result["precisions"] == pytest.approx(sacrebleu.corpus_bleu(predictions, [references]).precisions)


def test_several_references_per_prediction():
    result = compute_bleu(["a b c d e"], [["x y z w v", "a b c d e"]])
    assert result["bleu"] == pytest.approx(100.0)
    assert result["signature"].startswith("nrefs:2|")


def test_lowercasing_raises_score_for_case_only_difference():
    result = compute_bleu(["The Cat sat on The Mat today ."], ["the cat sat on the mat today ."])
    assert result["bleu_lowercase_tokenized"] == pytest.approx(100.0)
    assert result["bleu"] < 60.0


def test_compound_split_follows_the_papers_script(metric_module):
    assert metric_module.split_compounds("a well-known man") == "a well ##AT##-##AT## known man"
    # The Perl substitution does not overlap matches: only the first hyphen of a-b-c splits.
    assert metric_module.split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
    # 13a separates punctuation first; a spaced hyphen is not a compound.
    assert (metric_module.paper_tokenize("a well-known man, 3 - 4 times.")
            == "a well ##AT##-##AT## known man , 3 - 4 times .")


def test_paper_tokenized_bleu_splits_compounds():
    prediction = ["The well-made car drove down the long and empty street at night ."]
    reference = ["The well-known car drove down the long and empty street at night ."]
    result = compute_bleu(prediction, reference)
    expected = BLEU(tokenize="none").corpus_score(
        ["The well ##AT##-##AT## made car drove down the long and empty street at night ."],
        [["The well ##AT##-##AT## known car drove down the long and empty street at night ."]],
    )
    assert result["bleu_paper_tokenized"] == pytest.approx(expected.score)
    # Splitting turns one wrong token into two right ones and one wrong one.
    assert result["bleu_paper_tokenized"] != pytest.approx(result["bleu"])
    assert "pretok:13a+compound-split" in result["signature_paper_tokenized"]
    # The paper's BLEU is case-sensitive.
    cased = compute_bleu(["the car ."], ["The car ."])
    assert cased["bleu_paper_tokenized"] < 100.0


def test_signature_and_chrf_are_reported():
    result = compute_bleu(["a small test sentence here"], ["a small test sentence there"])
    assert "case:mixed" in result["signature"] and "tok:13a" in result["signature"]
    assert "case:lc" in result["signature_lowercase_tokenized"]
    assert 0.0 < result["chrf"] < 100.0
    assert "nc:6" in result["chrf_signature"]


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError) as error:
        compute_bleu(["a", "b"], ["a"])
    assert_names(error, "2 predictions", "1 references")
    with pytest.raises(ValueError, match="lists of strings"):
        compute_bleu("a b", "a b")


def test_metric_loads_without_network(monkeypatch):
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network access is not allowed in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    metric = load_bleu_metric(keep_in_memory=True)
    assert metric.compute(predictions=["a b c d"], references=["a b c d"])["bleu"] == pytest.approx(100.0)
    assert attempts == []
