"""Table 3's measures of a trained row on the validation split: perplexity per subword with teacher forcing and
without label smoothing (so rows with different ε_ls compare), and BLEU of §6.1's beam search (docs/table3.md)."""

from __future__ import annotations

import math
import time
from pathlib import Path

import torch

from modeling_vaswani.evaluation.scoring import score_model
from modeling_vaswani.model.label_smoothing import label_smoothed_cross_entropy
from modeling_vaswani.model.modeling_vaswani import VaswaniForConditionalGeneration
from modeling_vaswani.tokenizer_loading import load_tokenizer

MAX_LENGTH = 256  # tokens, as scripts/train.py truncates by default


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
    return {
        **perplexity,
        "bleu": scores["bleu"],
        "bleu_signature": scores["signature"],
        "bleu_paper_tokenized": scores["bleu_paper_tokenized"],
        "num_beams": num_beams,
        "dev_sentences": len(sources),
        "parameters": model.num_parameters(),
        "scoring_seconds": round(time.monotonic() - began, 1),
    }
