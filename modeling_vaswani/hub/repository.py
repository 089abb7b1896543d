"""A complete Hub model repository for a trained model: write it, check it (not from the paper).

`write_repository` produces exactly what a user of the Hub expects to download: `save_pretrained`
output (config.json with `auto_map` and `custom_pipelines`, model.safetensors,
generation_config.json, the modeling code for `trust_remote_code`), the tokenizer files, the
measured results.json and the model card README.md rendered from it.

`validate_repository` checks such a folder the way a stranger would use it: every file present,
the card's YAML parses and carries the metrics, and — in a fresh Python process where this package
cannot be imported — the folder loads with `trust_remote_code=True` and translates through both
`generate` and `pipeline("translation")`.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from huggingface_hub import ModelCard

from .model_card import load_results, render_model_card
from ..model.modeling_vaswani import VaswaniForConditionalGeneration
from ..training.tokenization import load_tokenizer

REQUIRED_FILES = (
    "README.md",
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "results.json",
    "modeling_vaswani.py",
    "configuration_vaswani.py",
    "pipeline_vaswani.py",
)

_CLEAN_PROCESS_CHECK = r"""
import json, sys
sys.modules["modeling_vaswani"] = None  # this package must not be importable here
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
folder, sentence = sys.argv[1], sys.argv[2]
model = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
ids = model.generate(**tokenizer([sentence], return_tensors="pt"))
generated = tokenizer.batch_decode(ids, skip_special_tokens=True)[0]
translated = pipeline("translation", model=folder, trust_remote_code=True)(sentence)[0]["translation_text"]
print(json.dumps({"class": type(model).__module__, "generate": generated, "pipeline": translated}))
"""


def write_repository(model_dir, output_dir, repo_id: str) -> Path:
    """Write the Hub repository of the model in `model_dir` (which holds results.json) to `output_dir`."""
    model_dir, output_dir = Path(model_dir), Path(output_dir)
    if output_dir.resolve() == model_dir.resolve():
        raise ValueError(f"Write the repository to a new folder, not into the model folder {model_dir}.")
    results = load_results(model_dir / "results.json")
    model = VaswaniForConditionalGeneration.from_pretrained(model_dir)
    tokenizer = load_tokenizer(model_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)  # weights, configs, and the modeling code (register_for_auto_class)
    tokenizer.save_pretrained(output_dir)
    (output_dir / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    render_model_card(output_dir, results, repo_id).save(output_dir / "README.md")
    return output_dir


def validate_repository(folder, sentence: str = "Two dogs are playing in the snow.") -> dict:
    """Raise ValueError naming the first problem; return what the clean process translated."""
    folder = Path(folder)
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"{folder} is not a complete model repository: missing {missing}.")
    config = json.loads((folder / "config.json").read_text())
    for key in ("auto_map", "custom_pipelines"):
        if key not in config:
            raise ValueError(f"{folder}/config.json lacks {key!r}; save with the modeling_vaswani package imported.")
    card = ModelCard.load(folder / "README.md")
    index = card.data.to_dict().get("model-index")
    if not index:
        raise ValueError(f"{folder}/README.md has no model-index in its YAML metadata.")
    metrics = {m["type"] for result in index[0]["results"] for m in result["metrics"]}
    if not {"bleu", "chrf"} <= metrics:
        raise ValueError(f"{folder}/README.md reports {sorted(metrics)}; it must report bleu and chrf.")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    process = subprocess.run([sys.executable, "-c", _CLEAN_PROCESS_CHECK, str(folder.resolve()), sentence],
                             capture_output=True, text=True, cwd=tempfile.gettempdir(), env=env)
    if process.returncode != 0:
        tail = process.stderr.strip().splitlines()[-1] if process.stderr.strip() else "no output"
        raise ValueError(f"{folder} does not load with trust_remote_code in a clean process: {tail}")
    outcome = json.loads(process.stdout.strip().splitlines()[-1])
    if not outcome["pipeline"].strip() or not outcome["generate"].strip():
        raise ValueError(f"{folder} loads but translates {sentence!r} to an empty string.")
    return outcome
