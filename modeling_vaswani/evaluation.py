"""§6.1 evaluation: translate a test set and score it with BLEU (not a paper formula: glue).

`score_model` decodes the sources with the given settings (default: the model's own, beam 4 and
α = 0.6 in the paper) and scores the hypotheses with `scoring.compute_bleu` (sacreBLEU). It is
shared by scripts/evaluate_model.py (one model, one split) and scripts/collect_results.py (the grid
of weights × decoding × split that a model card reports).
"""

import time

from .data import load_multi30k
from .scoring import compute_bleu
from .translation import translate

SPLIT_NAMES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}


def multi30k_pairs(split: str, source_lang: str = "en", target_lang: str = "de", max_samples: int | None = None):
    """(sources, references) of a Multi30k split: "train", "validation" or "test" (test_2016_flickr)."""
    if split not in SPLIT_NAMES:
        raise ValueError(f"Unknown split {split!r}; choose one of {sorted(SPLIT_NAMES)}.")
    rows = load_multi30k(source_lang, target_lang)[split]["translation"]
    sources = [row[source_lang] for row in rows][:max_samples]
    references = [row[target_lang] for row in rows][:max_samples]
    return sources, references


def score_model(model, tokenizer, sources, references, batch_size: int = 64, **generate_kwargs):
    """Translate and score. Returns (hypotheses, scores) with timing and settings in `scores`."""
    if len(sources) != len(references):
        raise ValueError(f"{len(sources)} sources but {len(references)} references; they must be parallel.")
    if not sources:
        raise ValueError("Nothing to evaluate: no source sentences.")
    start = time.perf_counter()
    hypotheses = translate(model, tokenizer, sources, batch_size=batch_size, **generate_kwargs)
    seconds = time.perf_counter() - start
    scores = compute_bleu(hypotheses, references)
    scores.update(sentences=len(sources), translate_seconds=round(seconds, 2), **generate_kwargs)
    return hypotheses, scores
