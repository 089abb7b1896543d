"""Data for the training tests: tokenized pairs for the Trainer (example i starts with token 4 + i, so a batch tells
which it holds), and text files written line by line."""

import bz2
import gzip
import lzma

import numpy as np

COMPRESSORS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}
VOCAB = 300
MODEL = dict(vocab_size=VOCAB, num_heads=2, num_layers=1)  # the tiny config with one layer and two heads


def rows(n=120, seed=0, longest=30):
    """Sources of 2 to `longest` tokens ending in </s> (2); each target about as long as its source."""
    rng, rows = np.random.default_rng(seed), []
    for i in range(n):
        src_len = int(rng.integers(2, longest + 1))
        ids = [4 + i] + rng.integers(4, VOCAB, src_len - 2).tolist() + [2]
        labels = rng.integers(4, VOCAB, max(2, src_len + int(rng.integers(-2, 3))) - 1).tolist() + [2]
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": labels})
    return rows


def epoch(loader):
    """(sentences, source length, target length, first tokens) of each batch in one pass."""
    return [(*b["input_ids"].shape, b["labels"].shape[1], b["input_ids"][:, 0].tolist()) for b in loader]


def write_lines(path, lines):
    """`lines`, each ended by a newline, at `path`, compressed as its suffix says (lone surrogates stand for bytes
    that are not UTF-8)."""
    data = "".join(line + "\n" for line in lines).encode("utf-8", "surrogateescape")
    compress = COMPRESSORS.get(path.suffix)
    path.write_bytes(compress(data) if compress else data)
    return path
