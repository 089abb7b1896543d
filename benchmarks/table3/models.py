"""Each row's untrained model (scripts/train.py has no flag for d_k alone), seeded with the row's seed, over one BPE
vocabulary shared by every row so that perplexities per subword compare; and the trained one's dev perplexity
(teacher forcing, no label smoothing, so rows with different ε_ls compare) and §6.1 beam-search BLEU."""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch
import transformers

from modeling_vaswani.evaluation.scoring import score_model
from modeling_vaswani.model.configuration_vaswani import VaswaniConfig
from modeling_vaswani.model.label_smoothing import label_smoothed_cross_entropy
from modeling_vaswani.model.modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.tokenizer_loading import load_tokenizer
from modeling_vaswani.training.data import load_translation_dataset, select_first
from modeling_vaswani.training.tokenization import train_tokenizer_for_dataset

MAX_LENGTH = 256  # tokens, as scripts/train.py truncates by default


def shared_tokenizer(folder: Path, source_lang: str, target_lang: str, vocab_size: int,
                     max_train_samples: int | None = None):
    """Loaded from `folder`, or learned on (the first `max_train_samples` of) Multi30k's training pairs and saved there."""
    folder = Path(folder)
    if not (folder / "tokenizer.json").is_file():
        train = select_first(load_translation_dataset(source_lang, target_lang)["train"], max_train_samples)
        tokenizer = train_tokenizer_for_dataset(train, source_lang, target_lang, vocab_size=vocab_size)
        folder.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(folder)
    return load_tokenizer(folder)


def write_starting_model(folder: Path, config_values: dict, tokenizer, seed: int) -> int:
    """Save an untrained model of `config_values` with `tokenizer` into `folder`; its parameter count."""
    config = VaswaniConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                           bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                           decoder_start_token_id=tokenizer.bos_token_id, **config_values)
    transformers.set_seed(seed)  # the initial weights, as scripts/train.py draws a new model's
    model = VaswaniForConditionalGeneration(config)
    Path(folder).mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model.num_parameters()


def dev_perplexity(model, tokenizer, sources: list[str], references: list[str], batch_size: int = 64) -> dict:
    """{"ppl", "cross_entropy" (nats per subword), "subwords"} of `references` given `sources`."""
    total, count = 0.0, 0
    model.eval()
    with torch.inference_mode():
        for start in range(0, len(sources), batch_size):
            encoded = tokenizer(sources[start:start + batch_size], text_target=references[start:start + batch_size],
                                padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
            labels = encoded["labels"].masked_fill(encoded["labels"] == tokenizer.pad_token_id, -100)
            logits = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                           labels=labels).logits  # (batch, target length, V)
            total += label_smoothed_cross_entropy(logits, labels, 0.0, reduction="sum").item()
            count += int((labels != -100).sum())
    if not count:
        raise ValueError("no reference subwords to score: the validation split is empty.")
    return {"ppl": math.exp(total / count), "cross_entropy": total / count, "subwords": count}


def score_trained_row(run_dir: Path, sources: list[str], references: list[str], num_beams: int = 4,
                      batch_size: int = 64) -> dict:
    """Perplexity, BLEU and parameter count of the model scripts/train.py saved in `run_dir`."""
    began = time.monotonic()
    model = VaswaniForConditionalGeneration.from_pretrained(run_dir).eval()
    tokenizer = load_tokenizer(run_dir)
    perplexity = dev_perplexity(model, tokenizer, sources, references, batch_size)
    _, scores = score_model(model, tokenizer, sources, references, batch_size=batch_size, num_beams=num_beams)
    return {**perplexity, "bleu": scores["bleu"], "bleu_signature": scores["signature"],
            "bleu_paper_tokenized": scores["bleu_paper_tokenized"], "num_beams": num_beams,
            "dev_sentences": len(sources), "parameters": model.num_parameters(),
            "scoring_seconds": round(time.monotonic() - began, 1)}
