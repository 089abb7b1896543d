"""Conversions to and from other implementations of the Transformer: `marian` (MarianMTModel in and out)
and `ctranslate2` (out, optional). Tooling: nothing here is saved with a checkpoint."""
