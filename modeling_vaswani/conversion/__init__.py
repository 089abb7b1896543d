"""Conversions between this package's model and other implementations of the same Transformer.

Tooling, not part of the model: nothing here is copied into a saved checkpoint.

- `marian`: transformers' `MarianMTModel` (the Opus-MT models) in, and ours out as a Marian folder.
- `ctranslate2`: ours out as a CTranslate2 model folder (optional: `pip install ctranslate2`), which
  `evaluation.ctranslate2_engine` translates with.
"""
