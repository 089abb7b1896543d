"""§6.1 — BLEU of translations, through the offline `vaswani_bleu` metric (metrics/vaswani_bleu/): cased
sacreBLEU with its signature, the paper's tokenized BLEU, lowercased tokenized BLEU and chrF."""

from __future__ import annotations

import time
from functools import lru_cache
from pathlib import Path

import evaluate

from .translation import translate

METRIC_PATH = str(Path(__file__).resolve().parent / "metrics" / "vaswani_bleu")


def load_bleu_metric(**kwargs) -> evaluate.EvaluationModule:
    """The metric, loaded from disk with no network access."""
    return evaluate.load(METRIC_PATH, **kwargs)


@lru_cache(maxsize=1)
def _shared_metric() -> evaluate.EvaluationModule:
    # Loading copies and imports the script: once per process; keep_in_memory writes no cache file.
    return load_bleu_metric(keep_in_memory=True)


def compute_bleu(predictions: list[str], references: list[str] | list[list[str]]) -> dict:
    """The `vaswani_bleu` scores of detokenized `predictions` against `references` (a string or a list each)."""
    if isinstance(predictions, str) or isinstance(references, str):
        raise ValueError("predictions and references must be lists of strings (one per segment), not a single string.")
    predictions, references = list(predictions), list(references)
    if not predictions:
        raise ValueError("no predictions to score: pass at least one segment.")
    if len(predictions) != len(references):
        raise ValueError(f"got {len(predictions)} predictions but {len(references)} references; pass one per "
                         "prediction.")
    if not all(isinstance(p, str) for p in predictions):
        raise ValueError("every prediction must be a string (decode token ids before scoring).")
    return _shared_metric().compute(predictions=predictions, references=references)


def score_model(model, tokenizer, sources, references, batch_size: int = 64, progress=None, **generate_kwargs):
    """(hypotheses, scores), with timing and settings in `scores`; `progress(n)` as each batch finishes."""
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources but {len(references)} references; they must be parallel.")
    if not sources:
        raise ValueError("Nothing to evaluate: no source sentences.")
    start = time.perf_counter()
    hypotheses = translate(model, tokenizer, sources, batch_size=batch_size, progress=progress, **generate_kwargs)
    seconds = time.perf_counter() - start
    scores = compute_bleu(hypotheses, references)
    scores.update(sentences=len(sources), translate_seconds=round(seconds, 2), **generate_kwargs)
    return hypotheses, scores
