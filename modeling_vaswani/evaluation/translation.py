"""Translating text with a trained model — §6.1 decoding, end to end (tokenize → generate → detokenize).

The paper decodes with beam search (beam 4, length penalty α = 0.6, at most input length + 50
tokens); a saved model carries those settings in its generation_config.json, so `translate`
uses them unless told otherwise. Input is processed in batches of sentences sorted by length
(less padding), and results come back in the input order. `translate_stream` reads a long file
lazily, a batch at a time, so memory does not grow with the file.
"""

from itertools import islice
from typing import Iterable, Iterator

import torch
from transformers import AutoModelForSeq2SeqLM

from ..training.tokenization import load_tokenizer


def load_translator(model_name_or_path: str, device: str | None = None):
    """(model, tokenizer) from a saved folder or Hub id, model in eval mode.

    The model is built from this package's own classes (registered for model_type "vaswani" on
    import), never from code shipped inside the folder: trust_remote_code stays off, so a folder of
    another model type that brings its own code is refused instead of run.
    """
    model = AutoModelForSeq2SeqLM.from_pretrained(model_name_or_path, trust_remote_code=False)
    tokenizer = load_tokenizer(model_name_or_path)
    model.to(device or ("cuda" if torch.cuda.is_available() else "cpu")).eval()
    return model, tokenizer


def translate(model, tokenizer, sentences: list[str], batch_size: int = 64, max_source_length: int = 512,
              **generate_kwargs) -> list[str]:
    """Translate `sentences` (a list of str); blank lines give blank translations without decoding."""
    if isinstance(sentences, str):
        # Iterating a str would translate it character by character.
        raise ValueError("sentences must be a list of strings, not a single string; wrap it in a list.")
    for position, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise ValueError(f"Sentence {position} is a {type(sentence).__name__}, not a string.")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}.")
    outputs = [""] * len(sentences)
    todo = sorted((i for i, s in enumerate(sentences) if s.strip()), key=lambda i: len(sentences[i]))
    for start in range(0, len(todo), batch_size):
        chunk = todo[start:start + batch_size]
        encoded = tokenizer([sentences[i] for i in chunk], return_tensors="pt", padding=True,
                            truncation=True, max_length=max_source_length).to(model.device)
        with torch.inference_mode():
            generated = model.generate(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                                       **generate_kwargs)
        for i, text in zip(chunk, tokenizer.batch_decode(generated, skip_special_tokens=True)):
            outputs[i] = text.strip()
    return outputs


def translate_stream(model, tokenizer, lines: Iterable[str], batch_size: int = 64, **kwargs) -> Iterator[str]:
    """Translate an iterable of lines lazily, `batch_size` lines at a time, in order."""
    lines = iter(lines)
    while batch := [line.rstrip("\n") for line in islice(lines, batch_size)]:
        yield from translate(model, tokenizer, batch, batch_size=batch_size, **kwargs)
