"""The shared BPE vocabulary of §5.1."""

import pytest
from transformers import PreTrainedTokenizerFast

from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.data import load_multi30k, select_first
from modeling_vaswani.training.tokenization import (BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID,
                                                    train_bpe_tokenizer, train_tokenizer_for_dataset)


@pytest.fixture(scope="module")
def corpus():
    ds = load_multi30k("en", "de")
    return select_first(ds["train"], 3000), ds["validation"]


@pytest.fixture(scope="module")
def tok(corpus):
    return train_tokenizer_for_dataset(corpus[0], "en", "de", vocab_size=2000)


def test_special_ids_shared_vocab_eos_and_padding(tok):
    assert SPECIAL_TOKENS == ["<pad>", "<s>", "</s>", "<unk>"] and (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert tok.convert_tokens_to_ids(SPECIAL_TOKENS) == [0, 1, 2, 3]
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id, tok.unk_token_id) == (0, 1, 2, 3)
    assert len(tok) == 2000 and "▁the" in tok.get_vocab() and "▁der" in tok.get_vocab()  # one vocabulary for both
    batch = tok(["A dog runs.", "Two men."], text_target=["Ein Hund rennt.", "Zwei Männer."], truncation=True,
                max_length=4)
    for ids in batch["input_ids"] + batch["labels"]:
        assert ids[-1] == EOS_ID and len(ids) <= 4 and EOS_ID not in ids[:-1] and BOS_ID not in ids
    assert tok.decode(tok("Ein Hund rennt.")["input_ids"]) == "Ein Hund rennt.</s>"
    padded = tok(["A dog.", "A very big brown dog runs across the grass."], padding=True)
    assert padded["input_ids"][0][-1] == PAD_ID and padded["attention_mask"][0][-1] == 0


def test_punctuation_is_a_token_of_its_own(tok):
    # "▁dog." would be a merge of its own beside "▁dog"; split off, the word keeps one spelling.
    assert tok.tokenize("A dog runs.")[-1] == "." and "▁dog" in tok.tokenize("A dog, a cat.")
    assert not [t for t in tok.get_vocab() if len(t) > 1 and t[-1] in ".,!?;:" and t.strip("▁.,!?;:")]


def test_round_trip_exact(tok, corpus):
    train, val = corpus
    sentences = [s for pair in train["translation"] for s in pair.values()]
    for sentence, ids in zip(sentences, tok(sentences)["input_ids"]):
        assert tok.decode(ids, skip_special_tokens=True) == sentence
    # Unseen sentences round-trip too, as long as every character was seen in training.
    alphabet = set("".join(sentences))
    held_out = [s for pair in val["translation"] for s in pair.values() if set(s) <= alphabet]
    assert len(held_out) > 1500
    for sentence, ids in zip(held_out, tok(held_out)["input_ids"]):
        assert tok.decode(ids, skip_special_tokens=True) == sentence


@pytest.mark.parametrize("text", ["", "   ", "  leading and trailing  ", "x  y", "end. "])
def test_whitespace_edge_cases_and_unseen_characters(tok, text):
    ids = tok(text)["input_ids"]
    assert ids[-1] == EOS_ID and tok.decode(ids, skip_special_tokens=True) == text
    ids = tok("A dog 😀 runs ☃ 漢字.")["input_ids"]  # unseen characters become <unk>
    assert UNK_ID in ids and ids[-1] == EOS_ID
    decoded = tok.decode(ids, skip_special_tokens=True)
    assert decoded.startswith("A dog") and "runs" in decoded and "😀" not in decoded


def test_save_and_load_round_trip(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, PreTrainedTokenizerFast)
    sentences = ["Two young, White males are outside.", "Zwei Männer  stehen.", "  ", "emoji 😀"]
    assert loaded(sentences)["input_ids"] == tok(sentences)["input_ids"]
    assert loaded(["a"], text_target=["b"])["labels"] == tok(["a"], text_target=["b"])["labels"]
    assert (loaded.pad_token_id, loaded.eos_token_id, loaded.model_max_length) == (0, 2, 1024)
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        load_tokenizer(tmp_path / "nothing")


@pytest.mark.parametrize("texts,vocab_size,words", [
    (["a b c"], 10, ["at least 16", "10"]),
    (["abcdefghijklmnopqrstuvwxyz0123456789"], 20, ["distinct characters", "20"]),
    ([], 100, ["empty"]),
    ("a sentence", 100, ["single string"]),
    (["a", 3], 100, ["strings", "int"]),
])
def test_invalid_arguments(texts, vocab_size, words):
    with pytest.raises(ValueError) as error:
        train_bpe_tokenizer(texts, vocab_size=vocab_size)
    assert all(word in str(error.value) for word in words), str(error.value)


def test_model_max_length_truncates():
    small = train_bpe_tokenizer(["a b c d e f g"] * 10, vocab_size=32, model_max_length=5)
    ids = small("a b c d e f g", truncation=True)["input_ids"]
    assert len(ids) == 5 and ids[-1] == EOS_ID
