"""Sentencepiece models trained here on Multi30k, as Opus-MT's tokenizer, for the Marian conversion tests."""

import io
import json
from pathlib import Path

import pytest
import sentencepiece as spm
from transformers import AutoTokenizer, MarianTokenizer

from modeling_vaswani.training.data import multi30k_pairs


@pytest.fixture(scope="session")
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


@pytest.fixture(scope="session")
def marian_tokenizer(marian_tokenizer_dir):
    return AutoTokenizer.from_pretrained(marian_tokenizer_dir)
