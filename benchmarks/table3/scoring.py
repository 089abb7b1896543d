"""Table 3's two measures of a trained row: dev perplexity per subword and dev BLEU.

Perplexity (Table 3's "PPL (dev)", per wordpiece): exp of the mean cross-entropy of each
reference subword (the end-of-sentence token included) given the source and the reference before
it, with teacher forcing, over the validation split. Plain cross-entropy, without the §5.4 label
smoothing the model trains with: smoothing would add a term that depends on ε_ls and make rows
with different ε_ls (D3, D4) incomparable. Lower is better.

BLEU (Table 3's "BLEU (dev)"): the validation split translated with §6.1's beam search (beam 4,
α = 0.6, at most input length + 50, the model's generation config) and, as Table 3, no checkpoint
averaging; cased detokenized sacreBLEU, with the paper's tokenized BLEU beside it (scoring.py).
"""

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
