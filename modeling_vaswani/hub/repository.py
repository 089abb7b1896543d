"""A complete Hub model repository: `write_repository` (save_pretrained, tokenizer, results.json, the card)
and `validate_repository` (files, shipped code, card, then a translation with trust_remote_code in an isolated
process where this package cannot be imported)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from huggingface_hub import ModelCard

from .model_card import load_results, render_model_card
from ..model.loading import CUSTOM_GENERATE_FILE, MODEL_CODE
from ..outputs import claim
from ..model.modeling_vaswani import VaswaniForConditionalGeneration
from ..model.strict_json import read_json
from ..tokenizer_loading import load_tokenizer

REQUIRED_FILES = ("README.md", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                  "tokenizer_config.json", "results.json", "modeling_vaswani.py", "configuration_vaswani.py",
                  "pipeline_vaswani.py", CUSTOM_GENERATE_FILE)

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
    claim("output_dir", output_dir, [("model_dir", model_dir)], folder=True)
    results = load_results(model_dir / "results.json")
    model = VaswaniForConditionalGeneration.from_pretrained(model_dir)
    tokenizer = load_tokenizer(model_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)  # weights, configs, and the modeling code (register_for_auto_class)
    tokenizer.save_pretrained(output_dir)
    (output_dir / "results.json").write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    render_model_card(output_dir, results, repo_id).save(output_dir / "README.md")
    return output_dir


def validate_repository(folder, sentence: str = "Two dogs are playing in the snow.", allow_empty: bool = False) -> dict:
    """Raise ValueError naming the first problem; return what the clean process translated. An empty
    translation of `sentence` (a briefly trained model gives one) is a problem unless `allow_empty`."""
    folder = Path(folder)
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(f"{folder} is not a complete model repository: missing {missing}.")
    config = read_json(folder / "config.json")
    for key in ("auto_map", "custom_pipelines"):
        if key not in config:
            raise ValueError(f"{folder}/config.json lacks {key!r}; save with the modeling_vaswani package imported.")
    check_shipped_code(folder)
    card = ModelCard.load(folder / "README.md")
    index = card.data.to_dict().get("model-index")
    if not index:
        raise ValueError(f"{folder}/README.md has no model-index in its YAML metadata.")
    metrics = {m["type"] for result in index[0]["results"] for m in result["metrics"]}
    if not {"bleu", "chrf"} <= metrics:
        raise ValueError(f"{folder}/README.md reports {sorted(metrics)}; it must report bleu and chrf.")
    with tempfile.TemporaryDirectory(prefix="vaswani-check-") as workdir:
        # Its own folder to run in, and its own copy of the code trust_remote_code imports.
        outcome = run_isolated(["-c", _CLEAN_PROCESS_CHECK, str(folder.resolve()), sentence], workdir,
                               {"HF_MODULES_CACHE": str(Path(workdir) / "modules")},
                               f"{folder} does not load with trust_remote_code in a clean process")
    if not allow_empty and (not outcome["pipeline"].strip() or not outcome["generate"].strip()):
        raise ValueError(f"{folder} loads but translates {sentence!r} to an empty string.")
    return outcome


def run_isolated(arguments: list[str], cwd, env: dict, failure: str) -> dict:
    """The JSON last printed by `python -I <arguments>` run offline in `cwd`; ValueError(`failure`: its last
    error line) when it fails."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **env}
    process = subprocess.run([sys.executable, "-I", *arguments], capture_output=True, text=True, cwd=cwd, env=env)
    if process.returncode != 0:
        tail = process.stderr.strip().splitlines()[-1] if process.stderr.strip() else "no output"
        raise ValueError(f"{failure}: {tail}")
    return json.loads(process.stdout.strip().splitlines()[-1])


def check_shipped_code(folder) -> None:
    """ValueError unless every .py in `folder` is byte for byte the package's model code and every code
    reference of its configs (auto_map, custom_pipelines) names one of them: trust_remote_code runs what
    they name, and "other/repo--module.Class" would run another repository's code."""
    folder = Path(folder)
    shipped = set()
    for path in sorted(folder.rglob("*.py")):
        name = path.relative_to(folder).as_posix()
        source = MODEL_CODE / name  # modeling_vaswani/model/: the code a checkpoint ships
        if "/" in name and name != CUSTOM_GENERATE_FILE or source.name == "__init__.py" or not source.is_file():
            raise ValueError(f"{folder} ships {name}, which is not part of the model code (modeling_vaswani/model/); "
                             "remove it: a repository carries only the code save_pretrained copies.")
        if path.read_bytes() != source.read_bytes():
            raise ValueError(f"{folder}/{name} differs from the package's {source.relative_to(MODEL_CODE.parent)}; "
                             "write the repository again (save_pretrained copies the code as it is).")
        shipped.add(name)
    references = []
    for file in ("config.json", "tokenizer_config.json"):
        if (folder / file).is_file():
            auto_map = read_json(folder / file).get("auto_map")
            references += [(f"{file} auto_map[{entry!r}]", ref) for entry, ref in _entries(auto_map)]
    pipelines = read_json(folder / "config.json").get("custom_pipelines") or {}
    if not isinstance(pipelines, dict):
        raise ValueError(f"{folder}/config.json: custom_pipelines must map a task to its pipeline, got {pipelines!r}.")
    for task, spec in pipelines.items():
        impl = spec.get("impl") if isinstance(spec, dict) else spec
        references.append((f"config.json custom_pipelines[{task!r}].impl", impl))
    for where, reference in references:
        if reference is None:
            continue
        if not isinstance(reference, str) or "." not in reference:
            raise ValueError(f"{folder}/{where} is {reference!r}, not a reference to code (module.Class).")
        if "--" in reference:
            raise ValueError(f"{folder}/{where} points at code in another repository ({reference!r}); a repository may "
                             "name only the code it ships. Write it again with save_pretrained.")
        module = reference.rsplit(".", 1)[0].replace(".", "/") + ".py"
        if module not in shipped:
            raise ValueError(f"{folder}/{where} points at {module}, which the repository does not ship as model code.")


def _entries(mapping):
    """(key, reference) for each code reference in an auto_map (a value may be a [slow, fast] pair)."""
    if mapping is None:
        return []
    if not isinstance(mapping, dict):
        raise ValueError(f"auto_map must map an Auto class to code, got {mapping!r}.")
    return [(key, reference) for key, value in mapping.items()
            for reference in (value if isinstance(value, (list, tuple)) else [value])]
