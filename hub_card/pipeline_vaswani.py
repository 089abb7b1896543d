"""A `pipeline("translation", ...)` for this model (transformers 5 ships none): copied into every saved
model folder and named under `custom_pipelines` in its config.json, so that `pipeline("translation",
model=<folder or Hub id>, trust_remote_code=True)` finds it. Text in, `[{"translation_text": ...}]` out.
"""

import unicodedata

from transformers import Pipeline

# Unicode categories that show nothing: spaces (Zs, Zl, Zp), controls (Cc) and format characters (Cf:
# zero-width space U+200B, byte order mark U+FEFF, soft hyphen U+00AD, word joiner U+2060, ...).
_INVISIBLE = frozenset({"Zs", "Zl", "Zp", "Cc", "Cf"})


def source_line(line: str) -> str:
    """The line, or "" when none of its characters shows: translated as an empty line, not into made-up words
    (here and in evaluation/translation.py)."""
    return line if any(unicodedata.category(c) not in _INVISIBLE for c in line) else ""

# What config.json says about this pipeline (read by transformers.pipeline()).
CUSTOM_PIPELINES = {
    "translation": {
        "impl": "pipeline_vaswani.VaswaniTranslationPipeline",
        "pt": ["AutoModelForSeq2SeqLM"],
        "type": "text",
    }
}


class VaswaniTranslationPipeline(Pipeline):
    """Tokenize → `model.generate` (the model's saved decoding settings) → detokenize."""

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def _sanitize_parameters(self, max_length=None, **generate_kwargs):
        preprocess = {"max_length": max_length} if max_length is not None else {}
        return preprocess, generate_kwargs, {}

    def preprocess(self, text, max_length=None):
        if not isinstance(text, str):
            raise ValueError(f"The translation pipeline takes a string (or a list of strings), got {type(text).__name__}.")
        if not source_line(text):
            return {"empty": True}  # translated as "", like an empty line
        return self.tokenizer(text, return_tensors="pt", truncation=max_length is not None, max_length=max_length)

    def _forward(self, model_inputs, **generate_kwargs):
        if model_inputs.get("empty"):
            return {"output_ids": None}
        return {"output_ids": self.model.generate(**model_inputs, **generate_kwargs)}

    def postprocess(self, model_outputs):
        if model_outputs["output_ids"] is None:
            return [{"translation_text": ""}]
        return [
            {"translation_text": self.tokenizer.decode(ids, skip_special_tokens=True).strip()}
            for ids in model_outputs["output_ids"]
        ]
